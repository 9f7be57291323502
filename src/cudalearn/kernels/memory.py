"""Copy kernels that show coalesced vs strided global-memory access (Chapter 2)."""

from numba import cuda

SIGNATURES = {
    "copy_strided": "void(float32[::1], float32[::1], int32)",
}


@cuda.jit
def copy_strided(src, dst, stride):
    """dst[i] = src[j(i)]: every element copied once, thread i reading `stride` elements after thread i-1.

    With stride 1 the 32 threads of a warp read 32 neighbouring floats
    (128 bytes, coalesced); with stride s they read floats s apart, so a
    warp touches up to 32 separate 32-byte sectors. Shapes (n,) float32,
    n a multiple of `stride` (Chapter 2).
    """
    i = cuda.grid(1)
    n = dst.shape[0]
    if i < n:
        rows = n // stride  # view src as (stride, rows) and read it column by column
        j = (i % rows) * stride + i // rows
        dst[i] = src[j]
