"""Elementwise kernels of Chapters 0 and 2: vector add, scaling, a busy loop, thread indices."""

from numba import cuda, float32

SIGNATURES = {
    "vector_add": "void(float32[::1], float32[::1], float32[::1])",
    "scale": "void(float32[::1], float32)",
    "busy": "void(float32[::1], int32)",
    "thread_ids": "void(int32[:, ::1])",
}


@cuda.jit
def vector_add(a, b, out):
    """out[i] = a[i] + b[i], one thread per element; shapes (n,) float32 (Chapter 2)."""
    i = cuda.grid(1)
    if i < out.shape[0]:  # the last block may have threads past the end
        out[i] = a[i] + b[i]


@cuda.jit
def scale(x, factor):
    """x[i] *= factor in place, one thread per element; shape (n,) float32 (Chapter 0)."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        x[i] *= factor


@cuda.jit
def busy(x, iters):
    """Apply `iters` multiply-adds to every element: a kernel that takes a while (Chapter 0)."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        v = x[i]
        for _ in range(iters):
            v = v * float32(0.999) + float32(0.001)  # float32 constants keep it float32
        x[i] = v


@cuda.jit
def thread_ids(out):
    """out[i] = (blockIdx.x, threadIdx.x, global index, warp) of thread i; shape (n, 4) int32 (Chapter 2)."""
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i, 0] = cuda.blockIdx.x
        out[i, 1] = cuda.threadIdx.x
        out[i, 2] = i
        out[i, 3] = cuda.threadIdx.x // 32
