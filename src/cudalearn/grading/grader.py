"""`cudalearn grade`: grade a lab's submissions, write the grade table and feedback per student (instructors).

For each submission the grader (this process, which never runs student
code) finds the student's answer cells (`match`), then starts a judge
process with the job; the judge starts the confined student process. The
grader keeps a wall-clock backstop on the judge, so one submission can
never stop the others from being graded.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from cudalearn.compile import forkserver, ptx
from cudalearn.grading import judgeserver, match, process, python_command
from cudalearn.grading import lab as lab_mod
from cudalearn.grading.limits import (
    JUDGE_CGROUP_HEADROOM_MB,
    Limits,
    check_user,
    containment_notes,
    grader_cgroup,
    judge_memory,
    student_user,
)
from cudalearn.grading.report import write
from cudalearn.grading.results import Result, TestResult, all_errors
from cudalearn.grading.submissions import (
    Submission,
    distinct_students,
    find_submissions,
    load_submission,
    mark_identical,
    one_per_student,
)

JUDGE_MODULE = "cudalearn.grading.judge"


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


@dataclass
class Servers:
    """A grade run's warm processes: judges and compile workers are forked from them (either may be None)."""

    judges: judgeserver.Server | None = None
    compiler: forkserver.Server | None = None

    @classmethod
    def start(cls, plan: lab_mod.Lab) -> Servers:
        """Start both for `plan`'s lab; a server that cannot start is None (processes are then started)."""
        servers = cls()
        try:
            servers.compiler = forkserver.Server()  # NVVM loaded once for the run
        except OSError:
            pass
        try:
            servers.judges = judgeserver.Server(judgeserver.preload_for(plan))
        except OSError:
            pass
        return servers

    def close(self) -> None:
        for server in (self.judges, self.compiler):
            if server is not None:
                server.close()


def _run_judge(
    job: dict, limits: Limits, group: process.Cgroup | None = None, servers: Servers | None = None
) -> dict:
    """Run one judge process with its own memory limit; a backstop kills it and its sandboxes if it overruns.

    `group` (a cgroup) holds the judge and every sandbox it starts; it is emptied when the judge ends.
    `servers` fork the judge (else it is started) and its compile worker, which is put in the judge's
    group and limits and killed when the judge ends.
    """
    compiler = servers.compiler if servers is not None else None
    judges = servers.judges if servers is not None else None
    env = {**os.environ, "MPLBACKEND": "Agg"}
    env.pop(process.CGROUP_ENV, None)
    env.pop(ptx.WORKER_ENV, None)
    sock, worker = None, None
    if compiler is not None:
        try:
            sock, worker = compiler.worker()
            env[ptx.WORKER_ENV] = f"{sock.fileno()}:{worker}"
        except OSError:  # no server: the judge starts its own worker, as outside a grade run
            sock, worker = None, None
    judge_group = None
    if group is not None:
        try:
            mem = (judge_memory(limits) + JUDGE_CGROUP_HEADROOM_MB) << 20
            judge_group = group.child("judge", memory_bytes=mem, pids=process.PIDS_LIMIT)
            env[process.CGROUP_ENV] = group.spec
        except OSError:
            judge_group = None
    try:
        proc = None
        if judges is not None:
            try:
                proc = judges.judge(env, {ptx.WORKER_ENV: sock.fileno()} if sock is not None else {})
            except OSError:  # the server is gone: start this judge
                proc = None
        if proc is None:
            proc = subprocess.Popen(
                python_command(JUDGE_MODULE),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env=env,
                pass_fds=() if sock is None else (sock.fileno(),),
            )
    finally:
        if sock is not None:
            sock.close()  # the judge holds its own copy
    try:
        for pid in (proc.pid, worker):
            if pid is None:
                continue
            if judge_group is not None:
                judge_group.add(pid)
            if hasattr(os, "prlimit"):
                mem = judge_memory(limits) << 20
                import resource

                os.prlimit(pid, resource.RLIMIT_DATA, (mem, mem))  # with no cgroup, each process alone
    except OSError:
        pass
    try:
        out, err = proc.communicate(json.dumps(job).encode(), timeout=limits.timeout + 120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        if group is not None:
            group.kill()
        out = proc.rest() if isinstance(proc, judgeserver.Judge) else proc.communicate()[0]
        fatal = f"the judge overran the time limit ({limits.timeout:g} s) by more than 120 s"
        return {"fatal": fatal, "tests": _finished_tests(out)}
    finally:
        if group is not None:
            group.kill()  # whatever the judge left (a sandbox of a judge that died): nothing stays
        if worker is not None:
            try:
                os.kill(worker, signal.SIGKILL)  # the judge's compile worker, in no group without cgroups
            except OSError:
                pass
    lines = out.splitlines()
    try:
        result = json.loads(lines[-1])
        if not isinstance(result, dict) or "test" in result:
            raise ValueError("no final result")
        if "fatal" in result:  # the judge's own failure, after the tests it finished
            result["tests"] = _finished_tests(out)
        return result
    except (ValueError, IndexError):
        tail = err.decode(errors="replace")[-2000:]
        return {
            "fatal": f"the judge process ended with code {proc.returncode} without a result",
            "traceback": tail,
            "tests": _finished_tests(out),
        }


def _finished_tests(out: bytes) -> list[dict]:
    """The tests a judge reported as they finished (its `{"test": ...}` lines) before it ended early."""
    tests = []
    for line in out.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut short by the judge's end
        if isinstance(record, dict) and isinstance(record.get("test"), dict):
            tests.append(record["test"])
    return tests


def grade_one(
    lab: lab_mod.Lab,
    student: str,
    path: Path,
    limits: Limits,
    notebook: object = None,
    group: process.Cgroup | None = None,
    servers: Servers | None = None,
) -> Result:
    """Grade one submitted notebook of `lab` (the student's code runs in other processes only)."""
    limits = student_user(limits)
    if notebook is None:
        sub = load_submission(student, path, b"")
        if sub.error:
            return all_errors(lab, student, path, f"could not read your notebook: {sub.error}")
        notebook = sub.notebook
    answers = match.find_answers(lab, notebook)
    notes = [a.note for a in answers if a.note]
    raw = _run_judge(job_for(lab, answers, limits), limits, group, servers)
    if "fatal" in raw:
        msg = f"the grader failed on this notebook ({raw['fatal']}); ask your instructor to look at it"
        res = all_errors(lab, student, path, msg, notes=notes, grader_error=raw["fatal"])
        print(f"cudalearn grade: {path}: {raw['fatal']}\n{raw.get('traceback', '')}", file=sys.stderr)
        finished = {t["id"]: _test_result(t) for t in raw.get("tests", ())}  # kept: they had finished
        res.tests = [finished.get(t.test_id, t) for t in res.tests]
        return res
    tests = [_test_result(t) for t in raw["tests"]]
    return Result(student, lab.name, path, tests, notes + raw["notes"], raw.get("isolation", {}))


def _test_result(t: dict) -> TestResult:
    """A test's result as the judge sent it."""
    return TestResult(
        t["id"],
        t["exercise"],
        float(t["points"]),
        float(t["max"]),
        t["status"],
        t["message"],
        t.get("output", ""),
    )


def grade(
    lab: str | Path,
    submissions: list[str | Path],
    *,
    out: str | Path | None = "grades",
    limits: Limits = Limits(),  # noqa: B008 (frozen: one shared default is safe)
    jobs: int = 1,
    root: str | Path = ".",
) -> list[Result]:
    """Grade every submission of LAB; write OUT/LAB.csv and OUT/feedback/LAB/STUDENT.md unless out is None."""
    plan = lab_mod.load(resolve_lab(lab, root))
    limits = student_user(limits)
    if limits.user:
        check_user(limits.user)
    solution = plan.path.read_bytes()
    subs = [load_submission(s, p, solution) for s, p in distinct_students(find_submissions(submissions))]
    picked = one_per_student(plan, subs)
    top = grader_cgroup()
    notes = containment_notes(limits, cgroup=top is not None)
    seq = itertools.count(1)
    servers = Servers.start(plan)  # judges and compile workers forked from warm processes

    def run(entry: tuple[Submission, list[Path]]) -> Result:
        group = None
        if top is not None:
            try:
                group = top.child(f"n{next(seq)}")
            except OSError:
                group = None
        return _graded(plan, *entry, limits, group, notes, servers)

    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            results = list(pool.map(run, picked))
    finally:
        servers.close()
        if top is not None:
            top.kill()
    mark_identical(plan, results, {s.student: s for s, _ in picked})
    if out is not None:
        write(plan, results, Path(out))
    return results


def _graded(
    plan: lab_mod.Lab,
    sub: Submission,
    others: list[Path],
    limits: Limits,
    group: process.Cgroup | None = None,
    notes: list[str] = (),
    servers: Servers | None = None,
) -> Result:
    """Grade one student's picked notebook; any failure becomes that student's error row, not the class's."""
    if sub.error:
        result = all_errors(plan, sub.student, sub.path, f"could not read your notebook: {sub.error}")
    else:
        try:
            result = grade_one(plan, sub.student, sub.path, limits, sub.notebook, group, servers)
        except Exception as e:  # a grader bug on this notebook: reported on its row
            msg = f"the grader failed on this notebook ({type(e).__name__}: {e}); ask your instructor"
            result = all_errors(plan, sub.student, sub.path, msg, grader_error=str(e))
            print(f"cudalearn grade: {sub.path}: {type(e).__name__}: {e}", file=sys.stderr)
    if others:
        names = ", ".join(p.name for p in others)
        result.notes.insert(
            0, f"your folder also holds {names}; {sub.path.name} was graded (it has the most answers)."
        )
    result.notes += [f"grading: {n}" for n in notes]
    return result


def command(args: argparse.Namespace) -> int:
    """Run `cudalearn grade` from parsed arguments; print a summary; 0 when every notebook was graded."""
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
