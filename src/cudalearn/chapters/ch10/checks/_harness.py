"""What every check of lab 10 shares: the traced launch, the checked run, the sizes, the wrong-result message.

`_traced` runs the tracer (the course's sanitizer) on one small launch and raises its findings as a
student reads them; `_run` is `checks.run_kernel` with a tracer's finding as a message (the shuffle
kernels run on the tracer under the simulator).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cudalearn import checks
from cudalearn.runtime import device

WARP = 32


def _tracer_problem(e: Exception, bounds_hint: Callable[[Any], str] | None = None) -> str:
    """A tracer exception as the sentence a student reads; bounds_hint(e): the exercise's own cause of an
    out-of-bounds access ('' when it does not know it), which replaces the tracer's general guess."""
    name = type(e).__name__
    if name == "TraceOutOfBounds":
        own = bounds_hint(e) if bounds_hint is not None else ""
        if own:
            return (
                f"your kernel indexed outside an array (found by the tracer): {str(e).splitlines()[0]}. {own}"
            )
        return f"your kernel indexed outside an array (found by the tracer): {e}"
    if name == "WarpError":
        return (
            f"the tracer found a warp-level error, undefined behaviour on a GPU (it may hang or return "
            f"garbage): {e}"
        )
    return f"the tracer could not run your kernel: {e}"


def _traced(
    kernel: Any,
    griddim: Any,
    blockdim: Any,
    *args: Any,
    what: str,
    hint: str,
    bounds_hint: Callable[[Any], str] | None = None,
    **sanitizer_hints: str,
) -> Any:
    """The tracer's report of one launch on copies of args; any finding raised as an AssertionError.

    hint: the fix of a race; bounds_hint: see `_tracer_problem`; sanitizer_hints (init_hint,
    return_hint): report.sanitizer_message's.
    """
    from cudalearn.trace import TraceError, trace

    copies = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    try:
        report = trace(kernel, griddim, blockdim, *copies)
    except (TraceError, IndexError) as e:
        raise AssertionError(f"{what}: {_tracer_problem(e, bounds_hint)}") from None
    problem = report.sanitizer_message(**sanitizer_hints)
    if problem:
        raise AssertionError(f"{what}: {problem}")
    if report.race_count:
        raise AssertionError(f"{what}: {report.race_message(hint)}")
    return report


def _run(
    kernel: Any, griddim: Any, blockdim: Any, *args: Any, bounds_hint: Callable[[Any], str] | None = None
) -> list[Any]:
    """checks.run_kernel, with a tracer's finding (a shuffle run on the tracer in sim mode) as a message.

    An access outside an array that `bounds_hint` knows the cause of is replayed on the tracer (run_kernel
    left the arguments as they were; small launches only) for the exercise's own message.
    """
    from cudalearn.trace import TraceError, TraceOutOfBounds, trace
    from cudalearn.trace.model import MAX_THREADS, dim3

    try:
        return checks.run_kernel(kernel, griddim, blockdim, *args)
    except TraceError as e:
        raise AssertionError(_tracer_problem(e, bounds_hint)) from None
    except AssertionError as e:
        threads = math.prod(dim3(griddim, "griddim")) * math.prod(dim3(blockdim, "blockdim"))
        if bounds_hint is None or "indexed outside an array" not in str(e) or threads > MAX_THREADS:
            raise
        try:
            trace(kernel, griddim, blockdim, *[np.array(a, copy=True) for a in args])
        except TraceOutOfBounds as found:
            if bounds_hint(found):
                raise AssertionError(_tracer_problem(found, bounds_hint)) from None
        except Exception:  # noqa: BLE001 - the replay is best effort: run_kernel's own message stands
            pass
        raise


def _sizes(default_sim: list, default_gpu: list, cases: Sequence | None) -> list:
    """The cases given, else the mode's default."""
    if cases:
        return list(cases)
    return default_gpu if device.mode() == "gpu" else default_sim


#: the block sizes a visible check launches a warp kernel with when the caller names none: a kernel that
#: counts the warps or rows of a block for one block size (`cuda.blockIdx.x * 2 + ...`) fails the other
BLOCK_SIZES = (64, 32)


def _launches(sizes: list, threads: int | None) -> list[tuple[Any, int]]:
    """(case, threads) to run: every case with `threads`, or, when it is None, with the first of
    BLOCK_SIZES, and the largest case again with the second."""
    if threads is not None:
        return [(c, threads) for c in sizes]
    largest = max(sizes, key=lambda c: math.prod(c[:2]) if isinstance(c, tuple) else c)
    return [(c, BLOCK_SIZES[0]) for c in sizes] + [(largest, BLOCK_SIZES[1])]


def _wrong(
    got: np.ndarray,
    expected: np.ndarray,
    *,
    name: str,
    rtol: float,
    atol: float,
    hint: str,
    unwritten: np.ndarray | None = None,
) -> None:
    """Raise check_close's message (which element, expected vs got, the largest error) with our hint.

    unwritten: the elements a second run showed never written (a NaN elsewhere is the kernel's own).
    """
    try:
        checks.check_close(
            got, expected.astype(np.float32), name=name, rtol=rtol, atol=atol, unwritten=unwritten
        )
    except AssertionError as e:
        raise AssertionError(str(e).split(" Hint: ")[0] + f" Hint: {hint}") from None
    raise AssertionError(
        f"`{name}` is wrong (within float32's rounding of the expected values). Hint: {hint}"
    )


def _smallest(cases: Sequence[tuple]) -> tuple:
    """The case with the fewest elements: the one traced (the tracer runs every thread in Python)."""
    return min(cases, key=lambda c: math.prod(c[:2]) if isinstance(c, tuple) else c)


def _check_shuffles(report: Any, warps: int, per_warp: int, *, what: str, where: str, how: str) -> None:
    """Raise unless the traced kernel's lanes exchanged values by shuffles alone (labs 10's warp kernels):
    at least `per_warp` shuffles in each of `warps` warps, no shared memory, no atomic."""
    shuffles = sum(count for name, count in report.warp_ops.items() if name.startswith("shfl"))
    used = []
    if report.shared_requests:
        used.append(f"{report.shared_requests} shared-memory request(s)")
    if report.atomics:
        used.append(f"{report.atomics} atomic operation(s)")
    if shuffles < per_warp * warps:
        used.append(f"{shuffles} shuffle(s) for {warps} warp(s), where the exercise makes {per_warp} a warp")
    if used:
        raise AssertionError(
            f"your {what} right, but traced {where} your kernel made {', '.join(used)}: the exercise asks "
            f"the lanes of a warp to exchange their values through shuffles, in registers, with no shared "
            f"memory, no barrier and no atomic. Hint: {how}"
        )
