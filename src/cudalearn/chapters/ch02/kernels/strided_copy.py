"""Copy kernels that show coalesced vs strided global-memory access (Chapter 2)."""

from cudalearn.runtime.launch import blocks
from cudalearn.runtime.numba_backend import cuda

SIGNATURES = {
    "copy_strided": "void(float32[::1], float32[::1], int32, int32)",
}


@cuda.jit
def copy_strided(src, dst, rows, stride):
    """dst[y * rows + x] = src[x * stride + y]: each element copied once, read `stride` apart.

    A 2-D launch: x runs over the `rows` of src viewed as a (rows, stride)
    matrix, y over its `stride` columns, so src is read column by column.
    Threads next to each other in x read floats `stride` apart: with
    stride 1 a warp reads 128 neighbouring bytes (coalesced), with stride s
    it touches up to 32 separate 32-byte sectors. The writes stay coalesced.
    Shapes (rows * stride,) float32; no division in the kernel, so the
    index arithmetic never limits the copy (Chapter 2).
    """
    x, y = cuda.grid(2)
    if x < rows and y < stride:
        dst[y * rows + x] = src[x * stride + y]


def copy_strided_launch(n: int, stride: int, threads: int = 256):
    """(griddim, blockdim, rows, stride) for copying n float32 with `copy_strided` (Chapter 2)."""
    import numpy as np

    if n % stride:
        raise ValueError(f"n={n} must be a multiple of the stride {stride}")
    rows = n // stride
    return (blocks(rows, threads), stride), (threads, 1), np.int32(rows), np.int32(stride)
