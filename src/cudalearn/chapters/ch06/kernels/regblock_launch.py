"""How Chapter 6's register-blocked steps are launched: threads a block, grid, and a ready-to-run call.

Every step runs 1-D blocks of threads on a 2-D grid of (ceil(n / BN), ceil(m / BM)) blocks for an
(m, n) C: `threads_per_block` and `launch_config` give them for a step built with given tiles,
`launcher` a callable that runs it on device arrays (for the cp.async step, after Chapter 4's
transpose of A).
"""

from cudalearn.chapters.ch06.kernels.regblock_tiles import ASYNC
from cudalearn.runtime import launch
from cudalearn.runtime.numba_backend import cuda


def threads_per_block(kernel_name, cfg):
    """Threads per (1-D) block of the kernel `kernel_name` built with the tile sizes `cfg` (Chapter 6)."""
    if kernel_name == "regblock_1d":
        return (cfg["BM"] // cfg["TM"]) * cfg["BN"]
    return (cfg["BM"] // cfg["TM"]) * (cfg["BN"] // cfg["TN"])


def launch_config(kernel_name, cfg, m, n):
    """(griddim, blockdim) of `kernel_name` with tiles `cfg` for an (m, n) C; x along columns (Chapter 6)."""
    grid = (launch.blocks(n, cfg["BN"]), launch.blocks(m, cfg["BM"]))
    return grid, threads_per_block(kernel_name, cfg)


def launcher(name, kernel, cfg, A, B, C):
    """A callable that computes C = A @ B (device arrays) with step `name` built with tiles `cfg` (Ch. 6).

    For the cp.async step it launches two kernels: Chapter 4's padded transpose of A into a buffer
    made here, then the product; the time of the call includes both.
    """
    m, n = C.shape
    grid, threads = launch_config(name, cfg, m, n)
    if name != ASYNC:
        return lambda: kernel[grid, threads](A, B, C)
    from cudalearn.chapters.ch04 import kernels as transpose

    for label, arr in (("A", A), ("B", B), ("C", C)):  # cp.async copies by flat offsets of C-ordered rows
        if not arr.is_c_contiguous():
            raise ValueError(f"{name}: {label} must be C-contiguous (np.ascontiguousarray before to_device)")

    AT = cuda.device_array((A.shape[1], A.shape[0]), dtype=A.dtype)
    t_grid, t_block = transpose.launch_config(A.shape[0], A.shape[1], 32)

    def run():
        transpose.transpose_tiled32_padded[t_grid, t_block](A, AT)
        kernel[grid, threads](AT, B, C)

    return run


def check(name, fn, ops):
    """Run `fn`, which computes ops.dC = ops.dA @ ops.dB, into a NaN-filled C and check C against
    cuBLAS FP32 (`ops`: Chapter 3's `matmul_operands`); print that it passed (Chapter 6 and 6a)."""
    import math

    import numpy as np

    from cudalearn import checks

    n = ops.A.shape[0]
    ops.dC.copy_to_device(np.full(ops.dC.shape, np.nan, np.float32))  # a kernel that writes nothing fails
    fn()
    tol = {"rtol": 1e-3, "atol": 1e-3 * math.sqrt(n)}
    checks.check_close(ops.dC.copy_to_host(), ops.expected, name=f"C of {name}", **tol)
    print(f"{name} is correct for {n}x{n}")
