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

from cudalearn.checks import tracebacks  # noqa: F401  (in a notebook: a failing check shows its message)
from cudalearn.checks.answer_types import INT_FIX, int_problem, type_name
from cudalearn.checks.sentinels import _sentinel_name, is_sentinel
from cudalearn.checks.sentinels import empty_output as empty_output  # the labs call it as checks.empty_output
from cudalearn.checks.sentinels import sentinel as sentinel

NOT_DONE = (
    "the exercise is not done yet: replace the `# YOUR CODE HERE` lines "
    "(and the `pass` or `raise NotImplementedError()` below them) with your code."
)


def _to_numpy(x: Any) -> Any:
    """A host numpy copy of a numpy array, Numba device array or torch tensor; else `x`."""
    if hasattr(x, "copy_to_host"):
        return x.copy_to_host()
    if type(x).__module__.startswith("torch"):
        return x.detach().cpu().numpy()
    return x


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
        gpu = " (the course's GPU kernels compute in float32)" if expected.dtype == np.float32 else ""
        raise AssertionError(
            f"`{name}` has dtype {actual.dtype}, expected {expected.dtype}. Allocate it with "
            f"dtype=np.{expected.dtype.name}{gpu}."
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


def _diagnose(
    actual: np.ndarray, expected: np.ndarray, bad: np.ndarray, block: Sequence[int] | None, never: np.ndarray
) -> str:
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
    unwritten = bad & never
    if unwritten.any():
        hints.append(
            f"{int(unwritten.sum())} element(s) were never written (they still hold the sentinel, "
            f"{_sentinel_name(actual.dtype)}, the check put there): is the grid too small to cover the "
            f"array, or do some threads return before writing?"
        )
    with np.errstate(invalid="ignore"):
        computed = bad & ~np.isfinite(actual.astype(np.float64)) & ~never
    if computed.any() and np.isfinite(expected[computed].astype(np.float64)).all():
        hints.append(
            f"{int(computed.sum())} element(s) hold a NaN or inf your kernel computed and stored (not the "
            f"sentinel: they were written): look for a 0/0, inf - inf, a division by a zero sum, or an exp "
            f"that overflows float32 (exp(x) above x = 88; a softmax subtracts its row's max first)."
        )
    if not hints:
        hints.append("compare your indexing with the NumPy spec on a small example, element by element.")
    return " Hint: " + " ".join(hints)


def matmul_tol(k: int) -> dict[str, float]:
    """rtol and atol for a float32 product summed over k terms: its rounding error grows like sqrt(k)."""
    return {"rtol": 1e-4, "atol": 1e-4 * math.sqrt(k)}


#: float32's unit roundoff: one rounding to nearest has relative error at most this (Chapters 10-11).
FLOAT32_ROUNDOFF = 2.0**-24


def gamma(k: int) -> float:
    """Higham's gamma_k = k u / (1 - k u): bounds the relative error of k float32 roundings (Chapters 10-11).

    A float32 sum of k + 1 terms, in any order, is within gamma_k * sum |x| of the exact sum.
    """
    return k * FLOAT32_ROUNDOFF / (1 - k * FLOAT32_ROUNDOFF)


def tile_hint(shape: Sequence[int], tiles: int | Sequence[int]) -> tuple[int, ...]:
    """check_close's `block` for a tiled output: each axis's tile, 0 where one tile covers it (labs 3-6).

    (An array smaller than one tile is all "last partial block", which would make the hint misfire.)
    """
    tiles = (tiles,) * len(shape) if isinstance(tiles, int) else tuple(tiles)
    return tuple(t if s > t else 0 for s, t in zip(shape, tiles, strict=True))


def check_close(
    actual: Any,
    expected: np.ndarray,
    *,
    name: str = "result",
    rtol: float = 1e-5,
    atol: float = 1e-6,
    block: Sequence[int] | None = None,
    unwritten: np.ndarray | None = None,
) -> None:
    """Raise unless `actual` matches `expected` elementwise within rtol/atol (all labs).

    `block` is the launch's block shape, used to spot a missing guard on
    the last partial block. `unwritten`, when the caller knows it (a second
    run on another sentinel, lab 10), marks the elements never written; a
    NaN elsewhere was computed by the kernel. Without it every NaN counts as
    never written.
    """
    expected = np.asarray(expected)
    actual = check_shape_dtype(actual, expected, name)
    never = is_sentinel(actual) & ~is_sentinel(expected) if unwritten is None else np.asarray(unwritten)
    nothing = is_sentinel(actual).all() if unwritten is None else never.all()
    if nothing and not is_sentinel(expected).all():
        raise AssertionError(f"your kernel wrote nothing into `{name}`: {NOT_DONE}")
    with np.errstate(invalid="ignore"):
        ok = np.isclose(actual, expected, rtol=rtol, atol=atol)
    if ok.all():
        return
    bad = ~ok
    first = tuple(np.argwhere(bad)[0])
    tol = atol + rtol * float(np.abs(expected[first]))
    raise AssertionError(
        f"`{name}` is wrong at {int(bad.sum())} of {bad.size} elements. First wrong element "
        f"{name}{_fmt_index(first)}: expected {expected[first]!r}, got {actual[first]!r} "
        f"(allowed error there {tol:.3g}). {_largest_error(actual, expected, bad, never)}"
        + _diagnose(actual, expected, bad, block, never)
    )


def _largest_error(actual: np.ndarray, expected: np.ndarray, bad: np.ndarray, never: np.ndarray) -> str:
    """'Largest error: ...' over the wrong elements that hold a number, then how many hold none (NaN, inf).

    An element never written still holds the sentinel (NaN for floats), which has no error to measure:
    it is counted apart, so a result with only such elements never reads "Largest error: 0".
    """
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    unwritten = bad & never
    other = bad & ~np.isfinite(err) & ~unwritten
    numeric = bad & ~unwritten & ~other
    parts = []
    if numeric.any():
        some = " (over the wrong elements that hold a number)" if numeric.sum() < bad.sum() else ""
        parts.append(f"Largest error: {err[numeric].max():.3g}{some}")
    if unwritten.any():
        parts.append(
            f"{int(unwritten.sum())} wrong element(s) were never written: they still hold "
            f"{_sentinel_name(actual.dtype)}, the sentinel the check filled the output with"
        )
    if other.any():
        parts.append(
            f"{int(other.sum())} wrong element(s) hold NaN or inf that your kernel computed (they were "
            f"written: a 0/0, inf - inf or an overflow, not an element left unwritten)"
        )
    return "; ".join(parts) + "."


def _type_problem(actual: Any, expected: Any) -> str | None:
    """Why `actual` is not of `expected`'s type (an int for an int, a tuple for a tuple), or None.

    An int is judged by the course's one rule (`answer_types.is_int`: a Python int or a NumPy integer).
    """
    if isinstance(expected, (int, np.integer)) and not isinstance(expected, bool):
        return int_problem(actual)
    if isinstance(expected, tuple):
        if not isinstance(actual, tuple):
            return f"is {actual!r}, a {type_name(actual)}, where a tuple is asked for"
        for i, (a, e) in enumerate(zip(actual, expected, strict=False)):
            if (why := _type_problem(a, e)) is not None:
                return f"has item {i} that {why}"
    return None


def check_equal(actual: Any, expected: Any, *, name: str, hint: str = "", exact_types: bool = False) -> None:
    """Raise unless a scalar or tuple answer equals the expected one exactly (all labs).

    With `exact_types`, an int must also be an int by the course's one rule (`answer_types.is_int`: a
    Python int or a NumPy integer, not 3.0, np.float64 or True) and a tuple a tuple of such (launch
    configurations, counts).
    """
    if actual is None:
        raise AssertionError(f"`{name}` is None: {NOT_DONE}")
    why = _type_problem(actual, expected) if exact_types else None
    if actual != expected and not (why and _same_items(actual, expected)):
        raise AssertionError(
            f"`{name}` is {actual!r}, expected {expected!r}." + (f" Hint: {hint}" if hint else "")
        )
    if why is not None:
        fix = (
            "return a tuple, e.g. `return (x, y)`."
            if isinstance(expected, tuple) and not isinstance(actual, tuple)
            else "a comparison gives a bool (True or False), not a count: return the number itself."
            if isinstance(actual, (bool, np.bool_))
            else INT_FIX
        )
        raise AssertionError(
            f"`{name}` {why}: the value is right but the type is not (expected {expected!r}). Hint: {fix}"
        )


def _arg_names(kernel: Any, n: int) -> list[str]:
    fn = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None) or kernel
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    return (names + [f"arg{i}" for i in range(len(names), n)])[:n]


def _out_of_bounds(e: IndexError, kernel: Any = None, griddim: Any = None, blockdim: Any = None, args=()):
    """The AssertionError for an out-of-bounds access: the tracer's memcheck report when it can replay it.

    Given the launch, it is re-run under `cudalearn.trace` (when small enough) on the original `args`, to
    name the array, index, shape, thread, block and line; otherwise the simulator's message is used.
    """
    from cudalearn.trace import TraceOutOfBounds, trace
    from cudalearn.trace.model import MAX_THREADS, dim3

    if isinstance(e, TraceOutOfBounds):  # the tracer ran the launch (trace.launch): its report, no replay
        return AssertionError(f"your kernel indexed outside an array (found by the tracer): {e}")
    if kernel is not None:
        try:
            threads = math.prod(dim3(griddim, "griddim")) * math.prod(dim3(blockdim, "blockdim"))
            if threads <= MAX_THREADS:
                trace(kernel, griddim, blockdim, *args)
        except TraceOutOfBounds as found:
            return AssertionError(f"your kernel indexed outside an array (found by the tracer): {found}")
        except Exception:  # noqa: BLE001 - the replay is best effort (untraceable kernel): fall back below
            pass
    return AssertionError(
        f"your kernel indexed outside an array: {e}. Guard the threads of the last "
        f"partial block (e.g. `if i < out.shape[0]:`) so no thread reads or writes past the end."
    )


def run_kernel(kernel: Any, griddim: Any, blockdim: Any, *args: Any, float32_only: bool = True) -> list[Any]:
    """Launch a student's kernel on copies of `args`; return the host copies after the launch (all labs).

    First the kernel is compiled for a T4 (sm_75) with these arguments' types
    (`cudalearn.compile.ptx.check_kernel`): a kernel the real compiler rejects, or that
    computes in float64 on float32 data (unless `float32_only=False`), fails
    here even under the simulator. Numpy array arguments are copied to the
    device (on a GPU inside guard zones that catch writes past either end)
    and back. An out-of-bounds access becomes an AssertionError that names
    the argument and the fix.
    """
    from cudalearn.compile import ptx
    from cudalearn.runtime import device, numba_backend

    names = _arg_names(kernel, len(args))
    ptx.check_kernel(kernel, args, float32_only=float32_only, names=names)
    if device.mode() == "sim":
        from cudalearn import trace
        from cudalearn.trace import TraceError

        host = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
        try:
            trace.launch(kernel, griddim, blockdim, *host)  # the tracer runs what the simulator lacks
        except IndexError as e:  # the simulator names neither thread nor line: replay under the tracer
            raise _out_of_bounds(e, kernel, griddim, blockdim, args) from None
        except TraceError as e:  # a warp intrinsic's mask the GPU would not honour (WarpError), or worse
            raise AssertionError(
                f"the tracer, which runs your kernel's warp intrinsics here, found: {e}"
            ) from None
        return host
    from cudalearn.checks.guard import Guarded

    cuda = numba_backend.cuda_for(kernel)  # its arrays: from its package
    bufs = {i: Guarded(a, cuda) for i, a in enumerate(args) if isinstance(a, np.ndarray)}
    dev_args = [bufs[i].view if i in bufs else a for i, a in enumerate(args)]
    from numba.cuda.cudadrv.driver import CudaAPIError

    launch = (kernel, griddim, blockdim, args)
    try:
        kernel[griddim, blockdim](*dev_args)
        cuda.synchronize()
    except IndexError as e:  # the grader's sandbox found its guard zones written
        raise _out_of_bounds(e, *launch) from None
    except Exception as e:  # an illegal address kills the CUDA context (under the grader: its process)
        if not isinstance(e, CudaAPIError) and "CUDA_ERROR_ILLEGAL_ADDRESS" not in str(e):
            raise
        found = _out_of_bounds(e, *launch)
        where = (
            f" {found}"
            if "found by the tracer" in str(found)
            else " This is usually an access far outside an array."
        )
        raise AssertionError(
            f"your kernel crashed on the GPU: {type(e).__name__}: {e}.{where} Restart the notebook's kernel "
            f"(the GPU context is lost), then guard every index (e.g. `if i < out.shape[0]:`)."
        ) from None
    out = list(args)
    for i, g in bufs.items():
        before, after = g.overwritten()
        if before or after:
            where = "past the end" if after else "before the start"
            found = _out_of_bounds(IndexError(""), *launch)  # the tracer names the access when it can
            if "found by the tracer" in str(found):
                raise found
            raise AssertionError(
                f"your kernel wrote {where} of `{names[i]}` (shape {g.shape}): {max(before, after)} "
                f"element(s) outside the array were overwritten. Guard the last partial block "
                f"(e.g. `if i < {names[i]}.shape[0]:`) and check the index arithmetic."
            )
        out[i] = g.result()
    return out


def call_student(fn: Callable[..., Any], name: str, *args: Any) -> Any:
    """fn(*args) for a student's function; a stub's NotImplementedError says 'not done yet' (all labs)."""
    try:
        return fn(*args)
    except NotImplementedError:
        raise AssertionError(f"`{name}` raised NotImplementedError: {NOT_DONE}") from None


def student_side(experiment: Callable[..., Any], student: Any, *args: Any, **kwargs: Any) -> Any:
    """experiment(student, *args, **kwargs) where `student` lives; only plain data comes back (labs 7-9).

    In a notebook that is a plain call. Under `cudalearn grade` the student's function or class lives
    in a confined process and reaches the checks as a handle, so the part of a check that needs it live
    (a class to instantiate, a module to differentiate through, objects the instructor built) is such an
    `experiment`: a module-level function of a cudalearn module, run in the student's process on objects
    rebuilt there, returning numbers, strings, containers, numpy arrays or tensors (copies). The verdict
    is then computed from that data, here, where no student code runs.
    """
    remote = getattr(student, "_cl_experiment", None)
    if callable(remote):
        return remote(experiment, args, kwargs)
    return experiment(student, *args, **kwargs)


def student_sources(student: Any, name: str) -> list[str]:
    """The code of the student's `name` a check reads: under the grader, their answer cells (lab 1).

    Under `cudalearn grade` the student's function reaches the checks as a handle, and the sources are
    the answer cells the grader holds (`grading.remote.Remote._cl_sources`: the one defining `name`
    first, then the others, where a function it calls may be), never something asked of the student's
    process. In a notebook it is the function's own source. A source that cannot be read fails the
    check: a check that reads code never passes without reading it.
    """
    from_grader = getattr(type(student), "_cl_sources", None)
    if callable(from_grader):
        sources = from_grader(student)
    else:
        try:
            sources = [inspect.getsource(student)]
        except (OSError, TypeError):
            sources = []
    sources = [s for s in sources if isinstance(s, str)]
    if not sources or not sources[0].strip():
        raise AssertionError(
            f"the source of `{name}` could not be read, so the check cannot see how it computes its "
            f"result. Define `{name}` with a plain `def` in its exercise cell, run that cell, then this one."
        )
    return sources


def _same_answer(got: Any, expected: Any) -> bool:
    """got == expected, a float to 1e-9 relative (a real number only: not None, a bool or a string)."""
    if isinstance(expected, float):
        real = isinstance(got, (int, float, np.integer, np.floating)) and not isinstance(got, bool)
        return real and bool(np.isclose(got, expected, rtol=1e-9, atol=0))
    try:
        return bool(got == expected)
    except (TypeError, ValueError):  # e.g. an array compared with a tuple
        return False


def _same_items(got: Any, expected: Any) -> bool:
    """A list or tuple whose items are the expected tuple's (its type is then check_equal's business)."""
    return (
        isinstance(expected, tuple)
        and isinstance(got, (list, tuple))
        and len(got) == len(expected)
        and all(_same_answer(g, e) for g, e in zip(got, expected, strict=True))
    )


def check_function(
    fn: Callable[..., Any],
    cases: Sequence[tuple[tuple, Any]],
    *,
    name: str,
    hint: str = "",
    mistakes: Sequence[tuple[Callable[..., Any], str]] = (),
    exact_types: bool = False,
) -> None:
    """Raise unless fn(*args) == expected (floats to 1e-9 relative) for each (args, expected) (labs 0-1).

    `mistakes` are (formula, hint) pairs of usual wrong answers: when fn's answers are a formula's values
    (on every case, else on the first wrong one), the message gives that formula's hint instead of
    `hint`. `exact_types` is check_equal's: an int must be an int (`answer_types.is_int`), a tuple a tuple
    of them.
    """
    answers = [(args, expected, call_student(fn, name, *args)) for args, expected in cases]
    everywhere = [h for f, h in mistakes if all(_same_answer(got, f(*args)) for args, _, got in answers)]
    for args, expected, got in answers:
        call = f"{name}({', '.join(map(repr, args))})"
        if got is not None and (_same_answer(got, expected) or exact_types and _same_items(got, expected)):
            if exact_types:
                check_equal(got, expected, name=call, hint=hint, exact_types=True)
            continue
        here = [h for f, h in mistakes if _same_answer(got, f(*args))]
        why = (everywhere or here or [hint])[0]
        if isinstance(expected, float) and got is not None:
            raise AssertionError(
                f"`{call}` is {got!r}, expected {expected!r}." + (f" Hint: {why}" if why else "")
            )
        check_equal(got, expected, name=call, hint=why)


def trace_kernel(kernel: Any, griddim: Any, blockdim: Any, *args: Any, sanitize: bool = True):
    """`cudalearn.trace.trace`, with student-facing messages when the kernel cannot be traced (labs 3-6).

    sanitize: also raise on the tracer's synccheck and initcheck findings (a barrier some threads
    return before or skip; a shared read of an element the block never wrote), naming the barrier,
    the return, the array element and the lines, with the fix. Races are left to the caller's check.
    """
    from cudalearn.trace import TraceError, TraceOutOfBounds, trace

    try:
        report = trace(kernel, griddim, blockdim, *args)
    except TraceOutOfBounds as e:
        raise AssertionError(f"the tracer found an access outside an array: {e}") from None
    except TraceError as e:
        raise AssertionError(f"the tracer could not run your kernel: {e}") from None
    problem = report.sanitizer_message() if sanitize else ""
    if problem:
        raise AssertionError(problem)
    return report
