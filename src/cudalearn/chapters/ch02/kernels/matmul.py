"""Matrix-multiply kernels of Chapter 2: one thread per output element, global memory only."""

from cudalearn.runtime.numba_backend import cuda, float32

SIGNATURES = {
    "matmul_naive": "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])",
    "matmul_naive_swapped": "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])",
}


@cuda.jit
def matmul_naive(A, B, C):
    """C = A @ B, thread (x, y) computing C[y, x]; A (m, k), B (k, n), C (m, n) float32 (Chapter 2).

    Threads next to each other in x read neighbouring columns of B and
    write neighbouring elements of C: coalesced.
    """
    col, row = cuda.grid(2)  # grid(2) is (x, y): x picks the column
    if row < C.shape[0] and col < C.shape[1]:
        acc = float32(0.0)  # a float32 accumulator: 0.0 alone would make it float64
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def matmul_naive_swapped(A, B, C):
    """C = A @ B with thread (x, y) computing C[x, y]: the same work, uncoalesced (Chapter 2).

    Threads next to each other in x now walk down a column of A and write
    a column of C, a whole row apart: with (16, 16) blocks a warp spans 16
    rows, so each of its loads of A and stores of C touches 16 sectors,
    where matmul_naive's loads of A touch two and its stores of C four.
    """
    row, col = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = float32(0.0)  # a float32 accumulator: 0.0 alone would make it float64
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc
