"""Matrix transpose kernels of Chapter 4: straight through global memory, or through a shared tile.

All take a float32 `src` (m, n) and write `dst` (n, m) = src.T, with blocks
of (TILE, TILE) threads and a grid of (ceil(n / TILE), ceil(m / TILE))
blocks over `src`: thread (x, y) of block (bx, by) reads
src[by * TILE + y, bx * TILE + x]. Sizes need not be multiples of TILE.

* `transpose_naive`: each thread copies one element; the reads are
  coalesced, the writes are a column of `dst` (32 sectors a warp).
* `transpose_tiled32`: a block reads a tile row by row (coalesced), and
  writes it transposed row by row (coalesced) by reading the shared tile
  down a column: a 32-way bank conflict.
* `transpose_tiled32_padded`: the same with a (32, 33) tile: no conflict.
"""

from cudalearn.runtime.launch import square
from cudalearn.runtime.numba_backend import cuda, float32

_SIG = "void(float32[:, ::1], float32[:, ::1])"


@cuda.jit
def transpose_naive(src, dst):
    """dst = src.T, one element a thread; src (m, n), dst (n, m) float32 (Chapter 4)."""
    x, y = cuda.grid(2)  # x along the columns of src
    if y < src.shape[0] and x < src.shape[1]:
        dst[x, y] = src[y, x]  # neighbouring threads write a whole row of dst apart


def make_transpose_tiled(TILE, PAD):
    """A transpose through a (TILE, TILE + PAD) shared tile, for (TILE, TILE) blocks (Chapter 4)."""
    WIDTH = TILE + PAD  # a shared array's shape must be a compile-time constant: computed here

    @cuda.jit
    def transpose_tiled(src, dst):
        """dst = src.T through a shared tile: coalesced reads and writes; float32 (Chapter 4)."""
        tile = cuda.shared.array((TILE, WIDTH), float32)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        row = cuda.blockIdx.y * TILE + ty  # the element of src this thread reads
        col = cuda.blockIdx.x * TILE + tx
        if row < src.shape[0] and col < src.shape[1]:
            tile[ty, tx] = src[row, col]  # a warp stores along a row of the tile
        cuda.syncthreads()
        out_row = cuda.blockIdx.x * TILE + ty  # the element of dst this thread writes
        out_col = cuda.blockIdx.y * TILE + tx
        if out_row < dst.shape[0] and out_col < dst.shape[1]:
            dst[out_row, out_col] = tile[tx, ty]  # a warp reads down a column of the tile

    return transpose_tiled


transpose_tiled16 = make_transpose_tiled(16, 0)
transpose_tiled32 = make_transpose_tiled(32, 0)
transpose_tiled32_padded = make_transpose_tiled(32, 1)

SIGNATURES = {
    "transpose_naive": _SIG,
    "transpose_tiled16": _SIG,
    "transpose_tiled32": _SIG,
    "transpose_tiled32_padded": _SIG,
}


def launch_config(m, n, tile):
    """(griddim, blockdim) of a transpose of an (m, n) src with (tile, tile) blocks (Chapter 4)."""
    return square(m, n, tile)
