"""The shallow network's matrix products (Chapter 5): naive baselines and tiled kernels, one output a thread.

Shapes follow the network of `cudalearn.chapters.ch05.model`: a batch X (m, k) times a
weight matrix W (k, n) plus a bias b (n,) gives Z (m, n). All float32.

Naive baselines (one thread per output element, global memory only):

* `matmul_bt_naive`: C = A @ B.T, the backward pass's dX = dZ @ W.T read
  from W as it is stored: neighbouring threads read W a whole row apart;
* `matmul_at_naive`: C = A.T @ B, the weight gradient dW = X.T @ dZ.

(The naive forward product is Chapter 2's `matmul_naive`.)

Tiled kernels, made by a factory because a shared array's shape must be a
compile-time constant (Chapter 3): `make_tiled(TILE)` gives `matmul_tiled_plain`
(C = A @ B, no epilogue) and `linear_relu_tiled` (Y = relu(X @ W + b)), (TILE, TILE)
threads, one output each; the second is the first with bias and ReLU applied before
the only store (the lab's kernel). `tiled(TILE)` returns the (cached) pair for any
TILE; the module-level pair is built for the GPU's `TILE`.

The register-blocked products are `blocked` (`make_blocked`), the tuned network's
`tuned` (`make_blocked_vec`), their tile sizes `tiles`.
"""

from __future__ import annotations

import functools

# the book cites linear.make_blocked_vec, linear.SKINNY_COLS and linear.SKINNY_TILES (deep dive 5b)
from cudalearn.chapters.ch05.kernels.tiles import SKINNY_COLS, SKINNY_TILES  # noqa: F401
from cudalearn.chapters.ch05.kernels.tuned import make_blocked_vec  # noqa: F401
from cudalearn.runtime import launch as grids
from cudalearn.runtime.numba_backend import cuda, float32

_MM = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"
SIGNATURES = {
    "matmul_bt_naive": _MM,
    "matmul_at_naive": _MM,
    "matmul_tiled_plain": _MM,
    "linear_relu_tiled": "void(float32[:, ::1], float32[:, ::1], float32[::1], float32[:, ::1])",
}


# Naive baselines -------------------------------------------------------------------------------


@cuda.jit
def matmul_bt_naive(A, B, C):
    """C = A @ B.T, thread (x, y) on C[y, x]; A (m, k), B (n, k), C (m, n) float32 (Chapter 5).

    The backward pass's dX = dZ @ W.T with W (in, out) as stored: at each
    step the 32 threads of a warp (neighbouring x) read B[x, k] for 32
    neighbouring x, i.e. 32 values a whole row of B apart: 32 sectors.
    """
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = float32(0.0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[col, k]
        C[row, col] = acc


@cuda.jit
def matmul_at_naive(A, B, C):
    """C = A.T @ B, thread (x, y) on C[y, x]; A (k, m), B (k, n), C (m, n) float32 (Chapter 5).

    The weight gradient dW = X.T @ dZ: at each step a warp reads one value
    of A (the same for all its threads: a broadcast) and 32 neighbouring
    values of a row of B (coalesced).
    """
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = float32(0.0)
        for k in range(A.shape[0]):
            acc += A[k, row] * B[k, col]
        C[row, col] = acc


# Tiled, one output per thread (Chapter 3's tiles, plus the fused epilogue) ---------------------


def make_tiled(TILE):
    """(matmul_tiled_plain, linear_relu_tiled): (TILE, TILE) blocks and shared tiles (Chapter 5).

    Launch both with blocks of (TILE, TILE) threads and a grid of
    (ceil(n / TILE), ceil(m / TILE)) blocks; thread (x, y) computes output
    [by * TILE + y, bx * TILE + x]. Tiles that stick out of a matrix are
    filled with zeros, so any sizes work.
    """

    # teaching copy: linear_relu_tiled less its epilogue; Chapter 3's matmul_tiled has other PTX and name
    @cuda.jit
    def matmul_tiled_plain(A, B, C):
        """C = A @ B through (TILE, TILE) shared tiles; A (m, k), B (k, n), C (m, n) float32."""
        sA = cuda.shared.array((TILE, TILE), float32)
        sB = cuda.shared.array((TILE, TILE), float32)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        row = cuda.blockIdx.y * TILE + ty
        col = cuda.blockIdx.x * TILE + tx
        K = A.shape[1]
        acc = float32(0.0)
        for k0 in range(0, K, TILE):
            sA[ty, tx] = A[row, k0 + tx] if row < A.shape[0] and k0 + tx < K else float32(0.0)
            sB[ty, tx] = B[k0 + ty, col] if k0 + ty < K and col < B.shape[1] else float32(0.0)
            cuda.syncthreads()
            for k in range(TILE):
                acc += sA[ty, k] * sB[k, tx]
            cuda.syncthreads()
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc

    # teaching copy: the lab's solution (solutions/05, exercise 1), kept equal by test_kernels.py
    @cuda.jit
    def linear_relu_tiled(X, W, b, Y):
        """Y = relu(X @ W + b) in one launch; X (m, k), W (k, n), b (n,), Y (m, n) float32."""
        sX = cuda.shared.array((TILE, TILE), float32)
        sW = cuda.shared.array((TILE, TILE), float32)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        row = cuda.blockIdx.y * TILE + ty
        col = cuda.blockIdx.x * TILE + tx
        K = X.shape[1]
        acc = float32(0.0)
        for k0 in range(0, K, TILE):
            sX[ty, tx] = X[row, k0 + tx] if row < X.shape[0] and k0 + tx < K else float32(0.0)
            sW[ty, tx] = W[k0 + ty, col] if k0 + ty < K and col < W.shape[1] else float32(0.0)
            cuda.syncthreads()
            for k in range(TILE):
                acc += sX[ty, k] * sW[k, tx]
            cuda.syncthreads()
        if row < Y.shape[0] and col < Y.shape[1]:
            Y[row, col] = max(acc + b[col], float32(0.0))  # the epilogue: bias, ReLU in registers

    return matmul_tiled_plain, linear_relu_tiled


@functools.cache
def tiled(TILE: int):
    """The cached (matmul_tiled_plain, linear_relu_tiled) pair for one TILE (Chapter 5)."""
    return make_tiled(TILE)


def tiled_launch(m: int, n: int, TILE: int):
    """(griddim, blockdim) of the tiled kernels for an (m, n) output (Chapter 5)."""
    return grids.square(m, n, TILE)


# The GPU configuration, at module level (compiled to PTX by the tests) --------------------------

TILE = 16  #: tile of the one-output-per-thread kernels on a GPU
matmul_tiled_plain, linear_relu_tiled = tiled(TILE)
