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

from cudalearn.runtime import numba_backend
from cudalearn.trace.arrays import TracedArray
from cudalearn.trace.model import (
    MAX_STATIC_SHARED,
    SHARED_ALIGN,
    WARP_SIZE,
    Dim3,
    LocalArray,
    TraceError,
    TraceUnsupported,
)

_ATOMICS = "add, sub, max, min, exch, and_, or_, xor, inc, dec and cas"  # the cuda.atomic it models
_WARP = "a warp-level intrinsic: the lanes of a warp exchange values in lockstep"
_KINDS = {  # what a CUDA function the tracer does not model is, for its message
    **dict.fromkeys(("match_any_sync", "match_all_sync", "vote_sync_intrinsic"), _WARP),
    "cg": "cooperative groups (a grid-wide barrier)",
    "fp16": "half-precision intrinsics",
    "libdevice": "libdevice math functions",
}


def _as_dtype(dtype):
    """numpy dtype of np.float32, 'float32' or numba.float32."""
    try:
        return np.dtype(dtype)
    except TypeError:
        return np.dtype(getattr(dtype, "name", str(dtype)))


def _fresh(shape, dtype):
    """A new shared or local array: NaN for floats, 0 otherwise, so reads before writes show."""
    dtype = _as_dtype(dtype)
    return np.full(shape, np.nan if dtype.kind in "fc" else 0, dtype=dtype)


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
            data = _fresh(shape, dtype)
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
        return _fresh(shape, dtype).view(LocalArray)


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


def _atomic_op(update):
    """A cuda.atomic method from update(old, val) -> new."""

    def op(self, ary, idx, val):
        self._rec.report.atomics += 1
        return _atomic(ary, idx, lambda old: update(old, val), sys._getframe(1))

    return op


class _Atomic:
    """cuda.atomic: recorded as a load and a store, never a race with another atomic."""

    add = _atomic_op(lambda old, v: old + v)
    sub = _atomic_op(lambda old, v: old - v)
    max = _atomic_op(lambda old, v: max(old, v))
    min = _atomic_op(lambda old, v: min(old, v))
    exch = _atomic_op(lambda old, v: v)
    and_ = _atomic_op(lambda old, v: old & v)
    or_ = _atomic_op(lambda old, v: old | v)
    xor = _atomic_op(lambda old, v: old ^ v)
    inc = _atomic_op(lambda old, v: 0 if old >= v else old + 1)
    dec = _atomic_op(lambda old, v: v if old == 0 or old > v else old - 1)

    def cas(self, ary, idx, old, val):
        self._rec.report.atomics += 1
        return _atomic(ary, idx, lambda cur: val if cur == old else cur, sys._getframe(1))

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

    warpsize = WARP_SIZE

    def __init__(self, rec, real, kernel=""):
        self._rec, self._real, self._kernel = rec, real, kernel
        self.gridDim, self.blockDim = Dim3(*rec.griddim), Dim3(*rec.blockdim)
        self.threadIdx = self.blockIdx = Dim3(0, 0, 0)
        self.shared, self.local, self.const = _Shared(rec), _Local(), _Const()
        self.atomic = _Atomic(rec, kernel)

    @property
    def laneid(self):
        return self._rec.lane

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

    def popc(self, v):
        """Set bits of an int, over its width (a Python int is an int64 to numba)."""
        return bin(int(v) & ((1 << _bits(v)) - 1)).count("1")

    def ffs(self, v):
        """1 + the position of the lowest set bit of the low 32 bits, 0 if none (numba's ffs)."""
        v = int(v) & 0xFFFFFFFF
        return (v & -v).bit_length()

    def clz(self, v):
        """Leading zeros of an int over its width."""
        width = _bits(v)
        return width - (int(v) & ((1 << width) - 1)).bit_length()

    def brev(self, v):
        """The bits of an int reversed over its width."""
        width = _bits(v)
        return int(format(int(v) & ((1 << width) - 1), f"0{width}b")[::-1], 2)

    def fma(self, a, b, c):
        return a * b + c

    def selp(self, cond, a, b):
        return a if cond else b

    def __getattr__(self, name):
        """A numba type (`cuda.float32`) from the real module; any other name the tracer does not model."""
        if name.startswith("__"):  # a probe by copy, pickle or inspect: no such attribute
            raise AttributeError(name)
        value = getattr(self._real, name, None)
        if _is_numba_type(value):
            return value
        raise _unsupported(name, sys._getframe(1), self._kernel)


def _bits(v):
    """The width in bits of an integer as numba types it."""
    return np.dtype(type(v)).itemsize * 8 if isinstance(v, np.integer) else 64


def _is_numba_type(value):
    """Whether `value` is a numba type such as float32 (a kernel may write `cuda.float32(0.0)`)."""
    return numba_backend.is_type(value)  # numba-cuda's or numba-cuda-mlir's
