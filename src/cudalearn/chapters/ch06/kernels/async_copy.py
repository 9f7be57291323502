"""Asynchronous copies from global to shared memory (cp.async), for Chapter 6's last matmul.

From sm_80 on (A100, H100, H200) a thread can start a copy of 4, 8 or 16 bytes from global memory
straight into shared memory and go on without waiting for it: the data never passes through the
thread's registers. PTX spells it `cp.async` (PTX ISA 7.0); CUDA C++ reaches it through
`__pipeline_memcpy_async` and `cuda::memcpy_async` (CUDA C++ Programming Guide, "Asynchronous Data
Copies"). A thread groups the copies it started with `cp.async.commit_group`, and
`cp.async.wait_group n` waits until at most n of its groups are still in flight; the copies are
visible to the other threads of the block only after a barrier that follows the wait.

Numba has no function for these instructions, so this module makes three, with numba-cuda's
`@intrinsic` and inline PTX:

* `copy16(dst, doff, src, soff)` (and `copy16_a32`, the same with the shared address computed in 32
  bits, for 06d's fastest kernel): `cp.async.cg` of 16 bytes, the four float32 at flat offset `soff`
  of the C-contiguous global array `src` into flat offset `doff` of the shared array `dst` (both
  offsets multiples of 4: the addresses must be 16-byte aligned); `.cg` caches in L2 only; the arrays
  may also be uint32 (eight float16 packed two to a word: the tensor-core kernels of 06d);
* `commit()`: `cp.async.commit_group`;
* `make_wait(n)`: a device function that runs `cp.async.wait_group n`.

Under the simulator they are plain Python device functions: `copy16` copies at once, the other two
do nothing, so a kernel that uses them computes the same result there, and the tracer checks its
barriers against the shared stores the copies make. A copy that lands at once cannot show a missing
or too short wait: only a GPU can, and not on every run. `unavailable(cc)` says why they
cannot be used on a GPU: below sm_80 (a T4 is sm_75) ptxas rejects `cp.async`, and numba-cuda-mlir
compiles through MLIR, which takes none of numba-cuda's llvmlite intrinsics.
"""

from __future__ import annotations

from cudalearn.runtime import numba_backend
from cudalearn.runtime.numba_backend import SIMULATOR, cuda
from cudalearn.trace import standins

MIN_CC = (8, 0)  # cp.async: sm_80 and newer
SIGNATURES: dict = {}  # device functions only: they compile inside the kernels that call them


def unavailable(cc=None) -> str | None:
    """Why cp.async cannot be used for compute capability cc in this process, or None if it can (Ch. 6)."""
    if SIMULATOR:  # Python copies: any compute capability
        return None
    package = numba_backend.choice().package
    if package != numba_backend.NUMBA_CUDA:
        return f"{package} takes no numba-cuda intrinsics (inline PTX)"
    if cc is not None and tuple(cc) < MIN_CC:
        return f"cp.async needs sm_80 or newer; this GPU is sm_{cc[0]}{cc[1]}"
    return None


def _copy_at_once(dst, doff, src, soff):
    """dst.flat[doff:doff + 4] = src.flat[soff:soff + 4] at once: the simulator's and tracer's cp.async."""
    n, m = dst.shape[1], src.shape[1]
    for u in range(4):
        dst[(doff + u) // n, (doff + u) % n] = src[(soff + u) // m, (soff + u) % m]


def _nothing():
    """Nothing to group or wait for: the copies of the simulator and the tracer have landed already."""
    return None


if SIMULATOR:
    copy16 = copy16_a32 = cuda.jit(device=True)(_copy_at_once)
    commit = cuda.jit(device=True)(_nothing)

    def make_wait(n):
        """A device function that waits for copy groups: nothing to wait for under the simulator."""

        @cuda.jit(device=True)
        def wait():
            """cp.async.wait_group (the simulator's copies have landed already)."""
            return None

        return wait

elif numba_backend.choice().package == numba_backend.NUMBA_CUDA:
    from llvmlite import ir
    from numba.core import types
    from numba.cuda.extending import intrinsic

    def element_pointer(context, builder, aryty, ary, off, offty):
        """A pointer to element `off` (flat, no wrap-around) of the C-contiguous array `ary`."""
        data = context.make_array(aryty)(context, builder, value=ary).data
        return builder.gep(data, [context.cast(builder, off, offty, types.int64)], inbounds=True)

    def shared_address32(context, builder, aryty, ary, off, offty):
        """The 32-bit shared-window byte address of word `off` (flat) of a C-contiguous shared array.

        The array's generic data pointer is cast to the shared address space (cvta.to.shared) in LLVM IR
        and the offset added in 32 bits there, so the compiler sees base + 4 * off: the base is computed
        once and constant offsets become the instruction's immediate (`LDSM [R + 0x400]`), not 64-bit
        additions before each instruction (06d's `addr32` kernels: `copy16_a32`, `mma.ldmatrix_x4_a32`).
        """
        data = context.make_array(aryty)(context, builder, value=ary).data
        shared = builder.addrspacecast(data, ir.PointerType(data.type.pointee, 3))
        base = builder.trunc(builder.ptrtoint(shared, ir.IntType(64)), ir.IntType(32))
        word = builder.trunc(context.cast(builder, off, offty, types.int64), ir.IntType(32))
        return builder.add(base, builder.shl(word, ir.Constant(ir.IntType(32), 2)))

    _WORDS = (types.float32, types.uint32)  # 4-byte elements: float32, or two float16 in a word (06d)

    # Numba's shared arrays hand out generic addresses: cvta.to.shared makes the shared-window address
    # that cp.async's destination operand takes (32 bits), cvta.to.global the global one.
    _COPY16 = (
        "{ .reg .u64 sa_, ga_; .reg .u32 s32_; cvta.to.shared.u64 sa_, $0; cvt.u32.u64 s32_, sa_; "
        "cvta.to.global.u64 ga_, $1; cp.async.cg.shared.global [s32_], [ga_], 16; }"
    )

    def _copy16_intrinsic(asm, shared_operand, address):
        """A cp.async of 16 bytes whose shared operand is `address`'s (`shared_operand` its constraint)."""

        @intrinsic
        def copy(typingctx, dst, doff, src, soff):
            # flat offsets address C-ordered rows: any other layout would copy the wrong elements
            arrays = all(
                isinstance(a, types.Array) and a.dtype in _WORDS and a.layout == "C" for a in (dst, src)
            )
            if not (arrays and isinstance(doff, types.Integer) and isinstance(soff, types.Integer)):
                return None
            sig = types.void(dst, doff, src, soff)

            def codegen(context, builder, sig, args):
                d = address(context, builder, sig.args[0], args[0], args[1], sig.args[1])
                s = element_pointer(context, builder, sig.args[2], args[2], args[3], sig.args[3])
                fty = ir.FunctionType(ir.VoidType(), [d.type, s.type])
                builder.call(
                    ir.InlineAsm(fty, asm, f"{shared_operand},l,~{{memory}}", side_effect=True), [d, s]
                )
                return context.get_dummy_value()

            return sig, codegen

        return copy

    # copy16: cp.async of 16 bytes, dst.flat[doff:doff + 4] (shared) <- src.flat[soff:soff + 4] (global)
    copy16 = _copy16_intrinsic(_COPY16, "l", element_pointer)
    # copy16_a32: the same with the shared address made in 32 bits outside the instruction
    _COPY16_A32 = "{ .reg .u64 ga_; cvta.to.global.u64 ga_, $1; cp.async.cg.shared.global [$0], [ga_], 16; }"
    copy16_a32 = _copy16_intrinsic(_COPY16_A32, "r", shared_address32)

    def _statement(text):
        """An intrinsic of no arguments that emits the PTX statement `text` (a compiler memory barrier)."""

        @intrinsic
        def statement(typingctx):
            sig = types.void()

            def codegen(context, builder, sig, args):
                fty = ir.FunctionType(ir.VoidType(), [])
                builder.call(ir.InlineAsm(fty, text, "~{memory}", side_effect=True), [])
                return context.get_dummy_value()

            return sig, codegen

        return statement

    commit = _statement("cp.async.commit_group;")
    standins.register(copy16, _copy_at_once)  # traced on the CPU in gpu mode too (Chapter 6d)
    standins.register(copy16_a32, _copy_at_once)
    standins.register(commit, _nothing)

    def make_wait(n):
        """A device function that runs cp.async.wait_group n: at most n of this thread's groups pending."""
        wait = _statement(f"cp.async.wait_group {int(n)};")
        standins.register(wait, _nothing)
        return wait

else:  # numba-cuda-mlir: `unavailable()` says so, and no kernel is built with these

    def _refuse(*args):
        raise RuntimeError(f"cp.async: {unavailable()}")

    copy16 = copy16_a32 = commit = _refuse

    def make_wait(n):
        """Refused: see `unavailable()`."""
        return _refuse
