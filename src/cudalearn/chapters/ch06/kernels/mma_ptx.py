"""The GPU side of `mma`: mma.sync and ldmatrix as numba-cuda intrinsics with inline PTX (Chapter 6, 06d).

Imported by `mma` only on numba-cuda's GPU target. The a and b operands are uint32 words holding two
float16 (`.f16x2`), the accumulators float32; an ldmatrix's address is the flat index (in 32-bit
words) of this lane's row in a C-contiguous shared array, turned into a shared-window address as
`async_copy.copy16` does. ldmatrix is marked as having side effects, so that the compiler neither
merges two of them nor moves one across a barrier.
"""

from llvmlite import ir
from numba.core import types
from numba.cuda.extending import intrinsic

from cudalearn.chapters.ch06.kernels.async_copy import element_pointer, shared_address32

_I32, _F32 = ir.IntType(32), ir.FloatType()


def _mma(shape, na, nb):
    """An intrinsic (a words, b words, 4 floats of C) -> UniTuple(float32, 4) of D for mma `shape`."""
    regs = list(range(4 + na + nb + 4))
    ops = [regs[:4], regs[4 : 4 + na], regs[4 + na : 4 + na + nb], regs[4 + na + nb :]]
    text = (
        f"mma.sync.aligned.{shape}.row.col.f32.f16.f16.f32 "
        + ", ".join("{" + ",".join(f"${i}" for i in group) + "}" for group in ops)
        + ";"
    )
    constraints = ",".join(["=f"] * 4 + ["r"] * (na + nb) + ["f"] * 4)
    arg_types = [types.uint32] * (na + nb) + [types.float32] * 4

    def typer(typingctx, *args):
        if len(args) != na + nb + 4 or not all(isinstance(a, (types.Integer, types.Float)) for a in args):
            return None
        sig = types.UniTuple(types.float32, 4)(*arg_types)

        def codegen(context, builder, sig, args):
            fty = ir.FunctionType(ir.LiteralStructType([_F32] * 4), [_I32] * (na + nb) + [_F32] * 4)
            out = builder.call(ir.InlineAsm(fty, text, constraints), list(args))
            values = [builder.extract_value(out, i) for i in range(4)]
            return context.make_tuple(builder, sig.return_type, values)

        return sig, codegen

    return typer


def _typer_k8(typingctx, a0, a1, b0, c0, c1, c2, c3):
    """mma_m16n8k8(a0, a1, b0, c0..c3) -> (d0..d3): sm_75 and newer."""
    return _mma("m16n8k8", 2, 1)(typingctx, a0, a1, b0, c0, c1, c2, c3)


def _typer_k16(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    """mma_m16n8k16(a0..a3, b0, b1, c0..c3) -> (d0..d3): sm_80 and newer."""
    return _mma("m16n8k16", 4, 2)(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)


mma_m16n8k8 = intrinsic(_typer_k8)
mma_m16n8k16 = intrinsic(_typer_k16)


def _ldmatrix(num, trans, addr32=False):
    """An intrinsic (shared uint32 array, flat word offset) -> num uint32 registers of ldmatrix; with
    `addr32` the address is made in 32 bits outside the instruction (`shared_address32`)."""
    outs = ",".join(f"${i}" for i in range(num))
    op = f"ldmatrix.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}.shared.b16 {{{outs}}}"
    text = (
        f"{op}, [${num}];"
        if addr32
        else "{ .reg .u64 sa_; .reg .u32 s32_; cvta.to.shared.u64 sa_, $"
        + str(num)
        + f"; cvt.u32.u64 s32_, sa_; {op}, [s32_]; }}"
    )
    constraints = ",".join(["=r"] * num + ["r" if addr32 else "l"])

    def typer(typingctx, s, off):
        if not (
            isinstance(s, types.Array)
            and s.dtype == types.uint32
            and s.layout == "C"
            and isinstance(off, types.Integer)
        ):
            return None
        ret = types.uint32 if num == 1 else types.UniTuple(types.uint32, num)
        sig = ret(s, off)

        def codegen(context, builder, sig, args):
            where = shared_address32 if addr32 else element_pointer
            p = where(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            rty = _I32 if num == 1 else ir.LiteralStructType([_I32] * num)
            fty = ir.FunctionType(rty, [p.type])
            out = builder.call(ir.InlineAsm(fty, text, constraints, side_effect=True), [p])
            if num == 1:
                return out
            return context.make_tuple(
                builder, sig.return_type, [builder.extract_value(out, i) for i in range(num)]
            )

        return sig, codegen

    return typer


def _x1(typingctx, s, off):
    """ldmatrix .x1: one uint32 (sm_75 and newer)."""
    return _ldmatrix(1, False)(typingctx, s, off)


def _x2(typingctx, s, off):
    """ldmatrix .x2: two uint32 (sm_75 and newer)."""
    return _ldmatrix(2, False)(typingctx, s, off)


def _x4(typingctx, s, off):
    """ldmatrix .x4: four uint32 (sm_75 and newer)."""
    return _ldmatrix(4, False)(typingctx, s, off)


def _x2t(typingctx, s, off):
    """ldmatrix .x2.trans (sm_75 and newer)."""
    return _ldmatrix(2, True)(typingctx, s, off)


def _x4t(typingctx, s, off):
    """ldmatrix .x4.trans (sm_75 and newer)."""
    return _ldmatrix(4, True)(typingctx, s, off)


def _x4s(typingctx, s, off):
    """ldmatrix .x4 with its address made in 32 bits (`shared_address32`; sm_75 and newer)."""
    return _ldmatrix(4, False, addr32=True)(typingctx, s, off)


ldmatrix_x1, ldmatrix_x2, ldmatrix_x4 = intrinsic(_x1), intrinsic(_x2), intrinsic(_x4)
ldmatrix_x4_a32 = intrinsic(_x4s)
ldmatrix_x2_trans, ldmatrix_x4_trans = intrinsic(_x2t), intrinsic(_x4t)


_PACK = "{ .reg .f16 l_, h_; cvt.rn.f16.f32 l_, $1; cvt.rn.f16.f32 h_, $2; mov.b32 $0, {l_, h_}; }"


def _pack(typingctx, lo, hi):
    """(float, float) -> uint32: both rounded to float16, lo in the low half (sm_75 and newer)."""
    if not (isinstance(lo, types.Float) and isinstance(hi, types.Float)):
        return None
    sig = types.uint32(types.float32, types.float32)

    def codegen(context, builder, sig, args):
        fty = ir.FunctionType(_I32, [_F32, _F32])
        return builder.call(ir.InlineAsm(fty, _PACK, "=r,f,f"), list(args))

    return sig, codegen


pack_f16x2 = intrinsic(_pack)
