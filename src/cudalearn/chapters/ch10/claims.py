"""Chapter 10's claims tables: each quoted claim beside the figure that judges it (book 10 and 10a-10e).

Counts a notebook made (tracer reports, errors against float64) are `value=` claims, labelled "this
notebook"; GPU timings are `key=` claims on the stored run, labelled with its device and date.
"""

from __future__ import annotations

from cudalearn.measure import reference
from cudalearn.measure.sources import Claim

HARRIS = "Harris, Optimizing Parallel Reduction in CUDA (kernels 1-3)"
MILAKOV = "Milakov and Gimelshein, Online normalizer calculation for softmax (2018)"
TREE = ("sum_interleaved", "sum_strided_index", "sum_sequential")


def ms(figures: dict, name: str) -> float:
    """Median ms of the row called `name` of a stored `timing.measure` result."""
    return next(r["median_ms"] for r in figures["rows"] if r["name"] == name)


def core_claims(sweeps: dict) -> list[Claim]:
    """Book 10's claims: Harris's steps timed, and the online softmax counted and timed."""
    return [
        Claim(
            "Each of Harris's first three steps is faster than the one before",
            HARRIS,
            key="ch10.sum",
            show=lambda f: "kernels 1, 2, 3: " + ", ".join(f"{ms(f, n):.3g} ms" for n in TREE),
            holds=lambda f: ms(f, TREE[0]) > ms(f, TREE[1]) > ms(f, TREE[2]),
        ),
        Claim(
            "The online normalizer needs fewer memory accesses than the safe softmax",
            MILAKOV,
            value=sweeps,
            show=lambda v: (
                f"tracer: {v['softmax_warp']:.0f} sweeps read x (safe), {v['softmax_online']:.0f} (online)"
            ),
            holds=lambda v: v["softmax_online"] < v["softmax_warp"],
        ),
        Claim(
            "The online softmax is faster than the safe one (up to 1.3x)",
            MILAKOV,
            key="ch10.softmax",
            show=lambda f: f"{ms(f, 'softmax_warp') / ms(f, 'softmax_online'):.2f}x softmax_warp's speed",
            holds=lambda f: ms(f, "softmax_online") < ms(f, "softmax_warp"),
            note="most likely rows of 197 stay in cache, no DRAM sweep to save "
            + (
                "(the profile cell checks it)"
                if reference.lookup("ch10.ncu_rows")[0]
                else "(not profiled yet)"
            ),
        ),
    ]


def tree_claims(tree: dict, shared: dict) -> list[Claim]:
    """Book 10a's claims: the tracer's divergence and conflict counts, and shuffles without shared memory."""
    return [
        Claim(
            "Interleaved addressing leaves warps divergent; sequential addressing is conflict-free",
            HARRIS,
            value=tree,
            show=lambda v: ", ".join(
                f"{k}: {r} warp instr., {w:.2f} wavefronts/req." for k, (r, w) in v.items()
            ),
            holds=lambda v: (
                v["sum_sequential"][0] < v["sum_interleaved"][0]
                and v["sum_sequential"][1] == 1 < v["sum_strided_index"][1]
            ),
        ),
        Claim(
            "Warp shuffles exchange registers: no shared memory for the last steps",
            "Lin and Grover, Using CUDA Warp-Level Primitives (NVIDIA blog, 2018)",
            value=shared,
            show=lambda v: f"tracer: {v['sum_shuffle']} shared requests against {v['sum_sequential']}",
            holds=lambda v: v["sum_shuffle"] < v["sum_sequential"],
        ),
    ]


def variance_claims(variance: dict, tol: float) -> list[Claim]:
    """Book 10d's claim: Welford and two passes avoid the one-pass formula's cancellation."""
    return [
        Claim(
            "Welford's update (and two passes) give the variance without the cancellation of E[x^2] - E[x]^2",
            "Welford (1962); Chan, Golub and LeVeque (1983)",
            value=variance,
            show=lambda v: (
                f"one pass, E[x^2] - E[x]^2, gives {v['one pass']:.3g} where the variance is "
                f"{v['exact']:.3g}; "
                f"layernorm within {v['error']['layernorm']:.2g}, layernorm_long (Welford) "
                f"{v['error']['layernorm_long']:.2g}"
            ),
            holds=lambda v: max(v["error"].values()) <= tol,
        ),
    ]


def attention_claims(moved: dict, n: int) -> list[Claim]:
    """Book 10e's claims: attention over key tiles, bytes counted and time measured."""
    return [
        Claim(
            "Attention over tiles with the online softmax moves fewer bytes than the standard version",
            "Dao et al., FlashAttention (2022), section 3.2",
            value=moved,
            show=lambda v: f"tracer: {v['three kernels'] / v['fused, key tiles']:.1f}x fewer bytes, n = {n}",
            holds=lambda v: v["fused, key tiles"] < v["three kernels"],
        ),
        Claim(
            "Attention over key tiles is faster than the three-kernel version",
            "Dao et al., FlashAttention (2022)",
            key="ch10.attention",
            show=lambda f: (
                f"{ms(f, 'three kernels') / ms(f, 'fused, key tiles'):.2f}x the speed of three kernels"
            ),
            holds=lambda f: ms(f, "fused, key tiles") < ms(f, "three kernels"),
        ),
    ]
