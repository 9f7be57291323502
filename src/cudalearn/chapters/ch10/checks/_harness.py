"""What every check of lab 10 shares: the traced launch, the checked run, the sizes, the wrong-result message.

`_traced` runs the tracer (the course's sanitizer) on one small launch and raises its findings as a
student reads them; `_run` is `checks.run_kernel` with a tracer's finding as a message (the shuffle
kernels run on the tracer under the simulator).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from cudalearn import checks
from cudalearn.runtime import device

WARP = 32


def _tracer_problem(e: Exception) -> str:
    """A tracer exception as the sentence a student reads."""
    name = type(e).__name__
    if name == "TraceOutOfBounds":
        return f"your kernel indexed outside an array (found by the tracer): {e}"
    if name == "WarpError":
        return (
            f"the tracer found a warp-level error, undefined behaviour on a GPU (it may hang or return "
            f"garbage): {e}"
        )
    return f"the tracer could not run your kernel: {e}"


def _traced(
    kernel: Any, griddim: Any, blockdim: Any, *args: Any, what: str, hint: str, **sanitizer_hints: str
) -> Any:
    """The tracer's report of one launch on copies of args; any finding raised as an AssertionError.

    hint: the fix of a race; sanitizer_hints (init_hint, return_hint): report.sanitizer_message's.
    """
    from cudalearn.trace import TraceError, trace

    copies = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    try:
        report = trace(kernel, griddim, blockdim, *copies)
    except (TraceError, IndexError) as e:
        raise AssertionError(f"{what}: {_tracer_problem(e)}") from None
    problem = report.sanitizer_message(**sanitizer_hints)
    if problem:
        raise AssertionError(f"{what}: {problem}")
    if report.race_count:
        raise AssertionError(f"{what}: {report.race_message(hint)}")
    return report


def _run(kernel: Any, griddim: Any, blockdim: Any, *args: Any) -> list[Any]:
    """checks.run_kernel, with a tracer's finding (a shuffle run on the tracer in sim mode) as a message."""
    from cudalearn.trace import TraceError

    try:
        return checks.run_kernel(kernel, griddim, blockdim, *args)
    except TraceError as e:
        raise AssertionError(_tracer_problem(e)) from None


def _sizes(default_sim: list, default_gpu: list, cases: Sequence | None) -> list:
    """The cases given, else the mode's default."""
    if cases:
        return list(cases)
    return default_gpu if device.mode() == "gpu" else default_sim


def _wrong(got: np.ndarray, expected: np.ndarray, *, name: str, rtol: float, atol: float, hint: str) -> None:
    """Raise check_close's message (which element, expected vs got, the largest error) with our hint."""
    try:
        checks.check_close(got, expected.astype(np.float32), name=name, rtol=rtol, atol=atol)
    except AssertionError as e:
        raise AssertionError(str(e).split(" Hint: ")[0] + f" Hint: {hint}") from None
    raise AssertionError(
        f"`{name}` is wrong (within float32's rounding of the expected values). Hint: {hint}"
    )


def _smallest(cases: Sequence[tuple]) -> tuple:
    """The case with the fewest elements: the one traced (the tracer runs every thread in Python)."""
    return min(cases, key=lambda c: math.prod(c[:2]) if isinstance(c, tuple) else c)
