"""Elementwise kernels of Chapters 0 and 2: vector add, scaling, a busy loop, thread indices.

`vector_add` gives each thread one element; `vector_add_ilp(k)` makes the same addition with k
elements a thread and unsigned indices, one kernel per k (a compile-time constant, cached).
"""

import functools

from cudalearn.runtime.numba_backend import cuda, float32, uint32, uint64

SIGNATURES = {
    "vector_add": "void(float32[::1], float32[::1], float32[::1])",
    "scale": "void(float32[::1], float32)",
    "busy": "void(float32[::1], int32)",
    "thread_ids": "void(int32[:, ::1])",
}
# vector_add_ilp's kernels are made per k by a factory, so none is listed here: tests/compile/test_kernels.py
# compiles them for sm_75 and sm_90 with the signature of vector_add (VECTOR_ADD_ILP_SIGNATURE).
VECTOR_ADD_ILP_SIGNATURE = SIGNATURES["vector_add"]


@cuda.jit
def vector_add(a, b, out):
    """out[i] = a[i] + b[i], one thread per element; shapes (n,) float32 (Chapter 2)."""
    i = cuda.grid(1)
    if i < out.shape[0]:  # the last block may have threads past the end
        out[i] = a[i] + b[i]


@functools.cache
def vector_add_ilp(per_thread: int):
    """out = a + b, `per_thread` elements a thread, unsigned indices; (n,) float32 (Chapter 2).

    Block `g` covers the `per_thread * blockDim.x` elements from
    `g * per_thread * blockDim.x`; thread t of it takes elements t,
    t + blockDim.x, ..., so each of a warp's loads reads 32 neighbouring
    floats (coalesced). A thread issues the loads of all its elements
    before it adds any: 2 * per_thread independent loads can be in flight. The
    count is a compile-time constant (one kernel per value, cached), so the
    loops unroll and the values stay in registers. Indices are built from
    `uint32` values, which Numba widens to unsigned 64-bit integers: an
    index that cannot be negative needs no wrap-around code (Chapter 10), and
    no sum overflows for any array a GPU holds. Every element is guarded, so
    any n works. Launch with `launch.blocks(n, per_thread * threads)` blocks
    of `threads` threads.
    """
    if not isinstance(per_thread, int) or per_thread < 1:
        raise ValueError(f"per_thread must be a positive int, got {per_thread!r}")
    K = per_thread

    @cuda.jit
    def vector_add_ilp_kernel(a, b, out):
        width = uint32(cuda.blockDim.x)
        first = uint32(cuda.blockIdx.x) * width * uint32(K) + uint32(cuda.threadIdx.x)
        n = uint64(out.shape[0])  # unsigned as the indices: no mixed-sign comparison
        av = cuda.local.array(K, float32)
        bv = cuda.local.array(K, float32)
        for k in range(K):  # every load first: 2 * K of them in flight
            i = first + uint32(k) * width
            if i < n:
                av[k] = a[i]
                bv[k] = b[i]
        for k in range(K):
            i = first + uint32(k) * width
            if i < n:
                out[i] = av[k] + bv[k]

    return vector_add_ilp_kernel


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
    """out[i] = (blockIdx.x, threadIdx.x, global i, warp) of thread i; (n, 4) int32 (Chapter 2)."""
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i, 0] = cuda.blockIdx.x
        out[i, 1] = cuda.threadIdx.x
        out[i, 2] = i
        out[i, 3] = cuda.threadIdx.x // 32
