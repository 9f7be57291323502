"""`cudalearn grade`: grade a lab's submissions, write the grade table and feedback per student (instructors).

For each submission the grader (this process, which never runs student
code) finds the student's answer cells (`match`), then starts a judge
process with the job; the judge starts the confined student process. The
grader keeps a wall-clock backstop on the judge, so one submission can
never stop the others from being graded.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from cudalearn.grading import lab as lab_mod
from cudalearn.grading import match, python_command

STATUSES = ("passed", "failed", "error", "timeout", "crashed", "memory")


@dataclass
class TestResult:
    """One test's outcome for one student: points, status and the check's own message."""

    test_id: str
    exercise: int
    points: float
    max_points: float
    status: str
    message: str = ""
    output: str = ""


@dataclass
class Result:
    """One submission's grade: the tests, notes on how it was read, and how it was isolated."""

    student: str
    lab: str
    path: Path
    tests: list[TestResult]
    notes: list[str] = field(default_factory=list)
    isolation: dict = field(default_factory=dict)
    grader_error: str = ""

    @property
    def total(self) -> float:
        return sum(t.points for t in self.tests)

    @property
    def max_total(self) -> float:
        return sum(t.max_points for t in self.tests)


@dataclass(frozen=True)
class Limits:
    """Per-notebook limits: wall-clock seconds for the notebook and for one cell, memory, file size."""

    timeout: float = 600.0
    cell_timeout: float = 120.0
    memory_mb: int = 2048
    file_mb: int = 64
    landlock: bool = True
    user: str | None = None


def check_user(user: str) -> None:
    """Raise ValueError unless student code can run as `user`: it exists and can reach this Python."""
    import pwd
    import stat

    try:
        pw = pwd.getpwnam(user)
    except KeyError:
        raise ValueError(f"no user {user!r} on this machine") from None
    if os.geteuid() != 0:
        raise ValueError("--user needs the grader to run as root")
    for target in {
        os.path.realpath(sys.executable),
        os.path.realpath(sys.prefix),
        os.path.realpath(sys.base_prefix),
    }:
        path = Path(target)
        for folder in [*reversed(path.parents), path]:
            st = folder.stat()
            mine = st.st_uid == pw.pw_uid and st.st_mode & stat.S_IXUSR
            others = st.st_mode & stat.S_IXOTH
            group = st.st_gid == pw.pw_gid and st.st_mode & stat.S_IXGRP
            if not (mine or others or group):
                raise ValueError(
                    f"user {user!r} cannot use this Python: {folder} is closed to it (mode "
                    f"{stat.filemode(st.st_mode)}); install the course in a virtual environment it can read"
                )


def resolve_lab(lab: str | Path, root: str | Path = ".") -> Path:
    """The solution notebook for LAB: a path, a name in solutions/, or the start of one ('02')."""
    path = Path(lab)
    if path.suffix == ".ipynb" and path.exists():
        return path
    sols = sorted(Path(root, "solutions").glob(f"{path.stem}*.ipynb"))
    if len(sols) == 1:
        return sols[0]
    known = ", ".join(p.stem for p in sorted(Path(root, "solutions").glob("*.ipynb"))) or "none"
    raise lab_mod.LabError(f"no single solution notebook matches {str(lab)!r} (solutions: {known})")


def find_submissions(paths: list[str | Path]) -> list[tuple[str, Path]]:
    """(student, notebook) pairs: a file is a student; in a folder, one student per subfolder or file."""
    found: list[tuple[str, Path]] = []
    for p in map(Path, paths):
        if p.is_dir():
            for f in sorted(p.rglob("*.ipynb")):
                rel = f.relative_to(p)
                if any(part.startswith(".") for part in rel.parts):
                    continue  # .ipynb_checkpoints and hidden folders
                found.append((rel.parts[0] if len(rel.parts) > 1 else f.stem, f))
        elif p.exists():
            found.append((p.stem, p))
        else:
            raise FileNotFoundError(f"no such submission: {p}")
    return found


def _all_tests(lab: lab_mod.Lab, status: str, message: str) -> list[TestResult]:
    return [TestResult(t.test_id, t.exercise, 0.0, t.points, status, message) for t in lab.tests]


def job_for(lab: lab_mod.Lab, answers: list[match.Answer], limits: Limits) -> dict:
    """The judge's job: the lab's cells (no solution code), the student's answers and the limits."""
    cells = []
    for c in lab.cells:
        if c.role == "markdown":
            continue
        entry = {"role": c.role, "index": c.index, "exercise": c.exercise}
        if c.role == "context":
            entry.update(source=c.source, student=c.student_source)
        elif c.role == "test":
            entry.update(source=c.source, test_id=c.test_id, points=c.points)
        cells.append(entry)
    return {
        "cells": cells,
        "answers": {str(a.exercise): a.code for a in answers},
        "names": {str(e.number): list(e.names) for e in lab.exercises},
        "timeout": limits.timeout,
        "cell_timeout": limits.cell_timeout,
        "user": limits.user,
        "limits": {
            "memory_bytes": limits.memory_mb << 20,
            "file_bytes": limits.file_mb << 20,
            "cpu_seconds": int(2 * limits.timeout + 10),
            "landlock": limits.landlock,
        },
    }


def _run_judge(job: dict, limits: Limits) -> dict:
    """Run one judge process; a backstop kills it (and so its sandbox) if it overruns."""
    proc = subprocess.Popen(
        python_command("cudalearn.grading.judge"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    try:
        out, err = proc.communicate(json.dumps(job).encode(), timeout=limits.timeout + 120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"fatal": f"the judge overran the time limit ({limits.timeout:g} s) by more than 120 s"}
    try:
        return json.loads(out)
    except ValueError:
        tail = err.decode(errors="replace")[-2000:]
        return {
            "fatal": f"the judge process ended with code {proc.returncode} without a result",
            "traceback": tail,
        }


def grade_one(lab: lab_mod.Lab, student: str, path: Path, limits: Limits) -> Result:
    """Grade one submitted notebook of `lab` (the student's code runs in other processes only)."""
    try:
        nb = match.read(path)
    except (match.SubmissionError, OSError) as e:
        return Result(student, lab.name, path, _all_tests(lab, "error", f"could not read your notebook: {e}"))
    answers = match.find_answers(lab, nb)
    notes = [a.note for a in answers if a.note]
    raw = _run_judge(job_for(lab, answers, limits), limits)
    if "fatal" in raw:
        msg = f"the grader failed on this notebook ({raw['fatal']}); ask your instructor to look at it"
        res = Result(student, lab.name, path, _all_tests(lab, "error", msg), notes, grader_error=raw["fatal"])
        print(f"cudalearn grade: {path}: {raw['fatal']}\n{raw.get('traceback', '')}", file=sys.stderr)
        return res
    tests = [
        TestResult(
            t["id"],
            t["exercise"],
            float(t["points"]),
            float(t["max"]),
            t["status"],
            t["message"],
            t.get("output", ""),
        )
        for t in raw["tests"]
    ]
    return Result(student, lab.name, path, tests, notes + raw["notes"], raw.get("isolation", {}))


def grade(
    lab: str | Path,
    submissions: list[str | Path],
    *,
    out: str | Path | None = "grades",
    limits: Limits = Limits(),
    jobs: int = 1,
    root: str | Path = ".",
) -> list[Result]:
    """Grade every submission of LAB; write OUT/LAB.csv and OUT/feedback/LAB/STUDENT.md unless out is None."""
    plan = lab_mod.load(resolve_lab(lab, root))
    if limits.user:
        check_user(limits.user)
    subs = _one_per_student(plan, _unique(find_submissions(submissions)))
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = list(pool.map(lambda s: _graded(plan, *s, limits), subs))
    if out is not None:
        write(plan, results, Path(out))
    return results


def _graded(plan: lab_mod.Lab, student: str, path: Path, others: list[Path], limits: Limits) -> Result:
    result = grade_one(plan, student, path, limits)
    if others:
        names = ", ".join(p.name for p in others)
        result.notes.insert(
            0, f"your folder also holds {names}; {path.name} was graded (it has the most answers)."
        )
    return result


def _answered(plan: lab_mod.Lab, path: Path) -> int:
    """How many exercises a notebook answers (found and edited): picks a student's notebook."""
    try:
        answers = match.find_answers(plan, match.read(path))
    except (match.SubmissionError, OSError):
        return -1
    stubs = {e.number: match._norm(e.cell.student_source) for e in plan.exercises}
    return sum(1 for a in answers if a.code is not None and match._norm(a.code) != stubs[a.exercise])


def _one_per_student(plan: lab_mod.Lab, subs: list[tuple[str, Path]]) -> list[tuple[str, Path, list[Path]]]:
    """One notebook per student: the one that answers the most exercises, then the newest."""
    groups: dict[str, list[Path]] = {}
    for student, path in subs:
        groups.setdefault(student, []).append(path)
    picked = []
    for student, paths in groups.items():
        ranked = sorted(paths, key=lambda p: (_answered(plan, p), p.stat().st_mtime), reverse=True)
        picked.append((student, ranked[0], ranked[1:]))
    return picked


def _unique(subs: list[tuple[str, Path]]) -> list[tuple[str, Path]]:
    """Tell apart loose files with the same name in different folders by their folder's name."""
    folders: dict[str, set[Path]] = {}
    for s, p in subs:
        folders.setdefault(s, set()).add(p.parent)
    return [(f"{p.parent.name}-{s}" if len(folders[s]) > 1 and p.stem == s else s, p) for s, p in subs]


def _cell(text: str) -> str:
    """A CSV cell that a spreadsheet will not read as a formula."""
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def safe_name(name: str) -> str:
    """A file name for a student."""
    return re.sub(r"[^\w.-]+", "_", name).strip("._") or "student"


def write(lab: lab_mod.Lab, results: list[Result], out: Path) -> None:
    """Write the grade table OUT/LAB.csv and one feedback file per student."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / f"{lab.name}.csv", "w", newline="") as f:
        w = csv.writer(f)
        head = ["student", "lab"]
        for t in lab.tests:
            head += [f"{t.test_id} points", f"{t.test_id} status"]
        w.writerow(head + ["total", "max", "notebook"])
        for r in results:
            row = [_cell(r.student), r.lab]
            for t in r.tests:
                row += [f"{t.points:g}", t.status]
            w.writerow(row + [f"{r.total:g}", f"{r.max_total:g}", _cell(str(r.path))])
    fb = out / "feedback" / lab.name
    fb.mkdir(parents=True, exist_ok=True)
    for r in results:
        (fb / f"{safe_name(r.student)}.md").write_text(feedback(r))


def feedback(r: Result) -> str:
    """The feedback a student reads: each test, passed or why not, in the checks' own words."""
    lines = [f"# {r.lab}: feedback for {r.student}", "", f"Total: {r.total:g} of {r.max_total:g} points.", ""]
    for t in r.tests:
        pts = f"{t.points:g}/{t.max_points:g} point{'s' if t.max_points != 1 else ''}"
        lines.append(f"## {t.test_id} (exercise {t.exercise}): {t.status}, {pts}")
        if t.message:
            lines += ["", t.message]
        if t.output:
            lines += [
                "",
                "The last lines your code printed before its process died:",
                "",
                "```",
                t.output,
                "```",
            ]
        lines.append("")
    if r.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in r.notes] + [""]
    return "\n".join(lines)


def command(args: argparse.Namespace) -> int:
    """Run `cudalearn grade` from parsed arguments; print a summary; 0 when every notebook was graded."""
    from cudalearn.grading import process

    process.make_private()  # this process holds the hidden tests: no same-user ptrace
    try:
        path = resolve_lab(args.lab, args.root)
        lab_mod.load(path)
    except (lab_mod.LabError, OSError) as e:
        print(f"cudalearn grade: {e}", file=sys.stderr)
        return 2
    if args.nbgrader_source:
        import nbformat

        dest = Path(args.nbgrader_source, "source", path.stem, path.name)
        dest.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(lab_mod.nbgrader_source(path), dest)
        print(f"wrote {dest}")
        return 0
    if not args.submissions:
        print("cudalearn grade: give at least one submission (a notebook or a folder)", file=sys.stderr)
        return 2
    if args.user:
        try:
            check_user(args.user)
        except ValueError as e:
            print(f"cudalearn grade: {e}", file=sys.stderr)
            return 2
    limits = Limits(
        args.timeout, args.cell_timeout, args.memory, landlock=not args.no_landlock, user=args.user
    )
    try:
        results = grade(path, args.submissions, out=args.out, limits=limits, jobs=args.jobs, root=args.root)
    except FileNotFoundError as e:
        print(f"cudalearn grade: {e}", file=sys.stderr)
        return 2
    width = max([len(r.student) for r in results] + [7])
    for r in results:
        statuses = " ".join(f"{t.test_id}={t.status}" for t in r.tests)
        print(f"{r.student:<{width}}  {r.total:g}/{r.max_total:g}  {statuses}")
    ran = [r for r in results if r.isolation]
    if ran and not any(r.isolation.get("landlock") for r in ran) and not args.user:
        print(
            "warning: Landlock is not available here, so student code could read any file this user can "
            "(the solutions too). Grade as root with --user NAME, or in a container.",
            file=sys.stderr,
        )
    print(f"wrote {Path(args.out, path.stem + '.csv')} and {Path(args.out, 'feedback', path.stem)}/")
    return 1 if any(r.grader_error for r in results) else 0
