"""Shared-memory tiled matrix products of Chapters 3 and 4, built for a tile size fixed at compile time.

Numba needs the shape of a `cuda.shared.array` as a compile-time constant, so each
kernel comes from a factory: `make_tiled_matmul(16)` returns a `@cuda.jit` kernel
whose tile size is the closure constant `TILE`. Every kernel here computes C = A @ B
for float32 A (m, k), B (k, n), C (m, n), with blocks of (TILE, TILE) threads and a
grid of (ceil(n / TILE), ceil(m / TILE)) blocks; thread (x, y) of block (bx, by)
computes C[by * TILE + y, bx * TILE + x]. Sizes need not be multiples of TILE: tiles
that stick out of a matrix are filled with zeros.

The kernels differ only in how the tiles sit in shared memory:

* `matmul_tiled16`, `matmul_tiled32`: the tiled product of Chapter 3;
* `matmul_tiled16_one_barrier`: the same without the second `syncthreads`,
  wrong on purpose, to show the race it causes (Chapter 3);
* `matmul_tiled32_padded`: both tiles (TILE, TILE + 1); no bank conflict to
  remove here, and the padding costs speed (Chapter 4);
* `matmul_bt_tiled32`, `matmul_bt_tiled32_padded` (and the 16 versions):
  the B tile stored transposed and read along its columns, a 32-way bank
  conflict at TILE = 32 that the (TILE, TILE + 1) padding removes (Chapter 4).
"""

from cudalearn.runtime.numba_backend import cuda, float32

_SIG = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"


def make_tiled_matmul(TILE):
    """Tiled C = A @ B for (TILE, TILE) blocks: tiles of A and B in shared memory (Chapter 3)."""

    @cuda.jit
    def matmul_tiled(A, B, C):
        """C = A @ B through (TILE, TILE) shared tiles; A (m, k), B (k, n), C (m, n) float32."""
        sA = cuda.shared.array((TILE, TILE), float32)
        sB = cuda.shared.array((TILE, TILE), float32)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        row = cuda.blockIdx.y * TILE + ty
        col = cuda.blockIdx.x * TILE + tx
        K = A.shape[1]
        acc = float32(0.0)
        for t in range((K + TILE - 1) // TILE):  # the tiles along k, the last one maybe partial
            k0 = t * TILE
            a = float32(0.0)  # outside A or B a tile holds zeros, which add nothing to acc
            if row < A.shape[0] and k0 + tx < K:
                a = A[row, k0 + tx]
            b = float32(0.0)
            if k0 + ty < K and col < B.shape[1]:
                b = B[k0 + ty, col]
            sA[ty, tx] = a  # each thread loads one element of each tile
            sB[ty, tx] = b
            cuda.syncthreads()  # 1: both tiles are complete before anyone reads them
            for k in range(TILE):
                acc += sA[ty, k] * sB[k, tx]
            cuda.syncthreads()  # 2: everyone is done reading before the next tiles overwrite them
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc

    return matmul_tiled


# teaching copy: make_tiled_matmul less its second barrier; Chapter 3 diffs the two and traces the race
def make_tiled_matmul_one_barrier(TILE):
    """The tiled kernel WITHOUT its second syncthreads: a race, kept to show it (Chapter 3)."""

    @cuda.jit
    def matmul_tiled_one_barrier(A, B, C):
        """WRONG on purpose: fast threads overwrite the tiles while slow ones still read them."""
        sA = cuda.shared.array((TILE, TILE), float32)
        sB = cuda.shared.array((TILE, TILE), float32)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        row = cuda.blockIdx.y * TILE + ty
        col = cuda.blockIdx.x * TILE + tx
        K = A.shape[1]
        acc = float32(0.0)
        for t in range((K + TILE - 1) // TILE):  # the tiles along k, the last one maybe partial
            k0 = t * TILE
            a = float32(0.0)  # outside A or B a tile holds zeros, which add nothing to acc
            if row < A.shape[0] and k0 + tx < K:
                a = A[row, k0 + tx]
            b = float32(0.0)
            if k0 + ty < K and col < B.shape[1]:
                b = B[k0 + ty, col]
            sA[ty, tx] = a  # each thread loads one element of each tile
            sB[ty, tx] = b
            cuda.syncthreads()  # 1: both tiles are complete before anyone reads them
            for k in range(TILE):
                acc += sA[ty, k] * sB[k, tx]
            # 2: MISSING: the next iteration's stores may overwrite tiles that others still read
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc

    return matmul_tiled_one_barrier


def make_tiled_matmul_padded(TILE):
    """The tiled kernel with (TILE, TILE + 1) tiles: padding where there is no conflict (Chapter 4)."""
    WIDTH = TILE + 1  # a shared array's shape must be a compile-time constant: computed here

    @cuda.jit
    def matmul_tiled_padded(A, B, C):
        """matmul_tiled with a padding column in both tiles; same accesses, same (zero) conflicts."""
        sA = cuda.shared.array((TILE, WIDTH), float32)
        sB = cuda.shared.array((TILE, WIDTH), float32)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        row = cuda.blockIdx.y * TILE + ty
        col = cuda.blockIdx.x * TILE + tx
        K = A.shape[1]
        acc = float32(0.0)
        for t in range((K + TILE - 1) // TILE):
            k0 = t * TILE
            a = float32(0.0)
            if row < A.shape[0] and k0 + tx < K:
                a = A[row, k0 + tx]
            b = float32(0.0)
            if k0 + ty < K and col < B.shape[1]:
                b = B[k0 + ty, col]
            sA[ty, tx] = a
            sB[ty, tx] = b
            cuda.syncthreads()
            for k in range(TILE):
                acc += sA[ty, k] * sB[k, tx]
            cuda.syncthreads()
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc

    return matmul_tiled_padded


def make_matmul_bt_tiled(TILE, PAD):
    """A tiled kernel that keeps B's tile transposed, (TILE, TILE + PAD), read by column (Ch. 4).

    With PAD = 0 and TILE = 32, the 32 threads of a warp store to, and read
    from, one column of the tile: 32 words 32 words apart, all in one bank.
    PAD = 1 shifts each row by one bank, so a column spans all 32 banks.
    """
    WIDTH = TILE + PAD  # a shared array's shape must be a compile-time constant: computed here

    @cuda.jit
    def matmul_bt_tiled(A, B, C):
        """C = A @ B with the B tile kept transposed, sBt[j, k] = B[k0 + k, col0 + j]; float32."""
        sA = cuda.shared.array((TILE, TILE), float32)
        sBt = cuda.shared.array((TILE, WIDTH), float32)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        row = cuda.blockIdx.y * TILE + ty
        col = cuda.blockIdx.x * TILE + tx
        K = A.shape[1]
        acc = float32(0.0)
        for t in range((K + TILE - 1) // TILE):
            k0 = t * TILE
            a = float32(0.0)
            if row < A.shape[0] and k0 + tx < K:
                a = A[row, k0 + tx]
            b = float32(0.0)
            if k0 + ty < K and col < B.shape[1]:
                b = B[k0 + ty, col]
            sA[ty, tx] = a
            sBt[tx, ty] = b  # transposed: a warp (one ty, 32 tx) stores down a column
            cuda.syncthreads()
            for k in range(TILE):
                acc += sA[ty, k] * sBt[tx, k]  # a warp reads down column k of sBt
            cuda.syncthreads()
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc

    return matmul_bt_tiled


matmul_tiled16 = make_tiled_matmul(16)
matmul_tiled32 = make_tiled_matmul(32)
matmul_tiled16_one_barrier = make_tiled_matmul_one_barrier(16)
matmul_tiled32_padded = make_tiled_matmul_padded(32)
matmul_bt_tiled16 = make_matmul_bt_tiled(16, 0)
matmul_bt_tiled16_padded = make_matmul_bt_tiled(16, 1)
matmul_bt_tiled32 = make_matmul_bt_tiled(32, 0)
matmul_bt_tiled32_padded = make_matmul_bt_tiled(32, 1)

#: The tile size of each kernel above: its blocks have (TILE, TILE) threads.
TILES = {
    "matmul_tiled16": 16,
    "matmul_tiled32": 32,
    "matmul_tiled16_one_barrier": 16,
    "matmul_tiled32_padded": 32,
    "matmul_bt_tiled16": 16,
    "matmul_bt_tiled16_padded": 16,
    "matmul_bt_tiled32": 32,
    "matmul_bt_tiled32_padded": 32,
}

SIGNATURES = dict.fromkeys(TILES, _SIG)


def launch_config(m, n, tile):
    """(griddim, blockdim) of a tiled kernel over an (m, n) output: x along columns (Chapter 3)."""
    from cudalearn.runtime.launch import square  # here, not on top: Chapter 3 cites the kernels' line numbers

    return square(m, n, tile)
