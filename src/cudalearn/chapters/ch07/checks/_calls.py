"""How lab 7's checks call a student's function: errors with a hint, the functions it called, int answers."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from cudalearn import checks
from cudalearn.checks.answer_types import INT_FIX, INT_RULE, int_problem


def call_with_hint(fn: Callable, name: str, *args: Any, hint: str = "") -> Any:
    """fn(*args), with NotImplementedError turned into the "not done yet" message, errors into hints."""
    try:
        return checks.call_student(fn, name, *args)
    except (RuntimeError, TypeError, KeyError, IndexError, ValueError) as e:
        if not hint:
            raise
        raise AssertionError(f"`{name}` raised {type(e).__name__}: {e}\nHint: {hint}") from None


@contextlib.contextmanager
def watch(*functions: Callable) -> Iterator[list[str]]:
    """Names of the given Python functions called in this thread inside the block, however they were bound."""
    codes = {f.__code__: f.__qualname__ for f in functions}
    seen: list[str] = []

    def hook(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            seen.append(codes[frame.f_code])

    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        yield seen
    finally:
        sys.setprofile(previous)


def require_int(got: Any, name: str, hint: str = INT_FIX) -> None:
    """Raise unless `got` is an int by the course's one rule (`answer_types.is_int`), naming its type."""
    why = None if got is None else int_problem(got)
    if why:
        raise AssertionError(f"`{name}` {why}: the text asks for an int ({INT_RULE}). Hint: {hint}")
