"""Register-blocked matrix products of Chapter 6: each thread keeps a block of C in registers.

Every kernel here computes C = A @ B for float32 A (m, k), B (k, n) and C (m, n), C-contiguous,
with 1-D blocks of threads and a 2-D grid of (ceil(n / BN), ceil(m / BM)) blocks: block (bx, by)
computes the (BM, BN) tile of C whose top-left element is C[by * BM, bx * BN], walking along k in
steps of BK with one (BM, BK) tile of A and one (BK, BN) tile of B in shared memory. Sizes need not
be multiples of the tiles: what sticks out of a matrix is read as zeros and never written.
`regblock_launch` launches any kernel made here (`launch_config(name, tiles, m, n)`, `launcher`).

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
  a WM x WN sub-tile of the block tile and its lanes a grid inside it (`regblock_layout.make_layout`),
  so a warp's shared reads at each step along k cover fewer distinct 16-byte runs (the warp tiling of
  Simon Boehm's "How to Optimize a CUDA Matmul Kernel for cuBLAS-like Performance: a Worklog");
* `make_regblock_2d_async` (sm_80 and newer): `_vec`'s layout and outer product, the loop along k
  written out (`make_tile_steps`), and the tiles copied by cp.async (`async_copy`) into a ring of
  three shared buffers, one barrier a tile; it takes A transposed (`regblock_launch.launcher`
  transposes it first with Chapter 4's kernel), so that A's tile is copied 16 bytes at a time like B's.

Their shared pieces are device functions the kernels inline: `make_load_tiles` (the guarded loads of
a step along k, every tile of `_simple` and the edge tiles of `_vec`), Chapter 5's `make_outer_product`
(the step along k of the last four: `make_tile_steps` writes out a tile of its calls) and, from
`regblock_parts`, `make_block_origin` (the first lines of the last four: the thread's index and its
block tile's corner) and `make_store_block` (their epilogue).

The tiles of each step per target are `regblock_tiles`'s (`CONFIGS`, `config_for(cc)`, `tiles`);
`build(target)` makes every step that target has (`regblock_tiles.unbuilt` says why one is left out).
What the compiler made of a kernel (registers, occupancy, the machine instructions of its hot loop) is
`cudalearn.compile.toolchain`'s.
"""

from cudalearn.chapters.ch05.kernels.tile_steps import VEC, make_outer_product, make_tile_steps
from cudalearn.chapters.ch06.kernels.regblock_layout import make_layout
from cudalearn.chapters.ch06.kernels.regblock_parts import make_block_origin, make_store_block
from cudalearn.chapters.ch06.kernels.regblock_tiles import (
    CONFIGS,
    CONFIGS_1D,
    CONFIGS_WARP,
    MAX_REGISTERS,
    check_tiles_2d,
    tile_passes,
    tiles,
    unbuilt,
)
from cudalearn.runtime.numba_backend import SIMULATOR, cuda, float32, int64, uint32

_SIG = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"


def _jit_bounded(threads, regs=MAX_REGISTERS):
    """cuda.jit with launch bounds that cap registers at `regs` a thread (nothing under the simulator)."""
    if SIMULATOR:  # the simulator's cuda.jit takes no launch bounds
        return cuda.jit
    return cuda.jit(launch_bounds=(threads, max(1, 65536 // (threads * regs))))


def make_regblock_1d(BM, BN, BK, TM):
    """Each of (BM // TM) * BN threads computes TM outputs down one column of C (Chapter 6)."""
    threads = (BM // TM) * BN
    if BM % TM or threads > 1024 or threads % BK or BM % (threads // BK) or BK % (BM // TM):
        raise ValueError(f"tiles BM={BM}, BN={BN}, BK={BK}, TM={TM} do not split into equal loads")
    A_STEP, A_LOADS, B_STEP, B_LOADS = tile_passes(BM, BN, BK, threads)  # rows a pass loads, passes

    @cuda.jit
    def regblock_1d(A, B, C):
        """C = A @ B; thread t computes C[row0 + (t // BN) * TM + i, col0 + t % BN], i < TM."""
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
    """The guarded loads of a step along k of the 2-D kernels, A's tile transposed (Chapter 6).

    `threads` threads load the (BM, BK) tile of A at (row0, k0) into sAt (sAt[k, r] = A[row0 + r,
    k0 + k]) and the (BK, BN) tile of B at (k0, col0) into sB, neighbouring threads on neighbouring
    columns (coalesced), zeros outside the (M, K) and (K, N) matrices. Every tile of
    regblock_2d_simple, and the edge tiles of regblock_2d_vec; inlined into the kernel.
    """
    A_STEP, A_LOADS, B_STEP, B_LOADS = tile_passes(BM, BN, BK, threads)

    @cuda.jit(device=True, inline="always")
    def load_tiles(A, B, sAt, sB, row0, col0, k0, t, M, N, K):
        """sAt = A's tile at (row0, k0), transposed; sB = B's tile at (k0, col0); zeros outside."""
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
    threads = check_tiles_2d(BM, BN, BK, TM, TN, vec=False)
    RX = BN // TN  # threads along a row of the block tile
    load_tiles = make_load_tiles(BM, BN, BK, threads)

    @cuda.jit
    def regblock_2d_simple(A, B, C):
        """C = A @ B; thread t computes C[row0 + (t // RX) * TM + i, col0 + (t % RX) * TN + j]."""
        # the A tile transposed: sAt[k, r] = A[row0 + r, k0 + k]
        sAt = cuda.shared.array((BK, BM), float32)
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


def make_regblock_2d_vec(BM, BN, BK, TM, TN):
    """make_regblock_2d_simple as the compiler likes it: 128-bit reads, no wrap-around or bounds."""
    threads = check_tiles_2d(BM, BN, BK, TM, TN, vec=True)
    RX, RY = BN // TN, BM // TM
    A_STEP, A_LOADS, B_STEP, B_LOADS = tile_passes(BM, BN, BK, threads)
    WIDTH = BM + VEC  # sAt rows of BM + 4 floats: a warp's transposed stores hit all 32 banks
    outer_product = make_outer_product(TM, TN, RX, RY)
    store_block = make_store_block(TM, TN, RX, RY)
    load_tiles = make_load_tiles(BM, BN, BK, threads)
    block_origin = make_block_origin(BM, BN)

    @_jit_bounded(threads)
    def regblock_2d_vec(A, B, C):
        """C = A @ B; thread t owns rows 4 * (t // RX) + 4 * RY * g + u (u < 4), columns alike."""
        sAt = cuda.shared.array((BK, WIDTH), float32)
        sB = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array((TM, TN), float32)
        a = cuda.local.array(TM, float32)
        b = cuda.local.array(TN, float32)
        t, row0, col0 = block_origin()  # uint32: no wrap-around code for indices built from them
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


def make_regblock_2d_prefetch(BM, BN, BK, TM, TN, regs=MAX_REGISTERS, warp=None):
    """make_regblock_2d_vec, the next tiles' global loads in flight during the FMAs; k unrolled 4x.

    With `warp` = (WM, WN) the threads are laid out warp by warp (`make_layout`): the kernel is
    `regblock_2d_warptile`. `regs` caps the registers a thread (launch bounds).
    """
    threads = check_tiles_2d(BM, BN, BK, TM, TN, vec=True)
    if BK % 4:
        raise ValueError(f"BK={BK} must be a multiple of 4: the loop along k is unrolled by four")
    RX, RY, first = make_layout(BM, BN, TM, TN, warp)
    first_output = cuda.jit(device=True, inline="always")(first)
    A_STEP, A_LOADS, B_STEP, B_LOADS = tile_passes(BM, BN, BK, threads)
    WIDTH, ROWS2 = BM + VEC, 2 * BK  # shared shapes: constants of the factory, not computed inside
    outer_product = make_outer_product(TM, TN, RX, RY)
    store_block = make_store_block(TM, TN, RX, RY)
    block_origin = make_block_origin(BM, BN)

    def regblock_2d_prefetch(A, B, C):
        """C = A @ B as regblock_2d_vec; two shared buffers, global loads one tile ahead."""
        # two buffers stacked along k: tile s lives in rows (s % 2) * BK ... (s % 2) * BK + BK - 1
        sAt = cuda.shared.array((ROWS2, WIDTH), float32)
        sB = cuda.shared.array((ROWS2, BN), float32)
        acc = cuda.local.array((TM, TN), float32)
        a = cuda.local.array(TM, float32)
        b = cuda.local.array(TN, float32)
        pa = cuda.local.array(A_LOADS, float32)  # this thread's share of the next A tile
        pb = cuda.local.array(B_LOADS, float32)  # ... and of the next B tile
        t, row0, col0 = block_origin()
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
            if s < tiles:  # tile s: global loads into registers, in flight during the FMAs below
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


def make_regblock_2d_warptile(BM, BN, BK, TM, TN, WM, WN, regs=MAX_REGISTERS):
    """Step 5: make_regblock_2d_prefetch, each warp owning a WM x WN part of the block tile (6a)."""
    return make_regblock_2d_prefetch(BM, BN, BK, TM, TN, regs=regs, warp=(WM, WN))


def make_regblock_2d_async(BM, BN, BK, TM, TN, stages=3, regs=MAX_REGISTERS):
    """C = AT.T @ B, tiles copied by cp.async into a ring of `stages` shared buffers (Chapter 6).

    AT is A transposed, (K, M): `launcher` transposes A first with Chapter 4's padded transpose,
    so that A's tile, like B's, is copied 16 bytes at a time into rows that need no transposition.
    While tile s is multiplied, tiles s + 1 ... s + stages - 1 are on their way straight into shared
    memory (`async_copy`): no registers hold them and no thread waits for them until it needs them.
    One barrier a tile: it publishes tile s to the block and tells everyone that the stage of tile
    s - 1, which the next copies overwrite, is read. The thread layout, outer product and epilogue
    are `regblock_2d_vec`'s. Blocks that stick out of C, edge tiles along k and shapes whose rows
    are not multiples of 4 floats take guarded synchronous loads (zeros outside the matrices).
    sm_80 and newer (`async_copy.unavailable`).
    """
    from cudalearn.chapters.ch06.kernels import async_copy

    threads = check_tiles_2d(BM, BN, BK, TM, TN, vec=True)
    if stages < 2:
        raise ValueError(f"stages={stages}: at least two buffers, one read while the next fills")
    if (BM * BK) % (VEC * threads) or (BN * BK) % (VEC * threads):
        raise ValueError(f"{threads} threads cannot copy the tiles in equal 16-byte pieces")
    RX, RY, first = make_layout(BM, BN, TM, TN)
    first_output = cuda.jit(device=True, inline="always")(first)
    ROWS = stages * BK  # the ring: tile s lives in rows (s % stages) * BK ... + BK - 1
    if ROWS * (BM + BN) * 4 > 48 * 1024:
        raise ValueError(f"{ROWS * (BM + BN) * 4} bytes of shared memory a block: at most 48 KB")
    A_QUADS, B_QUADS = BM // VEC, BN // VEC  # 16-byte pieces along a row of AT's and of B's tile
    A_STEP, B_STEP = threads // A_QUADS, threads // B_QUADS  # tile rows a pass of the block copies
    A_PASSES, B_PASSES = BK // A_STEP, BK // B_STEP
    steps = make_tile_steps(BK, TM, TN, RX, RY)
    store_block = make_store_block(TM, TN, RX, RY)
    block_origin = make_block_origin(BM, BN)
    copy16, commit, wait = async_copy.copy16, async_copy.commit, async_copy.make_wait(stages - 2)
    ALIGN = None if SIMULATOR else 16  # the simulator's shared arrays take no alignment
    STAGES = stages

    @cuda.jit(device=True, inline="always")
    def fetch(AT, B, sAt, sB, q, k0, a_off, b_off, t, row0, col0, M, N, K, fast):
        """The tile at k0 into the stage whose rows start at q: cp.async if `fast` (a_off and b_off
        are this thread's first piece in AT and B, flat), else guarded loads, zeros outside."""
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
        """C = AT.T @ B: tiles copied by cp.async `STAGES - 1` tiles ahead, one barrier a tile."""
        sAt = cuda.shared.array((ROWS, BM), float32, alignment=ALIGN)  # 16-byte copies need 16-byte
        sB = cuda.shared.array((ROWS, BN), float32, alignment=ALIGN)  # aligned destinations
        acc = cuda.local.array((TM, TN), float32)
        a = cuda.local.array(TM, float32)
        b = cuda.local.array(TN, float32)
        t, row0, col0 = block_origin()
        c0, r0 = first_output(t)
        M, N, K = C.shape[0], C.shape[1], B.shape[0]
        interior = row0 + BM <= M and col0 + BN <= N
        fast_block = interior and M % VEC == 0 and N % VEC == 0  # 16-byte aligned, all inside
        a_off = (t // A_QUADS) * M + row0 + (t % A_QUADS) * VEC  # our first piece of tile 0
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
            steps(sAt, sB, uint32(rq), c0, r0, a, b, acc)  # uint32: no wrap-around code
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


def build(target):
    """{name: (kernel, tiles)} of the six steps with tiles for 'sm80+', 'sm75' or 'sim' (Chapter 6),
    less those `regblock_tiles.unbuilt(target)` names (the cp.async step below sm_80 and on
    numba-cuda-mlir)."""
    skip = unbuilt(target)
    return {
        name: (make(**tiles(name, target)), tiles(name, target))
        for name, make in FACTORIES.items()
        if name not in skip
    }


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
