"""What book 10e prints from the stored attention timings: which PyTorch call a row is, the (n, n) passes.

`pytorch_row` says which calls the PyTorch rows of a `ch10.attention` table timed (4-D tensors,
the backend named) and checks the order book 10e's Summary states. `say_passes` prints what fusing
saved against the time the three kernels' passes over the `(n, n)` arrays take at the datasheet's
bandwidth, and checks it.
"""

from __future__ import annotations

from cudalearn.chapters.ch10.kernels import attention
from cudalearn.measure import gpus, stated

#: The name book 10e times PyTorch's call under: 4-D tensors, the memory-efficient backend named.
FOUR_D = "F.sdpa, 4-D, efficient backend"
#: The same 4-D call with the math backend named: a product, a softmax and a product, by cuBLAS.
MATH_4D = "F.sdpa, 4-D, math backend"
#: `softmax.softmax_warp` reads each row three times: for the maximum, the sum and the output.
SOFTMAX_SWEEPS = 3
FUSED = "fused, key tiles"


def nn_passes(d: int) -> int:
    """Passes of `attention_three` over an (n, n) float32 array, head dimension d (book 10e).

    S is written once and read SOFTMAX_SWEEPS times by the softmax; P is written once and read once
    per TILE-wide column strip of the output by `attention_weighted` (a tiled product).
    """
    return 1 + SOFTMAX_SWEEPS + 1 + -(-d // attention.TILE)


def pytorch_row(rows: list[dict], where: str) -> None:
    """Print which calls the PyTorch rows of a `ch10.attention` table are, and check the Summary's order."""
    ms = {r["name"]: r.get("median_ms") for r in rows}
    if FOUR_D not in ms:
        return
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
