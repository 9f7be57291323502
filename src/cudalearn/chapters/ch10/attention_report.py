"""What book 10e prints from the stored attention timings: which PyTorch call a row is, the (n, n) passes.

`pytorch_row` says which call the PyTorch row of a `ch10.attention` table timed: the 4-D call that
book 10e makes now, or the 3-D call of older runs (PyTorch's math backend), with the 4-D call's time
from the same run's benchmark beside it; `shown` names such a 3-D row in the printed table by the
backend it ran. `say_passes` prints what fusing saved against the time the
three kernels' passes over the `(n, n)` arrays take at the datasheet's bandwidth, and checks it.
"""

from __future__ import annotations

import dataclasses

from cudalearn.chapters.ch10.kernels import attention
from cudalearn.measure import gpus, stated, timing

#: The name book 10e times PyTorch's call under: 4-D tensors, the memory-efficient backend named.
FOUR_D = "F.sdpa, 4-D, efficient backend"
#: The same 4-D call with the math backend named: a product, a softmax and a product, by cuBLAS.
MATH_4D = "F.sdpa, 4-D, math backend"
#: The name runs before that stored their 3-D call under: no fused backend takes 3-D, so the math one.
THREE_D = "F.scaled_dot_product_attention"
#: What book 10e's table calls such a row, so that it does not read as the 4-D call of its code.
THREE_D_SHOWN = "F.sdpa, 3-D, math backend"
#: `softmax.softmax_warp` reads each row three times: for the maximum, the sum and the output.
SOFTMAX_SWEEPS = 3
FUSED = "fused, key tiles"


def nn_passes(d: int) -> int:
    """Passes of `attention_three` over an (n, n) float32 array, head dimension d (book 10e).

    S is written once and read SOFTMAX_SWEEPS times by the softmax; P is written once and read once
    per TILE-wide column strip of the output by `attention_weighted` (a tiled product).
    """
    return 1 + SOFTMAX_SWEEPS + 1 + -(-d // attention.TILE)


def shown(results: timing.Results) -> timing.Results:
    """`results` as book 10e prints them: an older run's 3-D PyTorch row named by the backend it ran."""
    rows = [dict(r, name=THREE_D_SHOWN) if r["name"] == THREE_D else r for r in results.rows]
    return dataclasses.replace(results, rows=rows)


def pytorch_row(rows: list[dict], where: str) -> None:
    """Print which call the PyTorch row of a `ch10.attention` table is, with the 4-D time when stored."""
    ms = {r["name"]: r.get("median_ms") for r in rows}
    if FOUR_D in ms:
        print(stated.wrap("The PyTorch rows are the calls above: 4-D tensors, each with its backend named."))
        if ms.get(MATH_4D) and ms.get(FUSED):
            said = {  # book 10e's Summary
                "our fused kernel slower than PyTorch's math backend": ms[FUSED] > ms[MATH_4D],
                "PyTorch's memory-efficient kernel slower than its math backend": ms[FOUR_D] > ms[MATH_4D],
            }
            stated.check_each(ms, where, said)
            print(
                stated.wrap(
                    f"PyTorch's math backend, which writes S and P, ran {ms[FUSED] / ms[MATH_4D]:.1f}x as "
                    f"fast as our fused kernel and {ms[FOUR_D] / ms[MATH_4D]:.1f}x as fast as PyTorch's own "
                    "memory-efficient kernel (how each one's time splits was not profiled)."
                )
            )
        return
    if not ms.get(THREE_D):
        return
    print(
        stated.wrap(
            f"The PyTorch row is neither call above: the stored run ({where}) is older, and it passed "
            "3-D tensors, which no fused backend takes, so it timed the math backend: a product, a "
            "softmax and a product, S and P written out, the products by cuBLAS."
        )
    )
    bench, _ = stated.stored("ch10.bench_attention")  # scripts/bench_reductions.py: 4-D, PyTorch's choice
    if bench is not None and stated.one_run("ch10.attention", "ch10.bench_attention"):
        four_d = next(r["median_ms"] for r in bench["rows"] if r["name"] == "torch SDPA")
        said = {"4-D": four_d, "3-D": ms[THREE_D]}  # book 10e's Summary: the fused call was the slower
        stated.check(said, where, lambda m: m["4-D"] > m["3-D"], "the fused 4-D call slower than the 3-D one")
        print(
            stated.wrap(
                f"The 4-D call (memory-efficient backend, PyTorch's choice for float32) took "
                f"{four_d:.3f} ms in the same run's benchmark (scripts/bench_reductions.py, "
                f"n = {bench['size']['n']}, d = {bench['size']['d']}), against {ms[THREE_D]:.3f} ms for the "
                "3-D call in the table."
            )
        )
    if ms.get(FUSED):
        holds = lambda m: m[THREE_D] < m[FUSED] / 1.5  # noqa: E731
        stated.check(ms, where, holds, "the math backend far ahead of the fused kernel")
        print(
            stated.wrap(
                f"Writing S and P did not stop the math backend running {ms[FUSED] / ms[THREE_D]:.1f}x as "
                "fast as our own fused kernel: its cuBLAS products, its softmax and its passes over S and "
                f"P together took {ms[THREE_D] / ms[FUSED]:.0%} of our kernel's time (how that time splits "
                "was not profiled)."
            )
        )


def say_passes(figures: dict | None, where: str) -> None:
    """Print and check, from a `ch10.attention` result: fusing's saving, the passes' and FLOPs' floors."""
    spec = gpus.spec_for(where) if figures else None
    f = None
    if figures and spec:
        n, d = figures["size"]["n"], figures["size"]["d"]
        ms = {r["name"]: r["median_ms"] for r in figures["rows"]}
        nn_bytes = nn_passes(d) * 4 * n**2  # float32
        f = {
            "three": ms["three kernels"],
            "fused": ms[FUSED],
            "passes": nn_passes(d),
            "MB": nn_bytes / 1e6,
            "passes_ms": nn_bytes / spec.bandwidth_gbs / 1e6,
            "flops_ms": 4 * n**2 * d / spec.fp32_tflops / 1e9,  # Q K^T and P V, 2 n^2 d FLOPs each
        }
        f["saved"] = f["three"] - f["fused"]
    stated.say(
        f,
        f"{where}; floors at the {spec.name} datasheet's peaks" if f else where,
        lambda f: (
            f"Stored: three kernels {f['three']:.3f} ms, fused {f['fused']:.3f} ms: fusing saved "
            f"{f['saved']:.3f} ms. The three kernels' {f['passes']} passes over (n, n) arrays "
            f"({f['MB']:.0f} MB) take {f['passes_ms']:.3f} ms at the memory's bandwidth, "
            f"{f['saved'] / f['passes_ms']:.1f}x less than the saving; the products take "
            f"{f['flops_ms']:.3f} ms at the float32 peak, {f['fused'] / f['flops_ms']:.0f}x less than the "
            "fused kernel's time"
        ),
        holds=lambda f: f["passes_ms"] < f["saved"] < 3 * f["passes_ms"] and f["flops_ms"] < 0.2 * f["fused"],
        states="fusing saved more than the (n, n) passes take (not 3x more); the fused kernel far above its "
        "FLOP floor",
    )
