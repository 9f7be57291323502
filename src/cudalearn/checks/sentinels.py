"""The sentinel an output is filled with before a student's kernel runs, and where it is left (all labs).

A float output is filled with a NaN of marked bits, an int output with its type's minimum (the maximum for
unsigned types), so a check tells an element the kernel never wrote from one it wrote, a computed NaN
included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: the bits of the NaN a float output is filled with: a payload that arithmetic on numbers never makes (a
#: NaN computed from numbers, 0/0 or inf - inf, is the CPU's or GPU's default NaN), so an element the
#: kernel never wrote is told apart from a NaN it computed
_SENTINEL_BITS = {2: np.uint16(0x7E5E), 4: np.uint32(0x7FC0_5EED), 8: np.uint64(0x7FF8_0000_0D15_5EED)}


def sentinel(dtype: np.dtype) -> Any:
    """The value an output is filled with before a student's kernel runs: a marked NaN, or the int minimum."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        bits = _SENTINEL_BITS.get(dtype.itemsize)
        return np.nan if bits is None else np.array(bits).view(dtype)[()]
    if dtype.kind == "i":
        return np.iinfo(dtype).min
    if dtype.kind == "u":
        return np.iinfo(dtype).max
    raise TypeError(f"no sentinel for dtype {dtype}")


def is_sentinel(a: np.ndarray) -> np.ndarray:
    """Where `a` still holds the sentinel: for floats its exact bits, so a computed NaN is not one."""
    a = np.asarray(a)
    if a.dtype.kind == "f":
        bits = _SENTINEL_BITS.get(a.dtype.itemsize)
        if bits is None:
            return np.isnan(a)
        return np.ascontiguousarray(a).view(bits.dtype) == bits
    return a == sentinel(a.dtype)


def _sentinel_name(dtype: np.dtype) -> str:
    """How messages name the sentinel: 'the marked NaN' for floats, the int itself for integers."""
    return "the marked NaN" if np.dtype(dtype).kind == "f" else str(sentinel(dtype))


def empty_output(shape: Sequence[int] | int, dtype: Any = np.float32) -> np.ndarray:
    """An output array filled with the sentinel, so an unwritten element is recognised (all labs)."""
    return np.full(shape, sentinel(dtype), dtype=dtype)
