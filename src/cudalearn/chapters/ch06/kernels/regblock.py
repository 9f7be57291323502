"""Register-blocked matrix products of Chapter 6: each thread keeps a block of C in registers.

Every kernel here computes C = A @ B for float32 A (m, k), B (k, n) and C (m, n), C-contiguous,
with 1-D blocks of threads and a 2-D grid of (ceil(n / BN), ceil(m / BM)) blocks: block (bx, by)
computes the (BM, BN) tile of C whose top-left element is C[by * BM, bx * BN], walking along k in
steps of BK with one (BM, BK) tile of A and one (BK, BN) tile of B in shared memory. Sizes need not
be multiples of the tiles: what sticks out of a matrix is read as zeros and never written.
`launch_config(name, tiles, m, n)` gives the launch of any kernel made here.

Numba needs the shapes of `cuda.shared.array` and `cuda.local.array` as compile-time constants, so
each kernel comes from a factory whose arguments (block tile BM x BN, step BK, micro-tile TM x TN)
become closure constants. A `cuda.local.array` of constant shape, indexed only with constants once
the loops over it are unrolled, lives in registers; index it with a run-time value and it goes to
(slow) local memory.

The six steps of the chapter, each a factory:

* `make_regblock_1d`: each thread computes TM elements of one column of C, so each value of B it
  reads from shared memory serves TM multiply-adds;
* `make_regblock_2d_simple`: each thread computes a (TM, TN) block of C: per step along k it reads
  TM values of A and TN of B into registers and does TM * TN multiply-adds with them; the A tile is
  stored transposed so that the TM values a thread needs sit side by side;
* `make_regblock_2d_vec`: the thread's rows and columns come four at a time, so each group of four
  is an aligned 16-byte run that the compiler reads with one 128-bit shared load and a warp reads
  without bank conflict; indices pass through uint32 (no negative-index wrap-around code), full tiles
  load and store with no bounds check, and launch bounds cap registers at 128 a thread;
* `make_regblock_2d_prefetch`: as `_vec`, plus two shared buffers and a register prefetch (the
  global loads of the next tiles are in flight during the multiply-adds of the current ones, one
  barrier a tile) and the loop along k unrolled by four;
* `make_regblock_2d_warptile`: `_prefetch` with the threads laid out warp by warp: each warp owns
  a WM x WN sub-tile of the block tile and its lanes a grid inside it (`make_layout`), so a warp's
  shared reads at each step along k cover fewer distinct 16-byte runs (the warp tiling of
  Simon Boehm's "How to Optimize a CUDA Matmul Kernel for cuBLAS-like Performance: a Worklog");
* `make_regblock_2d_async` (sm_80 and newer): `_vec`'s layout and outer product, the loop along k
  written out (`make_tile_steps`), and the tiles copied by cp.async (`async_copy`) into a ring of
  three shared buffers, one barrier a tile; it takes A transposed (`launcher` transposes it first
  with Chapter 4's kernel), so that A's tile is copied 16 bytes at a time like B's.

Their shared pieces are device functions the kernels inline: `make_load_tiles` (the guarded loads of
a step along k, every tile of `_simple` and the edge tiles of `_vec`), `make_outer_product` (the step
along k of the last four: `make_tile_steps` writes out a tile of its calls) and `make_store_block`
(their epilogue).

`CONFIGS` (`CONFIGS_WARP` for the warp-tiled step, `CONFIGS_ASYNC` for the cp.async one) sizes the
tiles for sm_80 and newer ('sm80+': A100, H100, H200), for sm_75 ('sm75': a T4) and for the simulator
('sim'); `config_for(cc)` picks one, `build(target)` makes every step that target has (`unbuilt` says
why one is left out) and `launcher` runs any of them on device arrays. What the compiler made of a kernel
(registers, occupancy, the machine instructions of its hot loop) is `cudalearn.compile.toolchain`'s.
"""

from cudalearn.chapters.ch05.kernels.tile_steps import VEC, make_outer_product, make_tile_steps, vec_offset
from cudalearn.runtime import launch
from cudalearn.runtime.numba_backend import SIMULATOR, cuda, float32, int64, uint32

_SIG = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"
MAX_REGISTERS = 128  # per thread, for the last two steps: two 256-thread blocks fill 64K registers

#: Block tile (BM, BN, BK) and per-thread micro-tile (TM, TN) of the 2-D kernels, per target.
CONFIGS = {
    # sm_80 and newer (A100, H100, H200; 64K registers, over 100 KB of shared memory per SM): 128x128
    # tiles, 256 threads of 8x8 outputs; at 128 registers a thread, two blocks (16 warps) fit an SM.
    "sm80+": {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
    # sm_75 (T4: 40 SMs of at most 1024 threads and 64 KB of shared memory): 64x64 tiles, 128 threads
    # of 8x4 outputs, which its compiler fits in 128 registers without spilling; four blocks an SM.
    "sm75": {"BM": 64, "BN": 64, "BK": 8, "TM": 8, "TN": 4},
    # The simulator runs a Python thread per CUDA thread: 16x16 tiles of 16 threads of 4x4 outputs.
    "sim": {"BM": 16, "BN": 16, "BK": 4, "TM": 4, "TN": 4},
}

#: The warp-tiled kernel's tiles per target: the block and micro-tiles of CONFIGS, each warp owning a
#: WM x WN sub-tile whose 32 lanes form a (WM / TM) x (WN / TN) grid; `regs` caps registers a thread.
CONFIGS_WARP = {
    # 4 warps of 64 x 64 outputs (lanes 8 x 4) in the 128 x 128 tile, 8 x 16 outputs a thread, BK = 16,
    # up to 255 registers (two blocks of 128 threads an SM): the fastest warp tiling of the H200 probe
    # of 2026-12-05 (data/gpu-runs/2026-12-05-h200); at step 4's tiles the layout alone changed little.
    "sm80+": {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 16, "WM": 64, "WN": 64, "regs": 255},
    # 4 warps of 32 x 32 outputs (lanes 4 x 8) in the T4's 64 x 64 tile.
    "sm75": {"BM": 64, "BN": 64, "BK": 8, "TM": 8, "TN": 4, "WM": 32, "WN": 32, "regs": 128},
    # one warp of 16 x 32 outputs: the smallest tile a whole warp of 4 x 4 micro-tiles fills.
    "sim": {"BM": 16, "BN": 32, "BK": 4, "TM": 4, "TN": 4, "WM": 16, "WN": 32, "regs": 128},
}

#: The cp.async kernel's tiles per target (`make_regblock_2d_async`; sm_80 and newer only, so no 'sm75').
CONFIGS_ASYNC = {
    # 256 threads of 8 x 8 outputs at 128 registers (two blocks an SM), BK = 16, three stages (48 KB of
    # shared memory a block): the fastest of the cp.async candidates of the H100 probe of 2026-12-05
    # (data/gpu-runs/2026-12-05-h100-probe4).
    "sm80+": {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8, "stages": 3, "regs": 128},
    "sim": {"BM": 16, "BN": 16, "BK": 4, "TM": 4, "TN": 4, "stages": 3, "regs": 128},
}

#: The 1-D kernel's tiles (BM, BN, BK, TM) per target: TM outputs down one column per thread.
CONFIGS_1D = {
    "sm80+": {"BM": 64, "BN": 64, "BK": 8, "TM": 8},
    "sm75": {"BM": 64, "BN": 64, "BK": 8, "TM": 8},
    "sim": {"BM": 16, "BN": 8, "BK": 4, "TM": 4},
}


def _jit_bounded(threads, regs=MAX_REGISTERS):
    """cuda.jit with launch bounds that cap registers at `regs` a thread (nothing under the simulator)."""
    if SIMULATOR:  # the simulator's cuda.jit takes no launch bounds
        return cuda.jit
    return cuda.jit(launch_bounds=(threads, max(1, 65536 // (threads * regs))))


def config_for(cc, *, simulator=False):
    """'sim', 'sm80+' (sm_80 and newer: A100, H100, H200) or 'sm75' (older: a T4) for capability cc."""
    if simulator:
        return "sim"
    return "sm80+" if tuple(cc or (0, 0)) >= (8, 0) else "sm75"


def _check_2d(BM, BN, BK, TM, TN, vec):
    """The tile shapes a 2-D kernel needs; raise ValueError with the rule broken otherwise."""
    if BM % TM or BN % TN:
        raise ValueError(f"TM={TM} must divide BM={BM} and TN={TN} must divide BN={BN}")
    threads = (BM // TM) * (BN // TN)
    if threads > 1024:
        raise ValueError(f"{threads} threads per block: at most 1024")
    if threads % BK or BM % (threads // BK):
        raise ValueError(f"{threads} threads cannot load the ({BM}, {BK}) A tile in equal rows")
    if threads % BN or BK % (threads // BN):
        raise ValueError(f"{threads} threads cannot load the ({BK}, {BN}) B tile in equal rows")
    if vec and (TM % VEC or TN % VEC):
        raise ValueError(f"TM={TM} and TN={TN} must be multiples of {VEC} for 128-bit loads")
    return threads


def _tile_passes(BM, BN, BK, threads):
    """(A_STEP, A_LOADS, B_STEP, B_LOADS): rows of the (BM, BK) A tile and of the (BK, BN) B tile that
    one pass of the block's `threads` loads, and the passes (loads a thread) each tile takes."""
    A_STEP, B_STEP = threads // BK, threads // BN
    return A_STEP, BM // A_STEP, B_STEP, BK // B_STEP


def make_regblock_1d(BM, BN, BK, TM):
    """Each of (BM // TM) * BN threads computes TM outputs down one column of C (Chapter 6)."""
    threads = (BM // TM) * BN
    if BM % TM or threads > 1024 or threads % BK or BM % (threads // BK) or BK % (BM // TM):
        raise ValueError(f"tiles BM={BM}, BN={BN}, BK={BK}, TM={TM} do not split into equal loads")
    A_STEP, A_LOADS, B_STEP, B_LOADS = _tile_passes(BM, BN, BK, threads)  # rows a pass loads, passes

    @cuda.jit
    def regblock_1d(A, B, C):
        """C = A @ B; thread t computes C[row0 + (t // BN) * TM + i, col0 + t % BN], i < TM; float32."""
        sA = cuda.shared.array((BM, BK), float32)
        sB = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array(TM, float32)  # TM accumulators: registers
        t = cuda.threadIdx.x
        tx = t % BN  # this thread's column of the tile
        ty = t // BN  # its group of TM rows
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN
        M, N, K = C.shape[0], C.shape[1], A.shape[1]
        for i in range(TM):
            acc[i] = float32(0.0)
        for k0 in range(0, K, BK):
            for p in range(A_LOADS):  # neighbouring threads read neighbouring columns of A
                r = t // BK + p * A_STEP
                c = t % BK
                v = float32(0.0)
                if row0 + r < M and k0 + c < K:
                    v = A[row0 + r, k0 + c]
                sA[r, c] = v
            for p in range(B_LOADS):  # ... and of B: coalesced
                r = t // BN + p * B_STEP
                v = float32(0.0)
                if k0 + r < K and col0 + tx < N:
                    v = B[k0 + r, col0 + tx]
                sB[r, tx] = v
            cuda.syncthreads()
            for k in range(BK):
                b = sB[k, tx]  # one shared read of B ...
                for i in range(TM):  # ... serves TM multiply-adds
                    acc[i] += sA[ty * TM + i, k] * b
            cuda.syncthreads()
        for i in range(TM):
            r = row0 + ty * TM + i
            if r < M and col0 + tx < N:
                C[r, col0 + tx] = acc[i]

    return regblock_1d


def make_load_tiles(BM, BN, BK, threads):
    """The guarded loads of one step along k of the 2-D kernels, the A tile stored transposed (Chapter 6).

    `threads` threads load the (BM, BK) tile of A at (row0, k0) into sAt (sAt[k, r] = A[row0 + r,
    k0 + k]) and the (BK, BN) tile of B at (k0, col0) into sB, neighbouring threads on neighbouring
    columns (coalesced), zeros outside the (M, K) and (K, N) matrices. Every tile of
    regblock_2d_simple, and the edge tiles of regblock_2d_vec; inlined into the kernel.
    """
    A_STEP, A_LOADS, B_STEP, B_LOADS = _tile_passes(BM, BN, BK, threads)

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


def make_regblock_2d_simple(BM, BN, BK, TM, TN):
    """Each thread computes a (TM, TN) block of C from TM + TN shared reads per k (Chapter 6)."""
    threads = _check_2d(BM, BN, BK, TM, TN, vec=False)
    RX = BN // TN  # threads along a row of the block tile
    load_tiles = make_load_tiles(BM, BN, BK, threads)

    @cuda.jit
    def regblock_2d_simple(A, B, C):
        """C = A @ B; thread t computes C[row0 + (t // RX) * TM + i, col0 + (t % RX) * TN + j]; float32."""
        sAt = cuda.shared.array((BK, BM), float32)  # the A tile transposed: sAt[k, r] = A[row0 + r, k0 + k]
        sB = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array((TM, TN), float32)  # TM * TN accumulators: registers
        a = cuda.local.array(TM, float32)  # this k's column of A for our rows
        b = cuda.local.array(TN, float32)  # this k's row of B for our columns
        t = cuda.threadIdx.x
        tx = t % RX
        ty = t // RX
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN
        M, N, K = C.shape[0], C.shape[1], A.shape[1]
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0.0)
        for k0 in range(0, K, BK):
            load_tiles(A, B, sAt, sB, row0, col0, k0, t, M, N, K)
            cuda.syncthreads()
            for k in range(BK):
                for i in range(TM):
                    a[i] = sAt[k, ty * TM + i]
                for j in range(TN):
                    b[j] = sB[k, tx * TN + j]
                for i in range(TM):  # TM + TN shared reads feed TM * TN multiply-adds
                    for j in range(TN):
                        acc[i, j] += a[i] * b[j]
            cuda.syncthreads()
        for i in range(TM):
            r = row0 + ty * TM + i
            for j in range(TN):
                c = col0 + tx * TN + j
                if r < M and c < N:
                    C[r, c] = acc[i, j]

    return regblock_2d_simple


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


def make_regblock_2d_vec(BM, BN, BK, TM, TN):
    """make_regblock_2d_simple as the compiler likes it: 128-bit reads, no wrap-around, no bounds checks."""
    threads = _check_2d(BM, BN, BK, TM, TN, vec=True)
    RX, RY = BN // TN, BM // TM
    A_STEP, A_LOADS, B_STEP, B_LOADS = _tile_passes(BM, BN, BK, threads)
    WIDTH = BM + VEC  # sAt rows of BM + 4 floats: a warp's transposed stores spread over all 32 banks
    outer_product = make_outer_product(TM, TN, RX, RY)
    store_block = make_store_block(TM, TN, RX, RY)
    load_tiles = make_load_tiles(BM, BN, BK, threads)

    @_jit_bounded(threads)
    def regblock_2d_vec(A, B, C):
        """C = A @ B; thread t owns rows 4 * (t // RX) + 4 * RY * g + u (u < 4) and columns alike; float32."""
        sAt = cuda.shared.array((BK, WIDTH), float32)
        sB = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array((TM, TN), float32)
        a = cuda.local.array(TM, float32)
        b = cuda.local.array(TN, float32)
        # Through uint32, the compiler knows these are never negative: no wrap-around code for them.
        t = int64(uint32(cuda.threadIdx.x))
        row0 = int64(uint32(cuda.blockIdx.y)) * BM
        col0 = int64(uint32(cuda.blockIdx.x)) * BN
        tx = t % RX
        ty = t // RX
        M, N, K = C.shape[0], C.shape[1], A.shape[1]
        interior = row0 + BM <= M and col0 + BN <= N  # the same for every thread of the block
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0.0)
        for s in range((K + BK - 1) // BK):
            k0 = int64(uint32(s)) * BK
            if interior and k0 + BK <= K:  # a full tile: no bounds check at all
                for p in range(A_LOADS):
                    r = t // BK + p * A_STEP
                    sAt[t % BK, r] = A[row0 + r, k0 + t % BK]
                for p in range(B_LOADS):
                    r = t // BN + p * B_STEP
                    sB[r, t % BN] = B[k0 + r, col0 + t % BN]
            else:  # an edge tile: zeros outside the matrices
                load_tiles(A, B, sAt, sB, row0, col0, k0, t, M, N, K)
            cuda.syncthreads()
            for k in range(BK):
                outer_product(sAt, sB, uint32(k), tx * VEC, ty * VEC, a, b, acc)
            cuda.syncthreads()
        store_block(C, acc, row0, col0, tx * VEC, ty * VEC, interior)

    return regblock_2d_vec


def make_layout(BM, BN, TM, TN, warp=None):
    """(RX, RY, first): where each thread's outputs lie in the (BM, BN) block tile (Chapter 6).

    `first(t)` is (c0, r0), thread t's first column and row; its TM rows and TN columns come in
    groups of four from there, RY and RX threads' groups interleaving along each (`vec_offset`).
    Without `warp`, the threads of the block form one (BM / TM) x (BN / TN) grid (`regblock_2d_vec`
    and `_prefetch`). With `warp` = (WM, WN), each warp owns a WM x WN sub-tile of the block tile
    and its 32 lanes form a (WM / TM) x (WN / TN) grid inside it (`regblock_2d_warptile`).
    """
    if warp is None:
        RX, RY = BN // TN, BM // TM

        def first(t):
            """(c0, r0) of thread t: its place in the block's grid of threads, four outputs a place."""
            return (t % RX) * VEC, (t // RX) * VEC

        return RX, RY, first
    WM, WN = warp
    if BM % WM or BN % WN or WM % TM or WN % TN or (WM // TM) * (WN // TN) != 32:
        raise ValueError(
            f"warp tile {WM}x{WN} must divide the block tile {BM}x{BN} and hold 32 lanes of {TM}x{TN} outputs"
        )
    LX, LY, WX = WN // TN, WM // TM, BN // WN  # lanes along a warp tile's row and column, warps along a row

    def first(t):
        """(c0, r0) of thread t: its warp's sub-tile, then its lane's place inside it."""
        w, lane = t // 32, t % 32
        return (w % WX) * WN + (lane % LX) * VEC, (w // WX) * WM + (lane // LX) * VEC

    return LX, LY, first


def make_regblock_2d_prefetch(BM, BN, BK, TM, TN, regs=MAX_REGISTERS, warp=None):
    """make_regblock_2d_vec with the next tiles' global loads in flight during the FMAs, k unrolled by 4.

    With `warp` = (WM, WN) the threads are laid out warp by warp (`make_layout`): the kernel is
    `regblock_2d_warptile`. `regs` caps the registers a thread (launch bounds).
    """
    threads = _check_2d(BM, BN, BK, TM, TN, vec=True)
    if BK % 4:
        raise ValueError(f"BK={BK} must be a multiple of 4: the loop along k is unrolled by four")
    RX, RY, first = make_layout(BM, BN, TM, TN, warp)
    first_output = cuda.jit(device=True, inline="always")(first)
    A_STEP, A_LOADS, B_STEP, B_LOADS = _tile_passes(BM, BN, BK, threads)
    WIDTH, ROWS2 = BM + VEC, 2 * BK  # shared shapes must be constants of the factory, not computed inside
    outer_product = make_outer_product(TM, TN, RX, RY)
    store_block = make_store_block(TM, TN, RX, RY)

    def regblock_2d_prefetch(A, B, C):
        """C = A @ B as regblock_2d_vec; two shared buffers, global loads one tile ahead; float32."""
        sAt = cuda.shared.array((ROWS2, WIDTH), float32)  # two buffers stacked along k: tile s lives
        sB = cuda.shared.array((ROWS2, BN), float32)  # in rows (s % 2) * BK ... (s % 2) * BK + BK - 1
        acc = cuda.local.array((TM, TN), float32)
        a = cuda.local.array(TM, float32)
        b = cuda.local.array(TN, float32)
        pa = cuda.local.array(A_LOADS, float32)  # this thread's share of the next A tile
        pb = cuda.local.array(B_LOADS, float32)  # ... and of the next B tile
        t = int64(uint32(cuda.threadIdx.x))
        row0 = int64(uint32(cuda.blockIdx.y)) * BM
        col0 = int64(uint32(cuda.blockIdx.x)) * BN
        c0, r0 = first_output(t)  # this thread's first output column and row in the tile
        ar, ac = t // BK, t % BK  # this thread's first element of an A tile
        br, bc = t // BN, t % BN  # ... and of a B tile
        M, N, K = C.shape[0], C.shape[1], A.shape[1]
        interior = row0 + BM <= M and col0 + BN <= N
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0.0)
        tiles = (K + BK - 1) // BK
        for s in range(tiles + 1):
            k0 = int64(uint32(s)) * BK
            if s < tiles:  # tile s: global loads into registers, still in flight during the FMAs below
                if interior and k0 + BK <= K:
                    for p in range(A_LOADS):
                        pa[p] = A[row0 + ar + p * A_STEP, k0 + ac]
                    for p in range(B_LOADS):
                        pb[p] = B[k0 + br + p * B_STEP, col0 + bc]
                else:
                    for p in range(A_LOADS):
                        pa[p] = float32(0.0)
                        if row0 + ar + p * A_STEP < M and k0 + ac < K:
                            pa[p] = A[row0 + ar + p * A_STEP, k0 + ac]
                    for p in range(B_LOADS):
                        pb[p] = float32(0.0)
                        if k0 + br + p * B_STEP < K and col0 + bc < N:
                            pb[p] = B[k0 + br + p * B_STEP, col0 + bc]
            if s > 0:  # the FMAs of tile s - 1, in shared memory since the last barrier
                q = uint32((s - 1) % 2) * uint32(BK)  # the first row of its buffer
                for k4 in range(BK // 4):
                    k = q + uint32(4 * k4)
                    outer_product(sAt, sB, k, c0, r0, a, b, acc)
                    outer_product(sAt, sB, k + 1, c0, r0, a, b, acc)
                    outer_product(sAt, sB, k + 2, c0, r0, a, b, acc)
                    outer_product(sAt, sB, k + 3, c0, r0, a, b, acc)
            if s < tiles:  # tile s into the other buffer, which nobody reads during this step
                q = uint32(s % 2) * uint32(BK)
                for p in range(A_LOADS):
                    sAt[q + ac, ar + p * A_STEP] = pa[p]
                for p in range(B_LOADS):
                    sB[q + br + p * B_STEP, bc] = pb[p]
            cuda.syncthreads()  # one barrier a tile: tile s is complete and tile s - 1 is read
        store_block(C, acc, row0, col0, c0, r0, interior)

    if warp is not None:  # the same code, named for what its layout is
        regblock_2d_prefetch.__name__ = regblock_2d_prefetch.__qualname__ = "regblock_2d_warptile"
    return _jit_bounded(threads, regs)(regblock_2d_prefetch)


def threads_per_block(kernel_name, cfg):
    """Threads per (1-D) block of the kernel `kernel_name` built with the tile sizes `cfg` (Chapter 6)."""
    if kernel_name == "regblock_1d":
        return (cfg["BM"] // cfg["TM"]) * cfg["BN"]
    return (cfg["BM"] // cfg["TM"]) * (cfg["BN"] // cfg["TN"])


def launch_config(kernel_name, cfg, m, n):
    """(griddim, blockdim) of `kernel_name` with tiles `cfg` for an (m, n) C; x along columns (Chapter 6)."""
    grid = (launch.blocks(n, cfg["BN"]), launch.blocks(m, cfg["BM"]))
    return grid, threads_per_block(kernel_name, cfg)


def thread_outputs(kernel_name, cfg, t):
    """(rows, cols) of the block tile whose C elements thread t computes, for the 2-D kernels (Chapter 6).

    regblock_2d_simple: a contiguous TM x TN block; the last three kernels: groups of four rows and
    four columns spread by `vec_offset` from `make_layout`'s first output (their Python functions,
    so the picture follows the kernel's rule).
    """
    if kernel_name == "regblock_2d_simple":
        tx, ty = t % (cfg["BN"] // cfg["TN"]), t // (cfg["BN"] // cfg["TN"])
        rows = [ty * cfg["TM"] + i for i in range(cfg["TM"])]
        return rows, [tx * cfg["TN"] + j for j in range(cfg["TN"])]
    warp = (cfg["WM"], cfg["WN"]) if kernel_name == "regblock_2d_warptile" else None
    RX, RY, first = make_layout(cfg["BM"], cfg["BN"], cfg["TM"], cfg["TN"], warp)
    c0, r0 = first(t)
    offset = vec_offset.py_func
    return [offset(i, r0, RY) for i in range(cfg["TM"])], [offset(j, c0, RX) for j in range(cfg["TN"])]


def warp_read_runs(kernel_name, cfg, warp=0):
    """(A, B): distinct 16-byte runs of sAt and of sB that warp `warp` reads at one step along k (Chapter 6).

    For the last three kernels, whose threads read their rows and columns four at a time: each group
    of four is one aligned run, read with one 128-bit shared load, and a warp's shared traffic per
    step along k is 16 * (A + B) bytes. Counted from `thread_outputs`, the kernels' own rule.
    """
    if kernel_name not in ("regblock_2d_vec", "regblock_2d_prefetch", "regblock_2d_warptile", ASYNC):
        raise ValueError(f"{kernel_name} does not read its rows and columns in 16-byte runs")
    first = 32 * warp
    threads = threads_per_block(kernel_name, cfg)
    if not 0 <= first < threads:
        raise ValueError(f"warp {warp} is not in a block of {threads} threads")
    runs_a, runs_b = set(), set()
    for t in range(first, min(first + 32, threads)):
        rows, cols = thread_outputs(kernel_name, cfg, t)
        runs_a.update(r // VEC for r in rows)
        runs_b.update(c // VEC for c in cols)
    return len(runs_a), len(runs_b)


def make_regblock_2d_warptile(BM, BN, BK, TM, TN, WM, WN, regs=MAX_REGISTERS):
    """make_regblock_2d_prefetch with each warp owning a WM x WN sub-tile of the block tile (Chapter 6)."""
    return make_regblock_2d_prefetch(BM, BN, BK, TM, TN, regs=regs, warp=(WM, WN))


def make_regblock_2d_async(BM, BN, BK, TM, TN, stages=3, regs=MAX_REGISTERS):
    """C = AT.T @ B with the tiles copied by cp.async into a ring of `stages` shared buffers (Chapter 6).

    AT is A transposed, (K, M): `launcher` transposes A first with Chapter 4's padded transpose,
    so that A's tile, like B's, is copied 16 bytes at a time into rows that need no transposition.
    While tile s is multiplied, tiles s + 1 ... s + stages - 1 are on their way straight into shared
    memory (`async_copy`): no registers hold them and no thread waits for them until it needs them.
    One barrier a tile: it publishes tile s to the block and tells everyone that the stage of tile
    s - 1, which the next copies overwrite, is read. The thread layout, outer product and epilogue are
    `regblock_2d_vec`'s. Blocks that stick out of C, edge tiles along k and shapes whose rows are not
    multiples of 4 floats take guarded synchronous loads instead (zeros outside the matrices).
    sm_80 and newer (`async_copy.unavailable`).
    """
    from cudalearn.chapters.ch06.kernels import async_copy

    threads = _check_2d(BM, BN, BK, TM, TN, vec=True)
    if stages < 2:
        raise ValueError(f"stages={stages}: at least two buffers, one read while the next is filled")
    if (BM * BK) % (VEC * threads) or (BN * BK) % (VEC * threads):
        raise ValueError(f"{threads} threads cannot copy the tiles in equal 16-byte pieces")
    RX, RY, first = make_layout(BM, BN, TM, TN)
    first_output = cuda.jit(device=True, inline="always")(first)
    ROWS = stages * BK  # the ring: tile s lives in rows (s % stages) * BK ... + BK - 1
    if ROWS * (BM + BN) * 4 > 48 * 1024:
        raise ValueError(f"{ROWS * (BM + BN) * 4} bytes of shared memory a block: at most 48 KB (static)")
    A_QUADS, B_QUADS = BM // VEC, BN // VEC  # 16-byte pieces along a row of AT's and of B's tile
    A_STEP, B_STEP = threads // A_QUADS, threads // B_QUADS  # tile rows one pass of the block copies
    A_PASSES, B_PASSES = BK // A_STEP, BK // B_STEP
    steps = make_tile_steps(BK, TM, TN, RX, RY)
    store_block = make_store_block(TM, TN, RX, RY)
    copy16, commit, wait = async_copy.copy16, async_copy.commit, async_copy.make_wait(stages - 2)
    ALIGN = None if SIMULATOR else 16  # the simulator's shared arrays take no alignment
    STAGES = stages

    @cuda.jit(device=True, inline="always")
    def fetch(AT, B, sAt, sB, q, k0, a_off, b_off, t, row0, col0, M, N, K, fast):
        """The tile at k0 into the stage whose rows start at q: cp.async if `fast` (a_off and b_off are
        this thread's first piece of it in AT and B, flat), else guarded loads, zeros outside."""
        ar, ac = t // A_QUADS, (t % A_QUADS) * VEC  # this thread's first piece of the tiles
        br, bc = t // B_QUADS, (t % B_QUADS) * VEC
        if fast:
            for p in range(A_PASSES):
                copy16(sAt, (q + ar + p * A_STEP) * BM + ac, AT, a_off + p * A_STEP * M)
            for p in range(B_PASSES):
                copy16(sB, (q + br + p * B_STEP) * BN + bc, B, b_off + p * B_STEP * N)
        else:
            for p in range(A_PASSES):
                for u in range(VEC):
                    v = float32(0.0)
                    if k0 + ar + p * A_STEP < K and row0 + ac + u < M:
                        v = AT[k0 + ar + p * A_STEP, row0 + ac + u]
                    sAt[q + ar + p * A_STEP, ac + u] = v
            for p in range(B_PASSES):
                for u in range(VEC):
                    v = float32(0.0)
                    if k0 + br + p * B_STEP < K and col0 + bc + u < N:
                        v = B[k0 + br + p * B_STEP, col0 + bc + u]
                    sB[q + br + p * B_STEP, bc + u] = v

    def regblock_2d_async(AT, B, C):
        """C = AT.T @ B: tiles copied by cp.async `STAGES - 1` tiles ahead, one barrier a tile; float32."""
        sAt = cuda.shared.array((ROWS, BM), float32, alignment=ALIGN)  # 16-byte copies need 16-byte
        sB = cuda.shared.array((ROWS, BN), float32, alignment=ALIGN)  # aligned destinations
        acc = cuda.local.array((TM, TN), float32)
        a = cuda.local.array(TM, float32)
        b = cuda.local.array(TN, float32)
        t = int64(uint32(cuda.threadIdx.x))
        row0 = int64(uint32(cuda.blockIdx.y)) * BM
        col0 = int64(uint32(cuda.blockIdx.x)) * BN
        c0, r0 = first_output(t)
        M, N, K = C.shape[0], C.shape[1], B.shape[0]
        interior = row0 + BM <= M and col0 + BN <= N
        fast_block = interior and M % VEC == 0 and N % VEC == 0  # 16-byte aligned pieces, all inside
        a_off = (t // A_QUADS) * M + row0 + (t % A_QUADS) * VEC  # this thread's first piece of tile 0
        b_off = (t // B_QUADS) * N + col0 + (t % B_QUADS) * VEC
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0.0)
        tiles = (K + BK - 1) // BK
        wq = int64(0)  # the first row of the stage the next fetched tile goes to
        k0 = int64(0)  # the first k of the next fetched tile
        for s in range(STAGES - 1):  # the first STAGES - 1 tiles on their way
            if s < tiles:
                fast = fast_block and k0 + BK <= K  # a whole tile of a block inside C: cp.async
                fetch(AT, B, sAt, sB, uint32(wq), k0, a_off, b_off, t, row0, col0, M, N, K, fast)
            commit()  # a group every time, even empty: the wait below counts groups
            wq += BK
            k0 += BK
            a_off += BK * M
            b_off += BK * N
        rq = int64(0)  # the first row of the stage that holds tile s
        for _ in range(tiles):  # tile s = 0, 1, ...: its stage starts at row rq
            wait()  # this thread's copies of tile s have landed ...
            cuda.syncthreads()  # ... everyone's have, and everyone has read tile s - 1's stage
            if wq == ROWS:
                wq = int64(0)
            if k0 < K:  # tile s + STAGES - 1, into the stage tile s - 1 used
                fast = fast_block and k0 + BK <= K  # a whole tile of a block inside C: cp.async
                fetch(AT, B, sAt, sB, uint32(wq), k0, a_off, b_off, t, row0, col0, M, N, K, fast)
            commit()
            wq += BK
            k0 += BK
            a_off += BK * M
            b_off += BK * N
            steps(sAt, sB, uint32(rq), c0, r0, a, b, acc)  # uint32: no wrap-around code for the rows
            rq += BK
            if rq == ROWS:
                rq = int64(0)
        store_block(C, acc, row0, col0, c0, r0, interior)

    return _jit_bounded(threads, regs)(regblock_2d_async)


FACTORIES = {
    "regblock_1d": make_regblock_1d,
    "regblock_2d_simple": make_regblock_2d_simple,
    "regblock_2d_vec": make_regblock_2d_vec,
    "regblock_2d_prefetch": make_regblock_2d_prefetch,
    "regblock_2d_warptile": make_regblock_2d_warptile,
    "regblock_2d_async": make_regblock_2d_async,
}
ASYNC = "regblock_2d_async"  # the one step whose kernel takes A transposed (`launcher` transposes it)
_TABLES = {"regblock_1d": CONFIGS_1D, "regblock_2d_warptile": CONFIGS_WARP, ASYNC: CONFIGS_ASYNC}


def tiles(kernel_name, target):
    """The tile sizes of `kernel_name` for `target` ('sm80+', 'sm75' or 'sim'), as a dict (Chapter 6)."""
    table = _TABLES.get(kernel_name, CONFIGS)
    if target not in table:
        raise ValueError(f"{kernel_name} has no tiles for {target}: {unbuilt(target)[kernel_name]}")
    return table[target]


def unbuilt(target):
    """{name: why} of the steps `build(target)` leaves out in this process (Chapter 6)."""
    from cudalearn.chapters.ch06.kernels import async_copy

    if target not in CONFIGS_ASYNC:  # 'sm75': whatever runs the kernels, a T4's ptxas refuses cp.async
        return {ASYNC: "cp.async needs sm_80 or newer; the sm75 tiles are a T4's (sm_75)"}
    why = async_copy.unavailable()
    return {} if why is None else {ASYNC: why}


def build(target):
    """{name: (kernel, tiles)} of the six steps with tiles for 'sm80+', 'sm75' or 'sim' (Chapter 6),
    less those `unbuilt(target)` names (the cp.async step below sm_80 and on numba-cuda-mlir)."""
    skip = unbuilt(target)
    return {
        name: (make(**tiles(name, target)), tiles(name, target))
        for name, make in FACTORIES.items()
        if name not in skip
    }


def launcher(name, kernel, cfg, A, B, C):
    """A callable that computes C = A @ B (device arrays) with step `name` built with tiles `cfg` (Ch. 6).

    For the cp.async step it launches two kernels: Chapter 4's padded transpose of A into a buffer
    made here, then the product; the time of the call includes both.
    """
    m, n = C.shape
    grid, threads = launch_config(name, cfg, m, n)
    if name != ASYNC:
        return lambda: kernel[grid, threads](A, B, C)
    from cudalearn.chapters.ch04 import kernels as transpose

    for label, arr in (("A", A), ("B", B), ("C", C)):  # cp.async copies by flat offsets of C-ordered rows
        if not arr.is_c_contiguous():
            raise ValueError(f"{name}: {label} must be C-contiguous (np.ascontiguousarray before to_device)")

    AT = cuda.device_array((A.shape[1], A.shape[0]), dtype=A.dtype)
    t_grid, t_block = transpose.launch_config(A.shape[0], A.shape[1], 32)

    def run():
        transpose.transpose_tiled32_padded[t_grid, t_block](A, AT)
        kernel[grid, threads](AT, B, C)

    return run


# Each step at sm_80's tile sizes (the H200's), and the last at sm_75's (the T4's); compiled at their
# first launch.
regblock_1d = make_regblock_1d(**CONFIGS_1D["sm80+"])
regblock_2d_simple = make_regblock_2d_simple(**CONFIGS["sm80+"])
regblock_2d_vec = make_regblock_2d_vec(**CONFIGS["sm80+"])
regblock_2d_prefetch = make_regblock_2d_prefetch(**CONFIGS["sm80+"])
regblock_2d_prefetch_t4 = make_regblock_2d_prefetch(**CONFIGS["sm75"])
regblock_2d_warptile = make_regblock_2d_warptile(**CONFIGS_WARP["sm80+"])
regblock_2d_warptile_t4 = make_regblock_2d_warptile(**CONFIGS_WARP["sm75"])

SIGNATURES = dict.fromkeys(
    [
        "regblock_1d",
        "regblock_2d_simple",
        "regblock_2d_vec",
        "regblock_2d_prefetch",
        "regblock_2d_prefetch_t4",
        "regblock_2d_warptile",
        "regblock_2d_warptile_t4",
    ],
    _SIG,
)
