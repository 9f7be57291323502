"""The labs' mutation corpus: realistic wrong answers and valid alternatives, one module per lab.

`tests/chapters/chNN/corpus.py`, beside the chapter's tests, holds `MUTATIONS`, a list of
`wrong(...)` and `valid(...)` entries for lab NN. Each entry is a student's answer cell for one
exercise, written as edits of the solution's own answer (so it follows the solution when that
changes) or as the whole cell. A wrong answer must fail the exercise's visible check with an
AssertionError whose message matches `cause`, and lose that exercise's points in `cudalearn grade`
with the same cause in its feedback; a valid one must pass both. The lab's own solution is always
graded too and must get full marks. each chapter's `test_corpus_labNN.py` runs it (`suite.py`); `python
tests/mutations NN` tries one lab's entries and prints what a student would read.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    """One answer to one exercise: wrong (with the cause its message must name) or valid."""

    name: str  # unique in its lab: the submission's student name
    exercise: str  # a name the exercise cell defines, e.g. "matmul_tiled"
    why: str  # what the student did, in words
    cause: str  # regex the check's message must match (wrong answers); "" for valid ones
    edits: tuple[tuple[str, str], ...] = ()  # (old, new) replacements in the solution's answer
    code: str | None = None  # or the whole answer cell
    is_valid: bool = False
    known: str = ""  # a hole not closed yet, in words: the corpus test expects it to misbehave (strict xfail)


def wrong(
    name: str,
    exercise: str,
    why: str,
    cause: str,
    *edits: tuple[str, str],
    code: str | None = None,
    known: str = "",
):
    """A wrong answer: fails the visible check and loses its points, with a message matching `cause`."""
    if not cause:
        raise ValueError(f"{name}: a wrong answer needs the cause its message must name")
    return Mutation(name, exercise, why, cause, tuple(edits), code, known=known)


def valid(
    name: str, exercise: str, why: str, *edits: tuple[str, str], code: str | None = None, known: str = ""
):
    """A valid alternative answer: passes the visible check and gets full marks."""
    return Mutation(name, exercise, why, "", tuple(edits), code, is_valid=True, known=known)
