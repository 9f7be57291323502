"""Chapter 10's benchmark: sums, row softmax, LayerNorm and attention against PyTorch and the copy, one run.

    CUDALEARN_MODE=gpu python3 scripts/bench_reductions.py

Four groups, each timed by one `timing.measure` call (CUDA events, warm-up,
median) and recorded under `ch10.bench_*` when `CUDALEARN_RECORD` is set
(scripts/gpu_run.py). Every candidate's output is checked against PyTorch
or NumPy before it is timed.

- `ch10.bench_copy`: a device-to-device copy of the sum's array (torch's
  `copy_`), the bandwidth the goals are measured against; `ch10.bench_sum`:
  `torch.sum` and each sum kernel of `cudalearn.chapters.ch10.kernels.reductions` on
  `ch10.sum_n` floats (GB/s = bytes read / time; the copy's GB/s counts
  its reads and writes).
- `ch10.bench_softmax`, `ch10.bench_layernorm`: the row kernels of
  `cudalearn.chapters.ch10.kernels.softmax` and `cudalearn.chapters.ch10.kernels.layernorm` against
  `torch.softmax` / `F.layer_norm` and a copy of the same array, at the ViT shapes of `sizes/ch10.py`
  (GB/s = one read and one write of the array: the copy's traffic). The kernels are
  launched through `softmax.prepare_rows` (`launch.prepared`): Numba's
  plain launch spends longer on the host than `layernorm` runs on the GPU,
  and back-to-back plain launches would time the host.
- `ch10.bench_attention`: one head, three kernels against the fused kernel
  against `F.scaled_dot_product_attention` (FP32, TF32 off).

The goals (issue 16), judged on the figures of this run (`goal_lines`): the
shuffle reduction (`sum_atomic`) reads at >= 85% of the copy bandwidth; the
best row softmax and LayerNorm kernels at >= 80% of it and no slower than
PyTorch; the fused attention faster than the three kernels, and moving
fewer bytes (the compulsory bytes of `attention.bytes_moved`; the chapter
counts them with the tracer). A missed goal is printed as NOT MET; the exit
status only says whether the measurements ran. Under the simulator nothing
is timed: every candidate runs once at the simulator's sizes (a smoke test,
shuffling kernels on the tracer) and the stored reference figures are shown.
"""

from __future__ import annotations

import numpy as np

from cudalearn.measure.timing import SIMULATED
from cudalearn.runtime import device
from cudalearn.runtime.sizes import size

COPY = "copy (torch)"
GOAL_SUM = 0.85  # sum_atomic's read rate / the copy's rate
GOAL_ROWS = 0.80  # best row kernel's rate / the copy's rate
SUM_KERNELS = ("sum_interleaved", "sum_strided_index", "sum_sequential", "sum_shuffle", "sum_atomic")
SOFTMAX_KERNELS = ("softmax_block", "softmax_warp", "softmax_online", "softmax_registers")
LN_KERNELS = ("layernorm", "layernorm_block", "layernorm_pairs")
THREE, FUSED, SDPA = "three kernels (s and p in global memory)", "fused, online softmax", "torch SDPA"


def _checked(run, read, expected, name, rtol, atol, out=None):
    """run, wrapped so that its first call checks read() against expected (then it only runs).

    `out`, a device array the candidates share, is filled with NaN before that first call, so a
    kernel that writes nothing cannot pass on the output of the candidate before it.
    """
    from cudalearn import checks

    done = []

    def call():
        if not done and out is not None:
            out.copy_to_device(np.full(out.shape, np.nan, np.float32))
        run()
        if not done:
            checks.check_close(read(), expected, name=name, rtol=rtol, atol=atol)
            done.append(True)

    return call


def sum_candidates(n: int, seed: int = 0):
    """({COPY: ...}, {name: callable}): the copy and the sums of n float32 on the device (Chapter 10)."""
    import torch

    from cudalearn.chapters.ch10.kernels import reductions
    from cudalearn.runtime.device import torch_device
    from cudalearn.runtime.numba_backend import cuda

    x = np.random.default_rng(seed).random(n, dtype=np.float32)  # in [0, 1): no cancellation
    exact = np.array([np.sum(x, dtype=np.float64)], np.float32)  # the exact sum, rounded once
    dx = cuda.to_device(x)
    tx = torch.from_numpy(x).to(torch_device())
    ty = torch.empty_like(tx)
    # a float32 sum of n values in [0, 1) in a blocked or tree order errs by about 1e-6 of the total
    # (sqrt of the additions times half an ulp); 1e-5 catches a grid that stops short or a pass that
    # drops partials. tests/chapters/ch10/test_reductions.py checks each kernel's order of additions bitwise.
    tol = 1e-5 * float(exact[0])
    sums = {
        "torch.sum": _checked(
            lambda: tx.sum(), lambda: tx.sum().cpu().numpy().reshape(1), exact, "torch.sum", 0, tol
        )
    }
    for name in SUM_KERNELS:
        run, result = reductions.sum_launcher(getattr(reductions, name), dx)
        sums[name] = _checked(run, result.copy_to_host, exact, name, 0, tol)
    return {COPY: lambda: ty.copy_(tx)}, sums


def rows_candidates(kind: str, rows: int, cols: int, seed: int = 0) -> dict:
    """{name: callable} for `kind` 'softmax' or 'layernorm' on (rows, cols) float32, with a copy (Ch. 10)."""
    import torch
    import torch.nn.functional as F

    from cudalearn.chapters.ch10.kernels import layernorm, softmax
    from cudalearn.runtime.device import torch_device
    from cudalearn.runtime.numba_backend import cuda

    rng = np.random.default_rng(seed)
    x = (4 * rng.standard_normal((rows, cols))).astype(np.float32)
    dev = torch_device()
    dx, dy = cuda.to_device(x), cuda.device_array_like(x)
    tx = torch.from_numpy(x).to(dev)
    ty = torch.empty_like(tx)
    found = {COPY: lambda: ty.copy_(tx)}
    if kind == "softmax":
        expected = softmax.softmax_reference(x)
        found["torch.softmax"] = _checked(
            lambda: torch.softmax(tx, dim=1),
            lambda: torch.softmax(tx, dim=1).cpu().numpy(),
            expected,
            "torch.softmax",
            1e-4,
            1e-6,
        )
        for name in SOFTMAX_KERNELS:
            kernel = getattr(softmax, name)
            found[name] = _checked(
                softmax.prepare_rows(kernel, dx, dy),
                dy.copy_to_host,
                expected,
                name,
                1e-4,
                1e-6,
                out=dy,
            )
        return found
    gamma = (1 + 0.1 * rng.standard_normal(cols)).astype(np.float32)
    beta = (0.1 * rng.standard_normal(cols)).astype(np.float32)
    eps = 1e-5
    expected = layernorm.layernorm_reference(x, gamma, beta, eps)
    dg, db = cuda.to_device(gamma), cuda.to_device(beta)
    tg, tb = torch.from_numpy(gamma).to(dev), torch.from_numpy(beta).to(dev)

    def torch_ln():
        return F.layer_norm(tx, (cols,), tg, tb, eps)

    found["F.layer_norm"] = _checked(
        torch_ln, lambda: torch_ln().cpu().numpy(), expected, "F.layer_norm", 1e-4, 1e-4
    )
    for name in LN_KERNELS:
        found[name] = _checked(
            softmax.prepare_rows(getattr(layernorm, name), dx, dy, dg, db, eps),
            dy.copy_to_host,
            expected,
            name,
            1e-4,
            1e-4,
            out=dy,
        )
    return found


def attention_candidates(n: int, d: int, seed: int = 0) -> dict:
    """{THREE: ..., FUSED: ..., SDPA: ...}: one head on (n, d) float32 q, k, v on the device (Chapter 10)."""
    import torch
    import torch.nn.functional as F

    from cudalearn.chapters.ch10.kernels import attention
    from cudalearn.runtime.device import torch_device
    from cudalearn.runtime.numba_backend import cuda

    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((n, d)).astype(np.float32) for _ in range(3))
    dq, dk, dv = (cuda.to_device(a) for a in (q, k, v))
    ds, dp = cuda.device_array((n, n), np.float32), cuda.device_array((n, n), np.float32)
    do = cuda.device_array((n, d), np.float32)
    tq, tk, tv = (torch.from_numpy(a).to(torch_device())[None, None] for a in (q, k, v))

    def sdpa():
        return F.scaled_dot_product_attention(tq, tk, tv)

    expected = sdpa()[0, 0].cpu().numpy()  # checked against NumPy in tests/chapters/ch10/test_reductions.py
    tol = {"rtol": 1e-3, "atol": 1e-4}
    return {
        THREE: _checked(
            lambda: attention.attention_three(dq, dk, dv, ds, dp, do),
            do.copy_to_host,
            expected,
            THREE,
            **tol,
            out=do,
        ),
        FUSED: _checked(
            lambda: attention.launch_attention_fused(dq, dk, dv, do),
            do.copy_to_host,
            expected,
            FUSED,
            **tol,
            out=do,
        ),
        SDPA: sdpa,
    }


def twice_timed_gap(key: str, bench_key: str) -> dict | None:
    """{'gap': largest |median ratio - 1|} over the rows that the stored `key` (a book cell's timing)
    and `bench_key` (this benchmark's) share, when one stored run holds both; else None (book 10).

    The book and this script time the same kernels in one session: how far their medians differ is
    that session's run-to-run noise.
    """
    from cudalearn.measure import reference

    (a, head_a), (b, head_b) = reference.lookup(key), reference.lookup(bench_key)
    if a is None or b is None or head_a.get("created") != head_b.get("created"):
        return None
    first, again = ({r["name"]: r["median_ms"] for r in f["rows"]} for f in (a, b))
    shared = first.keys() & again.keys()
    return {"gap": max(abs(first[k] / again[k] - 1) for k in shared), "rows": len(shared)} if shared else None


def _ms(results) -> dict:
    """{name: median ms} of a Results' rows (None where nothing was timed)."""
    return {r["name"]: r.get("median_ms") for r in results.rows}


def _verdict(ok: bool) -> str:
    """'met' or 'NOT MET'."""
    return "met" if ok else "NOT MET"


def goal_lines(copy, sums, soft, norm, attn, nbytes: dict) -> list[str]:
    """A line per goal of issue 16 from one run's Results: met, NOT MET, or not judged (Chapter 10)."""
    lines = []
    c, s = _ms(copy), _ms(sums)
    n = sums.size.get("n")
    if c.get(COPY) and s.get("sum_atomic") and n:
        copy_rate = 8 * n / c[COPY]  # bytes per ms: read and write
        for name in ("sum_shuffle", "sum_atomic", "torch.sum"):
            if s.get(name):
                r = (4 * n / s[name]) / copy_rate
                goal = f" (goal >= {GOAL_SUM:.0%}): {_verdict(r >= GOAL_SUM)}" if name == "sum_atomic" else ""
                lines.append(f"sum: {name} reads at {r:.1%} of the copy bandwidth{goal}")
    else:
        lines.append("sum: no GPU times in this run or the reference: not judged")
    for results, torch_name, kernels in (
        (soft, "torch.softmax", SOFTMAX_KERNELS),
        (norm, "F.layer_norm", LN_KERNELS),
    ):
        t = _ms(results)
        timed = [k for k in kernels if t.get(k)]
        if not (t.get(COPY) and t.get(torch_name) and timed):
            lines.append(f"{results.key}: no GPU times: not judged")
            continue
        best = min(timed, key=t.get)
        r, vs = t[COPY] / t[best], t[torch_name] / t[best]
        lines.append(
            f"{results.key}: best kernel {best} at {r:.1%} of the copy bandwidth (goal >= {GOAL_ROWS:.0%}): "
            f"{_verdict(r >= GOAL_ROWS)}; {vs:.2f}x the speed of {torch_name} (goal >= 1): "
            f"{_verdict(vs >= 1)}; "
            f"{torch_name} at {t[COPY] / t[torch_name]:.1%} of the copy"
        )
    a = _ms(attn)
    fewer = nbytes["fused"] < nbytes["three kernels"]
    lines.append(
        f"attention: compulsory bytes, fused {nbytes['fused'] / 1e6:.3g} MB vs three kernels "
        f"{nbytes['three kernels'] / 1e6:.3g} MB (goal: fewer): {_verdict(fewer)}"
    )
    if a.get(THREE) and a.get(FUSED):
        sp = a[THREE] / a[FUSED]
        lines.append(
            f"attention: fused {sp:.2f}x the speed of the three kernels (goal > 1): {_verdict(sp > 1)}"
        )
        if a.get(SDPA):
            lines.append(f"attention: fused at {a[SDPA] / a[FUSED]:.2f}x the speed of {SDPA} (no goal)")
    else:
        lines.append("attention: no GPU times: not judged")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Chapter 10's measurements, the ratios and one verdict line per goal: scripts/bench_reductions.py."""
    info = device.setup()
    from cudalearn.chapters.ch10.kernels import attention
    from cudalearn.measure import timing
    from cudalearn.runtime import precision

    if info.mode == "sim":
        print(SIMULATED)
    n = size("ch10.sum_n")
    copies, sums = sum_candidates(n)
    copy = timing.measure("ch10.bench_copy", copies, nbytes=8 * n, size={"n": n, "dtype": "float32"})
    print(copy, "\n")
    summed = timing.measure(
        "ch10.bench_sum", sums, baseline="torch.sum", nbytes=4 * n, size={"n": n, "dtype": "float32"}
    )
    print(summed, "\n")
    rows = {}
    for kind, base, r, c in (
        ("softmax", "torch.softmax", size("ch10.softmax_rows"), size("ch10.softmax_cols")),
        ("layernorm", "F.layer_norm", size("ch10.ln_rows"), size("ch10.ln_cols")),
    ):
        rows[kind] = timing.measure(
            f"ch10.bench_{kind}",
            rows_candidates(kind, r, c),
            baseline=base,
            nbytes=2 * 4 * r * c,
            size={"rows": r, "cols": c, "dtype": "float32"},
        )
        print(rows[kind], "\n")
    an, ad = size("ch10.attn_n"), size("ch10.attn_d")
    with precision.fp32():  # PyTorch in true FP32, as the kernels compute
        attn = timing.measure(
            "ch10.bench_attention",
            attention_candidates(an, ad),
            baseline=THREE,
            flops=4 * an * an * ad,
            size={"n": an, "d": ad, "heads": 1, "dtype": "float32", "tf32": False},
        )
    print(attn, "\n")
    for line in goal_lines(
        copy, summed, rows["softmax"], rows["layernorm"], attn, attention.bytes_moved(an, ad)
    ):
        print("goal " + line)
    return 0
