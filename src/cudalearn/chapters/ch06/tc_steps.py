"""The steps of deep dive 06d as callables: which kernels, their tiles, their launch on torch tensors (Ch. 6).

`STEPS` names the steps (the one-warp kernel, the block tile with padded or swizzled rows, the cp.async
pipeline); `build(cc)` makes those this device runs; `tc_call` is a ready-to-time launch of one on torch
tensors (float16 A and B as uint32 words, `as_words`); `bench_tc` and `mlp_tc` use them.
"""

from __future__ import annotations

import textwrap

import numpy as np

from cudalearn.chapters.ch06.kernels import tc_gemm, tc_parts
from cudalearn.runtime import device

STEPS = {  # name -> tile overrides of make_tc_gemm (None: the one-warp kernel)
    "mma warp tile": None,
    "block tile, padded rows": {"stages": 1, "layout": "pad"},
    "block tile, swizzled rows": {"stages": 1, "layout": "swizzle"},
    "cp.async pipeline": {},
}


#: candidates for a faster pipelined kernel (issue 33's goal), timed by `bench_tc` beside the steps:
#: name -> full tiles on a GPU (the tracer runs them scaled down: `sim_tiles`)
_P = {"BK": 32, "stages": 3, "layout": "swizzle", "addr32": True}
_W4 = {**_P, "BM": 128, "BN": 128, "WARPS_M": 2, "WARPS_N": 2, "blocks": 2}  # 4 warps of 64 x 64
_W8 = {**_P, "BM": 128, "BN": 256, "WARPS_M": 2, "WARPS_N": 4, "blocks": 1, "dynamic": True}  # 8 of them
#: grouped: 16 block rows a group, so that the blocks resident at once (132 SMs of an H100, one or two
#: blocks each) cover a squarer patch of C, reading fewer rows of A and columns of B from L2
#: a32: 32-bit shared addresses (addr32); prefetch: fragments double-buffered (with BK = 64 its unrolled
#: loop spills); launch_bounds' blocks: one an SM for 8 warps of 64 x 64 (255 registers a thread)
VARIANTS = {
    "128x128, 8 warps of 64x32, a32": {**tc_gemm.CONFIGS["gpu"], "addr32": True},
    "128x128, 8 warps of 64x32, a32, grouped": {**tc_gemm.CONFIGS["gpu"], "addr32": True, "group": 16},
    "128x128, 4 warps of 64x64, a32": _W4,
    "128x128, 4 warps of 64x64, a32, grouped": {**_W4, "group": 16},
    "128x128x64, 4 warps of 64x64, a32": {**_W4, "BK": 64, "dynamic": True},
    "128x256, 8 warps of 64x64": {**_W8, "addr32": False},
    "128x256, 8 warps of 64x64, a32": _W8,
    "128x256, 8 warps of 64x64, a32, 4 stages": {**_W8, "stages": 4},
    "128x256, 8 warps of 64x64, a32, 2 stages": {**_W8, "stages": 2, "dynamic": False},  # 48 KB static
    "128x256, 8 warps of 64x64, a32, grouped": {**_W8, "group": 16},
    "128x256x64, 8 warps of 64x64, a32": {**_W8, "BK": 64},
    "128x128, 4 warps of 64x64, a32, prefetch": {**_W4, "prefetch": True},
    "128x256, 8 warps of 64x64, a32, prefetch": {**_W8, "prefetch": True},
    "128x256, 8 warps of 64x64, a32, prefetch, 4 stages": {**_W8, "prefetch": True, "stages": 4},
    "128x256, 8 warps of 64x64, a32, prefetch, grouped": {**_W8, "prefetch": True, "group": 16},
    "256x128, 8 warps of 64x64, a32, prefetch": {
        **_W8,
        "BM": 256,
        "BN": 128,
        "WARPS_M": 4,
        "WARPS_N": 2,
        "prefetch": True,
    },
    "256x128, 8 warps of 64x64, a32": {**_W8, "BM": 256, "BN": 128, "WARPS_M": 4, "WARPS_N": 2},
}


def sim_tiles(tiles):
    """`tiles` with each warp's tile halved along m and n (a CPU traces it): same warps, stages, layout,
    BK, block order; a warp tile of 64 x 64 becomes 32 x 32, so the mma and ldmatrix loops still run."""
    return {**tiles, "BM": tiles["BM"] // 2, "BN": tiles["BN"] // 2}


def tiles_for(step, cc):
    """The tiles of step or variant `step` in this mode (the tracer's small ones under the simulator)."""
    if step in VARIANTS:
        return sim_tiles(VARIANTS[step]) if device.mode() == "sim" else dict(VARIANTS[step])
    base = tc_gemm.CONFIGS["sim" if device.mode() == "sim" else "gpu"]
    return {**base, **STEPS[step]}


def build_variants(cc, names=None) -> dict:
    """{variant: (kernel, tiles)} of the `VARIANTS` named (all by default); none below sm_80 (cp.async)."""
    if device.mode() == "gpu" and tuple(cc) < (8, 0):
        return {}
    shape = tc_gemm.shape_for(cc if device.mode() == "gpu" else None)
    out = {}
    for name in VARIANTS if names is None else names:
        tiles = tiles_for(name, cc)
        out[name] = (tc_gemm.make_tc_gemm(**tiles, shape=shape), tiles)
    return out


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
    if device.mode() == "gpu":  # with the dynamic shared memory a `dynamic` kernel needs
        return tc_parts.launcher(kernel, tiles, grid, threads, (wa, wb, vb, vc))
    return lambda: launch(kernel, grid, threads, wa, wb, vb, vc)


def table(results, width=100) -> str:
    """A timing.Results as text whose lines fit `width` columns (a long stored-run label is wrapped)."""
    lines = str(results).splitlines()
    return "\n".join(
        part for line in lines for part in textwrap.wrap(line, width, subsequent_indent="  ") or [""]
    )
