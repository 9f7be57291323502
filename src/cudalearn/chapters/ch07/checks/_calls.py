"""How lab 7's checks call a student's function: errors with a hint, the functions it called, int answers."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from cudalearn import checks


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


def _is_int(v: Any) -> bool:
    """True for a Python int (not a bool, a float such as 3.0, or a NumPy integer)."""
    return isinstance(v, int) and not isinstance(v, bool)


def require_int(got: Any, name: str, hint: str) -> None:
    """Raise unless `got` is a Python int, naming the type the student returned."""
    if got is not None and not _is_int(got):
        raise AssertionError(
            f"`{name}` returned {got!r}, a {checks.type_name(got)}: the text asks for an int. Hint: {hint}"
        )
