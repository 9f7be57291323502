"""How lab 11's checks quote an exception the student's code raised (ring all-reduce, tensor-parallel MLP)."""

from __future__ import annotations


def error_text(e: BaseException) -> str:
    """'ValueError: ...': an exception of the student's code as a message quotes it."""
    return f"{type(e).__name__}: {e}"
