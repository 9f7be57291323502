"""A student's PyTorch answer as plain data, compared with the reference (labs 8-9).

Under `cudalearn grade` the student's class and functions live in another
process, so each check of labs 8 and 9 is split in two: an experiment (a
module-level `*_experiment` function run there through `checks.student_side`)
builds the inputs from a seed, runs the student's code and returns plain
data (tensors, numbers, type names); the check then computes the reference
itself, from that data and the same seeds, and decides. In a notebook both
halves run in the student's process, one after the other.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cudalearn import checks
from cudalearn.runtime import device


def _close(a: Any, b: Any, *, rtol: float, atol: float) -> bool:
    return bool(np.allclose(checks._to_numpy(a), checks._to_numpy(b), rtol=rtol, atol=atol))


def _compare(actual: Any, expected: Any, *, name: str, rtol: float, atol: float, hint: str) -> None:
    """checks.check_close on numpy copies, with `hint` (the most likely cause) put first in the message."""
    try:
        checks.check_close(
            checks._to_numpy(actual), checks._to_numpy(expected), name=name, rtol=rtol, atol=atol
        )
    except AssertionError as e:
        details = str(e).split(" Hint: ")[0]  # check_close's generic hint would point elsewhere
        raise AssertionError(f"`{name}` is wrong. Most likely: {hint} Details: {details}") from None


def _one_thread(experiment: Callable[..., Any]) -> Callable[..., Any]:
    """An experiment run with PyTorch on one CPU thread, in whichever process it runs (labs 8-9)."""

    @functools.wraps(experiment)
    def run(*args: Any, **kwargs: Any) -> Any:
        with device.one_torch_thread():
            return experiment(*args, **kwargs)

    return run


def _plain(value: Any) -> Any:
    """A student's return value as data: a detached tensor copy, a number, None, or {'type': its name}."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if value is None or isinstance(value, (bool, int, float, np.floating, np.integer)):
        return value
    return {"type": type(value).__name__}


def _tensor_or_raise(value: Any, name: str, shape: Sequence[int]) -> Any:
    """value (a tensor of `shape` from an experiment), or an AssertionError saying what it is instead."""
    import torch

    if value is None:
        raise AssertionError(f"`{name}` is None: {checks.NOT_DONE} (Did your function `return` its result?)")
    if not isinstance(value, torch.Tensor):
        what = value.get("type") if isinstance(value, dict) else type(value).__name__
        raise AssertionError(f"`{name}` should be a torch.Tensor of shape {tuple(shape)}, got a {what}.")
    if tuple(value.shape) != tuple(shape):
        raise AssertionError(f"`{name}` has shape {tuple(value.shape)}, expected {tuple(shape)}.")
    return value
