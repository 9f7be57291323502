"""The device functions Chapter 6's register-blocked kernels inline: tile loads, block corner, epilogue.

Each is made by a factory whose arguments (the tile sizes) become closure constants, like the kernels
of `regblock` that call them: `make_load_tiles` (the guarded loads of a step along k, every tile of
`regblock_2d_simple` and the edge tiles of `regblock_2d_vec`), `make_block_origin` (the thread's index
and its block tile's corner, the first lines of the last four kernels) and `make_store_block` (their
epilogue). The step along k itself is Chapter 5's `tile_steps.make_outer_product`.
"""

from cudalearn.chapters.ch05.kernels.tile_steps import vec_offset
from cudalearn.chapters.ch06.kernels.regblock_tiles import tile_passes
from cudalearn.runtime.numba_backend import cuda, float32, int64, uint32

SIGNATURES: dict = {}  # device functions only: they compile inside the kernels that call them


def make_load_tiles(BM, BN, BK, threads):
    """The guarded loads of one step along k of the 2-D kernels, the A tile stored transposed (Chapter 6).

    `threads` threads load the (BM, BK) tile of A at (row0, k0) into sAt (sAt[k, r] = A[row0 + r,
    k0 + k]) and the (BK, BN) tile of B at (k0, col0) into sB, neighbouring threads on neighbouring
    columns (coalesced), zeros outside the (M, K) and (K, N) matrices. Every tile of
    regblock_2d_simple, and the edge tiles of regblock_2d_vec; inlined into the kernel.
    """
    A_STEP, A_LOADS, B_STEP, B_LOADS = tile_passes(BM, BN, BK, threads)

    @cuda.jit(device=True, inline="always")
    def load_tiles(A, B, sAt, sB, row0, col0, k0, t, M, N, K):
        """sAt = the A tile at (row0, k0), transposed; sB = the B tile at (k0, col0); zeros outside."""
        for p in range(A_LOADS):
            r = t // BK + p * A_STEP
            c = t % BK
            v = float32(0.0)
            if row0 + r < M and k0 + c < K:
                v = A[row0 + r, k0 + c]
            sAt[c, r] = v  # stored transposed
        for p in range(B_LOADS):
            r = t // BN + p * B_STEP
            c = t % BN
            v = float32(0.0)
            if k0 + r < K and col0 + c < N:
                v = B[k0 + r, col0 + c]
            sB[r, c] = v

    return load_tiles


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
    """The last three kernels' epilogue: a thread's (TM, TN) accumulators into C, rows and columns as
    make_outer_product reads them; bounds checked only in blocks that are not `interior` (Chapter 6)."""

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
