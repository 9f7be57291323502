"""Deep dive 6b's figures printed beside its prose and checked against what the prose says (deep dive 6b).

Each function prints what a cell shows and raises `stated.StaleProse` when the stored run's figures no
longer show what the text around that cell states (a rerun changed them: reread the sentence). On a
GPU the cells print the reader's own figures unchecked: another GPU may rightly differ.
"""

from __future__ import annotations

from typing import Any

from cudalearn.measure import gpus, stated, timing


def autocast(results: Any) -> None:
    """Check the text after the autocast table: on the stored H100 run the BF16 step is several (over 3)
    times faster than the FP32 one."""
    rows = [r for r in results.rows if r.get("median_ms")]
    if len(rows) < 2 or results.source != "reference":
        return
    amp = next(r for r in rows if r["name"].startswith("autocast"))
    stated.check(
        amp,
        results.label,
        lambda r: r["vs_baseline"] > 3 and "bfloat16" in r["name"] and "H100" in results.label,
        "the autocast step, in BF16 on an H100, is several times faster",
    )


def convolution(conv: dict[str, Any] | None, device: str | None, label: str, stored: bool) -> None:
    """Print both cudnn.benchmark settings' times and rates; check the text after them.

    It says: the steady-state speed-up is close to 1 (0.8x to 1.25x), and both settings ran at over
    twice the FP32 peak of the stored run's GPU; checked only when `stored` (the figures are the stored
    run's)."""
    if conv is None:
        print(f"Not measured yet: {label}.")
        return
    n, c, hw = conv["shape"]
    print(f"3x3 convolution, {c} -> {c} channels, batch {n}, {hw}x{hw} pixels, float32 inputs:")
    for setting in ("benchmark off", "benchmark on"):
        r = conv[setting]
        tf32 = {True: ", TF32 allowed", False: ", TF32 off"}.get(r.get("cudnn_allow_tf32"), "")
        print(
            f"  {setting:<14} first call {r['first_call_ms']:8.1f} ms, then {r['median_ms']:.3f} ms "
            f"({timing.gflops(conv['flops'], r['median_ms']) / 1e3:.3g} TFLOP/s{tf32})"
        )
    off, on = conv["benchmark off"]["median_ms"], conv["benchmark on"]["median_ms"]
    print(f"  steady state: benchmark on is {off / on:.2f}x the speed of benchmark off")
    spec = gpus.spec_for(device)
    if spec is None:
        return
    slowest = timing.gflops(conv["flops"], max(off, on)) / 1e3
    fastest = timing.gflops(conv["flops"], min(off, on)) / 1e3
    verdict = "above it: not a direct FP32 convolution" if fastest > spec.fp32_tflops else "within it"
    print(f"  {fastest:.3g} TFLOP/s against an FP32 peak of {spec.fp32_tflops:.3g}, {verdict}")
    if stored:
        stated.check(
            conv,
            label,
            lambda f: 0.8 < off / on < 1.25 and slowest > 2 * spec.fp32_tflops,
            "benchmark's steady-state speed-up is close to 1; both settings ran at over twice the FP32 peak",
        )


def silu(stored: Any) -> None:
    """Print the stored fused / eager ratio of useful GB/s; check the text: eager shows about half."""
    if stored is None:
        return
    gb = {r["name"]: r["gbps"] for r in stored.rows}
    ratio = gb["Triton fused bias + SiLU"] / gb["PyTorch eager: add, then silu"]
    print(f"fused / eager in useful GB/s, stored run: {ratio:.2f}")
    stated.check(
        gb, stored.label, lambda g: 1.6 < ratio < 2.6, "eager shows about half the fused kernel's rate"
    )
