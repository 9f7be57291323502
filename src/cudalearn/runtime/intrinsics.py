"""What a GPU computes for numba.cuda's scalar intrinsics and atomics, for the tracer and the simulator
(Chapters 2, 10).

The tracer (`cudalearn.trace`) and Numba's CUDA simulator both run a kernel as Python; each used to
compute `cuda.popc`, `clz`, `brev`, `ffs`, `fma`, `cbrt` in its own way (the simulator's `popc(-1)`
was 1, a GPU's 64), so a kernel could tell them apart and show the tracer another path than the one
that ran. Both now take these functions from here (`runtime.simfix` installs them in the simulator),
and they follow what numba-cuda 0.30 compiles for a GPU (cudadecl.py typing, cudaimpl.py lowering,
PTX ISA semantics), checked against `compile_ptx` in tests/runtime/test_intrinsics.py:

- an argument's width is its Numba type's: a Python int is an int64, `cuda.threadIdx.x` and its
  siblings (and `cuda.laneid`) are int32 (`Int32` here), a NumPy scalar its own dtype;
- `popc(x)`, `clz(x)`: over that width, two's complement (popc(-1) = 64 for an int64), clz(0) = width;
- `brev(x)`: numba types it uint32 for every argument but a uint64, so the low 32 bits reversed;
- `ffs(x)`: 1 + the index of the lowest set bit over 32 bits (int32/uint32) or 64 (int64/uint64),
  0 when none, a uint32;
- `fma(a, b, c)`: one rounding (float32 when all three are float32, else float64), not a*b+c's two;
- `cbrt(x)`: the real cube root (cbrt(-8.0) = -2.0; the simulator's `x ** (1/3)` is complex there);
- the builtins `max(a, b)` and `min(a, b)` of two floats: fmaxf/fminf, which drop a NaN (Python's
  `max(nan, 1.0)` is nan); other arguments follow Python's rule, as Numba's generic builtin does;
- atomics return the old value; float max/min leave the element unchanged when either value is NaN,
  nanmax/nanmin replace a NaN element and ignore a NaN value (numba's CAS loops); inc/dec wrap as
  PTX atom.inc/atom.dec.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction
from typing import Any

import numpy as np


class Int32(int):
    """An int that Numba types int32 (threadIdx.x, blockDim.y, laneid...): its arithmetic gives plain ints,
    as Numba promotes int32 arithmetic to int64; only the bit intrinsics read its width (Chapter 2)."""

    __slots__ = ()


def width(v: Any) -> int:
    """The width in bits of an integer as Numba types it: NumPy's itemsize, 32 for Int32, 8 for a bool,
    64 for any other Python int."""
    if isinstance(v, (bool, np.bool_)):
        return 8
    if isinstance(v, np.integer):
        return v.dtype.itemsize * 8
    if isinstance(v, Int32):
        return 32
    return 64


def _same_type(v: Any, result: int) -> Any:
    """`result` as the type Numba gives popc/clz of v: v's own (int32 stays Int32, int8 for a bool)."""
    if isinstance(v, (bool, np.bool_)):
        return np.int8(result)
    if isinstance(v, np.integer):
        return type(v)(result)
    return Int32(result) if isinstance(v, Int32) else result


def popc(v: Any) -> Any:
    """cuda.popc: the set bits of v's two's complement over its width."""
    return _same_type(v, (int(v) & ((1 << width(v)) - 1)).bit_count())


def clz(v: Any) -> Any:
    """cuda.clz: the leading zero bits of v over its width (the width for 0, 0 for a negative)."""
    n = width(v)
    return _same_type(v, n - (int(v) & ((1 << n) - 1)).bit_length())


def brev(v: Any) -> Any:
    """cuda.brev: the bits reversed over 64 bits for a uint64, else over the low 32 (numba: uint32)."""
    n = 64 if isinstance(v, np.uint64) else 32
    bits = int(v) & ((1 << n) - 1)
    out = int(format(bits, f"0{n}b")[::-1], 2)
    return np.uint64(out) if n == 64 else np.uint32(out)


def ffs(v: Any) -> Any:
    """cuda.ffs: 1 + the index of the lowest set bit (over 32 bits for an int32/uint32, else 64), or 0."""
    n = 32 if width(v) <= 32 else 64
    bits = int(v) & ((1 << n) - 1)
    return np.uint32((bits & -bits).bit_length())


def _float32(*values: Any) -> bool:
    """Whether Numba picks an intrinsic's float32 signature: every argument a float32."""
    return all(isinstance(x, np.float32) for x in values)


_DOUBLE = struct.Struct("<d")  # a float64's bytes, little-endian: the first holds the mantissa's last bit
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _fma32(x: float, y: float, z: float) -> np.float32:
    """a * b + c of float32 values rounded once to float32: x * y is exact in float64, TwoSum gives the
    sum's error, and rounding to odd in float64 first (53 >= 24 + 2 bits) leaves no double rounding."""
    p = x * y
    s = p + z
    if not math.isfinite(s):  # inf, NaN: IEEE's rules, nothing to round
        with np.errstate(all="ignore"):
            return np.float32(s)
    err = (p - (s - z)) + (z - (s - (s - z)))
    if err and not _DOUBLE.pack(s)[0] & 1:
        s = math.nextafter(s, math.inf if err > 0 else -math.inf)
    if abs(s) <= _FLOAT32_MAX:
        return np.float32(s)
    with np.errstate(over="ignore"):  # past float32's range: inf
        return np.float32(s)


def fma(a: Any, b: Any, c: Any) -> Any:
    """cuda.fma: a * b + c rounded once, in float32 when all three are float32, else in float64."""
    if type(a) is np.float32 and type(b) is np.float32 and type(c) is np.float32:
        return _fma32(float(a), float(b), float(c))
    x, y, z = float(a), float(b), float(c)
    with np.errstate(all="ignore"):
        if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):  # IEEE's rules: no rounding
            return np.float64(x) * np.float64(y) + np.float64(z)
        exact = Fraction(x) * Fraction(y) + Fraction(z)
        try:
            return np.float64(float(exact))
        except OverflowError:
            return np.float64(np.inf if exact > 0 else -np.inf)


def cbrt(v: Any) -> Any:
    """cuda.cbrt: the real cube root, float32 for a float32 argument, else float64."""
    with np.errstate(all="ignore"):
        return np.cbrt(np.float32(v)) if _float32(v) else np.cbrt(np.float64(v))


def selp(cond: Any, a: Any, b: Any) -> Any:
    """cuda.selp: a if cond else b."""
    return a if cond else b


def as_dtype(dtype: Any) -> np.dtype:
    """The NumPy dtype of np.float32, 'float32' or numba.float32."""
    try:
        return np.dtype(dtype)
    except TypeError:
        return np.dtype(getattr(dtype, "name", str(dtype)))


def fresh(shape: Any, dtype: Any) -> np.ndarray:
    """A new local (or the tracer's shared) array: NaN for floats, else 0, so reads before writes show."""
    dtype = as_dtype(dtype)
    return np.full(shape, np.nan if dtype.kind in "fc" else 0, dtype=dtype)


def cast(v: Any, dtype: np.dtype) -> Any:
    """v converted to an array's dtype, as Numba converts an atomic's value (ints wrap, floats round)."""
    with np.errstate(all="ignore"):
        return np.asarray(v).astype(dtype)[()]


def _fminmax(pick_max: bool, args: tuple) -> Any:
    """Numba's `max`/`min` on a GPU: of exactly two floats, libdevice's fmaxf/fmax (fminf/fmin), which drop
    a NaN (the other value; NaN only when both are), float32 when both are; otherwise Python's rule
    (numba's generic builtin reproduces it: max(nan, 1.0) is nan, max(1.0, nan) is 1.0)."""
    builtin = max if pick_max else min
    if len(args) != 2 or not all(isinstance(x, (float, np.floating)) for x in args):
        return builtin(*args)
    a, b = args
    kind = np.float32 if isinstance(a, np.float32) and isinstance(b, np.float32) else np.float64
    if a != a or b != b:  # NaN
        return kind(b if a != a else a)
    return kind(builtin(a, b))


def gpu_max(*args: Any) -> Any:
    """`max` in a kernel as a GPU computes it (`_fminmax`)."""
    return _fminmax(True, args)


def gpu_min(*args: Any) -> Any:
    """`min` in a kernel as a GPU computes it (`_fminmax`)."""
    return _fminmax(False, args)


#: builtins whose value in a kernel differs from Python's: the tracer and the simulator give kernels these
KERNEL_BUILTINS = {"max": gpu_max, "min": gpu_min}


# The update each atomic applies to the old value (the old value is what it returns) ----------------


def _nan(v: Any) -> bool:
    return isinstance(v, (float, np.floating)) and v != v


def atomic_max(old: Any, v: Any) -> Any:
    """cuda.atomic.max's new value: v when old < v; a NaN old or v leaves old."""
    return old if _nan(old) or _nan(v) or not old < v else v


def atomic_min(old: Any, v: Any) -> Any:
    """cuda.atomic.min's new value: v when old > v; a NaN old or v leaves old."""
    return old if _nan(old) or _nan(v) or not old > v else v


def atomic_nanmax(old: Any, v: Any) -> Any:
    """cuda.atomic.nanmax's new value: a NaN v leaves old; a NaN old is replaced."""
    return old if _nan(v) or not (_nan(old) or old < v) else v


def atomic_nanmin(old: Any, v: Any) -> Any:
    """cuda.atomic.nanmin's new value: a NaN v leaves old; a NaN old is replaced."""
    return old if _nan(v) or not (_nan(old) or old > v) else v


def atomic_inc(old: Any, v: Any) -> Any:
    """cuda.atomic.inc's new value (PTX atom.inc): 0 when old >= v, else old + 1."""
    return 0 if old >= v else old + 1


def atomic_dec(old: Any, v: Any) -> Any:
    """cuda.atomic.dec's new value (PTX atom.dec): v when old is 0 or above v, else old - 1."""
    return v if old == 0 or old > v else old - 1


ATOMIC_UPDATES = {  # cuda.atomic.<name> -> its new value from (old, val)
    "add": lambda old, v: old + v,
    "sub": lambda old, v: old - v,
    "and_": lambda old, v: old & v,
    "or_": lambda old, v: old | v,
    "xor": lambda old, v: old ^ v,
    "exch": lambda old, v: v,
    "max": atomic_max,
    "min": atomic_min,
    "nanmax": atomic_nanmax,
    "nanmin": atomic_nanmin,
    "inc": atomic_inc,
    "dec": atomic_dec,
}
