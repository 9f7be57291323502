"""The steps of deep dive 06d as callables: which kernels, their tiles, their launch on torch tensors (Ch. 6).

`STEPS` names the steps (the one-warp kernel, the block tile with padded or swizzled rows, the cp.async
pipeline); `build(cc)` makes those this device runs; `tc_call` is a ready-to-time launch of one on torch
tensors (float16 A and B as uint32 words, `as_words`); `bench_tc` and `mlp_tc` use them.
"""

from __future__ import annotations

import textwrap

import numpy as np

from cudalearn.chapters.ch06.kernels import tc_gemm
from cudalearn.runtime import device

STEPS = {  # name -> tile overrides of make_tc_gemm (None: the one-warp kernel)
    "mma warp tile": None,
    "block tile, padded rows": {"stages": 1, "layout": "pad"},
    "block tile, swizzled rows": {"stages": 1, "layout": "swizzle"},
    "cp.async pipeline": {},
}


def tiles_for(step, cc):
    """The tiles of step `step` in this mode (the tracer's small ones under the simulator)."""
    base = tc_gemm.CONFIGS["sim" if device.mode() == "sim" else "gpu"]
    return {**base, **STEPS[step]}


def build(cc) -> dict:
    """{step: (kernel, tiles)} of the 06d steps this device runs (no cp.async below sm_80)."""
    shape = tc_gemm.shape_for(cc if device.mode() == "gpu" else None)
    out = {}
    for step, over in STEPS.items():
        if over is None:
            out[step] = (tc_gemm.make_warp_tile(shape), None)
            continue
        tiles = tiles_for(step, cc)
        if tiles["stages"] > 1 and device.mode() == "gpu" and tuple(cc) < (8, 0):
            continue
        out[step] = (tc_gemm.make_tc_gemm(**tiles, shape=shape), tiles)
    return out


def as_words(t):
    """A float16 torch tensor as the uint32 array the kernels take (a Numba device array on a GPU)."""
    import torch

    if t.is_cuda:
        from cudalearn.runtime.numba_backend import cuda

        return cuda.as_cuda_array(t.view(torch.int32)).view(np.uint32)
    return t.numpy().view(np.uint32)


def as_array(t):
    """A float32 torch tensor as an array a kernel writes (Numba device array on a GPU, numpy here)."""
    if t.is_cuda:
        from cudalearn.runtime.numba_backend import cuda

        return cuda.as_cuda_array(t)
    return t.numpy()


def tc_call(kernel, tiles, A, B, bias, C):
    """A callable C = A @ B.T + bias with a 06d kernel (torch tensors: float16 A, B; float32 bias, C)."""
    from cudalearn.trace import launch

    m, n = C.shape
    wa, wb, vb, vc = as_words(A), as_words(B), as_array(bias), as_array(C)
    if tiles is None:
        return lambda: launch(kernel, (n // 8, m // 16), 32, wa, wb, vc)
    tc_gemm.check_shapes(tiles, m, n, A.shape[1])
    grid, threads = (n // tiles["BN"], m // tiles["BM"]), tc_gemm.threads_per_block(tiles)
    return lambda: launch(kernel, grid, threads, wa, wb, vb, vc)


def table(results, width=100) -> str:
    """A timing.Results as text whose lines fit `width` columns (a long stored-run label is wrapped)."""
    lines = str(results).splitlines()
    return "\n".join(
        part for line in lines for part in textwrap.wrap(line, width, subsequent_indent="  ") or [""]
    )
