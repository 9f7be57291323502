"""Benchmark of Chapter 6's deep dive 06d: the hand-written tensor-core kernels against cuBLAS, one run.

    CUDALEARN_MODE=gpu python3 scripts/bench_tc.py      # N = 4096 on a GPU
    python3 scripts/bench_tc.py                         # a smoke test on the CPU tracer (N = 64)

At N = sizes.size("ch6.tc_n") every candidate computes C = A @ B.T from the same float32 A, B (the
FP16 ones from float16 copies) and is compared with the FP32 product (cuBLAS, TF32 off): its largest
error relative to the largest |C|, recorded under `bench.tc.N{N}.error`. Then all are timed in one
`timing.measure` call (`bench.tc.N{N}`): the 06d steps (`tc_gemm`: one warp a tile, a block tile
with padded or swizzled shared rows, the cp.async pipeline), Chapter 6's two best float32 kernels
and cuBLAS in FP16, TF32 and FP32. `bench.tc.N{N}.goal` judges issue 33's goal with the numbers of
this run: the best 06d kernel at >= 50% of cuBLAS FP16 and >= 5x the best float32 kernel of the course.
`bench.tc.mlp` times Chapter 5's network's forward pass (`mlp_tc`) in FP16 on the tensor-core kernel
against the same network's float32 forward pass (`TunedMLP`).
"""

from __future__ import annotations

import sys

import numpy as np

from cudalearn.chapters.ch06.tc_steps import STEPS, build, table, tc_call
from cudalearn.runtime import device, sizes

BASELINE = "cuBLAS FP16"
GOAL_CUBLAS, GOAL_FP32 = 0.5, 5.0  # issue 33
FP32_STEPS = ("regblock_2d_warptile", "regblock_2d_async")  # Chapter 6's best float32 kernels


def key(n: int) -> str:
    """The reference-data key of size n."""
    return f"bench.tc.N{n}"


def candidates(n, cc):
    """({name: callable}, {name: relative error against FP32}) for the run at size n."""
    import torch

    from cudalearn.chapters.ch06 import bench
    from cudalearn.runtime import precision

    dev = device.torch_device()
    g = torch.Generator().manual_seed(0)
    a32 = torch.randn(n, n, generator=g).to(dev)
    b32 = torch.randn(n, n, generator=g).to(dev)  # B as (n, k): C = A @ B.T
    bt32 = b32.T.contiguous()  # the float32 kernels take B as (k, n)
    a16, b16 = a32.half(), b32.half()
    precision.set_fp32()
    ref = torch.matmul(a32, b32.T).float().cpu().numpy()
    bias = torch.zeros(n, device=dev)
    c32 = torch.empty(n, n, device=dev)
    c16 = torch.empty(n, n, device=dev, dtype=torch.float16)
    found = {}
    for step, (kernel, tiles) in build(cc).items():
        found[step] = tc_call(kernel, tiles, a16, b16, bias, c32)
    if device.mode() == "gpu":
        from cudalearn.runtime.numba_backend import cuda

        dA, dB, dC = cuda.as_cuda_array(a32), cuda.as_cuda_array(bt32), cuda.as_cuda_array(c32)
        for name, (kernel, tiles) in bench.numba_kernels(cc).items():
            if name in FP32_STEPS:
                found[f"{name} FP32 (Ch. 6)"] = bench.launch(name, kernel, tiles, n, dA, dB, dC)
    found["cuBLAS FP16"] = lambda: torch.matmul(a16, b16.T, out=c16)
    for p in ("TF32", "FP32"):
        found[f"cuBLAS {p}"] = bench.cublas_call(p, a32, b32.T, c32)
    errors = {}
    for name, fn in found.items():
        c32.fill_(float("nan"))
        c16.fill_(float("nan"))
        fn()
        got = (c16 if name == "cuBLAS FP16" else c32).float().cpu().numpy()
        errors[name] = float(np.abs(got - ref).max() / np.abs(ref).max())
    precision.set_fp32()
    return found, errors


def verdict(results) -> dict | None:
    """The best 06d kernel's fraction of cuBLAS FP16 and speed-up over the best float32 kernel, one run."""
    rate = {r["name"]: r.get("gflops") for r in results.rows}
    tc = {s: rate.get(s) for s in STEPS if rate.get(s)}
    fp32 = {s: g for s, g in rate.items() if g and s.endswith("FP32 (Ch. 6)")}
    if not tc or not fp32 or not rate.get(BASELINE):
        return None
    best, best32 = max(tc, key=tc.get), max(fp32, key=fp32.get)
    frac, speedup = tc[best] / rate[BASELINE], tc[best] / fp32[best32]
    return {
        "best": best,
        "best_fp32": best32,
        "fraction_of_cublas_fp16": frac,
        "speedup_over_best_fp32": speedup,
        "goal": {"fraction_of_cublas_fp16": GOAL_CUBLAS, "speedup_over_best_fp32": GOAL_FP32},
        "met": frac >= GOAL_CUBLAS and speedup >= GOAL_FP32,
    }


def verdict_line(v: dict) -> str:
    """The goal's verdict in two lines."""
    return (
        f"goal: {v['best']} at {v['fraction_of_cublas_fp16']:.0%} of cuBLAS FP16 (goal >= {GOAL_CUBLAS:.0%})"
        f"\n      and {v['speedup_over_best_fp32']:.1f}x {v['best_fp32']} (goal >= {GOAL_FP32:.0f}x),"
        f" same run: {'met' if v['met'] else 'MISSED'}"
    )


def main(argv: list[str] | None = None) -> int:
    """Check, time and record the 06d kernels at N and the MLP forward pass; print the verdict."""
    from cudalearn.chapters.ch06 import mlp_tc
    from cudalearn.measure import reference, timing

    device.setup()
    n = int(argv[0]) if argv else sizes.size("ch6.tc_n")
    cc = device.info().compute_capability
    found, errors = candidates(n, cc)
    reference.record(key(n) + ".error", errors)
    print("largest error relative to max |C| of the FP32 product:")
    print("\n".join(f"  {name:<34} {e:.2e}" for name, e in errors.items()))
    results = timing.measure(key(n), found, baseline=BASELINE, flops=2 * n**3, size={"N": n, "C": "A @ B.T"})
    print(table(results))
    if device.mode() != "gpu":
        results = timing.stored_results(key(sizes.size("ch6.tc_n", "gpu")))
        print(table(results) if results is not None else "no stored GPU run yet")
        if results is None:
            return 0
    v = verdict(results)
    print(verdict_line(v) if v else "goal: not judged (no GPU times for the kernels it compares)")
    if v and device.mode() == "gpu":
        reference.record(key(n) + ".goal", v)
    print(mlp_tc.compare())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
