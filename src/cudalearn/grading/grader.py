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
import dataclasses
import hashlib
import itertools
import json
import os
import re
import signal
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from cudalearn.grading import lab as lab_mod
from cudalearn.grading import match, process, python_command

STATUSES = ("passed", "failed", "error", "timeout", "crashed", "memory")
SOLUTION_MARK = "(the solution notebook)"  # in the `identical to` column
DEFAULT_USER = "nobody"  # student code runs as this user when the grader is root and no --user is given
JUDGE_MEMORY_MB = 4096  # the judge's own memory limit, at least (it holds the lab's arrays and a reply)


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
    same_as: list[str] = field(default_factory=list)  # students whose answers are identical

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
    """Raise ValueError unless student code can run as `user`: it exists and can reach this Python.

    A Python in a folder closed to `user` (a pyenv under /root) is fine when the sandbox can make a mount
    namespace: there it lays a tmpfs over the closed folder holding only the Python's own folders.
    """
    import pwd

    from cudalearn.grading.sandbox import closed_folder, probe_namespaces

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
        folder = closed_folder(target, pw.pw_uid, pw.pw_gid)
        if folder is not None and probe_namespaces() != "root":
            mode = stat.filemode(os.stat(folder).st_mode)
            raise ValueError(
                f"user {user!r} cannot use this Python: {folder} is closed to it (mode {mode}) and this "
                f"kernel gives the grader no mount namespace to open it; install the course in a virtual "
                f"environment {user!r} can read, pass --user NAME for a user that can, or --user root to "
                f"run student code as root with its capabilities dropped (it can then read root's files)"
            )


def student_user(limits: Limits) -> Limits:
    """The limits with the user student code runs as: --user, else DEFAULT_USER when the grader is root."""
    if limits.user == "root":
        return dataclasses.replace(limits, user=None)  # explicitly asked for: root, capabilities dropped
    if limits.user or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return limits
    return dataclasses.replace(limits, user=DEFAULT_USER)


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

    Raises match.SubmissionError saying why not (a link, a pipe, a device, too large).
    """
    limit = match.MAX_NOTEBOOK_BYTES
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if os.path.islink(path):
            raise match.SubmissionError(
                "it is a symbolic link, not a file: only the notebook itself can be graded"
            ) from None
        raise match.SubmissionError(f"it cannot be opened ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a named pipe" if stat.S_ISFIFO(st.st_mode) else "a device or socket"
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else kind
            raise match.SubmissionError(f"it is {kind}, not a notebook file")
        if st.st_size > limit:
            raise match.SubmissionError(
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
            raise match.SubmissionError(f"the file is over the {limit >> 20} MiB limit")
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


def load_submission(student: str, path: Path, solution: bytes) -> Submission:
    """Read and parse one submission once; never raises (an unreadable one carries its reason)."""
    sub = Submission(student, path)
    try:
        data = read_submission(path)
        sub.mtime = os.lstat(path).st_mtime
        sub.is_solution = data == solution  # graded (an instructor's own check), and flagged
        sub.notebook = match.read(_Submitted(data))
        sub.digest = hashlib.sha256(data).hexdigest()
    except (match.SubmissionError, OSError) as e:
        sub.error = str(e)
    except Exception as e:  # a notebook that breaks the parser: this student's row, not the class's
        sub.error = f"it could not be read ({type(e).__name__}: {e})"
    return sub


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


def _run_judge(job: dict, limits: Limits, group: process.Cgroup | None = None) -> dict:
    """Run one judge process with its own memory limit; a backstop kills it and its sandboxes if it overruns.

    `group` (a cgroup) holds the judge and every sandbox it starts; it is emptied when the judge ends.
    """
    env = {**os.environ, "MPLBACKEND": "Agg"}
    env.pop(process.CGROUP_ENV, None)
    judge_group = None
    if group is not None:
        try:
            mem = judge_memory(limits) << 20
            judge_group = group.child("judge", memory_bytes=mem, pids=process.PIDS_LIMIT)
            env[process.CGROUP_ENV] = group.spec
        except OSError:
            judge_group = None
    proc = subprocess.Popen(
        python_command("cudalearn.grading.judge"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=env,
    )
    try:
        if judge_group is not None:
            judge_group.add(proc.pid)
        if hasattr(os, "prlimit"):
            mem = judge_memory(limits) << 20
            import resource

            os.prlimit(proc.pid, resource.RLIMIT_DATA, (mem, mem))  # with no cgroup, the judge alone
    except OSError:
        pass
    try:
        out, err = proc.communicate(json.dumps(job).encode(), timeout=limits.timeout + 120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        if group is not None:
            group.kill()
        proc.communicate()
        return {"fatal": f"the judge overran the time limit ({limits.timeout:g} s) by more than 120 s"}
    finally:
        if group is not None:
            group.kill()  # whatever the judge left (a sandbox of a judge that died): nothing stays
    try:
        return json.loads(out)
    except ValueError:
        tail = err.decode(errors="replace")[-2000:]
        return {
            "fatal": f"the judge process ended with code {proc.returncode} without a result",
            "traceback": tail,
        }


def judge_memory(limits: Limits) -> int:
    """MiB of memory for the judge of one notebook: its checks hold copies of the sandbox's arrays."""
    return max(JUDGE_MEMORY_MB, 2 * limits.memory_mb)


def grade_one(
    lab: lab_mod.Lab,
    student: str,
    path: Path,
    limits: Limits,
    notebook: object = None,
    group: process.Cgroup | None = None,
) -> Result:
    """Grade one submitted notebook of `lab` (the student's code runs in other processes only)."""
    limits = student_user(limits)
    if notebook is None:
        sub = load_submission(student, path, b"")
        if sub.error:
            msg = f"could not read your notebook: {sub.error}"
            return Result(student, lab.name, path, _all_tests(lab, "error", msg))
        notebook = sub.notebook
    answers = match.find_answers(lab, notebook)
    notes = [a.note for a in answers if a.note]
    raw = _run_judge(job_for(lab, answers, limits), limits, group)
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
    limits = student_user(limits)
    if limits.user:
        check_user(limits.user)
    solution = plan.path.read_bytes()
    subs = [load_submission(s, p, solution) for s, p in _unique(find_submissions(submissions))]
    picked = _one_per_student(plan, subs)
    top = grader_cgroup()
    notes = containment_notes(limits, cgroup=top is not None)
    seq = itertools.count(1)

    def run(entry: tuple[Submission, list[Path]]) -> Result:
        group = None
        if top is not None:
            try:
                group = top.child(f"n{next(seq)}")
            except OSError:
                group = None
        return _graded(plan, *entry, limits, group, notes)

    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            results = list(pool.map(run, picked))
    finally:
        if top is not None:
            top.kill()
    mark_identical(plan, results, {s.student: s for s, _ in picked})
    if out is not None:
        write(plan, results, Path(out))
    return results


def grader_cgroup() -> process.Cgroup | None:
    """A cgroup for this grading run, where each judge gets its own; None where the kernel refuses."""
    base = process.Cgroup.base()
    if base is None:
        return None
    try:
        top = base.child(f"cudalearn-grade-{os.getpid()}")
    except OSError:
        return None
    try:
        top.child("probe", memory_bytes=64 << 20, pids=8).kill()  # limits can really be set below it
    except OSError:
        top.kill()
        return None
    return top


def containment_notes(limits: Limits, cgroup: bool) -> list[str]:
    """What this machine cannot enforce, in a student's feedback words (empty when everything holds)."""
    from cudalearn.grading.sandbox import landlock_abi, probe_namespaces

    notes = []
    if not cgroup:
        notes.append(
            "this grading machine gave the grader no cgroup: the memory limit held for each of your "
            "notebook's processes, not for all of them together, and shared memory was not counted."
        )
    if not probe_namespaces():
        notes.append(
            "this grading machine gave the grader no PID or mount namespace: processes your code started "
            "were ended by process group and as orphans, and /dev/shm was closed to your code."
        )
    if limits.landlock and not landlock_abi():
        notes.append("this grading machine has no Landlock: your code could read every file its OS user can.")
    return notes


def _graded(
    plan: lab_mod.Lab,
    sub: Submission,
    others: list[Path],
    limits: Limits,
    group: process.Cgroup | None = None,
    notes: list[str] = (),
) -> Result:
    """Grade one student's picked notebook; any failure becomes that student's error row, not the class's."""
    if sub.error:
        msg = f"could not read your notebook: {sub.error}"
        result = Result(sub.student, plan.name, sub.path, _all_tests(plan, "error", msg))
    else:
        try:
            result = grade_one(plan, sub.student, sub.path, limits, sub.notebook, group)
        except Exception as e:  # a grader bug on this notebook: reported on its row
            msg = f"the grader failed on this notebook ({type(e).__name__}: {e}); ask your instructor"
            result = Result(
                sub.student, plan.name, sub.path, _all_tests(plan, "error", msg), grader_error=str(e)
            )
            print(f"cudalearn grade: {sub.path}: {type(e).__name__}: {e}", file=sys.stderr)
    if others:
        names = ", ".join(p.name for p in others)
        result.notes.insert(
            0, f"your folder also holds {names}; {sub.path.name} was graded (it has the most answers)."
        )
    result.notes += [f"grading: {n}" for n in notes]
    return result


def _answered(plan: lab_mod.Lab, sub: Submission) -> int:
    """How many exercises a notebook answers (found and edited): picks a student's notebook."""
    if sub.error:
        return -1
    answers = match.find_answers(plan, sub.notebook)
    stubs = {e.number: match._norm(e.cell.student_source) for e in plan.exercises}
    return sum(1 for a in answers if a.code is not None and match._norm(a.code) != stubs[a.exercise])


def _one_per_student(plan: lab_mod.Lab, subs: list[Submission]) -> list[tuple[Submission, list[Path]]]:
    """One notebook per student: the one that answers the most exercises, then the newest."""
    groups: dict[str, list[Submission]] = {}
    for sub in subs:
        groups.setdefault(sub.student, []).append(sub)
    picked = []
    for group in groups.values():
        ranked = sorted(group, key=lambda s: (_answered(plan, s), s.mtime), reverse=True)
        picked.append((ranked[0], [s.path for s in ranked[1:]]))
    return picked


def mark_identical(plan: lab_mod.Lab, results: list[Result], subs: dict[str, Submission]) -> None:
    """Flag students whose graded answers are the same code (or whose files are the same bytes)."""
    stubs = {e.number: match._norm(e.cell.student_source) for e in plan.exercises}
    keys: dict[str, list[str]] = {}
    for r in results:
        sub = subs.get(r.student)
        if sub is None or sub.error:
            continue
        answers = match.find_answers(plan, sub.notebook)
        code = [match._norm(a.code or "") for a in answers]
        if any(a.code is not None and match._norm(a.code) != stubs[a.exercise] for a in answers):
            keys.setdefault("answers:" + hashlib.sha256("\0".join(code).encode()).hexdigest(), []).append(
                r.student
            )
        keys.setdefault("file:" + sub.digest, []).append(r.student)
    by_student = {r.student: r for r in results}
    for group in keys.values():
        if len(group) > 1:
            for name in group:
                r = by_student[name]
                r.same_as = sorted(set(r.same_as) | (set(group) - {name}))
    for r in results:
        sub = subs.get(r.student)
        if sub is not None and sub.is_solution:
            r.same_as = [SOLUTION_MARK, *r.same_as]
            r.notes.append("this file is the course's solution notebook itself, hidden tests included.")
    for r in results:
        others = [name for name in r.same_as if name != SOLUTION_MARK]
        if others:
            r.notes.append(
                f"your answers are identical to those of {len(others)} other submission(s); your "
                f"instructor sees which."
            )


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
    """A file name for a student (letters, digits, '.', '-', '_'; at most 100 characters)."""
    return re.sub(r"[^\w.-]+", "_", name).strip("._")[:100] or "student"


def feedback_names(students: list[str]) -> dict[str, str]:
    """A distinct, safe feedback file stem per student: names that map to one file get -2, -3, ...

    Distinct regardless of case too, so that no two files collide on a case-insensitive disk.
    """
    taken: set[str] = set()
    names = {}
    for student in sorted(set(students)):
        stem, n = safe_name(student), 1
        while (candidate := stem if n == 1 else f"{stem}-{n}").lower() in taken:
            n += 1
        taken.add(candidate.lower())
        names[student] = candidate
    return names


def write(lab: lab_mod.Lab, results: list[Result], out: Path) -> None:
    """Write the grade table OUT/LAB.csv and one feedback file per student."""
    out.mkdir(parents=True, exist_ok=True)
    files = feedback_names([r.student for r in results])
    with open(out / f"{lab.name}.csv", "w", newline="") as f:
        w = csv.writer(f)
        head = ["student", "lab"]
        for t in lab.tests:
            head += [f"{t.test_id} points", f"{t.test_id} status"]
        w.writerow(head + ["total", "max", "notebook", "identical to", "feedback"])
        for r in results:
            row = [_cell(r.student), r.lab]
            for t in r.tests:
                row += [f"{t.points:g}", t.status]
            same = _cell(" ".join(r.same_as))
            row += [f"{r.total:g}", f"{r.max_total:g}", _cell(str(r.path)), same, f"{files[r.student]}.md"]
            w.writerow(row)
    fb = out / "feedback" / lab.name
    fb.mkdir(parents=True, exist_ok=True)
    for r in results:
        (fb / f"{files[r.student]}.md").write_text(feedback(r))


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
    limits = student_user(
        Limits(args.timeout, args.cell_timeout, args.memory, landlock=not args.no_landlock, user=args.user)
    )
    if limits.user:
        try:
            check_user(limits.user)
        except ValueError as e:
            print(f"cudalearn grade: {e}", file=sys.stderr)
            return 2
    elif args.user == "root":
        print("warning: --user root: student code runs as root (capabilities dropped)", file=sys.stderr)
    top = grader_cgroup()
    if top is not None:
        top.kill()
    for note in containment_notes(limits, cgroup=top is not None):
        print(f"warning: {note}", file=sys.stderr)
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
    if ran and not any(r.isolation.get("landlock") for r in ran) and not limits.user:
        print(
            "warning: Landlock is not available here, so student code could read any file this user can "
            "(the solutions too). Grade as root with --user NAME, or in a container.",
            file=sys.stderr,
        )
    print(f"wrote {Path(args.out, path.stem + '.csv')} and {Path(args.out, 'feedback', path.stem)}/")
    return 1 if any(r.grader_error for r in results) else 0
