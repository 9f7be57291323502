"""The tracer's instrumented arrays: numpy arrays whose element reads and writes are recorded (Chapter 2)."""

import operator
import sys

import numpy as np

from cudalearn.runtime.intrinsics import Int32
from cudalearn.trace.model import LOAD, STORE, TraceError

_INTS = frozenset((int, Int32))  # the index types of the fast paths (Int32: threadIdx.x and its siblings)


class Allocation:
    """One traced array: its name, memory space, base byte address and shape."""

    def __init__(self, aid, name, shared, base, data):
        self.id, self.name, self.shared, self.base = aid, name, shared, base
        self.itemsize, self.shape = data.itemsize, data.shape
        fortran = data.ndim > 1 and data.flags.f_contiguous and not data.flags.c_contiguous
        self.order = "F" if fortran else "C"

    def index(self, off):
        """The element index tuple at byte offset off."""
        flat = off // self.itemsize
        return tuple(int(i) for i in np.unravel_index(flat, self.shape, order=self.order))


class TracedArray:
    """A numpy array (or a view of one) whose element reads and writes are recorded (Chapter 2)."""

    __slots__ = ("_rec", "_alloc", "_data", "_off0", "_shape", "_strides", "_name")

    def __init__(self, rec, alloc, data, off0=0, name=None):
        self._rec, self._alloc, self._data, self._off0 = rec, alloc, data, off0
        self._shape, self._strides = data.shape, data.strides
        self._name = name or alloc.name

    shape = property(lambda self: self._shape)
    ndim = property(lambda self: self._data.ndim)
    size = property(lambda self: self._data.size)
    dtype = property(lambda self: self._data.dtype)
    strides = property(lambda self: self._strides)

    def __len__(self):
        return self._shape[0]

    def __repr__(self):
        return f"<traced {self._name} {self._data.dtype}{list(self._shape)}>"

    def _locate(self, idx, kind, frame):
        """Byte offset of a full integer index (fast paths for 1-D and 2-D), None for views."""
        shape = self._shape
        if type(idx) in _INTS:
            if len(shape) == 1 and 0 <= idx < shape[0]:
                return self._off0 + idx * self._strides[0]
        elif type(idx) is tuple and len(idx) == 2 == len(shape):
            i, j = idx
            if type(i) in _INTS and type(j) in _INTS and 0 <= i < shape[0] and 0 <= j < shape[1]:
                return self._off0 + i * self._strides[0] + j * self._strides[1]
        return self._locate_any(idx, kind, frame)

    def _locate_any(self, idx, kind, frame):
        """Byte offset of any full integer index, with bounds checks; None for views."""
        if type(idx) is not tuple:
            idx = (idx,)
        if len(idx) != len(self._shape):
            return None
        off = self._off0
        for i, n, s in zip(idx, self._shape, self._strides, strict=True):
            if type(i) not in _INTS:
                if isinstance(i, slice):
                    return None
                i = _as_index(i, self._name, frame)
            if i < 0 or i >= n:
                raise self._rec.out_of_bounds(self, idx, kind, frame)
            off += i * s
        return off

    def __getitem__(self, idx):
        frame = sys._getframe(1)
        off = self._locate(idx, LOAD, frame)
        if off is None:
            return self._view(idx, frame)
        self._rec.access(self._alloc, off, LOAD, frame, False)
        return self._data[idx]

    def __setitem__(self, idx, value):
        frame = sys._getframe(1)
        off = self._locate(idx, STORE, frame)
        if off is None:
            self._store_view(idx, value, frame)
            return
        self._rec.access(self._alloc, off, STORE, frame, False)
        self._data[idx] = value

    def _store_view(self, idx, value, frame):
        """`A[a:b] = v`, `A[i] = v` on a 2-D array: every element of the view stored, in C order, as Numba's
        loop does; an array value's elements are read first (traced ones recorded), as when they overlap."""
        view = self._view(idx, frame, STORE)
        shape = view._shape
        if isinstance(value, TracedArray):
            if np.broadcast_shapes(value._shape, shape) != shape:
                raise ValueError(f"line {frame.f_lineno}: cannot store shape {value._shape} into {shape}")
            lead = len(shape) - len(value._shape)
            values = []
            for nd in np.ndindex(*shape):
                src = tuple(0 if n == 1 else i for i, n in zip(nd[lead:], value._shape, strict=True))
                values.append(value._load(src, frame))
        else:
            values = np.broadcast_to(np.asarray(value), shape).ravel().tolist() if shape else [value]
        for nd, v in zip(np.ndindex(*shape), values, strict=True):
            off = view._locate(nd, STORE, frame)
            self._rec.access(self._alloc, off, STORE, frame, False)
            view._data[nd] = v

    def _load(self, idx, frame):
        """One element read at a full index, recorded as the kernel's line `frame` reads it."""
        off = self._locate(idx, LOAD, frame)
        self._rec.access(self._alloc, off, LOAD, frame, False)
        return self._data[idx]

    def _view(self, idx, frame, kind=LOAD):
        """A[i] of a 2-D array, or a slice: a traced view of the same allocation."""
        idx = idx if type(idx) is tuple else (idx,)
        if len(idx) > len(self._shape):
            raise self._rec.out_of_bounds(self, idx, kind, frame)
        for i, n in zip(idx, self._shape, strict=False):
            if not isinstance(i, slice) and not 0 <= _as_index(i, self._name, frame) < n:
                raise self._rec.out_of_bounds(self, idx, kind, frame)
        view = self._data[idx]
        off0 = view.__array_interface__["data"][0] - self._data.__array_interface__["data"][0]
        name = f"{self._name}[{', '.join(fmt_index(i) for i in idx)}]"
        return TracedArray(self._rec, self._alloc, view, self._off0 + off0, name)

    def atomic(self, idx, update, frame):
        """Apply update(old) to one element atomically; return old (cuda.atomic.*)."""
        off = self._locate(idx, STORE, frame)
        if off is None:
            raise TraceError(f"line {frame.f_lineno}: atomics need a full index into {self._name}")
        self._rec.access(self._alloc, off, LOAD, frame, True)
        self._rec.access(self._alloc, off, STORE, frame, True)
        old = self._data[idx]
        self._data[idx] = update(old)
        return old


def fmt_index(i):
    """An index or slice as the kernel wrote it."""
    if isinstance(i, slice):
        parts = ["" if v is None else str(v) for v in (i.start, i.stop)]
        return ":".join(parts) + (f":{i.step}" if i.step is not None else "")
    return str(i)


def _as_index(i, name, frame):
    """An integer index, or a TypeError naming the line and the array."""
    try:
        return operator.index(i)
    except TypeError:
        msg = f"line {frame.f_lineno}: index {i!r} into {name} is a {type(i).__name__}, not an integer"
        raise TypeError(msg) from None
