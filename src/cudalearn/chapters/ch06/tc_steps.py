"""The steps of deep dive 06d as callables: which kernels, their tiles, their launch on torch tensors (Ch. 6).

`STEPS` names the steps (the one-warp kernel, the block tile with padded or swizzled rows, the cp.async
pipeline, and `FAST`: larger warp and block tiles, 32-bit shared addresses, prefetched fragments);
`build(cc)` makes those this device runs; `VARIANTS` holds candidates a GPU run times beside them; `tc_call`
is a ready-to-time launch of one on torch tensors (float16 A and B as uint32 words, `as_words`); `bench_tc`
and `mlp_tc` use them.
"""

from __future__ import annotations

import textwrap

import numpy as np

from cudalearn.chapters.ch06.kernels import tc_gemm, tc_parts
from cudalearn.runtime import device

#: step 4: the fastest of the variants timed on an H100 (bench.tc.N4096 of h100-2026-12-06-tc-variants.json):
#: a 128 x 256 tile of 8 warps of 64 x 64 (32 mma.sync per 8 ldmatrix.x4 a k16 step), its 72 KB ring in
#: dynamic shared memory, 32-bit shared addresses (addr32) and fragments double-buffered (prefetch)
FAST = "128x256, 8 warps of 64x64, a32, prefetch"
FAST_TILES = {
    "BM": 128, "BN": 256, "BK": 32, "WARPS_M": 2, "WARPS_N": 4, "stages": 3, "layout": "swizzle",
    "dynamic": True, "addr32": True, "prefetch": True, "blocks": 1,
}  # fmt: skip
STEPS = {  # name -> tile overrides of make_tc_gemm (None: the one-warp kernel), or all of them (step 4)
    "mma warp tile": None,
    "block tile, padded rows": {"stages": 1, "layout": "pad"},
    "block tile, swizzled rows": {"stages": 1, "layout": "swizzle"},
    "cp.async pipeline": {},
    FAST: FAST_TILES,
}
#: candidates for a faster kernel, timed by `bench_tc` beside the steps (name -> tiles on a GPU); the 17
#: of 2026-12-06 were decided (their figures: bench.tc.N4096, their tiles: bench.tc.N4096.variants)
VARIANTS: dict = {}


def sim_tiles(tiles):
    """`tiles` with each warp's tile halved along m and n (a CPU traces it): same warps, stages, layout,
    BK, block order; a warp tile of 64 x 64 becomes 32 x 32, so the mma and ldmatrix loops still run."""
    return {**tiles, "BM": tiles["BM"] // 2, "BN": tiles["BN"] // 2}


def tiles_for(step, cc):
    """The tiles of step or variant `step` in this mode (the tracer's small ones under the simulator)."""
    full = VARIANTS.get(step) or (STEPS.get(step) if "BM" in (STEPS.get(step) or {}) else None)
    if full is not None:
        return sim_tiles(full) if device.mode() == "sim" else dict(full)
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
