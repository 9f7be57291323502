"""Parts of 06d's tensor-core GEMM (`tc_gemm.make_tc_gemm`): its shared rings, its block order, its launch.

* `make_shared(A_ROWS, B_ROWS, RW, dynamic)`: the device function that declares the shared rings of A
  and B: two static arrays (at most 48 KB a block), or one dynamic array sized at launch, B's rows
  after A's, for rings above 48 KB (an H100 gives a block up to 227 KB, but only to a kernel that asks:
  `allow_shared`);
* `make_place(BM, BN)`: the device function giving a block the tile it computes;
* `shared_bytes(tiles)`: the bytes of the rings; `launcher(kernel, tiles, grid, threads, args)`: a
  ready-to-time launch on a GPU, with the dynamic shared memory a `dynamic` kernel needs.
"""

from __future__ import annotations

from cudalearn.runtime import numba_backend
from cudalearn.runtime.numba_backend import SIMULATOR, cuda, uint32

SIGNATURES: dict = {}  # device-function factories only: they compile inside tc_gemm's kernels
STATIC_LIMIT = 48 * 1024  # bytes of static shared memory a block may declare
DYNAMIC_LIMIT = 227 * 1024  # an sm_90 block's shared memory with the opt-in (CUDA C++ Programming Guide)


def row_words(tiles) -> int:
    """32-bit words of one shared row of `tiles`: BK / 2, and 4 more with `pad` rows."""
    return tiles["BK"] // 2 + (4 if tiles.get("layout", "swizzle") == "pad" else 0)


def shared_bytes(tiles) -> int:
    """Bytes of shared memory of the rings of `tiles` (stages x (BM + BN) rows)."""
    stages = max(1, tiles.get("stages", 1))
    return stages * (tiles["BM"] + tiles["BN"]) * row_words(tiles) * 4


def make_shared(A_ROWS, B_ROWS, RW, dynamic):
    """A device function () -> (sA, sB): the rings of A (A_ROWS x RW words) and of B (B_ROWS x RW).

    With `dynamic`, sA and sB are one array of dynamic shared memory, B's rows from word A_ROWS * RW
    (`make_tc_gemm`'s B_BASE); the tracer takes no dynamic shared memory, so there it is a static one
    of (A_ROWS + B_ROWS) rows (the tiles the tracer runs are small; its cp.async takes 2-D arrays)."""
    ALIGN = None if SIMULATOR else 16
    if dynamic:
        WORDS = (A_ROWS + B_ROWS, RW) if SIMULATOR else 0

        @cuda.jit(device=True, inline="always")
        def shared_dynamic():
            """One array for both rings, its size the launch's (kernel[grid, block, stream, bytes])."""
            sAB = cuda.shared.array(WORDS, uint32, alignment=ALIGN)
            return sAB, sAB

        return shared_dynamic

    @cuda.jit(device=True, inline="always")
    def shared_static():
        """Two static arrays."""
        sA = cuda.shared.array((A_ROWS, RW), uint32, alignment=ALIGN)
        sB = cuda.shared.array((B_ROWS, RW), uint32, alignment=ALIGN)
        return sA, sB

    return shared_static


def make_place(BM, BN):
    """A device function () -> (row0, col0): the first row and column of C this block computes.

    (Walking the grid in groups of 16 block rows, for L2 reuse, was slower on the H100 of 2026-12-06 for
    every tile tried: bench.tc.N4096, the `grouped` variants.)"""

    @cuda.jit(device=True, inline="always")
    def place_plain():
        """Block (x, y) computes tile row y, column x."""
        return cuda.blockIdx.y * BM, cuda.blockIdx.x * BN

    return place_plain


def allow_shared(kernel, args, nbytes) -> None:
    """Compile `kernel` for `args` and let it launch with `nbytes` of dynamic shared memory (a GPU): above
    48 KB a kernel must opt in (`numba_backend.allow_dynamic_shared`)."""
    if nbytes <= STATIC_LIMIT:
        return
    numba_backend.allow_dynamic_shared(kernel, tuple(args), nbytes)


def launcher(kernel, tiles, grid, threads, args):
    """A callable launching kernel[grid, threads](*args) on a GPU, with the dynamic shared memory of a
    `dynamic` kernel (`shared_bytes(tiles)`, allowed first by `allow_shared`)."""
    if not tiles.get("dynamic"):
        return lambda: kernel[grid, threads](*args)
    nbytes = shared_bytes(tiles)
    allow_shared(kernel, args, nbytes)
    return lambda: kernel[grid, threads, 0, nbytes](*args)
