"""Find a student's answer to each exercise in their notebook, whatever they did to it (instructors).

Only the student's answer cells are taken from a submission; everything
else (setup, context, checks, hidden tests) comes from the solution
notebook. An exercise's answer is found by, in order:

1. the cell id the lab was generated with (nbformat ids survive most editors);
2. any code cell whose top-level code defines every name the exercise asks
   for (so cells moved, copied into a new notebook, or stripped of their
   ids by an editor are still found);
3. failing both, the code cell most like the lab's stub for that exercise.

When several cells match (a duplicated cell), the last one that differs
from the untouched stub is graded, as "Run All" would leave it, and the
feedback says so. This file parses the submission as text and JSON only:
no student code runs here.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from cudalearn.grading.lab import Lab, bound_names

MAX_NOTEBOOK_BYTES = 64 << 20
SIMILAR = 0.6


@dataclass(frozen=True)
class Answer:
    """The code graded for one exercise (None: no answer found) and how it was found."""

    exercise: int
    code: str | None
    cell_index: int | None
    note: str = ""


class UnreadableSubmission(ValueError):
    """A submission cannot be read as a notebook (its grade is 0; the message says why)."""


def read(path: Path) -> nbformat.NotebookNode:
    """Read a submitted notebook, tolerating an invalid schema; UnreadableSubmission if it is not one."""
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_BYTES:
        raise UnreadableSubmission(
            f"the file is {size >> 20} MiB, over the {MAX_NOTEBOOK_BYTES >> 20} MiB limit"
        )
    try:
        data = json.loads(path.read_bytes())
    except (ValueError, RecursionError) as e:
        raise UnreadableSubmission(f"the file is not a notebook (not valid JSON: {e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise UnreadableSubmission("the file is not a notebook (no list of cells)")
    cells = []
    for raw in data["cells"]:
        if not isinstance(raw, dict):
            continue
        src = raw.get("source", "")
        if isinstance(src, list):
            src = "".join(s for s in src if isinstance(s, str))
        if not isinstance(src, str):
            continue
        cid = raw.get("id")
        cells.append(
            nbformat.NotebookNode(
                cell_type=str(raw.get("cell_type", "")), source=src, id=cid if isinstance(cid, str) else None
            )
        )
    return nbformat.NotebookNode(cells=cells)


def defined_names(source: str) -> set[str]:
    """Names a student's cell binds at top level (a regex fallback when it does not parse)."""
    try:
        return set(bound_names(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pattern = r"^(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)|^(\w+)[ \t]*(?::[^=\n]*)?=(?!=)"
        return {a or b for a, b in re.findall(pattern, source, re.M)}


def _norm(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().splitlines() if line.strip())


def find_answers(lab: Lab, nb: nbformat.NotebookNode) -> list[Answer]:
    """One Answer per exercise of `lab`, found in the submitted notebook `nb`."""
    code = [(j, c) for j, c in enumerate(nb.cells) if c.cell_type == "code"]
    instructor = {_norm(c.student_source) for c in lab.cells if c.role in ("context", "test")}
    names = {j: defined_names(c.source) for j, c in code}
    answers = []
    claimed: set[int] = set()
    for ex in lab.exercises:
        stub = _norm(ex.cell.student_source)
        by_id = [j for j, c in code if ex.cell.cell_id and c.get("id") == ex.cell.cell_id]
        by_names = [j for j, c in code if set(ex.names) <= names[j] and _norm(c.source) not in instructor]
        found = sorted(set(by_id) | set(by_names))
        how = "by its cell id" if by_id else "by the names it defines"
        if not found:
            scored = [
                (difflib.SequenceMatcher(None, stub, _norm(c.source)).ratio(), j)
                for j, c in code
                if j not in claimed and _norm(c.source) not in instructor
            ]
            best = max(scored, default=(0.0, None))
            if best[1] is not None and best[0] >= SIMILAR:
                found, how = [best[1]], "by its resemblance to the exercise's cell"
        wanted = ", ".join(f"`{n}`" for n in ex.names)
        if not found:
            answers.append(
                Answer(
                    ex.number, None, None, f"exercise {ex.number}: no cell of your notebook defines {wanted}."
                )
            )
            continue
        edited = [j for j in found if _norm(nb.cells[j].source) != stub]
        pick = (edited or found)[-1]
        claimed.add(pick)
        note = ""
        if len(found) > 1:
            cells = ", ".join(f"#{j + 1}" for j in found)
            note = (
                f"exercise {ex.number}: {len(found)} cells define {wanted} (cells {cells}); "
                f"the last one you edited, cell #{pick + 1}, was graded."
            )
        elif how.startswith("by its resemblance"):
            note = (
                f"exercise {ex.number}: graded cell #{pick + 1}, found {how} (it defines none of {wanted})."
            )
        answers.append(Answer(ex.number, nb.cells[pick].source, pick, note))
    return answers
