"""Deep dive 6d's stored tensor-core figures printed and checked against its prose (Chapter 6, 6d).

`step4_parts` reads step 4's four changes one at a time from the stored `bench_tc` run and sets the
fastest kernel against what `mma.sync` can reach on Hopper; `mlp_read_back` says why Chapter 5's small
layers gain less on tensor cores (tiles against SMs, the products' arithmetic against the measured
time). Each raises `stated.StaleProse` when a rerun no longer shows what the text says.
"""

from __future__ import annotations

from cudalearn.chapters.ch06.kernels import tc_gemm
from cudalearn.chapters.ch06.tc_steps import FAST
from cudalearn.measure import gpus, stated, timing
from cudalearn.measure.reference import label, lookup

#: FlashAttention-3 (Shah et al., 2024): `mma.sync` reaches about two thirds of an H100's tensor-core peak
MMA_SYNC_SHARE = 2 / 3
PARTS = {  # what the text calls each row of bench.tc.N4096 that isolates one of step 4's changes
    "step 3": "cp.async pipeline",
    "the 128 x 256 tile alone": "128x256, 8 warps of 64x64",
    "+ addr32": "128x256, 8 warps of 64x64, a32",
    "+ prefetch (step 4)": FAST,
    "128 x 128 tile, addr32, prefetch": "128x128, 4 warps of 64x64, a32, prefetch",
}


def step4_parts(n: int) -> None:
    """6d: each of step 4's changes in `bench_tc`'s stored run at size n (the one with the variants),
    the variants' count, and step 4 against the two thirds of the FP16 tensor-core peak that
    `mma.sync` reaches (FlashAttention-3's figure).

    The text says: the larger tile alone is slower than step 3; addr32 adds little; prefetching
    carries step 4's gain (over 1.3x); the 128 x 128 tile with prefetch is already close; 17 variants;
    step 4 below two thirds of the peak, so part of the gap to cuBLAS is this kernel's own."""
    results = timing.stored_results(f"bench.tc.N{n}")
    ms = {r["name"]: r["median_ms"] for r in results.rows}
    part = {label: ms[name] for label, name in PARTS.items()}
    variants, _ = lookup(f"bench.tc.N{n}.variants")
    spec = gpus.spec_for(results.label)
    rate = {r["name"]: r["gflops"] / 1e3 for r in results.rows}[FAST]
    reach = rate / (MMA_SYNC_SHARE * spec.fp16_tensor_tflops)
    print(stated.wrap("; ".join(f"{label} {t:.3f} ms" for label, t in part.items())))
    print(f"bench_tc timed {len(variants)} variants beside the steps")
    print(
        stated.wrap(
            f"step 4: {rate:.0f} TFLOP/s, {rate / spec.fp16_tensor_tflops:.0%} of the {spec.name}'s dense "
            f"FP16 peak, {reach:.0%} of the two thirds of it that mma.sync reaches"
        )
    )
    stated.check(
        part,
        results.label,
        lambda p: (
            p["the 128 x 256 tile alone"] > p["step 3"]
            and p["+ addr32"] > 0.95 * p["the 128 x 256 tile alone"]
            and p["+ addr32"] / p["+ prefetch (step 4)"] > 1.3
            and p["+ prefetch (step 4)"]
            < p["128 x 128 tile, addr32, prefetch"]
            < 1.15 * p["+ prefetch (step 4)"]
            and len(variants) == 17
            and reach < 0.9
        ),
        "the larger tile alone slower than step 3, addr32 little, prefetch the gain; 17 variants; step 4 "
        "below what mma.sync reaches",
    )


def mlp_read_back() -> None:
    """6d: Chapter 5's three layers as tiles against the GPU's SMs, and their products' arithmetic at
    the pipelined kernel's own large-GEMM rate against the measured forward pass (stored runs).

    The text says: every layer has fewer 128 x 128 tiles than the GPU has SMs, and the products would
    take under a fifth of the measured time at the kernel's large-GEMM rate."""
    mlp, mlp_run = lookup("bench.tc.mlp")
    big, _ = lookup("bench.tc.N4096")
    batch, sizes = mlp["size"]["batch"], mlp["size"]["sizes"]
    bm, bn = tc_gemm.CONFIGS["gpu"]["BM"], tc_gemm.CONFIGS["gpu"]["BN"]
    tiles = [-(-batch // bm) * -(-n // bn) for n in sizes[1:]]
    gflop = sum(2 * batch * k * n for k, n in zip(sizes, sizes[1:], strict=False)) / 1e9
    large = {r["name"]: r["gflops"] for r in big["rows"]}["cp.async pipeline"] / 1e3  # TFLOP/s
    measured = {r["name"]: r["median_ms"] for r in mlp["rows"]}["tensor cores FP16 (06d)"] * 1e3  # us
    f = {"tiles": tiles, "sms": mlp_run["sms"], "ideal_us": gflop / large * 1e3, "us": measured}
    stated.say(
        f,
        label(mlp_run),
        lambda f: (
            f"The three layers have {', '.join(map(str, f['tiles']))} tiles of {bm} x {bn}, for {f['sms']} "
            "SMs; "
            f"their {gflop:.2f} GFLOP at the pipelined kernel's N = 4096 rate ({large:.0f} TFLOP/s) would "
            f"take {f['ideal_us']:.0f} us, against {f['us']:.1f} us measured for the three launches."
        ),
        holds=lambda f: max(f["tiles"]) < f["sms"] and f["ideal_us"] < 0.2 * f["us"],
        states="every layer leaves SMs idle; the products' arithmetic is a small part of the time",
    )
