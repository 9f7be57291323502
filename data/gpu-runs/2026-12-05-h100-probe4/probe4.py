"""GPU probe 4 (not part of the course): FP32 GEMM at N = 4096 and Chapter 5's training step.

    CUDALEARN_MODE=gpu python3 .probe/probe4.py [--budget 420] [--only gemm|ch5] [--out DIR]
    python3 .probe/probe4.py --sim-smoke          # the same code path under the simulator, tiny sizes

Writes DIR/probe4.json (DIR = $OUT, else .probe/out4) after every candidate, and prints progress.
Every candidate runs inside try/except: a compile error, a spill or a wrong result is recorded and
the rest still run. No new candidate starts once --budget seconds (default 420) have passed since
the start (the final comparison tables still run: a few seconds).

Issue 17's goals this probe judges, each against its baseline in the same run:
(a) the best Numba FP32 GEMM at N = 4096 >= 85% of cuBLAS FP32 (TF32 off) and faster than Triton
    FP32; (b) Chapter 5's network (256-1024-1024-10, batch 1024) trains in <= 0.8x PyTorch's time
    with repeats within 10%.

GEMM candidates (factories below; they reuse Chapter 6's `make_layout`, `make_outer_product`,
`make_store_block` from cudalearn.kernels.regblock):
* `make_gemm_r`: `regblock_2d_prefetch` (two shared buffers, the next tile's global loads in
  registers during the FMAs) with 16-byte global loads (`ld4`, an @intrinsic: ld.global.v4.f32),
  16-byte shared stores of B (`st4`), flat int64 offsets advanced a tile at a time, and the tile's
  loop along k fully unrolled (`make_compute`), optionally with the shared fragments of step k + 1
  read before the FMAs of step k (`db`).
* `make_gemm_cp`: no register prefetch: a STAGES-deep ring of shared buffers filled with cp.async
  (Ampere's asynchronous copies, inline PTX through @intrinsic; sm_80+), one barrier a tile, as
  cuBLAS's SIMT SGEMM does. A as given, copied 4 bytes at a time into the transposed tile
  (a_mode 'row4'), or A transposed once by a separate kernel (the transpose is in the timed call)
  and copied 16 bytes at a time (a_mode 'at').
Every candidate is checked against cuBLAS FP32 (TF32 off) before it is timed.

Chapter 5 candidates: `linear.Tiles` variants of the package's kernels, `make_blocked_vec` (the
same three products with each thread's rows and columns in groups of four, A's tile transposed in
shared memory, so the shared reads are 128-bit: `regblock.make_outer_product`), and `Mixed`
networks whose skinny launches (an output of at most 32 columns: the 10-logit layer and its weight
gradient) use other tiles. Each is checked against the package's kernels, then timed per launch of
one step, then trained with `time_training`-style interleaved repeats against PyTorch.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback

os.environ.setdefault("CUDALEARN_NUMBA", "numba-cuda")  # the @intrinsic helpers are numba-cuda's

import numpy as np  # noqa: E402

import cudalearn  # noqa: E402

SMOKE = "--sim-smoke" in sys.argv
#: How the unrolled step functions are inlined: "llvm" (compiled once each as device functions and
#: marked alwaysinline for LLVM: `forceinline=True`) or "numba" (Numba's IR inliner, inline="always",
#: as regblock's outer_product: slow to compile when a tile's 16 steps are unrolled).
#: `--inline llvm|numba` on the command line.
INLINE = "llvm" if "--inline" not in sys.argv else sys.argv[sys.argv.index("--inline") + 1]
if SMOKE:
    os.environ["CUDALEARN_MODE"] = "sim"
INFO = cudalearn.setup(quiet=__name__ != "__main__")

from cudalearn.numba_backend import SIMULATOR, cuda, float32, int64, uint32  # noqa: E402
from cudalearn.kernels import regblock  # noqa: E402
from cudalearn.kernels.regblock import make_layout, make_outer_product, make_store_block, vec_offset  # noqa: E402,F401

if SIMULATOR:
    DEVICE = {"device": True}
elif INLINE == "numba":
    DEVICE = {"device": True, "inline": "always"}
else:
    DEVICE = {"device": True, "forceinline": True}

VEC = 4

# ------------------------------------------------------------------------------------------------
# 16-byte accesses and asynchronous copies: @intrinsic on a GPU, plain Python under the simulator
# ------------------------------------------------------------------------------------------------

if SIMULATOR:

    @cuda.jit(device=True)
    def ld4(arr, off):
        """(arr.flat[off], ..., arr.flat[off + 3]) of a 2-D float32 array; off a multiple of 4."""
        n = arr.shape[1]
        r, c = off // n, off % n
        return arr[r, c], arr[r, c + 1], arr[r, c + 2], arr[r, c + 3]

    @cuda.jit(device=True)
    def st4(arr, off, v0, v1, v2, v3):
        """arr.flat[off:off + 4] = v0..v3 (2-D float32 array, off a multiple of 4)."""
        n = arr.shape[1]
        r, c = off // n, off % n
        arr[r, c] = v0
        arr[r, c + 1] = v1
        arr[r, c + 2] = v2
        arr[r, c + 3] = v3

    @cuda.jit(device=True)
    def cp_async16(dst, doff, src, soff):
        """dst.flat[doff:doff + 4] = src.flat[soff:soff + 4] (synchronous here)."""
        n, m = dst.shape[1], src.shape[1]
        for u in range(4):
            dst[(doff + u) // n, (doff + u) % n] = src[(soff + u) // m, (soff + u) % m]

    @cuda.jit(device=True)
    def cp_async4(dst, doff, src, soff):
        """dst.flat[doff] = src.flat[soff] (synchronous here)."""
        n, m = dst.shape[1], src.shape[1]
        dst[doff // n, doff % n] = src[soff // m, soff % m]

    @cuda.jit(device=True)
    def cp_commit():
        """Nothing to commit: the simulator's copies are synchronous."""
        return None

    def make_cp_wait(n):
        """cp.async.wait_group n: nothing to wait for under the simulator."""

        @cuda.jit(device=True)
        def cp_wait():
            return None

        return cp_wait

else:
    from llvmlite import ir
    from numba.core import types
    from numba.cuda.extending import intrinsic

    _V4 = ir.VectorType(ir.FloatType(), 4)

    def _element_pointer(context, builder, aryty, ary, off, offty):
        """Pointer to element `off` (flat, no wrap-around) of the C-contiguous array `ary`."""
        data = context.make_array(aryty)(context, builder, value=ary).data
        return builder.gep(data, [context.cast(builder, off, offty, types.int64)], inbounds=True)

    @intrinsic
    def ld4(typingctx, arr, off):
        """The four float32 at flat offset `off` of `arr` in one 16-byte load (ld.*.v4.f32)."""
        if not (isinstance(arr, types.Array) and arr.dtype == types.float32 and isinstance(off, types.Integer)):
            return None
        sig = types.UniTuple(types.float32, 4)(arr, off)

        def codegen(context, builder, sig, args):
            ptr = _element_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            v = builder.load(builder.bitcast(ptr, _V4.as_pointer()), align=16)
            vals = [builder.extract_element(v, ir.Constant(ir.IntType(32), i)) for i in range(4)]
            return context.make_tuple(builder, sig.return_type, vals)

        return sig, codegen

    @intrinsic
    def st4(typingctx, arr, off, v0, v1, v2, v3):
        """arr's four float32 at flat offset `off` = v0..v3, one 16-byte store (st.*.v4.f32)."""
        if not (isinstance(arr, types.Array) and arr.dtype == types.float32 and isinstance(off, types.Integer)):
            return None
        sig = types.void(arr, off, types.float32, types.float32, types.float32, types.float32)

        def codegen(context, builder, sig, args):
            ptr = _element_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            v = ir.Constant(_V4, ir.Undefined)
            for i, x in enumerate(args[2:]):
                v = builder.insert_element(v, x, ir.Constant(ir.IntType(32), i))
            builder.store(v, builder.bitcast(ptr, _V4.as_pointer()), align=16)
            return context.get_dummy_value()

        return sig, codegen

    def _cp_async(size, cache):
        asm = (
            "{ .reg .u64 sa_, ga_; .reg .u32 s32_; cvta.to.shared.u64 sa_, $0; cvt.u32.u64 s32_, sa_; "
            f"cvta.to.global.u64 ga_, $1; cp.async.{cache}.shared.global [s32_], [ga_], {size}; }}"
        )

        @intrinsic
        def cp_async(typingctx, dst, doff, src, soff):
            """cp.async of `size` bytes: dst.flat[doff...] (shared) <- src.flat[soff...] (global)."""
            sig = types.void(dst, doff, src, soff)

            def codegen(context, builder, sig, args):
                d = _element_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
                s = _element_pointer(context, builder, sig.args[2], args[2], args[3], sig.args[3])
                fty = ir.FunctionType(ir.VoidType(), [d.type, s.type])
                builder.call(ir.InlineAsm(fty, asm, "l,l,~{memory}", side_effect=True), [d, s])
                return context.get_dummy_value()

            return sig, codegen

        return cp_async

    cp_async16 = _cp_async(16, "cg")  # 16 bytes, cached in L2 only (as cuBLAS and CUTLASS copy)
    cp_async4 = _cp_async(4, "ca")  # 4 bytes (.cg takes only 16)

    def _asm_statement(text):
        @intrinsic
        def statement(typingctx):
            sig = types.void()

            def codegen(context, builder, sig, args):
                fty = ir.FunctionType(ir.VoidType(), [])
                builder.call(ir.InlineAsm(fty, text, "~{memory}", side_effect=True), [])
                return context.get_dummy_value()

            return sig, codegen

        return statement

    cp_commit = _asm_statement("cp.async.commit_group;")

    def make_cp_wait(n):
        """cp.async.wait_group n: wait until at most n of this thread's copy groups are pending."""
        return _asm_statement(f"cp.async.wait_group {int(n)};")


# ------------------------------------------------------------------------------------------------
# The tile's loop along k, unrolled, with or without register double-buffering of the fragments
# ------------------------------------------------------------------------------------------------


def make_fragment_ops(TM, TN, RX, RY):
    """(frag, fma): read a step's TM + TN shared values (128-bit groups), and its TM * TN FMAs."""

    @cuda.jit(**DEVICE)
    def frag(sAt, sB, k, c0, r0, a, b):
        for i in range(TM):
            a[i] = sAt[k, vec_offset(i, r0, RY)]
        for j in range(TN):
            b[j] = sB[k, vec_offset(j, c0, RX)]

    @cuda.jit(**DEVICE)
    def fma(a, b, acc):
        for i in range(TM):
            for j in range(TN):
                acc[i, j] += a[i] * b[j]

    return frag, fma


def make_compute(BK, TM, TN, RX, RY, db=False, unroll="full", colsum=False):
    """A device function compute(sAt, sB, q, c0, r0, a0, b0, a1, b1, acc): the BK steps of a tile
    whose rows start at q. unroll='full': straight-line code (generated); db: step k + 1's fragments
    are read (into a1/b1, then a0/b0 alternately) before the FMAs of step k. unroll=4: the package's
    loop of four steps (regblock_2d_prefetch's). colsum (Chapter 5's weight gradient): two more
    arguments (sums, dbacc), and dbacc[j] += b[j] after each step when sums is true."""
    frag, fma = make_fragment_ops(TM, TN, RX, RY)

    @cuda.jit(**DEVICE)
    def add_cols(b, dbacc):
        for j in range(TN):
            dbacc[j] += b[j]

    if unroll != "full":
        outer_product = make_outer_product(TM, TN, RX, RY)
        if colsum:

            @cuda.jit(device=True, inline="always")
            def compute4c(sAt, sB, q, c0, r0, a0, b0, a1, b1, acc, sums, dbacc):
                for k4 in range(BK // 4):
                    k = q + 4 * k4
                    outer_product(sAt, sB, k, c0, r0, a0, b0, acc)
                    if sums:
                        add_cols(b0, dbacc)
                    outer_product(sAt, sB, k + 1, c0, r0, a0, b0, acc)
                    if sums:
                        add_cols(b0, dbacc)
                    outer_product(sAt, sB, k + 2, c0, r0, a0, b0, acc)
                    if sums:
                        add_cols(b0, dbacc)
                    outer_product(sAt, sB, k + 3, c0, r0, a0, b0, acc)
                    if sums:
                        add_cols(b0, dbacc)

            return compute4c

        @cuda.jit(device=True, inline="always")
        def compute4(sAt, sB, q, c0, r0, a0, b0, a1, b1, acc):
            for k4 in range(BK // 4):
                k = q + 4 * k4
                outer_product(sAt, sB, k, c0, r0, a0, b0, acc)
                outer_product(sAt, sB, k + 1, c0, r0, a0, b0, acc)
                outer_product(sAt, sB, k + 2, c0, r0, a0, b0, acc)
                outer_product(sAt, sB, k + 3, c0, r0, a0, b0, acc)

        return compute4
    if colsum:
        lines = ["def compute(sAt, sB, q, c0, r0, a0, b0, a1, b1, acc, sums, dbacc):"]
        for k in range(BK):
            lines.append(f"    frag(sAt, sB, q + {k}, c0, r0, a0, b0)")
            lines.append("    fma(a0, b0, acc)")
            lines.append("    if sums:")
            lines.append("        add_cols(b0, dbacc)")
        ns = {"frag": frag, "fma": fma, "add_cols": add_cols}
        exec(compile("\n".join(lines) + "\n", f"<compute BK={BK} colsum>", "exec"), ns)
        return cuda.jit(**DEVICE)(ns["compute"])
    lines = ["def compute(sAt, sB, q, c0, r0, a0, b0, a1, b1, acc):"]
    if db:
        lines.append("    frag(sAt, sB, q, c0, r0, a0, b0)")
        for k in range(BK):
            cur, nxt = ("0", "1") if k % 2 == 0 else ("1", "0")
            if k + 1 < BK:
                lines.append(f"    frag(sAt, sB, q + {k + 1}, c0, r0, a{nxt}, b{nxt})")
            lines.append(f"    fma(a{cur}, b{cur}, acc)")
    else:
        for k in range(BK):
            lines.append(f"    frag(sAt, sB, q + {k}, c0, r0, a0, b0)")
            lines.append("    fma(a0, b0, acc)")
    ns = {"frag": frag, "fma": fma}
    exec(compile("\n".join(lines) + "\n", f"<compute BK={BK} db={db}>", "exec"), ns)
    return cuda.jit(**DEVICE)(ns["compute"])


def _jit(threads, regs):
    """cuda.jit with launch bounds capping registers at `regs` (nothing under the simulator)."""
    if SIMULATOR:
        return cuda.jit
    return cuda.jit(launch_bounds=(threads, max(1, 65536 // (threads * regs))))


def _check_tiles(BM, BN, BK, TM, TN, warp):
    if BM % TM or BN % TN or TM % VEC or TN % VEC or BK % 4:
        raise ValueError(f"tiles {BM}x{BN}x{BK} / {TM}x{TN}: TM, TN, BK multiples of 4 dividing the tile")
    threads = (BM // TM) * (BN // TN)
    if threads > 1024 or (BM * BK) % (VEC * threads) or (BN * BK) % (VEC * threads):
        raise ValueError(f"{threads} threads cannot load the tiles four floats at a time")
    if warp is not None and threads % 32:
        raise ValueError("warp layout needs whole warps")
    return threads


# ------------------------------------------------------------------------------------------------
# GEMM family R: register prefetch (the package's step 4) with 16-byte global loads
# ------------------------------------------------------------------------------------------------


def make_gemm_r(BM, BN, BK, TM, TN, regs=255, warp=None, a_mode="row", db=False, unroll="full"):
    """C = A @ B (a_mode 'row': A (M, K)) or C = AT.T @ B (a_mode 'at': AT (K, M)); B (K, N), C (M, N).

    `regblock_2d_prefetch` with the next tile's loads in registers, four floats a load: A's quads run
    along k (stored transposed: four 32-bit shared stores) or, with 'at', along m (one 16-byte
    store); B's along n. Full tiles of interior blocks take the 16-byte path when the row lengths
    are multiples of 4; everything else the guarded scalar path (zeros outside the matrices).
    """
    threads = _check_tiles(BM, BN, BK, TM, TN, warp)
    RX, RY, first = make_layout(BM, BN, TM, TN, warp)
    first_output = cuda.jit(device=True, inline="always")(first)
    QA, QB = BM * BK // (VEC * threads), BN * BK // (VEC * threads)  # 16-byte loads a thread, a tile
    AQ_ROW = BK // VEC if a_mode == "row" else BM // VEC  # quads along a row of A's tile (or AT's)
    BQ_ROW = BN // VEC
    A_STEP, B_STEP = threads // AQ_ROW, threads // BQ_ROW  # rows a pass of the block covers
    if threads % AQ_ROW or threads % BQ_ROW:
        raise ValueError("a pass of the block must cover whole rows of quads")
    WIDTH, ROWS2 = BM + VEC, 2 * BK
    compute = make_compute(BK, TM, TN, RX, RY, db=db, unroll=unroll)
    store_block = make_store_block(TM, TN, RX, RY)
    AT = a_mode == "at"

    def gemm_r(A, B, C):
        sAt = cuda.shared.array((ROWS2, WIDTH), float32)
        sB = cuda.shared.array((ROWS2, BN), float32)
        acc = cuda.local.array((TM, TN), float32)
        a0 = cuda.local.array(TM, float32)
        b0 = cuda.local.array(TN, float32)
        a1 = cuda.local.array(TM, float32)
        b1 = cuda.local.array(TN, float32)
        pa = cuda.local.array((QA, VEC), float32)
        pb = cuda.local.array((QB, VEC), float32)
        t = int64(uint32(cuda.threadIdx.x))
        row0 = int64(uint32(cuda.blockIdx.y)) * BM
        col0 = int64(uint32(cuda.blockIdx.x)) * BN
        c0, r0 = first_output(t)
        M, N = C.shape[0], C.shape[1]
        K = B.shape[0]
        LDA = A.shape[1]  # K for 'row', M for 'at'
        ar, ac = t // AQ_ROW, (t % AQ_ROW) * VEC  # this thread's first quad of A's (or AT's) tile
        br, bc = t // BQ_ROW, (t % BQ_ROW) * VEC
        interior = row0 + BM <= M and col0 + BN <= N
        vec_ok = K % VEC == 0 and N % VEC == 0 and (M % VEC == 0 if AT else True)
        # flat offsets of this thread's first quad in tile 0; tile s adds s * (BK or BK * ld)
        if AT:
            a_off = ar * LDA + row0 + ac
            a_tile = BK * LDA
        else:
            a_off = (row0 + ar) * LDA + ac
            a_tile = BK
        b_off = br * N + col0 + bc
        b_tile = BK * N
        a_pass = A_STEP * LDA
        b_pass = B_STEP * N
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0.0)
        tiles = (K + BK - 1) // BK
        for s in range(tiles + 1):
            k0 = int64(uint32(s)) * BK
            if s < tiles:
                if interior and vec_ok and k0 + BK <= K:
                    for p in range(QA):
                        v0, v1, v2, v3 = ld4(A, a_off + p * a_pass)
                        pa[p, 0] = v0
                        pa[p, 1] = v1
                        pa[p, 2] = v2
                        pa[p, 3] = v3
                    for p in range(QB):
                        v0, v1, v2, v3 = ld4(B, b_off + p * b_pass)
                        pb[p, 0] = v0
                        pb[p, 1] = v1
                        pb[p, 2] = v2
                        pb[p, 3] = v3
                else:
                    for p in range(QA):
                        for u in range(VEC):
                            pa[p, u] = float32(0.0)
                            if AT:
                                kk, mm = k0 + ar + p * A_STEP, row0 + ac + u
                                if kk < K and mm < M:
                                    pa[p, u] = A[kk, mm]
                            else:
                                mm, kk = row0 + ar + p * A_STEP, k0 + ac + u
                                if mm < M and kk < K:
                                    pa[p, u] = A[mm, kk]
                    for p in range(QB):
                        for u in range(VEC):
                            pb[p, u] = float32(0.0)
                            kk, nn = k0 + br + p * B_STEP, col0 + bc + u
                            if kk < K and nn < N:
                                pb[p, u] = B[kk, nn]
                a_off += a_tile
                b_off += b_tile
            if s > 0:  # uint32 indices: no wrap-around code for negative ones (the compiler cannot
                q = uint32(((s - 1) % 2) * BK)  # prove a signed loop-carried value non-negative)
                compute(sAt, sB, q, c0, r0, a0, b0, a1, b1, acc)
            if s < tiles:
                q = uint32((s % 2) * BK)
                for p in range(QA):
                    if AT:
                        st4(sAt, (q + ar + p * A_STEP) * WIDTH + ac, pa[p, 0], pa[p, 1], pa[p, 2], pa[p, 3])
                    else:
                        for u in range(VEC):
                            sAt[q + ac + u, ar + p * A_STEP] = pa[p, u]
                for p in range(QB):
                    st4(sB, (q + br + p * B_STEP) * BN + bc, pb[p, 0], pb[p, 1], pb[p, 2], pb[p, 3])
            cuda.syncthreads()
        store_block(C, acc, row0, col0, c0, r0, interior)

    gemm_r.__name__ = gemm_r.__qualname__ = f"gemm_r_{a_mode}"
    return _jit(threads, regs)(gemm_r)


# ------------------------------------------------------------------------------------------------
# GEMM family CP: a ring of STAGES shared buffers filled by cp.async, one barrier a tile
# ------------------------------------------------------------------------------------------------


def make_gemm_cp(BM, BN, BK, TM, TN, stages=3, regs=255, warp=None, a_mode="row4", db=False, unroll="full"):
    """C = A @ B (a_mode 'row4': A (M, K), copied 4 bytes at a time into the transposed tile) or
    C = AT.T @ B (a_mode 'at': AT (K, M), 16-byte copies); B (K, N), C (M, N); sm_80 and newer.

    Tiles s, s + 1, ..., s + STAGES - 2 are in flight (cp.async) while tile s is multiplied: no
    registers hold the next tiles, the copies go straight to shared memory. Edge tiles (and shapes
    whose rows are not multiples of 4 floats) take guarded synchronous loads instead.
    """
    threads = _check_tiles(BM, BN, BK, TM, TN, warp)
    if stages < 2:
        raise ValueError("at least two stages")
    RX, RY, first = make_layout(BM, BN, TM, TN, warp)
    first_output = cuda.jit(device=True, inline="always")(first)
    AT = a_mode == "at"
    PAD = 0 if AT else VEC  # the transposed 4-byte copies of 'row4' spread over the banks with BM + 4
    WIDTH = BM + PAD
    ROWS = stages * BK
    if ROWS * (WIDTH + BN) * 4 > 49152:
        raise ValueError(f"{ROWS * (WIDTH + BN) * 4} bytes of shared memory: at most 48 KB static")
    QB = BN * BK // (VEC * threads)
    BQ_ROW = BN // VEC
    B_STEP = threads // BQ_ROW
    if AT:
        QA = BM * BK // (VEC * threads)
        AQ_ROW = BM // VEC
        A_STEP = threads // AQ_ROW
    else:
        QA = BM * BK // threads  # 4-byte copies a thread
        A_STEP = threads // BK  # rows of A a pass covers (a warp: 32 // BK rows of BK floats)
        if threads % BK:
            raise ValueError("threads must be a multiple of BK")
    compute = make_compute(BK, TM, TN, RX, RY, db=db, unroll=unroll)
    store_block = make_store_block(TM, TN, RX, RY)
    cp_wait = make_cp_wait(stages - 2)
    STAGES = stages

    @cuda.jit(device=True, inline="always")
    def issue(A, B, sAt, sB, q, k0, a_off, b_off, t, row0, col0, M, N, K, fast):
        """The tile at k0 into the stage whose rows start at q: cp.async when `fast` (a_off, b_off:
        this thread's first chunk of it in A (or AT) and B), else guarded synchronous copies."""
        if fast:
            for p in range(QB):
                r = t // BQ_ROW + p * B_STEP
                c = (t % BQ_ROW) * VEC
                cp_async16(sB, (q + r) * BN + c, B, b_off + p * B_STEP * N)
            for p in range(QA):
                if AT:
                    r = t // AQ_ROW + p * A_STEP
                    c = (t % AQ_ROW) * VEC
                    cp_async16(sAt, (q + r) * WIDTH + c, A, a_off + p * A_STEP * M)
                else:
                    r = t // BK + p * A_STEP
                    c = t % BK
                    cp_async4(sAt, (q + c) * WIDTH + r, A, a_off + p * A_STEP * K)
        else:
            for p in range(QB):
                r = t // BQ_ROW + p * B_STEP
                c = (t % BQ_ROW) * VEC
                for u in range(VEC):
                    v = float32(0.0)
                    if k0 + r < K and col0 + c + u < N:
                        v = B[k0 + r, col0 + c + u]
                    sB[q + r, c + u] = v
            for p in range(QA):
                if AT:
                    r = t // AQ_ROW + p * A_STEP
                    c = (t % AQ_ROW) * VEC
                    for u in range(VEC):
                        v = float32(0.0)
                        if k0 + r < K and row0 + c + u < M:
                            v = A[k0 + r, row0 + c + u]
                        sAt[q + r, c + u] = v
                else:
                    r = t // BK + p * A_STEP
                    c = t % BK
                    v = float32(0.0)
                    if row0 + r < M and k0 + c < K:
                        v = A[row0 + r, k0 + c]
                    sAt[q + c, r] = v

    def gemm_cp(A, B, C):
        sAt = cuda.shared.array((ROWS, WIDTH), float32)
        sB = cuda.shared.array((ROWS, BN), float32)
        acc = cuda.local.array((TM, TN), float32)
        a0 = cuda.local.array(TM, float32)
        b0 = cuda.local.array(TN, float32)
        a1 = cuda.local.array(TM, float32)
        b1 = cuda.local.array(TN, float32)
        t = int64(uint32(cuda.threadIdx.x))
        row0 = int64(uint32(cuda.blockIdx.y)) * BM
        col0 = int64(uint32(cuda.blockIdx.x)) * BN
        c0, r0 = first_output(t)
        M, N = C.shape[0], C.shape[1]
        K = B.shape[0]
        interior = row0 + BM <= M and col0 + BN <= N
        vec_ok = N % VEC == 0 and (M % VEC == 0 if AT else True)
        fast_blocks = interior and vec_ok
        # this thread's first chunk of tile 0 in B and in A (or AT), as flat offsets; a tile adds a_tile
        b_off = (t // BQ_ROW) * N + col0 + (t % BQ_ROW) * VEC
        if AT:
            a_off = (t // AQ_ROW) * M + row0 + (t % AQ_ROW) * VEC
            a_tile = BK * M
        else:
            a_off = (row0 + t // BK) * K + t % BK
            a_tile = BK
        b_tile = BK * N
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0.0)
        tiles = (K + BK - 1) // BK
        wq = int64(0)  # the first row of the stage the next issued tile goes to
        k0 = int64(0)  # the k of the next issued tile
        for s in range(STAGES - 1):  # the first STAGES - 1 tiles in flight
            if s < tiles:
                issue(A, B, sAt, sB, uint32(wq), k0, a_off, b_off, t, row0, col0, M, N, K, fast_blocks and k0 + BK <= K)
            cp_commit()
            wq += BK
            k0 += BK
            a_off += a_tile
            b_off += b_tile
        rq = int64(0)  # the first row of the stage tile s is in
        for s in range(tiles):
            cp_wait()  # this thread's copies of tile s have landed ...
            cuda.syncthreads()  # ... everyone's, and everyone is done with tile s - 1's stage
            if wq == ROWS:
                wq = int64(0)
            if k0 < K:  # tile s + STAGES - 1, into the stage tile s - 1 used
                issue(A, B, sAt, sB, uint32(wq), k0, a_off, b_off, t, row0, col0, M, N, K, fast_blocks and k0 + BK <= K)
            cp_commit()
            wq += BK
            k0 += BK
            a_off += a_tile
            b_off += b_tile
            compute(sAt, sB, uint32(rq), c0, r0, a0, b0, a1, b1, acc)  # uint32: no wrap-around code
            rq += BK
            if rq == ROWS:
                rq = int64(0)
        store_block(C, acc, row0, col0, c0, r0, interior)

    gemm_cp.__name__ = gemm_cp.__qualname__ = f"gemm_cp_{a_mode}"
    return _jit(threads, regs)(gemm_cp)


# ------------------------------------------------------------------------------------------------
# Chapter 5: the register-blocked products with 128-bit shared reads
# ------------------------------------------------------------------------------------------------


def make_blocked_vec(cfg, unroll="full"):
    """linear.make_blocked's three products for Tiles `cfg`, each thread's outputs in groups of four.

    Thread (tx, ty) owns rows vec_offset(i, 4 ty, TY) and columns vec_offset(j, 4 tx, TX) of the
    block's tile (regblock's layout), so each step along k reads its TM + TN values with
    (TM + TN) / 4 128-bit shared loads (`regblock.make_outer_product`) instead of TM + TN 32-bit
    ones, the tile's BK steps unrolled into straight-line code (`make_compute`; Numba's loop over
    them is unrolled only by two). A's tile is stored transposed (sAt[k, r], rows of BM + 4); in the weight gradient the
    X tile needs no transposition at all (sAt[k, r] = X[s0 + k, row0 + r]). Same arguments, launch
    (`cfg.launch`) and results as the package's kernels; `sgd_transpose` is the package's.
    """

    TX, TY = cfg.threads
    NT = TX * TY
    BM, BN, BK, TM, TN = cfg.bm, cfg.bn, cfg.bk, cfg.tm, cfg.tn
    if TM % VEC or TN % VEC or BM * BK % NT or BK * BN % NT:
        raise ValueError(f"{cfg}: tm and tn must be multiples of 4, the tiles must split evenly")
    A_LOADS, B_LOADS = BM * BK // NT, BK * BN // NT
    WIDTH = BM + VEC
    compute = make_compute(BK, TM, TN, TX, TY, unroll=unroll)  # the tile's BK steps, straight-line
    compute_db = make_compute(BK, TM, TN, TX, TY, unroll=unroll, colsum=True)

    @cuda.jit(device=True, inline="always")
    def load_a_transposed(X, sAt, row0, k0, t, m, K):
        """sAt[c, r] = X[row0 + r, k0 + c] (zeros outside X): the A tile of forward and backward_input."""
        for p in range(A_LOADS):
            e = t + p * NT
            r, c = e // BK, e % BK
            v = float32(0.0)
            if row0 + r < m and k0 + c < K:
                v = X[row0 + r, k0 + c]
            sAt[c, r] = v

    @cuda.jit(device=True, inline="always")
    def load_b(W, sB, k0, col0, t, K, n):
        """sB[r, c] = W[k0 + r, col0 + c] (zeros outside W)."""
        for p in range(B_LOADS):
            e = t + p * NT
            r, c = e // BN, e % BN
            v = float32(0.0)
            if k0 + r < K and col0 + c < n:
                v = W[k0 + r, col0 + c]
            sB[r, c] = v

    @cuda.jit
    def linear_forward(X, W, b, Y, relu):
        sAt = cuda.shared.array((BK, WIDTH), float32)
        sB = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array((TM, TN), float32)
        a = cuda.local.array(TM, float32)
        w = cuda.local.array(TN, float32)
        tx = int64(uint32(cuda.threadIdx.x))
        ty = int64(uint32(cuda.threadIdx.y))
        t = ty * TX + tx
        row0 = int64(uint32(cuda.blockIdx.y)) * BM
        col0 = int64(uint32(cuda.blockIdx.x)) * BN
        m, K, n = X.shape[0], X.shape[1], W.shape[1]
        c0, r0 = tx * VEC, ty * VEC
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0.0)
        for k0 in range(0, K, BK):
            load_a_transposed(X, sAt, row0, k0, t, m, K)
            load_b(W, sB, k0, col0, t, K, n)
            cuda.syncthreads()
            compute(sAt, sB, uint32(0), c0, r0, a, w, a, w, acc)
            cuda.syncthreads()
        for i in range(TM):
            r = row0 + vec_offset(i, r0, TY)
            for j in range(TN):
                c = col0 + vec_offset(j, c0, TX)
                if r < m and c < n:
                    v = acc[i, j] + b[c]
                    if relu != 0 and v < float32(0.0):
                        v = float32(0.0)
                    Y[r, c] = v

    @cuda.jit
    def linear_backward_input(dZ, WT, A, dA):
        sAt = cuda.shared.array((BK, WIDTH), float32)
        sB = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array((TM, TN), float32)
        a = cuda.local.array(TM, float32)
        w = cuda.local.array(TN, float32)
        tx = int64(uint32(cuda.threadIdx.x))
        ty = int64(uint32(cuda.threadIdx.y))
        t = ty * TX + tx
        row0 = int64(uint32(cuda.blockIdx.y)) * BM
        col0 = int64(uint32(cuda.blockIdx.x)) * BN
        m, K, n = dZ.shape[0], dZ.shape[1], WT.shape[1]
        c0, r0 = tx * VEC, ty * VEC
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0.0)
        for k0 in range(0, K, BK):
            load_a_transposed(dZ, sAt, row0, k0, t, m, K)
            load_b(WT, sB, k0, col0, t, K, n)
            cuda.syncthreads()
            compute(sAt, sB, uint32(0), c0, r0, a, w, a, w, acc)
            cuda.syncthreads()
        for i in range(TM):
            r = row0 + vec_offset(i, r0, TY)
            for j in range(TN):
                c = col0 + vec_offset(j, c0, TX)
                if r < m and c < n:
                    dA[r, c] = acc[i, j] if A[r, c] > float32(0.0) else float32(0.0)

    @cuda.jit
    def linear_backward_weight(X, dZ, dW, db):
        sAt = cuda.shared.array((BK, WIDTH), float32)
        sB = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array((TM, TN), float32)
        a = cuda.local.array(TM, float32)
        w = cuda.local.array(TN, float32)
        dbacc = cuda.local.array(TN, float32)
        tx = int64(uint32(cuda.threadIdx.x))
        ty = int64(uint32(cuda.threadIdx.y))
        t = ty * TX + tx
        row0 = int64(uint32(cuda.blockIdx.y)) * BM  # rows of dW: input features
        col0 = int64(uint32(cuda.blockIdx.x)) * BN  # columns of dW: output features
        batch, k_in, n = X.shape[0], X.shape[1], dZ.shape[1]
        c0, r0 = tx * VEC, ty * VEC
        sums = cuda.blockIdx.y == 0 and ty == 0
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0.0)
        for j in range(TN):
            dbacc[j] = float32(0.0)
        for s0 in range(0, batch, BK):
            for p in range(A_LOADS):  # X[s0 + k, row0 + r] is already A's tile transposed: sAt[k, r]
                e = t + p * NT
                k, r = e // BM, e % BM
                v = float32(0.0)
                if s0 + k < batch and row0 + r < k_in:
                    v = X[s0 + k, row0 + r]
                sAt[k, r] = v
            load_b(dZ, sB, s0, col0, t, batch, n)
            cuda.syncthreads()
            compute_db(sAt, sB, uint32(0), c0, r0, a, w, a, w, acc, sums, dbacc)
            cuda.syncthreads()
        for i in range(TM):
            r = row0 + vec_offset(i, r0, TY)
            for j in range(TN):
                c = col0 + vec_offset(j, c0, TX)
                if r < k_in and c < n:
                    dW[r, c] = acc[i, j]
        if sums:
            for j in range(TN):
                c = col0 + vec_offset(j, c0, TX)
                if c < n:
                    db[c] = dbacc[j]

    return {
        "linear_forward": linear_forward,
        "linear_backward_input": linear_backward_input,
        "linear_backward_weight": linear_backward_weight,
        "sgd_transpose": shared_sgd(cfg),
    }


def shared_sgd(cfg):
    """The package's sgd_transpose for cfg's (tt, tr): the default configuration's own kernel when they
    agree (compiled once for every variant)."""
    import dataclasses

    from cudalearn.kernels import linear

    return linear.blocked(dataclasses.replace(linear.tiles_for_mode(), tt=cfg.tt, tr=cfg.tr))["sgd_transpose"]


_KERNEL_SETS: dict = {}


def kernel_set(kind, tiles):
    """The (cached) kernels of one Chapter 5 variant: kind 'pkg' (linear.blocked), 'vec' or 'vec4'."""
    from cudalearn.kernels import linear

    key = (kind, tiles)
    if key not in _KERNEL_SETS:
        if kind == "pkg":
            ks = dict(linear.blocked(tiles))
        else:  # 'vec': the tile's steps unrolled into straight-line code; 'vec4': a loop of four steps
            ks = make_blocked_vec(tiles, unroll=4 if kind == "vec4" else "full")
        ks["sgd_transpose"] = shared_sgd(tiles)
        _KERNEL_SETS[key] = ks
    return _KERNEL_SETS[key]


def make_net_class(name, main, skinny=None, skinny_cols=32):
    """A PreparedMLP whose products use `main` = (kind, Tiles), and `skinny` = (kind, Tiles) for the
    launches whose output has at most `skinny_cols` columns (the 10-logit layer and its weight
    gradient). Registered in cudalearn.nn.mlp and shallow_net.IMPLEMENTATIONS under `name`."""
    from cudalearn.bench import shallow_net
    from cudalearn.nn import mlp

    class Net(mlp.PreparedMLP):
        def __init__(self, params, batch, lr):
            super().__init__(params, batch, lr, main[1])
            self.k = kernel_set(*main)
            self._skinny = (kernel_set(*skinny), skinny[1]) if skinny else None
            self._names = {id(k): n for n, k in self.k.items()}

        def _remap(self, launches):
            if self._skinny is None:
                return launches
            ks, tiles = self._skinny
            out = []
            for kernel, config, args in launches:
                name = self._names.get(id(kernel))
                if name in ("linear_forward", "linear_backward_input", "linear_backward_weight"):
                    result = args[2] if name == "linear_backward_weight" else args[3]
                    if result.shape[1] <= skinny_cols:
                        kernel, config = ks[name], tiles.launch(*result.shape)
                out.append((kernel, config, args))
            return out

        def forward_launches(self, X):
            return self._remap(super().forward_launches(X))

        def step_launches(self, X, y, losses, s):
            return self._remap(super().step_launches(X, y, losses, s))

    cls_name = "Probe_" + "".join(ch if ch.isalnum() else "_" for ch in name)
    Net.__name__ = Net.__qualname__ = cls_name
    Net.name = name
    setattr(mlp, cls_name, Net)
    shallow_net.IMPLEMENTATIONS[name] = cls_name
    return Net


# ------------------------------------------------------------------------------------------------
# Candidates
# ------------------------------------------------------------------------------------------------


def _g(name, fam, **kw):
    return {"name": name, "fam": fam, "kw": kw}


#: Every GEMM variant the static analysis (.probe/probe4_static.py) looked at.
GEMM_STATIC = [
    _g("P 128x128x16 8x16 r255 (best, 0.781x)", "pkg", BM=128, BN=128, BK=16, TM=8, TN=16, regs=255),
    _g("W 128x128x16 w64x64 8x16 r255 (step 5)", "pkg", BM=128, BN=128, BK=16, TM=8, TN=16, regs=255, warp=(64, 64)),
    _g("R-row 128x128x16 8x16", "r", BM=128, BN=128, BK=16, TM=8, TN=16),
    _g("R-row 128x128x16 8x16 db", "r", BM=128, BN=128, BK=16, TM=8, TN=16, db=True),
    _g("R-row 128x128x16 8x16 unroll4", "r", BM=128, BN=128, BK=16, TM=8, TN=16, unroll=4),
    _g("R-row 128x128x16 w64x64 8x16", "r", BM=128, BN=128, BK=16, TM=8, TN=16, warp=(64, 64)),
    _g("R-row 128x128x8 8x16", "r", BM=128, BN=128, BK=8, TM=8, TN=16),
    _g("R-at 128x128x16 8x16", "r", BM=128, BN=128, BK=16, TM=8, TN=16, a_mode="at"),
    _g("R-row 128x128x16 8x8 r128", "r", BM=128, BN=128, BK=16, TM=8, TN=8, regs=128),
    _g("R-row 128x256x8 8x16", "r", BM=128, BN=256, BK=8, TM=8, TN=16),
    _g("CP-row4 128x128x8 8x16 s3", "cp", BM=128, BN=128, BK=8, TM=8, TN=16, stages=3),
    _g("CP-row4 128x128x8 8x16 s4", "cp", BM=128, BN=128, BK=8, TM=8, TN=16, stages=4),
    _g("CP-row4 128x128x16 8x16 s2", "cp", BM=128, BN=128, BK=16, TM=8, TN=16, stages=2),
    _g("CP-row4 128x128x8 w64x64 8x16 s4", "cp", BM=128, BN=128, BK=8, TM=8, TN=16, stages=4, warp=(64, 64)),
    _g("CP-row4 128x128x8 8x16 s4 r168", "cp", BM=128, BN=128, BK=8, TM=8, TN=16, stages=4, regs=168),
    _g("CP-at 128x128x8 8x16 s3", "cp", BM=128, BN=128, BK=8, TM=8, TN=16, stages=3, a_mode="at"),
    _g("CP-at 128x128x8 8x16 s4", "cp", BM=128, BN=128, BK=8, TM=8, TN=16, stages=4, a_mode="at"),
    _g("CP-at 128x128x16 8x16 s2", "cp", BM=128, BN=128, BK=16, TM=8, TN=16, stages=2, a_mode="at"),
    _g("CP-at 128x128x16 8x16 s3", "cp", BM=128, BN=128, BK=16, TM=8, TN=16, stages=3, a_mode="at"),
    _g("CP-at 128x128x16 8x16 s3 db", "cp", BM=128, BN=128, BK=16, TM=8, TN=16, stages=3, a_mode="at", db=True),
    _g("CP-at 128x128x16 w64x64 8x16 s3", "cp", BM=128, BN=128, BK=16, TM=8, TN=16, stages=3, a_mode="at", warp=(64, 64)),
    _g("CP-at 128x128x16 8x16 s3 r168", "cp", BM=128, BN=128, BK=16, TM=8, TN=16, stages=3, a_mode="at", regs=168),
    _g("CP-at 128x128x8 8x8 s4 r128", "cp", BM=128, BN=128, BK=8, TM=8, TN=8, stages=4, a_mode="at", regs=128),
    _g("CP-at 128x128x16 8x8 s3 r128", "cp", BM=128, BN=128, BK=16, TM=8, TN=8, stages=3, a_mode="at", regs=128),
    _g("CP-at 128x256x8 8x16 s3", "cp", BM=128, BN=256, BK=8, TM=8, TN=16, stages=3, a_mode="at"),
]


def build_gemm(c, small=False):
    """The kernel of GEMM candidate `c`; `small`: the same family and options on simulator-sized tiles."""
    kw = dict(c["kw"])
    if small:
        warp = kw.get("warp")
        kw.update(BM=16, BN=32, BK=8, TM=4, TN=4)
        if warp is not None:
            kw["warp"] = (16, 32)
        if c["fam"] == "cp" and kw.get("a_mode") != "at":
            kw["BK"] = 8
    if c["fam"] == "pkg":
        if "warp" in kw:
            warp = kw.pop("warp")
            return regblock.make_regblock_2d_warptile(kw["BM"], kw["BN"], kw["BK"], kw["TM"], kw["TN"], *warp, regs=kw.get("regs", 128)), kw | {"warp": warp}
        return regblock.make_regblock_2d_prefetch(**kw), kw
    if c["fam"] == "r":
        return make_gemm_r(**kw), kw
    return make_gemm_cp(**kw), kw


def gemm_threads(kw):
    return (kw["BM"] // kw["TM"]) * (kw["BN"] // kw["TN"])


def _tiles(**kw):
    from cudalearn.kernels import linear

    return linear.Tiles(**kw)


def ch5_static_variants():
    """[(name, kind, Tiles)] of Chapter 5 kernel sets for the GPU (the static table and the probe)."""
    T = _tiles
    return [
        ("pkg 64x64x16 4x4 (default)", "pkg", T()),
        ("pkg 64x64x32 4x4", "pkg", T(bk=32)),
        ("pkg 64x64x16 8x8", "pkg", T(tm=8, tn=8)),
        ("pkg 128x64x16 8x4", "pkg", T(bm=128, tm=8)),
        ("vec 64x64x16 4x4", "vec", T()),
        ("vec 64x64x32 4x4", "vec", T(bk=32)),
        ("vec 64x64x16 8x4", "vec", T(tm=8)),
        ("vec 64x64x16 8x8", "vec", T(tm=8, tn=8)),
        ("vec 128x64x16 8x4", "vec", T(bm=128, tm=8)),
        ("vec 64x128x16 4x8", "vec", T(bn=128, tn=8)),
        ("vec 32x64x32 4x4", "vec", T(bm=32, bk=32)),
        ("vec4 64x64x16 4x4", "vec4", T()),
        ("vec4 128x64x16 8x4", "vec4", T(bm=128, tm=8)),
        ("pkg 16x16x64 1x1 (skinny)", "pkg", T(bm=16, bn=16, bk=64, tm=1, tn=1)),
        ("pkg 32x16x32 2x1 (skinny)", "pkg", T(bm=32, bn=16, bk=32, tm=2, tn=1)),
        ("pkg 64x16x32 4x1 (skinny)", "pkg", T(bm=64, bn=16, bk=32, tm=4, tn=1)),
        ("vec 32x16x32 4x4 (skinny)", "vec", T(bm=32, bn=16, bk=32, tm=4, tn=4)),
    ]


def ch5_sim_variants():
    """Simulator-sized kernel sets: the same kinds and layouts on small tiles (tt, tr: SIM_TILES')."""
    T = _tiles
    s = dict(tt=8, tr=2)
    return [
        ("pkg 8x8x4 2x2 (SIM_TILES)", "pkg", T(bm=8, bn=8, bk=4, tm=2, tn=2, **s)),
        ("vec 8x8x4 4x4", "vec", T(bm=8, bn=8, bk=4, tm=4, tn=4, **s)),
        ("vec 16x8x8 4x4", "vec", T(bm=16, bn=8, bk=8, tm=4, tn=4, **s)),
        ("vec 8x16x4 4x8", "vec", T(bm=8, bn=16, bk=4, tm=4, tn=8, **s)),
        ("vec4 16x8x8 4x4", "vec4", T(bm=16, bn=8, bk=8, tm=4, tn=4, **s)),
        ("pkg 8x4x8 1x1 (skinny)", "pkg", T(bm=8, bn=4, bk=8, tm=1, tn=1, **s)),
    ]


def check_kernel_set(kind, tiles, rng, shapes):
    """Max errors of one kernel set's three products (and db) against float64 references, per shape
    (m, k, n): forward (with ReLU), backward_input (the mask fused), backward_weight (and db)."""
    import torch

    dev = cudalearn.torch_device()
    ks = kernel_set(kind, tiles)
    out = {}
    worst = 0.0
    for m, k, n in shapes:
        X = rng.standard_normal((m, k)).astype(np.float32)
        W = rng.standard_normal((k, n)).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        dZ = rng.standard_normal((m, n)).astype(np.float32)
        Xt, Wt, bt, dZt = (torch.from_numpy(a).to(dev).double() for a in (X, W, b, dZ))
        ref_y = torch.relu(Xt @ Wt + bt).cpu().numpy()
        ref_dx = ((dZt @ Wt.T) * (Xt > 0)).cpu().numpy()
        ref_dw = (Xt.T @ dZt).cpu().numpy()
        ref_db = dZt.sum(0).cpu().numpy()
        dX, dW_, db_, ddZ = cuda.to_device(X), cuda.to_device(W), cuda.to_device(b), cuda.to_device(dZ)
        dWT = cuda.to_device(np.ascontiguousarray(W.T))
        Y = cuda.to_device(np.full((m, n), np.nan, np.float32))
        dA = cuda.to_device(np.full((m, k), np.nan, np.float32))
        gW = cuda.to_device(np.full((k, n), np.nan, np.float32))
        gb = cuda.to_device(np.full(n, np.nan, np.float32))
        ks["linear_forward"][tiles.launch(m, n)](dX, dW_, db_, Y, 1)
        ks["linear_backward_input"][tiles.launch(m, k)](ddZ, dWT, dX, dA)
        ks["linear_backward_weight"][tiles.launch(k, n)](dX, ddZ, gW, gb)
        errs = {
            "forward": float(np.max(np.abs(Y.copy_to_host() - ref_y))),
            "backward_input": float(np.max(np.abs(dA.copy_to_host() - ref_dx))),
            "backward_weight": float(np.max(np.abs(gW.copy_to_host() - ref_dw))),
            "db": float(np.max(np.abs(gb.copy_to_host() - ref_db))),
        }
        scale = 1e-5 * max(k, m) ** 0.5 * 20
        out[f"{m}x{k}x{n}"] = errs
        worst = max(worst, *(e / scale if math.isfinite(e) else math.inf for e in errs.values()))
    out["ok"] = bool(worst < 1.0)
    out["worst_vs_tolerance"] = worst
    return out


#: The GEMM candidates the GPU run times, in order (tier 1 before Chapter 5, tier 2 after it); the
#: static analysis (.probe/probe4-static.md) says why these.
GEMM_TIER1 = [
    "P 128x128x16 8x16 r255 (best, 0.781x)",  # the reference: the package's best so far
    "CP-at 128x128x16 8x16 s3",  # the highest FFMA share of the hot path (0.912), cp.async, 3 stages
    "R-row 128x128x16 8x16",  # the package's kernel with 16-byte loads, unrolled: no transpose, no asm
    "CP-row4 128x128x8 8x16 s4",  # cuBLAS's shape (128x128x8, 4 stages), A as given (4-byte copies)
    "CP-at 128x128x8 8x16 s4",  # the same with A transposed first: 16-byte copies
    "R-at 128x128x16 8x16",  # register prefetch with A transposed first
    "CP-at 128x128x16 w64x64 8x16 s3",  # warp tiles: 238 registers instead of 248
    "CP-at 128x128x16 8x8 s3 r128",  # 256 threads of 8x8: 16 warps an SM instead of 8
]
GEMM_TIER2 = [
    "CP-at 128x128x16 8x16 s2",
    "CP-row4 128x128x16 8x16 s2",
    "R-row 128x128x16 w64x64 8x16",
    "R-row 128x256x8 8x16",
    "CP-at 128x256x8 8x16 s3",
    "R-row 128x128x16 8x16 unroll4",  # what the full unrolling adds to the 16-byte loads
    "CP-row4 128x128x8 8x16 s3",
    "CP-at 128x128x8 8x8 s4 r128",
]


#: Chapter 5's kernel sets the GPU run profiles (names of ch5_static_variants), in order: the main
#: ones replace every product of the step; the skinny ones only those with at most 32 output columns.
CH5_MAINS = [
    "vec 64x64x16 4x4",  # the package's tiles, 128-bit shared reads, the tile's steps unrolled
    "vec4 64x64x16 4x4",  # the same with regblock's loop of four steps (simpler to teach)
    "vec 128x64x16 8x4",  # the highest FFMA share (0.63) of the sets
    "vec 64x128x16 4x8",
    "vec 64x64x32 4x4",
    "vec 64x64x16 8x4",
    "vec 64x64x16 8x8",
    "pkg 64x64x32 4x4",  # the package's kernels at BK = 32: half the barriers
]
CH5_SKINNIES = [
    "pkg 16x16x64 1x1 (skinny)",
    "pkg 32x16x32 2x1 (skinny)",
    "pkg 64x16x32 4x1 (skinny)",
    "vec 32x16x32 4x4 (skinny)",
]


def ch5_run_variants():
    """(main kernel sets, skinny kernel sets) the GPU run profiles: [(name, kind, Tiles)] each."""
    by = {n: (n, k, t) for n, k, t in ch5_static_variants()}
    return [by[n] for n in CH5_MAINS], [by[n] for n in CH5_SKINNIES]


# ------------------------------------------------------------------------------------------------
# The run: recorder, budget, timing
# ------------------------------------------------------------------------------------------------

GPU = INFO.mode == "gpu"
T0 = time.time()


def _arg(flag, default):
    if flag in sys.argv:
        i = sys.argv.index(flag)
        if i + 1 < len(sys.argv):
            return sys.argv[i + 1]
    return default


BUDGET = float(_arg("--budget", 420 if GPU else 1e9))
ONLY = _arg("--only", None)


def log(msg):
    print(f"[{time.time() - T0:6.1f} s] {msg}", flush=True)


def over_budget():
    return time.time() - T0 > BUDGET


class Recorder:
    """The probe's JSON, rewritten (atomically) after every candidate."""

    def __init__(self, path):
        self.path = path
        self.data = {"meta": self.meta(), "gemm": {"baselines": {}, "candidates": {}, "tables": []},
                     "ch5": {"checks": {}, "profiles": {}, "training": [], "host": {}}, "errors": []}

    def meta(self):
        from importlib.metadata import PackageNotFoundError, version

        vers = {}
        for pkg in ("numba", "numba-cuda", "numpy", "torch", "triton", "llvmlite"):
            try:
                vers[pkg] = version(pkg)
            except PackageNotFoundError:
                vers[pkg] = None
        from cudalearn import numba_backend

        return {"device": INFO.device, "mode": INFO.mode, "compiler": numba_backend.choice().label,
                "versions": vers, "argv": sys.argv, "budget_s": BUDGET, "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                "smoke": SMOKE}

    def save(self):
        self.data["meta"]["elapsed_s"] = round(time.time() - T0, 1)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str))
        tmp.replace(self.path)

    def error(self, where, e):
        self.data["errors"].append({"where": where, "error": f"{type(e).__name__}: {str(e)[:1500]}",
                                    "traceback": traceback.format_exc()[-4000:]})
        log(f"ERROR in {where}: {type(e).__name__}: {str(e)[:300]}")
        self.save()


def gpu_ms(fn, repeat=10):
    """timing.gpu_time's figures for fn (CUDA events); under the simulator one call and None."""
    if not GPU:
        fn()
        return None
    from cudalearn import timing

    t = timing.gpu_time(fn, warmup=2, repeat=repeat)
    return {"median_ms": t.median_ms, "min_ms": t.min_ms, "runs": len(t.times_ms), "launches_per_run": t.launches_per_sample}


def sync():
    from cudalearn import timing

    timing.synchronize()


def resources(kernel):
    """Registers, local (spill) bytes a thread and shared bytes a block, as the driver reports them."""
    out = {}
    for attr, key in (("get_regs_per_thread", "registers"), ("get_local_mem_per_thread", "local_bytes"),
                      ("get_shared_mem_per_block", "shared_bytes")):
        try:
            v = getattr(kernel, attr)()
            out[key] = next(iter(v.values())) if isinstance(v, dict) else v
        except Exception:  # noqa: BLE001  (the simulator has none of these)
            out[key] = None
    return out


# ------------------------------------------------------------------------------------------------
# GEMM
# ------------------------------------------------------------------------------------------------


class Gemm:
    """Operands, reference, baselines and the candidates' callables of the N x N GEMM."""

    def __init__(self, rec):
        import torch

        from cudalearn import launch, precision
        from cudalearn.kernels import transpose

        self.rec = rec
        self.n = n = 4096 if GPU else 32
        precision.set_fp32()
        self.dev = cudalearn.torch_device()
        g = torch.Generator().manual_seed(0)
        self.tA = torch.randn(n, n, generator=g).to(self.dev)
        self.tB = torch.randn(n, n, generator=g).to(self.dev)
        self.tC = torch.empty(n, n, device=self.dev)
        self.tAT = torch.empty(n, n, device=self.dev)
        self.ref = self.tA.double() @ self.tB.double()
        self.flops = 2 * n**3
        self.fns = {}  # name -> callable of the ones that passed, for the final tables
        self.info = rec.data["gemm"]
        self.info["n"] = n

        def view(t):
            return launch.cuda_view(t)

        self.view = view
        tr = transpose.transpose_tiled32_padded
        grid, block = transpose.launch_config(n, n, 32)
        self.transpose = launch.prepared(tr, grid, block, view(self.tA), view(self.tAT))
        self.transpose()
        sync()
        err = (self.tAT - self.tA.T).abs().max().item()
        self.info["baselines"]["transpose A (tiled32_padded)"] = {"max_err": err, "time": gpu_ms(self.transpose)}

    def err(self, out):
        e = (out.double() - self.ref).abs().max().item()
        return e if math.isfinite(e) else float("inf")

    def baselines(self):
        import torch

        tA, tB, tC = self.tA, self.tB, self.tC
        b = self.info["baselines"]
        cublas = lambda: torch.matmul(tA, tB, out=tC)  # noqa: E731
        cublas()
        sync()
        e = self.err(tC)
        self.tol = max(8 * e, 1e-4)
        b["cuBLAS FP32"] = {"max_err": e, "tolerance_for_candidates": self.tol, "time": gpu_ms(cublas)}
        self.cublas_ms = b["cuBLAS FP32"]["time"]["median_ms"] if GPU else None
        self.fns["cuBLAS FP32"] = cublas
        log(f"cuBLAS FP32: err {e:.2e}, {b['cuBLAS FP32']['time']}")
        self.rec.save()
        try:
            from cudalearn import triton_kernels

            tri = lambda: triton_kernels.matmul(tA, tB, precision="ieee", out=tC)  # noqa: E731
            t0 = time.time()
            tri()
            sync()
            entry = {"first_call_s": round(time.time() - t0, 1), "max_err": self.err(tC)}
            entry["time"] = gpu_ms(tri)
            if GPU:
                entry["vs_cublas"] = self.cublas_ms / entry["time"]["median_ms"]
            b["Triton FP32"] = entry
            self.fns["Triton FP32"] = tri
            log(f"Triton FP32: {entry}")
        except Exception as e:  # noqa: BLE001
            b["Triton FP32"] = {"error": f"{type(e).__name__}: {str(e)[:500]}"}
            log(f"Triton FP32 failed: {type(e).__name__}: {str(e)[:200]}")
        self.rec.save()

    def candidate(self, c):
        import torch

        from cudalearn import launch

        name = c["name"]
        entry = self.info["candidates"].setdefault(name, {"kw": dict(c["kw"]), "fam": c["fam"]})
        if over_budget():
            entry["status"] = "skipped: over the time budget"
            self.rec.save()
            return
        entry["status"] = "started"
        self.rec.save()
        try:
            kernel, kw = build_gemm(c, small=not GPU)
            entry["tiles_run"] = {k: v for k, v in kw.items()}
            n = self.n
            threads = gemm_threads(kw)
            grid = (launch.blocks(n, kw["BN"]), launch.blocks(n, kw["BM"]))
            out = torch.full((n, n), float("nan"), device=self.dev)
            at = kw.get("a_mode") == "at"
            t0 = time.time()
            gemm = launch.prepared(kernel, grid, threads, self.view(self.tAT if at else self.tA), self.view(self.tB), self.view(out))
            entry["compile_s"] = round(time.time() - t0, 1)
            if at:
                tr = self.transpose

                def fn():
                    tr()
                    gemm()
            else:
                fn = gemm
            fn()
            sync()
            entry["max_err"] = e = self.err(out)
            entry["ok"] = ok = e <= self.tol
            entry.update(resources(kernel))
            entry["threads"] = threads
            log(f"{name}: err {e:.2e} {'ok' if ok else 'WRONG'} {resources(kernel)} compile {entry['compile_s']} s")
            if ok:
                entry["time"] = gpu_ms(fn)
                if at:
                    entry["time_gemm_only"] = gpu_ms(gemm)
                if GPU:
                    ms = entry["time"]["median_ms"]
                    entry["tflops"] = self.flops / ms / 1e9
                    entry["vs_cublas"] = self.cublas_ms / ms
                    log(f"    {ms:.3f} ms, {entry['tflops']:.1f} TFLOP/s, {entry['vs_cublas']:.3f}x cuBLAS")
                self.fns[name] = fn
            entry["status"] = "done"
        except Exception as e:  # noqa: BLE001
            entry["status"] = "failed"
            entry["error"] = f"{type(e).__name__}: {str(e)[:1500]}"
            entry["traceback"] = traceback.format_exc()[-3000:]
            log(f"{name}: FAILED {type(e).__name__}: {str(e)[:300]}")
        self.rec.save()

    def tables(self, top=6):
        """The best candidates, the reference kernel, cuBLAS and Triton in one timing.measure call, twice."""
        from cudalearn import timing

        cands = self.info["candidates"]
        ranked = sorted((n for n in self.fns if n in cands and cands[n].get("vs_cublas")),
                        key=lambda n: -cands[n]["vs_cublas"])
        names = ranked[:top]
        ref = GEMM_TIER1[0]
        if ref in self.fns and ref not in names:
            names.append(ref)
        fns = {n: self.fns[n] for n in names}
        for base in ("cuBLAS FP32", "Triton FP32"):
            if base in self.fns:
                fns[base] = self.fns[base]
        for rep in range(2):
            try:
                res = timing.measure(f"probe4.gemm{rep}", fns, baseline="cuBLAS FP32", flops=self.flops)
                print(res, flush=True)
                self.info["tables"].append({"rows": res.rows, "source": res.source})
            except Exception as e:  # noqa: BLE001
                self.rec.error("gemm tables", e)
            self.rec.save()


# ------------------------------------------------------------------------------------------------
# Chapter 5
# ------------------------------------------------------------------------------------------------


def _kernel_name(kernel):
    fn = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None)
    return getattr(fn, "__name__", str(kernel))


def describe(kernel, config, args):
    """A launch of a step: kernel, grid, block, output shape and length of the sum."""
    name = _kernel_name(kernel)
    d = {"kernel": name, "grid": list(config[0]) if isinstance(config[0], tuple) else config[0],
         "block": list(config[1]) if isinstance(config[1], tuple) else config[1]}
    if name == "linear_forward":
        d["out"], d["k"] = list(args[3].shape), args[0].shape[1]
    elif name == "linear_backward_input":
        d["out"], d["k"] = list(args[3].shape), args[0].shape[1]
    elif name == "linear_backward_weight":
        d["out"], d["k"] = list(args[2].shape), args[0].shape[0]
    return d


class Ch5:
    def __init__(self, rec):
        from cudalearn import datasets, precision
        from cudalearn.nn import epoch_data, mlp
        from cudalearn.sizes import size

        self.rec = rec
        self.info = rec.data["ch5"]
        precision.set_fp32()
        mlp.quiet_small_grids()
        if GPU:
            self.data = datasets.load_digits_augmented(size("ch5.copies"), side=size("ch5.side"),
                                                       originals_used=size("ch5.originals"))
            self.sizes = mlp.layer_sizes(self.data.features, size("ch5.hidden"))
            self.batch = size("ch5.batch")
        else:
            self.data = datasets.load_digits_augmented(2, side=size("ch5.side"), originals_used=20)
            self.sizes = mlp.layer_sizes(self.data.features, 8)
            self.batch = 16
        self.params = mlp.init_params(self.sizes, 0)
        self.dd = epoch_data.NumbaData(self.data)
        self.dd.shuffle(mlp.permutations(self.dd.n_train, 1, 0)[0])
        self.info["setup"] = {"sizes": list(self.sizes), "batch": self.batch, "train_rows": int(self.dd.n_train)}
        self.classes = {}  # net name -> class
        rec.save()

    def variants(self):
        """(mains, skinnies): [(name, kind, Tiles)] to profile."""
        if GPU:
            return ch5_run_variants()
        v = ch5_sim_variants()
        return [x for x in v if "skinny" not in x[0]], [x for x in v if "skinny" in x[0]]

    def checks(self, sets):
        rng = np.random.default_rng(1)
        shapes = [(1024, 256, 1024), (1024, 1024, 10), (999, 300, 70)] if GPU else [(16, 24, 20), (13, 21, 10)]
        for name, kind, tiles in sets:
            if name in self.info["checks"]:
                continue
            if over_budget():
                self.info["checks"][name] = {"status": "skipped: over the time budget"}
                continue
            try:
                t0 = time.time()
                r = check_kernel_set(kind, tiles, rng, shapes)
                r["first_call_s"] = round(time.time() - t0, 1)
                r.update({k: resources(kernel_set(kind, tiles)[k]) for k in
                          ("linear_forward", "linear_backward_input", "linear_backward_weight")})
                self.info["checks"][name] = r
                log(f"ch5 check {name}: ok={r['ok']} ({r['worst_vs_tolerance']:.3g} of the tolerance), {r['first_call_s']} s")
            except Exception as e:  # noqa: BLE001
                self.info["checks"][name] = {"ok": False, "error": f"{type(e).__name__}: {str(e)[:1500]}",
                                             "traceback": traceback.format_exc()[-3000:]}
                log(f"ch5 check {name}: FAILED {type(e).__name__}: {str(e)[:300]}")
            self.rec.save()

    def net_class(self, name, main=None, skinny=None):
        from cudalearn.nn import mlp

        if name in ("prepared", "fused"):
            return {"prepared": mlp.PreparedMLP, "fused": mlp.FusedMLP}[name]
        if name not in self.classes:
            self.classes[name] = make_net_class(name, main, skinny)
        return self.classes[name]

    def profile(self, name, cls):
        """Per-launch GPU time of one step (prepared launches) and the whole step, for network `name`."""
        from cudalearn.nn import mlp

        if over_budget():
            self.info["profiles"][name] = {"status": "skipped: over the time budget"}
            self.rec.save()
            return None
        try:
            net = cls(self.params, self.batch, mlp.LR)
            X, y = self.dd.batch(0, self.batch)
            losses = self.dd.losses(4)
            t0 = time.time()
            with mlp.quiet_grids():
                net.step(X, y, losses, 0)
                sync()
            first = time.time() - t0
            plan = net._plans[(id(X), id(y))]
            launches = net.step_launches(X, y, losses, 0)
            rows = []
            for prepared, (kernel, config, args) in zip(plan, launches, strict=True):
                d = describe(kernel, config, args)
                d["time"] = gpu_ms(prepared, repeat=5)
                rows.append(d)

            def step():
                for p in plan:
                    p()

            whole = gpu_ms(step, repeat=10)
            prof = {"first_step_s": round(first, 1), "launches": rows, "step": whole}
            if GPU:
                prof["sum_of_launches_ms"] = sum(r["time"]["median_ms"] for r in rows)
                prof["skinny_ms"] = sum(r["time"]["median_ms"] for r in rows if r.get("out", [0, 99])[1] <= 32)
                prof["main_ms"] = prof["sum_of_launches_ms"] - prof["skinny_ms"]
                log(f"ch5 profile {name}: step {whole['median_ms']:.3f} ms, launches {prof['sum_of_launches_ms']:.3f} ms "
                    f"(skinny {prof['skinny_ms']:.3f}), first step {first:.1f} s")
            else:
                log(f"ch5 profile {name}: ran ({len(rows)} launches)")
            self.info["profiles"][name] = prof
            self.rec.save()
            return prof
        except Exception as e:  # noqa: BLE001
            self.info["profiles"][name] = {"status": "failed", "error": f"{type(e).__name__}: {str(e)[:1500]}",
                                           "traceback": traceback.format_exc()[-3000:]}
            log(f"ch5 profile {name}: FAILED {type(e).__name__}: {str(e)[:300]}")
            self.rec.save()
            return None

    def training(self, names, epochs, repeats, key):
        from cudalearn.bench import shallow_net

        try:
            t0 = time.time()
            from cudalearn.nn import mlp

            out = shallow_net.time_training(self.data, self.sizes, batch=self.batch, lr=mlp.LR, epochs=epochs,
                                            names=tuple(names), repeats=repeats)
            out["wall_s"] = round(time.time() - t0, 1)
            sec, spread = out["seconds"], out["spread"]
            verdicts = {}
            for n in names:
                if n == "torch":
                    continue
                r = sec[n] / sec["torch"]
                worst = max(spread[n], spread["torch"])
                verdicts[n] = {"vs_torch": r, "worst_spread": worst, "meets_goal": bool(r <= 0.8 and worst <= 0.10 and repeats >= 3)}
            out["verdicts"] = verdicts
            out["key"] = key
            self.info["training"].append(out)
            log(f"ch5 training {key} ({out['wall_s']} s):")
            for line in shallow_net.training_lines(out) if "naive" in sec else []:
                print("   ", line, flush=True)
            for n, v in verdicts.items():
                log(f"    {n:28s} {sec[n]:.3f} s  spread {spread[n]:.1%}  {v['vs_torch']:.3f}x torch  goal {'MET' if v['meets_goal'] else 'missed'}")
            log(f"    {'torch':28s} {sec['torch']:.3f} s  spread {spread['torch']:.1%}")
        except Exception as e:  # noqa: BLE001
            self.rec.error(f"ch5 training {key}", e)
        self.rec.save()

    def host(self, name):
        from cudalearn.bench import shallow_net
        from cudalearn.nn import mlp

        try:
            self.info["host"][name] = shallow_net.time_step_host(
                self.data, self.sizes, batch=self.batch, lr=mlp.LR, steps=50 if GPU else 2, network=name,
                calls=200 if GPU else 2, repeats=5 if GPU else 1)
            log(f"ch5 host {name}: {({k: v for k, v in self.info['host'][name].items() if k.endswith(('ms', 'us', 'per_step'))})}")
        except Exception as e:  # noqa: BLE001
            self.rec.error(f"ch5 host {name}", e)
        self.rec.save()

    def run(self):
        mains, skinnies = self.variants()
        self.checks(mains + skinnies)
        ok = {n for n, r in self.info["checks"].items() if r.get("ok")}
        # every network: the package's, each main kernel set alone, the package's with each skinny set
        profiles = {}
        p = self.profile("prepared", self.net_class("prepared"))
        if p:
            profiles["prepared"] = p
        default = ("pkg", _tiles() if GPU else None)
        if not GPU:
            from cudalearn.kernels import linear

            default = ("pkg", linear.SIM_TILES)
        for name, kind, tiles in mains:
            if name in ok:
                p = self.profile(f"main: {name}", self.net_class(f"main: {name}", (kind, tiles)))
                if p:
                    profiles[f"main: {name}"] = (p, (kind, tiles))
        for name, kind, tiles in skinnies:
            if name in ok:
                p = self.profile(f"skinny: {name}", self.net_class(f"skinny: {name}", default, (kind, tiles)))
                if p:
                    profiles[f"skinny: {name}"] = (p, (kind, tiles))
        # the best main kernels and the best skinny kernels together (by the profiles' launch sums)
        key = "main_ms" if GPU else None

        def best(prefix, field):
            cands = [(v[0].get(field, 0.0) if GPU else 0.0, n, v[1]) for n, v in profiles.items()
                     if n.startswith(prefix) and isinstance(v, tuple)]
            return min(cands) if cands else None

        bm = best("main: ", key)
        bs = best("skinny: ", "skinny_ms")
        base = profiles.get("prepared")
        chosen = []
        if bm:
            chosen.append(bm[1])
            mains = sorted((v[0].get("main_ms", 0.0) if GPU else 0.0, n) for n, v in profiles.items()
                           if n.startswith("main: ") and isinstance(v, tuple))
            if len(mains) > 1:
                chosen.append(mains[1][1])  # the second best too
        if bm and bs and (not GPU or (base and bs[0] < base.get("skinny_ms", 0.0))):
            name = f"mixed: {bm[1][6:]} + {bs[1][8:]}"
            p = self.profile(name, self.net_class(name, bm[2], bs[2]))
            if p:
                chosen.insert(0, name)
        # the step times of all, for the record
        steps = {n: (v[0] if isinstance(v, tuple) else v).get("step") for n, v in profiles.items()}
        self.info["step_ms"] = {n: (s or {}).get("median_ms") for n, s in steps.items()}
        self.rec.save()
        names = ["fused", "prepared", "torch", *chosen[:3]]
        if over_budget() or not GPU:  # the dry run: the code path, not the figures
            names = ["prepared", "torch", *chosen[:1]]
        self.training(names, epochs=15 if GPU else 1, repeats=5 if GPU else 2, key="training_1")
        if chosen:
            self.host(chosen[0])
        if GPU and not over_budget() and chosen:
            self.training(["prepared", "torch", chosen[0]], epochs=15, repeats=3, key="training_2")


def main():
    from pathlib import Path

    outdir = Path(_arg("--out", os.environ.get("OUT") or str(Path(__file__).resolve().parent / "out4")))
    outdir.mkdir(parents=True, exist_ok=True)
    rec = Recorder(outdir / "probe4.json")
    rec.save()
    log(f"probe 4 on {INFO.device} ({INFO.mode}), budget {BUDGET:.0f} s, writing {rec.path}")
    by_name = {c["name"]: c for c in GEMM_STATIC}
    gemm = None
    if ONLY in (None, "gemm"):
        try:
            gemm = Gemm(rec)
            gemm.baselines()
            for name in GEMM_TIER1:
                gemm.candidate(by_name[name])
        except Exception as e:  # noqa: BLE001
            rec.error("gemm", e)
    if ONLY in (None, "ch5"):
        try:
            Ch5(rec).run()
        except Exception as e:  # noqa: BLE001
            rec.error("ch5", e)
    if gemm is not None:
        try:
            for name in GEMM_TIER2:
                gemm.candidate(by_name[name])
        except Exception as e:  # noqa: BLE001
            rec.error("gemm tier 2", e)
        try:
            if gemm.fns:
                gemm.tables()
        except Exception as e:  # noqa: BLE001
            rec.error("gemm tables", e)
    rec.data["meta"]["finished"] = True
    rec.save()
    log(f"done: {rec.path}")


if __name__ == "__main__":
    main()
