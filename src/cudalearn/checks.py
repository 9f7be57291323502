"""Student-facing checks that raise `AssertionError` with a message a student can act on (all labs).

Every failure says what is wrong (shape, dtype, which element, expected vs
got, how many elements, the largest error against the tolerance) and gives
a hint for the usual cause. Nothing here only prints. `run_kernel` launches
a student's kernel on copies of the inputs, fills outputs with a sentinel
so an unfinished kernel is recognised, and turns an out-of-bounds access
into a clear message in both modes (the simulator raises IndexError; on a
GPU, guard zones around each array catch writes past either end).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

NOT_DONE = (
    "the exercise is not done yet: replace the `# YOUR CODE HERE` lines "
    "(and the `pass` or `raise NotImplementedError()` below them) with your code."
)
GUARD = 64  # elements of guard zone on each side of an array on the GPU


def _to_numpy(x: Any) -> Any:
    """A host numpy copy of a numpy array, Numba device array or torch tensor; else `x`."""
    if hasattr(x, "copy_to_host"):
        return x.copy_to_host()
    if type(x).__module__.startswith("torch"):
        return x.detach().cpu().numpy()
    return x


def sentinel(dtype: np.dtype) -> Any:
    """The value an output is filled with before a student's kernel runs: NaN, or the int minimum."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.nan
    if dtype.kind == "i":
        return np.iinfo(dtype).min
    if dtype.kind == "u":
        return np.iinfo(dtype).max
    raise TypeError(f"no sentinel for dtype {dtype}")


def _is_sentinel(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        return np.isnan(a)
    return a == sentinel(a.dtype)


def _fmt_index(idx: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(int(i)) for i in idx) + "]"


def check_shape_dtype(actual: Any, expected: np.ndarray, name: str = "result") -> np.ndarray:
    """Raise unless `actual` is an array with the shape and dtype of `expected`; return it as numpy."""
    if actual is None:
        raise AssertionError(f"`{name}` is None: {NOT_DONE} (Did your function `return` its result?)")
    actual = _to_numpy(actual)
    if not isinstance(actual, np.ndarray):
        raise AssertionError(
            f"`{name}` should be a numpy array of shape {expected.shape}, got a {type(actual).__name__}."
        )
    if actual.shape != expected.shape:
        hint = ""
        if actual.shape == expected.shape[::-1]:
            hint = " It has the transposed shape: did you swap rows and columns?"
        elif actual.size == expected.size:
            hint = " It has the right number of elements: check how you reshape or allocate it."
        raise AssertionError(f"`{name}` has shape {actual.shape}, expected {expected.shape}.{hint}")
    if actual.dtype != expected.dtype:
        raise AssertionError(
            f"`{name}` has dtype {actual.dtype}, expected {expected.dtype}. Allocate it with "
            f"dtype=np.{expected.dtype.name} (GPU kernels in this course use {expected.dtype.name})."
        )
    return actual


def _in_last_partial_block(bad: np.ndarray, block: Sequence[int]) -> int | None:
    """The axis whose last partial block holds every wrong element, or None."""
    for axis, (n, b) in enumerate(zip(bad.shape, block, strict=True)):
        if b and n > b and n % b:  # at least one full block, and a partial one
            tail = np.zeros_like(bad)
            sl = [slice(None)] * bad.ndim
            sl[axis] = slice(n - n % b, n)
            tail[tuple(sl)] = True
            if not (bad & ~tail).any():
                return axis
    return None


def _diagnose(actual: np.ndarray, expected: np.ndarray, bad: np.ndarray, block: Sequence[int] | None) -> str:
    """A hint for the usual causes of a wrong result, most specific first."""
    hints = []
    axis = _in_last_partial_block(bad, block) if block is not None else None
    if axis is not None:
        n, b = actual.shape[axis], block[axis]
        hints.append(
            f"all wrong elements are in the last partial block along axis {axis} (size {n} is not a "
            f"multiple of the block size {b}): did you guard the last partial block correctly?"
        )
    square = actual.ndim == 2 and actual.shape[0] == actual.shape[1]
    if square and np.allclose(actual, expected.T) and not np.allclose(expected, expected.T):
        hints.append(
            "your result is the transpose of the expected one: are the row and column indices swapped?"
        )
    if actual.ndim == 1 and actual.size > 2:
        if np.allclose(actual[1:], expected[:-1]) or np.allclose(actual[:-1], expected[1:]):
            hints.append("your result is shifted by one element: check the index arithmetic.")
    unwritten = _is_sentinel(actual) & ~_is_sentinel(expected)
    if unwritten.any():
        hints.append(
            f"{int(unwritten.sum())} element(s) were never written (they still hold the sentinel "
            f"{sentinel(actual.dtype)} the check put there): is the grid too small to cover the "
            f"array, or do some threads return before writing?"
        )
    if not hints:
        hints.append("compare your indexing with the NumPy spec on a small example, element by element.")
    return " Hint: " + " ".join(hints)


def matmul_tol(k: int) -> dict[str, float]:
    """rtol and atol for a float32 product summed over k terms: its rounding error grows like sqrt(k)."""
    return {"rtol": 1e-4, "atol": 1e-4 * math.sqrt(k)}


def check_close(
    actual: Any,
    expected: np.ndarray,
    *,
    name: str = "result",
    rtol: float = 1e-5,
    atol: float = 1e-6,
    block: Sequence[int] | None = None,
) -> None:
    """Raise unless `actual` matches `expected` elementwise within rtol/atol (all labs).

    `block` is the launch's block shape, used to spot a missing guard on
    the last partial block.
    """
    expected = np.asarray(expected)
    actual = check_shape_dtype(actual, expected, name)
    if _is_sentinel(actual).all() and not _is_sentinel(expected).all():
        raise AssertionError(f"your kernel wrote nothing into `{name}`: {NOT_DONE}")
    with np.errstate(invalid="ignore"):
        ok = np.isclose(actual, expected, rtol=rtol, atol=atol)
    if ok.all():
        return
    bad = ~ok
    first = tuple(np.argwhere(bad)[0])
    with np.errstate(invalid="ignore"):
        err = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    finite = err[np.isfinite(err)]
    max_err = f"{finite.max():.3g}" if finite.size else "nan"
    tol = atol + rtol * float(np.abs(expected[first]))
    raise AssertionError(
        f"`{name}` is wrong at {int(bad.sum())} of {bad.size} elements. First wrong element "
        f"{name}{_fmt_index(first)}: expected {expected[first]!r}, got {actual[first]!r} "
        f"(allowed error there {tol:.3g}). Largest error: {max_err}."
        + _diagnose(actual, expected, bad, block)
    )


def check_equal(actual: Any, expected: Any, *, name: str, hint: str = "") -> None:
    """Raise unless a scalar or tuple answer equals the expected one exactly (all labs)."""
    if actual is None:
        raise AssertionError(f"`{name}` is None: {NOT_DONE}")
    if actual != expected:
        raise AssertionError(
            f"`{name}` is {actual!r}, expected {expected!r}." + (f" Hint: {hint}" if hint else "")
        )


def _arg_names(kernel: Any, n: int) -> list[str]:
    fn = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None) or kernel
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    return (names + [f"arg{i}" for i in range(len(names), n)])[:n]


def _guarded(a: np.ndarray) -> np.ndarray:
    """A flat copy of `a` with GUARD elements of a known value on each side."""
    flat = np.full(a.size + 2 * GUARD, sentinel(a.dtype), dtype=a.dtype)
    flat[GUARD : GUARD + a.size] = a.ravel()
    return flat


def _overwritten(zone: np.ndarray) -> int:
    """How many elements of a guard zone no longer hold the guard value."""
    return int((~_is_sentinel(zone)).sum())


def _out_of_bounds(e: IndexError) -> AssertionError:
    return AssertionError(
        f"your kernel indexed outside an array: {e}. Guard the threads of the last "
        f"partial block (e.g. `if i < out.shape[0]:`) so no thread reads or writes past the end."
    )


def run_kernel(kernel: Any, griddim: Any, blockdim: Any, *args: Any) -> list[Any]:
    """Launch a student's kernel on copies of `args`; return the host copies after the launch (all labs).

    Numpy array arguments are copied to the device (on a GPU inside guard
    zones that catch writes past either end) and back. An out-of-bounds
    access becomes an AssertionError that names the argument and the fix.
    """
    from numba import cuda

    from cudalearn import device

    names = _arg_names(kernel, len(args))
    if device.mode() == "sim":
        host = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
        try:
            kernel[griddim, blockdim](*host)
        except IndexError as e:
            raise _out_of_bounds(e) from None
        return host
    bufs, dev_args = {}, []
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            flat = _guarded(np.ascontiguousarray(a))
            d = cuda.to_device(flat)
            bufs[i] = (d, a.shape, a.size)
            dev_args.append(d[GUARD : GUARD + a.size].reshape(a.shape))
        else:
            dev_args.append(a)
    from numba.cuda.cudadrv.driver import CudaAPIError

    try:
        kernel[griddim, blockdim](*dev_args)
        cuda.synchronize()
    except IndexError as e:
        raise _out_of_bounds(e) from None
    except CudaAPIError as e:  # e.g. an illegal address, which kills the CUDA context
        raise AssertionError(
            f"your kernel crashed on the GPU: {type(e).__name__}: {e}. This is usually an access "
            f"far outside an array. Restart the notebook's kernel (the GPU context is lost), then "
            f"guard every index (e.g. `if i < out.shape[0]:`)."
        ) from None
    out = list(args)
    for i, (d, shape, n) in bufs.items():
        flat = d.copy_to_host()
        before, after = _overwritten(flat[:GUARD]), _overwritten(flat[GUARD + n :])
        if before or after:
            where = "past the end" if after else "before the start"
            raise AssertionError(
                f"your kernel wrote {where} of `{names[i]}` (shape {shape}): {max(before, after)} "
                f"element(s) outside the array were overwritten. Guard the last partial block "
                f"(e.g. `if i < {names[i]}.shape[0]:`) and check the index arithmetic."
            )
        out[i] = flat[GUARD : GUARD + n].reshape(shape)
    return out


def empty_output(shape: Sequence[int] | int, dtype: Any = np.float32) -> np.ndarray:
    """An output array filled with the sentinel, so an unwritten element is recognised (all labs)."""
    return np.full(shape, sentinel(dtype), dtype=dtype)


def call_student(fn: Callable[..., Any], name: str, *args: Any) -> Any:
    """fn(*args) for a student's function; a stub's NotImplementedError says 'not done yet' (all labs)."""
    try:
        return fn(*args)
    except NotImplementedError:
        raise AssertionError(f"`{name}` raised NotImplementedError: {NOT_DONE}") from None


def check_function(
    fn: Callable[..., Any], cases: Sequence[tuple[tuple, Any]], *, name: str, hint: str = ""
) -> None:
    """Raise unless fn(*args) == expected (floats to 1e-9 relative) for each (args, expected) (labs 0-1)."""
    for args, expected in cases:
        call = f"{name}({', '.join(map(repr, args))})"
        got = call_student(fn, name, *args)
        if isinstance(expected, float) and got is not None and np.isclose(got, expected, rtol=1e-9, atol=0):
            continue
        check_equal(got, expected, name=call, hint=hint)


def trace_kernel(kernel: Any, griddim: Any, blockdim: Any, *args: Any):
    """`cudalearn.trace.trace`, with a student-facing message when the kernel cannot be traced (labs 3-6)."""
    from cudalearn.trace import TraceError, TraceOutOfBounds, trace

    try:
        return trace(kernel, griddim, blockdim, *args)
    except TraceOutOfBounds as e:
        raise AssertionError(f"the tracer found an access outside an array: {e}") from None
    except TraceError as e:
        raise AssertionError(f"the tracer could not run your kernel: {e}") from None
