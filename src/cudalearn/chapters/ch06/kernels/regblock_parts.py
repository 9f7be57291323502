"""What the last four register-blocked kernels of Chapter 6 do before and after their loop along k.

Two device functions they inline, each made by a factory whose arguments (tile sizes) become closure
constants, like the kernels of `regblock` that call them: `make_block_origin` (their first lines: the
thread's index and its block tile's corner) and `make_store_block` (their epilogue). The step along k
between them is Chapter 5's `tile_steps.make_outer_product`.
"""

from cudalearn.chapters.ch05.kernels.tile_steps import vec_offset
from cudalearn.runtime.numba_backend import cuda, int64, uint32

SIGNATURES: dict = {}  # device functions only: they compile inside the kernels that call them


def make_block_origin(BM, BN):
    """The last four kernels' first lines: the thread's index and its (BM, BN) block tile's corner (Ch. 6)."""

    @cuda.jit(device=True, inline="always")
    def block_origin():
        """(t, row0, col0), int64 through uint32: the compiler knows they are never negative, so the
        indices built from them need no wrap-around code."""
        t = int64(uint32(cuda.threadIdx.x))
        row0 = int64(uint32(cuda.blockIdx.y)) * BM
        col0 = int64(uint32(cuda.blockIdx.x)) * BN
        return t, row0, col0

    return block_origin


def make_store_block(TM, TN, RX, RY):
    """The last three kernels' epilogue: a thread's (TM, TN) accumulators into C, rows and columns
    as make_outer_product reads them; bounds checked only in blocks not `interior` (Chapter 6)."""

    @cuda.jit(device=True, inline="always")
    def store_block(C, acc, row0, col0, c0, r0, interior):
        """C[our rows, our columns] = acc, skipping what lies outside C."""
        for i in range(TM):
            r = row0 + vec_offset(i, r0, RY)
            for j in range(TN):
                c = col0 + vec_offset(j, c0, RX)
                if interior or (r < C.shape[0] and c < C.shape[1]):
                    C[r, c] = acc[i, j]

    return store_block
