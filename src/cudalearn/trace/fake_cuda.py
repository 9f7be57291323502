"""The `cuda` a traced kernel sees: shared, local and constant arrays, atomics, thread coordinates (Ch. 2).

`FakeCuda` stands in for the `cuda` module inside a traced kernel and its device functions; what
it does not define (match_*_sync, cooperative groups...) raises `TraceUnsupported`, naming the
call, the kernel and the line, instead of falling through to numba. The warp intrinsics are yields
(`execute._SyncToYield`, `warp.resolve`), not methods (Chapter 10).
"""

import linecache
import re
import sys

import numpy as np

from cudalearn.runtime import intrinsics, numba_backend
from cudalearn.trace.arrays import TracedArray
from cudalearn.trace.model import (
    MAX_STATIC_SHARED,
    SHARED_ALIGN,
    WARP_SIZE,
    LocalArray,
    TraceError,
    TraceUnsupported,
    int32_dim3,
)

# the cuda.atomic functions it models
_ATOMICS = "add, sub, max, min, nanmax, nanmin, exch, and_, or_, xor, inc, dec, cas and compare_and_swap"
_WARP = "a warp-level intrinsic: the lanes of a warp exchange values in lockstep"
_KINDS = {  # what a CUDA function the tracer does not model is, for its message
    **dict.fromkeys(("match_any_sync", "match_all_sync", "vote_sync_intrinsic"), _WARP),
    "cg": "cooperative groups (a grid-wide barrier)",
    "fp16": "half-precision intrinsics",
    "libdevice": "libdevice math functions",
}


class _Shared:
    """cuda.shared inside a traced kernel."""

    def __init__(self, rec):
        self._rec = rec

    def array(self, shape, dtype, alignment=None):
        """One allocation per call site and block, based at the next multiple of 128 bytes."""
        rec = self._rec
        frame = sys._getframe(1)
        site = (frame.f_code.co_filename, frame.f_lineno)
        arr = rec.shared_arrays.get(site)
        if arr is None:
            if shape == 0 or shape == (0,):
                raise TraceError(f"line {site[1]}: dynamic shared memory (shape 0) is not supported")
            data = intrinsics.fresh(shape, dtype)
            base = -(-rec.shared_top // SHARED_ALIGN) * SHARED_ALIGN
            rec.shared_top = base + data.nbytes
            if rec.shared_top > MAX_STATIC_SHARED:
                msg = f"the block declares {rec.shared_top} bytes of shared memory; CUDA allows 48 KiB"
                rec.warn("shared", msg)
            m = re.match(r"\s*([A-Za-z_]\w*)\s*=", linecache.getline(*site))
            name = m.group(1) if m else f"shared@{site[1]}"
            arr = rec.shared_arrays[site] = rec.allocate(name, True, base, data)
        return arr


class _Local:
    """cuda.local inside a traced kernel."""

    def array(self, shape, dtype, alignment=None):
        """Per-thread scratch array; not traced (registers or local memory)."""
        return intrinsics.fresh(shape, dtype).view(LocalArray)


class _Const:
    """cuda.const inside a traced kernel."""

    def array_like(self, ary):
        """Constant memory: the array itself, not traced."""
        return ary


def _atomic(ary, idx, update, frame):
    """Apply update to ary[idx], traced when ary is a TracedArray; return the old value."""
    if isinstance(ary, TracedArray):
        return ary.atomic(idx, update, frame)
    old = ary[idx]
    ary[idx] = update(old)
    return old


def _unsupported(name, frame, kernel, kind=None):
    """The TraceUnsupported error for `cuda.<name>`, used by the code of `frame` in the traced `kernel`."""
    line, src = frame.f_lineno, linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    caller = frame.f_code.co_name
    where = f"kernel `{kernel}`" + (f" (in its device function `{caller}`)" if caller != kernel else "")
    kind = kind or _KINDS.get(name, "a CUDA function the tracer does not implement")
    return TraceUnsupported(
        f"cudalearn.trace does not model `cuda.{name}` ({kind}): {where} uses it on line {line}"
        f" (`{src}`). The tracer runs a block's threads one at a time and models only their global and"
        f" shared memory accesses, barriers and the atomics {_ATOMICS}; run this kernel under the"
        f" simulator or on a GPU, or trace a version of it without `cuda.{name}`.",
        f"cuda.{name}",
        kernel,
        line,
    )


def _atomic_op(name):
    """A cuda.atomic method: the GPU's update (`runtime.intrinsics`) of ary[idx] by val; returns the old."""
    update = intrinsics.ATOMIC_UPDATES[name]

    def op(self, ary, idx, val):
        self._rec.report.atomics += 1
        val = intrinsics.cast(val, ary.dtype)
        return _atomic(ary, idx, lambda old: update(old, val), sys._getframe(1))

    op.__name__ = name
    return op


class _Atomic:
    """cuda.atomic: recorded as a load and a store, never a race with another atomic."""

    add, sub, and_, or_, xor, exch = map(_atomic_op, ("add", "sub", "and_", "or_", "xor", "exch"))
    max, min, nanmax, nanmin = map(_atomic_op, ("max", "min", "nanmax", "nanmin"))
    inc, dec = map(_atomic_op, ("inc", "dec"))

    def cas(self, ary, idx, old, val):
        self._rec.report.atomics += 1
        return _atomic(ary, idx, lambda cur: val if cur == old else cur, sys._getframe(1))

    def compare_and_swap(self, ary, old, val):
        """cuda.atomic.compare_and_swap: cas on the array's first element."""
        self._rec.report.atomics += 1
        return _atomic(ary, (0,) * ary.ndim, lambda cur: val if cur == old else cur, sys._getframe(1))

    def __init__(self, rec, kernel=""):
        self._rec, self._kernel = rec, kernel

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise _unsupported(
            f"atomic.{name}", sys._getframe(1), self._kernel, f"an atomic; modelled: {_ATOMICS}"
        )


class FakeCuda:
    """Stands in for the `cuda` module inside a traced kernel and its device functions (Chapter 2)."""

    warpsize = intrinsics.Int32(WARP_SIZE)  # numba: int32, as laneid and the thread coordinates

    def __init__(self, rec, real, kernel=""):
        self._rec, self._real, self._kernel = rec, real, kernel
        self.gridDim, self.blockDim = int32_dim3(rec.griddim), int32_dim3(rec.blockdim)
        self.threadIdx = self.blockIdx = int32_dim3((0, 0, 0))
        self.shared, self.local, self.const = _Shared(rec), _Local(), _Const()
        self.atomic = _Atomic(rec, kernel)

    @property
    def laneid(self):
        return intrinsics.Int32(self._rec.lane)

    def grid(self, ndim):
        """Absolute thread position: an int for ndim 1, else a tuple."""
        b, d, t = self.blockIdx, self.blockDim, self.threadIdx
        pos = (b.x * d.x + t.x, b.y * d.y + t.y, b.z * d.z + t.z)
        return pos[0] if ndim == 1 else pos[:ndim]

    def gridsize(self, ndim):
        """Threads in the grid per dimension: an int for ndim 1, else a tuple."""
        d, g = self.blockDim, self.gridDim
        size = (d.x * g.x, d.y * g.y, d.z * g.z)
        return size[0] if ndim == 1 else size[:ndim]

    def syncthreads(self, *args):
        """Reached only when a barrier was not rewritten (called through another name)."""
        raise TraceError(
            "the tracer supports cuda.syncthreads() only as a call written `cuda.syncthreads()` in a kernel"
            " or device function, not through another variable"
        )

    syncthreads_count = syncthreads_and = syncthreads_or = syncthreads

    def threadfence(self):
        pass

    threadfence_block = threadfence_system = threadfence

    def _direct_only(self, *args):
        """Reached only when a warp intrinsic's call was not rewritten (called through another name)."""
        raise TraceError(
            "the tracer runs warp intrinsics (cuda.shfl_*_sync, the votes, activemask, syncwarp) only as"
            " calls written `cuda.<name>(...)` in a kernel or device function, not through another variable"
        )

    shfl_sync = shfl_up_sync = shfl_down_sync = shfl_xor_sync = _direct_only
    ballot_sync = all_sync = any_sync = eq_sync = activemask = syncwarp = _direct_only

    def lanemask_lt(self):
        """The lanes below this one, a uint32 (numba: uint32)."""
        return np.uint32((1 << self._rec.lane) - 1)

    # what a GPU computes (runtime.intrinsics), as the simulator does under cudalearn (runtime.simintrinsics)
    popc, clz, brev, ffs = map(
        staticmethod, (intrinsics.popc, intrinsics.clz, intrinsics.brev, intrinsics.ffs)
    )
    fma, cbrt, selp = map(staticmethod, (intrinsics.fma, intrinsics.cbrt, intrinsics.selp))

    def __getattr__(self, name):
        """A numba type (`cuda.float32`) from the real module; any other name the tracer does not model."""
        if name.startswith("__"):  # a probe by copy, pickle or inspect: no such attribute
            raise AttributeError(name)
        value = getattr(self._real, name, None)
        if _is_numba_type(value):
            return value
        raise _unsupported(name, sys._getframe(1), self._kernel)


def _is_numba_type(value):
    """Whether `value` is a numba type such as float32 (a kernel may write `cuda.float32(0.0)`)."""
    return numba_backend.is_type(value)  # numba-cuda's or numba-cuda-mlir's
