"""Tensor-core matrix products written by hand with `mma.sync` and `ldmatrix` (Chapter 6, deep dive 06d).

Every kernel here computes C = A @ B.T (+ bias, ReLU) for float16 A (m, k) and B (n, k), C-contiguous,
into float32 C (m, n), accumulating in float32. B is stored as PyTorch stores a linear layer's weight
(out, in): a column of B.T is a row of B, so the k values one lane of the mma fragment needs are side
by side in memory and ldmatrix needs no `.trans`. The kernels take the float16 arrays viewed as uint32
(`words(x)`: two float16 a word, no copy), the mma operands' own format.

* `make_warp_tile(shape)`: one warp computes one 16 x 8 tile of C, its fragments loaded word by word
  from global memory into the lanes that `mma.FRAGMENTS` names (one block of 32 threads a tile);
* `make_tc_gemm(...)`: a block of warps computes a BM x BN tile; each step along k copies a BM x BK
  tile of A and a BN x BK tile of B into shared memory, then every warp loads its fragments with
  ldmatrix (x4: a 16 x 16 piece of A, or two 8 x 16 pieces of B) and runs mma.sync on them. The shared
  rows are laid out `plain`, `pad` (4 words more a row: Chapter 4's padding column, 16 bytes wide) or
  `swizzle` (the 16-byte chunk c of row r stored at chunk c ^ ((r >> 1) & 3)), which the tracer's
  bank-conflict count tells apart; with `stages` > 1 the tiles come by cp.async (`async_copy`) into a
  ring of `stages` buffers, the pipeline of the chapter's last FP32 step. Rings above 48 KB live in
  dynamic shared memory (`dynamic`, `tc_parts`), `addr32` makes ldmatrix's and cp.async's shared
  addresses in 32 bits, so that constant offsets become immediates, and `prefetch` double-buffers the
  fragments (`tc_gemm_prefetch`): the fast step of 06d (`tc_steps.FAST`).

Sizes must be multiples of the tiles (`check_shapes`); `launch(kernel, tiles, A, B, C, bias)` runs one.
`shape` 'm16n8k16' (sm_80 and newer) or 'm16n8k8' (sm_75: a T4; two instructions per k16 step).
"""

from __future__ import annotations

import numpy as np

from cudalearn.chapters.ch06.kernels import async_copy, mma, tc_parts
from cudalearn.runtime.numba_backend import SIMULATOR, cuda, float32, uint32

SIGNATURES: dict = {}  # factory kernels (make_*): tests/chapters/ch06 compiles them for sm_75 and sm_90

LAYOUTS = ("plain", "pad", "swizzle")
#: tiles of `make_tc_gemm` per target: the GPU's and the tracer's (small, so a CPU runs them)
CONFIGS = {
    "gpu": {"BM": 128, "BN": 128, "BK": 32, "WARPS_M": 2, "WARPS_N": 4, "stages": 3, "layout": "swizzle"},
    "sim": {"BM": 32, "BN": 32, "BK": 32, "WARPS_M": 2, "WARPS_N": 2, "stages": 2, "layout": "swizzle"},
}


def words(x):
    """A float16 array (numpy, device or torch) as uint32, two float16 a word along its last axis."""
    if hasattr(x, "view") and hasattr(x, "dtype") and str(x.dtype) == "torch.float16":
        import torch

        return x.view(torch.int32).view(torch.uint32) if hasattr(torch, "uint32") else x.view(torch.int32)
    return x.view(np.uint32)


def shape_for(cc) -> str:
    """The mma shape for compute capability cc: m16n8k16 from sm_80 on, else m16n8k8 (sm_75)."""
    return "m16n8k16" if cc is None or tuple(cc) >= (8, 0) else "m16n8k8"


def make_mma16(shape):
    """A device function (a0..a3, b0, b1, c0..c3) -> d0..d3: one k16 step, as one or two instructions."""
    if shape == "m16n8k16":
        k16 = mma.mma_m16n8k16

        @cuda.jit(device=True, inline="always")
        def mma16(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
            """One m16n8k16 (sm_80+)."""
            return k16(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)

        return mma16
    k8 = mma.mma_m16n8k8

    @cuda.jit(device=True, inline="always")
    def mma16_sm75(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        """Two m16n8k8 (sm_75): k 0-7 from (a0, a1, b0), then k 8-15 from (a2, a3, b1)."""
        d0, d1, d2, d3 = k8(a0, a1, b0, c0, c1, c2, c3)
        return k8(a2, a3, b1, d0, d1, d2, d3)

    return mma16_sm75


def make_warp_tile(shape="m16n8k16"):
    """Kernel (A, B, C): one warp a 16 x 8 tile of C = A @ B.T; grid (n / 8, m / 16), 32 threads."""
    mma16 = make_mma16(shape)

    def mma_warp_tile(A, B, C):
        """C[16 x 8 tile] = A @ B.T; A (m, k/2), B (n, k/2) uint32 words of float16; C float32."""
        lane = cuda.threadIdx.x
        g, t = lane >> 2, lane & 3  # groupID, threadID_in_group
        r0, c0 = cuda.blockIdx.y * 16, cuda.blockIdx.x * 8
        d0 = d1 = d2 = d3 = float32(0.0)
        for kw in range(0, A.shape[1], 8):  # 16 float16 of k = 8 words a step
            a0, a1 = A[r0 + g, kw + t], A[r0 + g + 8, kw + t]  # rows g, g + 8; k 2t, 2t + 1
            a2, a3 = A[r0 + g, kw + t + 4], A[r0 + g + 8, kw + t + 4]  # the same, k + 8
            b0, b1 = B[c0 + g, kw + t], B[c0 + g, kw + t + 4]  # column g of B.T; k 2t, 2t + 1 (+ 8)
            d0, d1, d2, d3 = mma16(a0, a1, a2, a3, b0, b1, d0, d1, d2, d3)
        C[r0 + g, c0 + 2 * t] = d0
        C[r0 + g, c0 + 2 * t + 1] = d1
        C[r0 + g + 8, c0 + 2 * t] = d2
        C[r0 + g + 8, c0 + 2 * t + 1] = d3

    return cuda.jit(mma_warp_tile)


def make_chunk(layout):
    """A device function (row, chunk) -> the word where 16-byte chunk `chunk` of `row` starts."""
    if layout == "swizzle":

        @cuda.jit(device=True, inline="always")
        def chunk_swizzled(row, chunk):
            """Chunk c of row r at c ^ ((r >> 1) & 3): 8 rows of one chunk hit 8 bank quads."""
            return (chunk ^ ((row >> 1) & 3)) << 2

        return chunk_swizzled

    @cuda.jit(device=True, inline="always")
    def chunk_linear(row, chunk):
        """Chunk c of a row at word 4c (plain and padded rows)."""
        return chunk << 2

    return chunk_linear


def check_shapes(tiles, m, n, k):
    """Raise ValueError unless (m, n, k) are multiples of the block tile (BM, BN, BK) of `tiles`."""
    for name, size, tile in (("m", m, tiles["BM"]), ("n", n, tiles["BN"]), ("k", k, tiles["BK"])):
        if size % tile:
            raise ValueError(f"{name} = {size} is not a multiple of the tile {tile}: pad the matrices")


def make_fetch(BM, BN, KW, RW, threads, layout, use_async, B_BASE=0, addr32=False):
    """A device function that copies the tiles at word kw0 into stage `stage` of sA and sB (16 bytes a
    piece): by cp.async if `use_async` (sm_80+), else through registers. sB's rows start B_BASE words
    in (one dynamic shared array holds both rings: `make_shared`); `addr32`: `async_copy.copy16_a32`."""
    chunk, CH = make_chunk(layout), KW // 4
    A_PASSES, B_PASSES = BM * CH // threads, BN * CH // threads
    A_STAGE, B_STAGE = BM * RW, BN * RW  # words of a stage: whole 8-row groups, where a layout repeats
    copy16 = async_copy.copy16_a32 if addr32 else async_copy.copy16

    if use_async:

        @cuda.jit(device=True, inline="always")
        def fetch_async(A, B, sA, sB, stage, row0, col0, kw0, t):
            """cp.async of this thread's pieces of the next tiles: row r, chunk c of each tile."""
            for p in range(A_PASSES):
                q = t + p * threads
                r, c = q // CH, q % CH
                copy16(sA, stage * A_STAGE + r * RW + chunk(r, c), A, (row0 + r) * A.shape[1] + kw0 + 4 * c)
            for p in range(B_PASSES):
                q = t + p * threads
                r, c = q // CH, q % CH
                s = B_BASE + stage * B_STAGE + r * RW + chunk(r, c)
                copy16(sB, s, B, (col0 + r) * B.shape[1] + kw0 + 4 * c)

        return fetch_async

    @cuda.jit(device=True, inline="always")
    def fetch_sync(A, B, sA, sB, stage, row0, col0, kw0, t):
        """Loads and stores of this thread's pieces of the next tiles, a word at a time."""
        for p in range(A_PASSES):
            q = t + p * threads
            r, c = stage * BM + q // CH, q % CH
            for u in range(4):
                sA[r, chunk(r, c) + u] = A[row0 + q // CH, kw0 + 4 * c + u]
        for p in range(B_PASSES):
            q = t + p * threads
            r, c = stage * BN + q // CH, q % CH
            for u in range(4):
                sB[r, chunk(r, c) + u] = B[col0 + q // CH, kw0 + 4 * c + u]

    return fetch_sync


def make_fragments(BM, BN, KW, RW, MI, NI, shape, B_BASE=0, addr32=False):
    """Device functions (load, multiply): a warp's fragments of one k16 step by ldmatrix into buffer
    `buf` of af, bf; the mma.sync of the fragments in buffer `buf` into acc (`addr32`: ldmatrix's
    address made in 32 bits, `mma.ldmatrix_x4_a32`)."""
    mma16, x4 = make_mma16(shape), mma.ldmatrix_x4_a32 if addr32 else mma.ldmatrix_x4
    A_STAGE, B_STAGE, PIECE = BM * RW, BN * RW, 16 * RW  # words of a stage of A, of B, of 16 rows

    @cuda.jit(device=True, inline="always")
    def load(sA, sB, st, kk, a_off, b_off, af, bf, buf):
        """af[buf], bf[buf] <- the warp's pieces of A and B for step kk of stage st.

        a_off[kk], b_off[kk]: where this lane's ldmatrix row starts in stage 0 for step kk along k
        (`lane_offsets`); a layout repeats every 8 rows, so other stages and pieces add whole rows.
        """
        for mi in range(MI):  # a 16 x 16 piece of A: a0..a3 of the mma
            r = st * A_STAGE + mi * PIECE + a_off[kk]
            af[buf, mi, 0], af[buf, mi, 1], af[buf, mi, 2], af[buf, mi, 3] = x4(sA, r)
        for nj in range(NI // 2):  # two 8-column tiles: rows of B (columns of B.T)
            r = B_BASE + st * B_STAGE + nj * PIECE + b_off[kk]
            bf[buf, 2 * nj, 0], bf[buf, 2 * nj, 1], bf[buf, 2 * nj + 1, 0], bf[buf, 2 * nj + 1, 1] = x4(sB, r)

    @cuda.jit(device=True, inline="always")
    def multiply(af, bf, acc, buf):
        """acc += the fragments in buffer buf: MI x NI mma.sync."""
        for mi in range(MI):
            for ni in range(NI):
                acc[mi, ni, 0], acc[mi, ni, 1], acc[mi, ni, 2], acc[mi, ni, 3] = mma16(
                    af[buf, mi, 0], af[buf, mi, 1], af[buf, mi, 2], af[buf, mi, 3], bf[buf, ni, 0],
                    bf[buf, ni, 1], acc[mi, ni, 0], acc[mi, ni, 1], acc[mi, ni, 2], acc[mi, ni, 3],
                )  # fmt: skip

    return load, multiply


def make_warp_step(BM, BN, KW, RW, MI, NI, layout, shape, B_BASE=0, addr32=False):
    """A device function: the warp's fragments of stage `st` by ldmatrix, its mma.sync into acc."""
    load, multiply = make_fragments(BM, BN, KW, RW, MI, NI, shape, B_BASE, addr32)

    @cuda.jit(device=True, inline="always")
    def warp_step(sA, sB, st, a_off, b_off, af, bf, acc):
        """acc += the warp's A rows @ B rows.T over stage st of the shared tiles (KW words of k)."""
        for kk in range(KW // 8):  # 16 float16 of k a step
            load(sA, sB, st, kk, a_off, b_off, af, bf, 0)
            multiply(af, bf, acc, 0)

    return warp_step


def make_lane_offsets(KW, RW, layout):
    """A device function filling a_off, b_off: where lane's ldmatrix rows start in stage 0, per k16 step.

    Lane l gives row l % 16 of A's 16 x 16 piece (chunk + 1 for lanes 16-31: k 8-15), and of B's two
    8-row pieces row l % 8 (+ 8 for lanes 16-31), chunk + 1 for lanes 8-15 and 24-31.
    """
    chunk = make_chunk(layout)

    @cuda.jit(device=True, inline="always")
    def lane_offsets(lane, a_first, b_first, a_off, b_off):
        """a_first, b_first: the warp's first row of A's and of B's tile in a stage."""
        a_row, a_hi = a_first + (lane & 15), lane >> 4
        b_row, b_hi = b_first + (lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1
        for kk in range(KW // 8):
            a_off[kk] = a_row * RW + chunk(a_row, 2 * kk + a_hi)
            b_off[kk] = b_row * RW + chunk(b_row, 2 * kk + b_hi)

    return lane_offsets


def make_tc_gemm(
    BM, BN, BK, WARPS_M, WARPS_N, stages=1, layout="swizzle", shape="m16n8k16", relu=False, half=False,
    dynamic=False, blocks=None, addr32=False, prefetch=False,
):  # fmt: skip
    """Kernel (A, B, bias, C): C = A @ B.T + bias (ReLU'd if `relu`), a BM x BN tile a block of
    32 * WARPS_M * WARPS_N threads, fragments by ldmatrix from `layout` rows, cp.async if stages > 1.
    With `half`, C is float16 as uint32 words (m, n / 2), rounded to nearest: a next layer's input.
    `dynamic`: the rings in dynamic shared memory (above 48 KB; `tc_parts.launcher` launches it);
    `blocks`: the blocks an SM must fit (launch_bounds; default 2 if pipelined, else 1);
    `addr32`: ldmatrix and cp.async shared addresses in 32 bits (`async_copy.shared_address32`);
    `prefetch`: fragments double-buffered across steps and tiles (`tc_gemm_prefetch`; pipelined only)."""
    KW, PAD = BK // 2, 4 if layout == "pad" else 0
    RW, TM, TN = KW + PAD, BM // WARPS_M, BN // WARPS_N
    MI, NI, threads = TM // 16, TN // 8, 32 * WARPS_M * WARPS_N
    if layout not in LAYOUTS or BK % 16 or TM % 16 or TN % 16 or (layout == "swizzle" and KW != 16):
        raise ValueError(f"tiles {BM}x{BN}x{BK}, warps {WARPS_M}x{WARPS_N}, {layout}: see make_tc_gemm")
    if (BM * KW // 4) % threads or (BN * KW // 4) % threads:
        raise ValueError(f"{threads} threads cannot copy {BM}x{BK} and {BN}x{BK} tiles in 16-byte pieces")
    nbytes = tc_parts.shared_bytes({"BM": BM, "BN": BN, "BK": BK, "stages": stages, "layout": layout})
    if (dynamic or prefetch) and (stages < 2 or KW % 16):
        raise ValueError(
            "dynamic rings and prefetched fragments need a pipelined kernel (stages >= 2, BK 32k)"
        )
    if nbytes > (tc_parts.DYNAMIC_LIMIT if dynamic else tc_parts.STATIC_LIMIT):
        raise ValueError(f"{nbytes} bytes of shared memory: at most 48 KB static, 227 KB dynamic (pipelined)")
    A_ROWS, B_ROWS = stages * BM, stages * BN  # the shared rings (shapes: compile-time constants)
    B_BASE = A_ROWS * RW if dynamic else 0  # where B's ring starts in the one dynamic array
    fetch = make_fetch(BM, BN, KW, RW, threads, layout, stages > 1, B_BASE=B_BASE, addr32=addr32)
    warp_step = make_warp_step(BM, BN, KW, RW, MI, NI, layout, shape, B_BASE=B_BASE, addr32=addr32)
    lane_offsets, KSTEPS = make_lane_offsets(KW, RW, layout), KW // 8
    load, multiply = make_fragments(BM, BN, KW, RW, MI, NI, shape, B_BASE, addr32)
    shared, place = tc_parts.make_shared(A_ROWS, B_ROWS, RW, dynamic), tc_parts.make_place(BM, BN)
    STAGES, RELU, HALF, pack = stages, relu, half, mma.pack_f16x2
    if stages > 1:
        commit, wait = async_copy.commit, async_copy.make_wait(stages - 2)

    def origin():
        """(thread, lane, warp row, warp column) of this thread."""
        t = cuda.threadIdx.x
        w = t >> 5
        return t, t & 31, w // WARPS_N, w % WARPS_N

    origin = cuda.jit(device=True, inline="always")(origin)

    @cuda.jit(device=True, inline="always")
    def store(C, bias, acc, row0, col0, wm, wn, lane):
        """The epilogue: each lane's accumulators (+ bias, ReLU) into C, where the C fragment says."""
        g, q = lane >> 2, lane & 3
        for mi in range(MI):
            for ni in range(NI):
                c = col0 + wn * TN + ni * 8 + 2 * q
                for h in range(2):  # c0, c1 on row g; c2, c3 on row g + 8
                    r = row0 + wm * TM + mi * 16 + g + 8 * h
                    v0, v1 = acc[mi, ni, 2 * h] + bias[c], acc[mi, ni, 2 * h + 1] + bias[c + 1]
                    if RELU:
                        v0, v1 = max(v0, float32(0.0)), max(v1, float32(0.0))
                    if HALF:  # the next layer's input: two float16 in one word
                        C[r, c >> 1] = pack(v0, v1)
                    else:
                        C[r, c], C[r, c + 1] = v0, v1

    def tc_gemm(A, B, bias, C):
        """C = A @ B.T + bias: A (m, k/2), B (n, k/2) uint32 words of float16, bias (n,), C (m, n) f32."""
        sA, sB = shared()
        acc = cuda.local.array((MI, NI, 4), float32)
        af = cuda.local.array((2, MI, 4), uint32)  # two buffers: `prefetch` loads one while the other
        bf = cuda.local.array((2, NI, 2), uint32)  # multiplies; warp_step uses the first
        t, lane, wm, wn = origin()
        row0, col0 = place()
        for mi in range(MI):
            for ni in range(NI):
                for i in range(4):
                    acc[mi, ni, i] = float32(0.0)
        a_off = cuda.local.array(KSTEPS, uint32)
        b_off = cuda.local.array(KSTEPS, uint32)
        lane_offsets(lane, wm * TM, wn * TN, a_off, b_off)
        tiles = A.shape[1] // KW
        for s in range(tiles):
            cuda.syncthreads()  # everyone has read the last tile
            fetch(A, B, sA, sB, 0, row0, col0, s * KW, t)
            cuda.syncthreads()  # everyone's pieces are in
            warp_step(sA, sB, 0, a_off, b_off, af, bf, acc)
        store(C, bias, acc, row0, col0, wm, wn, lane)

    def tc_gemm_pipelined(A, B, bias, C):
        """tc_gemm with the tiles copied by cp.async STAGES - 1 tiles ahead, one barrier a tile."""
        sA, sB = shared()
        acc = cuda.local.array((MI, NI, 4), float32)
        af = cuda.local.array((2, MI, 4), uint32)  # two buffers: `prefetch` loads one while the other
        bf = cuda.local.array((2, NI, 2), uint32)  # multiplies; warp_step uses the first
        t, lane, wm, wn = origin()
        row0, col0 = place()
        for mi in range(MI):
            for ni in range(NI):
                for i in range(4):
                    acc[mi, ni, i] = float32(0.0)
        a_off = cuda.local.array(KSTEPS, uint32)
        b_off = cuda.local.array(KSTEPS, uint32)
        lane_offsets(lane, wm * TM, wn * TN, a_off, b_off)
        tiles = A.shape[1] // KW
        for s in range(STAGES - 1):  # the first tiles on their way
            if s < tiles:
                fetch(A, B, sA, sB, s, row0, col0, s * KW, t)
            commit()  # a group every time, even empty: the wait counts groups
        rd, wr = 0, STAGES - 1  # the stages tile s is read from and tile s + STAGES - 1 goes to
        for s in range(tiles):
            wait()  # this thread's pieces of tile s have landed ...
            cuda.syncthreads()  # ... everyone's have, and everyone has read tile s - 1's stage
            if s + STAGES - 1 < tiles:  # into the stage tile s - 1 used
                fetch(A, B, sA, sB, wr, row0, col0, (s + STAGES - 1) * KW, t)
            commit()
            warp_step(sA, sB, rd, a_off, b_off, af, bf, acc)
            wr, rd = rd, rd + 1 if rd + 1 < STAGES else 0  # s % STAGES without a division
        store(C, bias, acc, row0, col0, wm, wn, lane)

    def tc_gemm_prefetch(A, B, bias, C):
        """tc_gemm_pipelined with two buffers of fragments: a step's mma.sync run while the next step's
        fragments load, the next tile's first ones right after the tile's one barrier (as CUTLASS's
        multistage sm80 mainloop does)."""
        sA, sB = shared()
        acc = cuda.local.array((MI, NI, 4), float32)
        af = cuda.local.array((2, MI, 4), uint32)
        bf = cuda.local.array((2, NI, 2), uint32)
        t, lane, wm, wn = origin()
        row0, col0 = place()
        for mi in range(MI):
            for ni in range(NI):
                for i in range(4):
                    acc[mi, ni, i] = float32(0.0)
        a_off = cuda.local.array(KSTEPS, uint32)
        b_off = cuda.local.array(KSTEPS, uint32)
        lane_offsets(lane, wm * TM, wn * TN, a_off, b_off)
        tiles = A.shape[1] // KW
        for s in range(STAGES - 1):  # the first tiles on their way
            if s < tiles:
                fetch(A, B, sA, sB, s, row0, col0, s * KW, t)
            commit()
        wait()
        cuda.syncthreads()
        load(sA, sB, 0, 0, a_off, b_off, af, bf, 0)  # tile 0's first step into buffer 0
        rd, wr = 0, STAGES - 1
        for s in range(tiles):
            for kk in range(KSTEPS):  # unrolled: the branches on kk are decided at compile time
                if kk == 0:
                    if s + STAGES - 1 < tiles:  # into the stage tile s - 1 used
                        fetch(A, B, sA, sB, wr, row0, col0, (s + STAGES - 1) * KW, t)
                    commit()
                if kk < KSTEPS - 1:
                    load(sA, sB, rd, kk + 1, a_off, b_off, af, bf, (kk + 1) & 1)
                else:
                    wait()  # tile s + 1 has landed (this thread's pieces) ...
                    cuda.syncthreads()  # ... everyone's, and every warp holds its fragments of tile s
                    wr, rd = rd, rd + 1 if rd + 1 < STAGES else 0
                    if s + 1 < tiles:
                        load(sA, sB, rd, 0, a_off, b_off, af, bf, 0)  # KSTEPS is even: buffer 0
                multiply(af, bf, acc, kk & 1)
        store(C, bias, acc, row0, col0, wm, wn, lane)

    kernel = tc_gemm_pipelined if stages > 1 else tc_gemm
    if prefetch:
        kernel = tc_gemm_prefetch
    if SIMULATOR:
        return cuda.jit(kernel)
    # the pipelined kernel fits 128 registers (two blocks an SM) without spilling; the others take more
    return cuda.jit(launch_bounds=(threads, blocks or (2 if stages > 1 else 1)))(kernel)


def threads_per_block(tiles) -> int:
    """Threads of a block of `make_tc_gemm(**tiles)`."""
    return 32 * tiles["WARPS_M"] * tiles["WARPS_N"]


def launch(kernel, tiles, A, B, bias, C):
    """kernel[grid, block](words(A), words(B), bias, C) for float16 A (m, k), B (n, k) (Chapter 6, 06d):
    on the CPU tracer under the simulator (`trace.launch`), checked against the tiles first."""
    from cudalearn.trace import launch as trace_launch

    (m, k), n = A.shape, B.shape[0]
    check_shapes(tiles, m, n, k)
    grid = (n // tiles["BN"], m // tiles["BM"])
    trace_launch(kernel, grid, threads_per_block(tiles), words(A), words(B), bias, C)
