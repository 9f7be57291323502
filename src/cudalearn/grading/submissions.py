"""Submitted notebooks: found, each read once, one picked per student, identical ones marked (instructors).

Inside a submissions folder nothing is followed and nothing is trusted: a
symbolic link, a named pipe, a device or a file over the size limit gets a
row saying why, and the other students are graded all the same.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from cudalearn.grading import lab as lab_mod
from cudalearn.grading import match
from cudalearn.grading.results import Result

SOLUTION_MARK = "(the solution notebook)"  # in the `identical to` column


def find_submissions(paths: list[str | Path]) -> list[tuple[str, Path]]:
    """(student, notebook) pairs: a file is a student; in a folder, one student per subfolder or file.

    Inside a folder nothing is followed: a symbolic link (to the solution, to another student's work),
    a named pipe or a device named like a notebook is listed all the same, and `read_submission` refuses
    it, so its student gets a row that says why.
    """
    found: list[tuple[str, Path]] = []
    for p in map(Path, paths):
        if p.is_dir():
            for top, dirs, files in os.walk(p, followlinks=False):
                rel_top = Path(top).relative_to(p)
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))  # .ipynb_checkpoints, hidden
                for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
                    f = Path(top, name)
                    if name.startswith(".") or not (name.endswith(".ipynb") or f.is_symlink()):
                        continue
                    rel = rel_top / name
                    found.append((rel.parts[0] if len(rel.parts) > 1 else f.stem, f))
                dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(top, d))]
        elif p.exists() or p.is_symlink():
            found.append((p.stem, p))
        else:
            raise FileNotFoundError(f"no such submission: {p}")
    return found


class _Submitted:
    """A submission's bytes, read once, as `match.read` reads a path (stat().st_size and read_bytes())."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stat(self) -> os.stat_result:
        return os.stat_result((0, 0, 0, 1, 0, 0, len(self.data), 0, 0, 0))

    def read_bytes(self) -> bytes:
        return self.data


def read_submission(path: Path) -> bytes:
    """A submission's bytes: a regular file (no link followed), read once, at most match's size limit.

    Raises match.UnreadableSubmission saying why not (a link, a pipe, a device, too large).
    """
    limit = match.MAX_NOTEBOOK_BYTES
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if os.path.islink(path):
            raise match.UnreadableSubmission(
                "it is a symbolic link, not a file: only the notebook itself can be graded"
            ) from None
        raise match.UnreadableSubmission(f"it cannot be opened ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a named pipe" if stat.S_ISFIFO(st.st_mode) else "a device or socket"
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else kind
            raise match.UnreadableSubmission(f"it is {kind}, not a notebook file")
        if st.st_size > limit:
            raise match.UnreadableSubmission(
                f"the file is {st.st_size >> 20} MiB, over the {limit >> 20} MiB limit"
            )
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise match.UnreadableSubmission(f"the file is over the {limit >> 20} MiB limit")
        return b"".join(chunks)
    finally:
        os.close(fd)


@dataclass
class Submission:
    """One submitted notebook as read once: its bytes' digest, the parsed notebook or why it is unreadable."""

    student: str
    path: Path
    notebook: object = None
    error: str = ""
    digest: str = ""
    mtime: float = 0.0
    is_solution: bool = False
    answers: list | None = None  # match.find_answers's, found once per submission (`answers_of`)


def load_submission(student: str, path: Path, solution: bytes) -> Submission:
    """Read and parse one submission once; never raises (an unreadable one carries its reason)."""
    sub = Submission(student, path)
    try:
        data = read_submission(path)
        sub.mtime = os.lstat(path).st_mtime
        sub.is_solution = data == solution  # graded (an instructor's own check), and flagged
        sub.notebook = match.read(_Submitted(data))
        sub.digest = hashlib.sha256(data).hexdigest()
    except (match.UnreadableSubmission, OSError) as e:
        sub.error = str(e)
    except Exception as e:  # a notebook that breaks the parser: this student's row, not the class's
        sub.error = f"it could not be read ({type(e).__name__}: {e})"
    return sub


def distinct_students(subs: list[tuple[str, Path]]) -> list[tuple[str, Path]]:
    """Tell apart loose files with the same name in different folders by their folder's name."""
    folders: dict[str, set[Path]] = {}
    for s, p in subs:
        folders.setdefault(s, set()).add(p.parent)
    return [(f"{p.parent.name}-{s}" if len(folders[s]) > 1 and p.stem == s else s, p) for s, p in subs]


def _edited(plan: lab_mod.Lab, answers: list[match.Answer]) -> list[match.Answer]:
    """The answers found and changed from the lab's stub: what counts as a student's work."""
    stubs = {e.number: match._norm(e.cell.student_source) for e in plan.exercises}
    return [a for a in answers if a.code is not None and match._norm(a.code) != stubs[a.exercise]]


def answers_of(plan: lab_mod.Lab, sub: Submission) -> list[match.Answer]:
    """The submission's answers, found once (`match` is bounded by the notebook's size, not by a limit)."""
    if sub.answers is None:
        sub.answers = match.find_answers(plan, sub.notebook)
    return sub.answers


def _answered(plan: lab_mod.Lab, sub: Submission) -> int:
    """How many exercises a notebook answers (found and edited): picks a student's notebook."""
    if sub.error:
        return -1
    return len(_edited(plan, answers_of(plan, sub)))


def one_per_student(plan: lab_mod.Lab, subs: list[Submission]) -> list[tuple[Submission, list[Path]]]:
    """One notebook per student: the one that answers the most exercises, then the newest."""
    groups: dict[str, list[Submission]] = {}
    for sub in subs:
        groups.setdefault(sub.student, []).append(sub)
    picked = []
    for group in groups.values():
        ranked = sorted(group, key=lambda s: (_answered(plan, s), s.mtime), reverse=True)
        picked.append((ranked[0], [s.path for s in ranked[1:]]))
    return picked


def identical(plan: lab_mod.Lab, subs: list[Submission]) -> dict[str, list[str]]:
    """For each student, the students whose graded answers are the same code (or whose files are the same
    bytes), and SOLUTION_MARK first for a copy of the solution notebook: known before any grading."""
    keys: dict[str, list[str]] = {}
    for sub in subs:
        if sub.error:
            continue
        answers = answers_of(plan, sub)
        code = [match._norm(a.code or "") for a in answers]
        if _edited(plan, answers):
            digest = hashlib.sha256("\0".join(code).encode("utf-8", "surrogatepass")).hexdigest()
            keys.setdefault("answers:" + digest, []).append(sub.student)
        keys.setdefault("file:" + sub.digest, []).append(sub.student)
    same: dict[str, set[str]] = {sub.student: set() for sub in subs}
    for group in keys.values():
        for name in group if len(group) > 1 else ():
            same[name] |= set(group) - {name}
    marks = {s.student: [SOLUTION_MARK] if s.is_solution and not s.error else [] for s in subs}
    return {name: marks[name] + sorted(others) for name, others in same.items()}


def mark_identical(result: Result, same_as: list[str]) -> None:
    """Put `identical`'s list on a student's row, and say it in their notes."""
    result.same_as = list(same_as)
    if SOLUTION_MARK in same_as:
        result.notes.append("this file is the course's solution notebook itself, hidden tests included.")
    others = [name for name in same_as if name != SOLUTION_MARK]
    if others:
        result.notes.append(
            f"your answers are identical to those of {len(others)} other submission(s); your "
            f"instructor sees which."
        )
