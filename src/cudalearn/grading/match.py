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

It runs in the grader, outside every limit of the student's processes, once
per submission, so its cost is bounded by the submission's size: a cell over
MAX_CELL_CHARS is not searched (found by its cell id only), the search reads
at most MAX_SEARCH_CHARS of a notebook's code, and the resemblance of a cell
is computed in full only for the CLOSEST cells by difflib's cheap upper
bounds (`real_quick_ratio`, `quick_ratio`); the feedback says which cells
were not searched.
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
MAX_CELL_CHARS = 100_000  # a longer cell is graded only when its cell id is the exercise's
MAX_SEARCH_CHARS = 2_000_000  # code read when searching by names and resemblance (each cell counts 100 more)
CLOSEST = 32  # cells compared in full with an exercise's stub: those closest to it by difflib's quick_ratio


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


def _searched(code: list[tuple[int, nbformat.NotebookNode]]) -> tuple[list[int], str]:
    """The code cells searched by names and resemblance, and a note on those that are not (or '')."""
    searched, large, left, budget = [], [], [], MAX_SEARCH_CHARS
    for j, c in code:
        if len(c.source) > MAX_CELL_CHARS:
            large.append(j)
        elif budget >= len(c.source) + 100:
            budget -= len(c.source) + 100
            searched.append(j)
        else:
            left.append(j)
    parts = []
    if large:
        longest = max(len(c.source) for j, c in code if j in large)
        parts.append(f"{_cells(large)} longer than {MAX_CELL_CHARS:,} characters (up to {longest:,})")
    if left:
        parts.append(f"{_cells(left)} past the first {MAX_SEARCH_CHARS:,} characters of your notebook's code")
    if not parts:
        return searched, ""
    verb = "was" if len(large) + len(left) == 1 else "were"
    return searched, " and ".join(parts) + f" {verb} not searched for answers (only a cell's id finds them)"


def _cells(indices: list[int]) -> str:
    shown = ", ".join(f"#{j + 1}" for j in indices[:5]) + (", ..." if len(indices) > 5 else "")
    return f"cell {shown}" if len(indices) == 1 else f"{len(indices)} cells ({shown})"


def _most_like(stub: str, cells: list[tuple[int, str]]) -> tuple[float, int | None]:
    """(similarity, index) of the cell most like the stub, if any reaches SIMILAR; else (0.0, None).

    difflib's `ratio` costs up to the product of the lengths, so it is computed only for the CLOSEST
    cells by `quick_ratio`, an upper bound of it, and only where that bound (and the cheaper one of the
    lengths alone) reaches SIMILAR: the cost per cell is linear, whatever a notebook holds.
    """
    bounds = []
    quick = difflib.SequenceMatcher(None)
    quick.set_seq2(stub)  # the stub's character counts, once (quick_ratio is symmetric)
    for j, text in cells:
        if 2 * min(len(stub), len(text)) < SIMILAR * (len(stub) + len(text)):  # real_quick_ratio
            continue
        quick.set_seq1(text)
        if (bound := quick.quick_ratio()) >= SIMILAR:
            bounds.append((bound, j, text))
    bounds.sort(key=lambda b: (-b[0], b[1]))
    scored = [(difflib.SequenceMatcher(None, stub, text).ratio(), j) for _, j, text in bounds[:CLOSEST]]
    best = max(scored, default=(0.0, None))
    return best if best[0] >= SIMILAR else (0.0, None)


def find_answers(lab: Lab, nb: nbformat.NotebookNode) -> list[Answer]:
    """One Answer per exercise of `lab`, found in the submitted notebook `nb` (time bounded by its size)."""
    code = [(j, c) for j, c in enumerate(nb.cells) if c.cell_type == "code"]
    searched, skipped = _searched(code)
    instructor = {_norm(c.student_source) for c in lab.cells if c.role in ("context", "test")}
    norm = {j: _norm(nb.cells[j].source) for j in searched}
    names = {j: defined_names(nb.cells[j].source) for j in searched}
    answers = []
    claimed: set[int] = set()
    for ex in lab.exercises:
        stub = _norm(ex.cell.student_source)
        by_id = [j for j, c in code if ex.cell.cell_id and c.get("id") == ex.cell.cell_id]
        by_names = [j for j in searched if set(ex.names) <= names[j] and norm[j] not in instructor]
        found = sorted(set(by_id) | set(by_names))
        how = "by its cell id" if by_id else "by the names it defines"
        if not found:
            free = [(j, norm[j]) for j in searched if j not in claimed and norm[j] not in instructor]
            _, best = _most_like(stub, free)
            if best is not None:
                found, how = [best], "by its resemblance to the exercise's cell"
        wanted = ", ".join(f"`{n}`" for n in ex.names)
        if not found:
            note = f"exercise {ex.number}: no cell of your notebook defines {wanted}"
            answers.append(Answer(ex.number, None, None, note + (f"; {skipped}." if skipped else ".")))
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
        if skipped and not by_id:
            note = (note + " " if note else f"exercise {ex.number}: ") + f"{skipped}."
        answers.append(Answer(ex.number, nb.cells[pick].source, pick, note))
    return answers
