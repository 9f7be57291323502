"""`cudalearn grade`: grade a lab's submissions, write the grade table and feedback per student (instructors).

For each submission the grader (this process, which never runs student
code) finds the student's answer cells (`match`), then starts a judge
process with the job; the judge starts the confined student process. The
grader holds the judge to the notebook's deadline from outside (`watch`)
and gives each notebook a CPU share where the kernel has a cpu controller,
so one submission can never stop or starve the others. Each student's row
and feedback file are written as soon as their grade is known (`report`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from cudalearn.compile import forkserver, ptx
from cudalearn.grading import judgeserver, match, process, python_command, speed, watch
from cudalearn.grading import lab as lab_mod
from cudalearn.grading.limits import (
    JUDGE_CGROUP_HEADROOM_MB,
    Limits,
    check_user,
    containment_notes,
    grader_cgroup,
    judge_memory,
    notebook_cpus,
    student_user,
)
from cudalearn.grading.report import Report, printable
from cudalearn.grading.results import Result, all_errors, from_judge
from cudalearn.grading.submissions import (
    Submission,
    distinct_students,
    find_submissions,
    identical,
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
            entry.update(source=c.source, test_id=c.test_id, points=c.points, **speed.job_entry(lab, c))
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
    job: dict,
    limits: Limits,
    group: process.Cgroup | None = None,
    servers: Servers | None = None,
) -> dict:
    """Run one judge process with its own memory limit, held to the notebook's deadline from outside.

    `group` (a cgroup) holds the judge and every sandbox it starts; it is emptied when the judge ends.
    `servers` fork the judge (else it is started) and its compile worker, which is put in the judge's
    group and limits and killed when the judge ends. The judge's temporary folders (its own, its
    sandboxes') are made in one folder of this notebook, removed when the judge ends however it ends.
    """
    compiler = servers.compiler if servers is not None else None
    judges = servers.judges if servers is not None else None
    scratch = tempfile.mkdtemp(prefix="cudalearn-notebook-")
    os.chmod(scratch, 0o711)  # the student's user passes through to its own folder, and lists nothing
    env = {**os.environ, "MPLBACKEND": "Agg", "TMPDIR": scratch}
    env.pop(process.CGROUP_ENV, None)
    env.pop(ptx.WORKER_ENV, None)
    sock, worker, proc = None, None, None
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

    def kill() -> None:
        """End the judge's whole tree: its session, its group (sandboxes, compile worker), its worker."""
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
        if group is not None:
            group.kill()
        if worker is not None:
            try:
                os.kill(worker, signal.SIGKILL)  # the judge's compile worker, in no group without cgroups
            except OSError:
                pass

    try:
        try:
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
        _confine_judge([proc.pid, worker], limits, judge_group)
        seen = watch.watch(proc, json.dumps(job).encode(), limits.timeout, kill)
        if seen.overran is None:
            returncode = _exit_status(proc, seen.deadline, kill)
        else:
            returncode = _exit_status(proc, time.monotonic() + 5, kill)
    finally:
        kill()  # whatever the judge left (a sandbox of a judge that died, its worker): nothing stays
        shutil.rmtree(scratch, ignore_errors=True)
        for stream in (proc.stdout, proc.stderr) if proc is not None else ():
            try:
                stream.close()
            except OSError:
                pass
    if seen.overran is not None:
        if not seen.started:
            return {"fatal": f"the judge did not start within {watch.START_S:g} s", "tests": seen.tests}
        return {"overran": seen.overran, "tests": seen.tests}
    lines = seen.out.splitlines()
    try:
        result = json.loads(lines[-1])
        if not isinstance(result, dict) or "test" in result or "clock" in result or "step" in result:
            raise ValueError("no final result")
        if "fatal" in result:  # the judge's own failure, after the tests it finished
            result["tests"] = seen.tests
        return result
    except (ValueError, IndexError):
        tail = seen.err.decode(errors="replace")[-2000:]
        return {
            "fatal": f"the judge process ended with code {returncode} without a result",
            "traceback": tail,
            "tests": seen.tests,
        }


def _confine_judge(pids: list[int | None], limits: Limits, group: process.Cgroup | None) -> None:
    """Put the judge and its compile worker in the judge's group and under its memory limit."""
    try:
        for pid in pids:
            if pid is None:
                continue
            if group is not None:
                group.add(pid)
            if hasattr(os, "prlimit"):
                import resource

                mem = judge_memory(limits) << 20
                os.prlimit(pid, resource.RLIMIT_DATA, (mem, mem))  # with no cgroup, each process alone
    except OSError:
        pass


def _exit_status(proc, deadline: float, kill) -> int | None:
    """The judge's exit code (negative: a signal), waited for until `deadline`, then killed and waited."""
    try:
        return proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
    except subprocess.TimeoutExpired:
        kill()
        try:
            return proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None


def grade_one(
    lab: lab_mod.Lab,
    student: str,
    path: Path,
    limits: Limits,
    notebook: object = None,
    group: process.Cgroup | None = None,
    servers: Servers | None = None,
    answers: list[match.Answer] | None = None,
) -> Result:
    """Grade one submitted notebook of `lab` (the student's code runs in other processes only).

    `answers`: the notebook's answers as `match` found them already (found here otherwise).
    """
    limits = student_user(limits)
    if notebook is None:
        sub = load_submission(student, path, b"")
        if sub.error:
            return all_errors(lab, student, path, f"could not read your notebook: {sub.error}")
        notebook = sub.notebook
    if answers is None:
        answers = match.find_answers(lab, notebook)
    notes = [a.note for a in answers if a.note]
    raw = _run_judge(job_for(lab, answers, limits), limits, group, servers)
    if "overran" in raw:
        return watch.overran(lab, student, path, limits.timeout, raw, notes)
    if "fatal" in raw:
        msg = f"the grader failed on this notebook ({raw['fatal']}); ask your instructor to look at it"
        res = all_errors(lab, student, path, msg, notes=notes, grader_error=raw["fatal"])
        print(f"cudalearn grade: {path}: {raw['fatal']}\n{raw.get('traceback', '')}", file=sys.stderr)
        finished = {t["id"]: from_judge(t) for t in raw.get("tests", ())}  # kept: they had finished
        res.tests = [finished.get(t.test_id, t) for t in res.tests]
        return res
    tests = [from_judge(t) for t in raw["tests"]]
    return Result(student, lab.name, path, tests, notes + raw["notes"], raw.get("isolation", {}))


def grade(
    lab: str | Path,
    submissions: list[str | Path],
    *,
    out: str | Path | None = "grades",
    limits: Limits = Limits(),  # noqa: B008 (frozen: one shared default is safe)
    jobs: int = 1,
    root: str | Path = ".",
    failed: list[str] | None = None,
    leaderboard: bool = False,
) -> list[Result]:
    """Grade every submission of LAB; write OUT/LAB.csv and OUT/feedback/LAB/STUDENT.md unless out is None.

    Each student's row and feedback are written as soon as their grade is known. `failed` (a list)
    gets what could not be written. `leaderboard`: also merge the speed ratios into OUT/LAB-leaderboard.csv.
    """
    plan = lab_mod.load(resolve_lab(lab, root))
    speed.declarations(plan)  # a wrong `# SPEED:` line stops the run before any notebook is graded
    limits = student_user(limits)
    if limits.user:
        check_user(limits.user)
    solution = plan.path.read_bytes()
    subs = [load_submission(s, p, solution) for s, p in distinct_students(find_submissions(submissions))]
    picked = one_per_student(plan, subs)  # each notebook's answers found once, here
    same = identical(plan, [s for s, _ in picked])
    top = grader_cgroup()
    cpus = notebook_cpus(jobs) if top is not None and top.cpu_share else None
    notes = containment_notes(limits, cgroup=top is not None, cpu=cpus is not None)
    seq = itertools.count(1)
    report = Report(plan, [s.student for s, _ in picked], Path(out)) if out is not None else None
    servers = Servers.start(plan)  # judges and compile workers forked from warm processes

    def run(entry: tuple[Submission, list[Path]]) -> Result:
        group = None
        if top is not None:
            try:
                group = top.child(f"n{next(seq)}", cpus=cpus)
            except OSError:
                group = None
        result = _graded(plan, *entry, limits, group, notes, servers)
        mark_identical(result, same.get(entry[0].student, []))
        return result

    results: dict[int, Result] = {}
    given = os.environ.get(speed.LOCK_ENV)  # one lock for several grade runs on this GPU, if set
    lock_dir = None if given else tempfile.mkdtemp(prefix="cudalearn-timing-")  # the grader's own folder
    if lock_dir is not None:
        os.environ[speed.LOCK_ENV] = os.path.join(lock_dir, "lock")  # every judge times under it, in turn
    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = {pool.submit(run, entry): i for i, entry in enumerate(picked)}
            for future in as_completed(futures):
                results[futures[future]] = result = future.result()
                if report is not None:
                    report.add(result)  # written now: nothing graded is lost to a later failure
    finally:
        if lock_dir is not None:
            os.environ.pop(speed.LOCK_ENV, None)
            shutil.rmtree(lock_dir, ignore_errors=True)
        servers.close()
        if top is not None:
            top.kill()
        if report is not None:
            report.close()
            if failed is not None:
                failed += report.failed
    ordered = [results[i] for i in sorted(results)]
    if leaderboard and out is not None:
        from cudalearn.grading.report import write_leaderboard

        write_leaderboard(Path(out, f"{plan.name}-leaderboard.csv"), ordered)
    return ordered


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
            result = grade_one(plan, sub.student, sub.path, limits, sub.notebook, group, servers, sub.answers)
        except Exception as e:  # a grader bug on this notebook: reported on its row
            msg = f"the grader failed on this notebook ({type(e).__name__}: {e}); ask your instructor"
            result = all_errors(plan, sub.student, sub.path, msg, grader_error=str(e))
            print(f"cudalearn grade: {sub.path}: {type(e).__name__}: {e}", file=sys.stderr)
        finally:
            if group is not None:
                group.kill()  # the notebook's group, emptied and removed: nothing of it stays
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
        speed.declarations(lab_mod.load(path))
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
    cpu = top is not None and top.cpu_share  # read before the probe group is removed
    if top is not None:
        top.kill()
    for note in containment_notes(limits, cgroup=top is not None, cpu=cpu):
        print(f"warning: {note}", file=sys.stderr)
    unwritten: list[str] = []
    try:
        results = grade(
            path,
            args.submissions,
            out=args.out,
            limits=limits,
            jobs=args.jobs,
            root=args.root,
            failed=unwritten,
            leaderboard=args.leaderboard,
        )
    except FileNotFoundError as e:
        print(f"cudalearn grade: {e}", file=sys.stderr)
        return 2
    width = max([len(printable(r.student)) for r in results] + [7])
    for r in results:
        statuses = " ".join(
            f"{t.test_id}={t.status}" + (f"+speed:{t.speed.get('status')}" if t.speed else "")
            for t in r.tests
        )
        print(f"{printable(r.student):<{width}}  {r.total:g}/{r.max_total:g}  {statuses}")
    for what in unwritten:
        print(f"cudalearn grade: could not write {what}", file=sys.stderr)
    ran = [r for r in results if r.isolation]
    if ran and not any(r.isolation.get("landlock") for r in ran) and not limits.user:
        print(
            "warning: Landlock is not available here, so student code could read any file this user can "
            "(the solutions too). Grade as root with --user NAME, or in a container.",
            file=sys.stderr,
        )
    print(f"wrote {Path(args.out, path.stem + '.csv')} and {Path(args.out, 'feedback', path.stem)}/")
    # 1 only for real failures: the grader's own (a judge that crashed, a row it could not write)
    return 1 if unwritten or any(r.grader_error for r in results) else 0
