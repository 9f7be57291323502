"""The grader's watch on one judge: its job written, its lines read, its deadline enforced from outside.

A judge stuck in one long C call (`sum(range(10**12))` on a value a student's
code returned, a regular expression that backtracks for hours) never returns
to Python, so its own alarm cannot fire. The grader therefore holds every
judge to the notebook's deadline itself: the judge says when its clock
starts (a `{"clock": seconds}` line, once the job is read) and which test
it is running (`{"step": ...}`), and the grader kills its whole process tree
(`kill`: its session and cgroup) `GRACE_S` after that deadline. The tests it
had finished (its `{"test": ...}` lines) keep their points; the test it was
running and those after it are timeouts (`overran`: the student's row). Writing the job and reading the
lines never block past the deadline either, whatever the judge does.
"""

from __future__ import annotations

import json
import os
import select
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from cudalearn.grading import lab as lab_mod
from cudalearn.grading.results import Result, TestResult, from_judge

# Seconds a judge gets to read its job and start its clock (its imports: a cold PyTorch on a slow machine).
START_S = 120.0
# Seconds past the notebook's deadline before the judge is killed from outside: its own alarm fires 1 s
# after the deadline, then it ends the student's process and reports the tests it did not run.
GRACE_S = 10.0
DRAIN_S = 5.0  # seconds to read what a killed judge had written before it died


@dataclass
class Watched:
    """What a judge wrote and how it ended: `overran` names the step it was killed in (None: it ended)."""

    out: bytes
    err: bytes
    overran: dict | None = None
    started: bool = False
    tests: list[dict] = field(default_factory=list)
    deadline: float = 0.0  # when the judge's exit is waited for at the latest


def watch(proc, job: bytes, timeout: float, kill) -> Watched:
    """Give `proc` (a judge: Popen or a forked judge) its job and read it to the end, or to its deadline.

    `timeout` is the notebook's limit; `kill()` ends the judge's whole process tree. The deadline is
    START_S until the judge's clock line, then that clock's seconds plus GRACE_S.
    """
    out, err, rest = bytearray(), bytearray(), bytearray()
    seen = Watched(b"", b"")
    step: dict = {"name": "starting the grader's checks"}
    deadline = time.monotonic() + START_S
    pending: memoryview | None = memoryview(job)
    stdin = proc.stdin.fileno()
    os.set_blocking(stdin, False)
    reads = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    while reads:
        left = deadline - time.monotonic()
        if left <= 0:
            if seen.overran is not None:
                break  # killed, and its pipes still open: a process of its own kept them
            kill()
            seen.overran, deadline = step, time.monotonic() + DRAIN_S
            continue
        writes = [stdin] if pending is not None and seen.overran is None else []
        readable, writable, _ = select.select(list(reads), writes, [], left)
        if writable and pending is not None:
            try:
                pending = pending[os.write(stdin, pending[: 1 << 16]) :]
            except BlockingIOError:
                pass
            except OSError:
                pending = memoryview(b"")  # the judge is gone: how it ended says why
            if not len(pending):
                proc.stdin.close()
                pending = None
        for fd in readable:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                del reads[fd]
                continue
            reads[fd].extend(chunk)
            if fd != proc.stdout.fileno():
                continue
            rest.extend(chunk)
            *lines, tail = bytes(rest).split(b"\n")
            rest[:] = tail
            for line in lines:
                record = _record(line)
                if "clock" in record and not seen.started:
                    seen.started = True
                    deadline = time.monotonic() + float(record["clock"]) + GRACE_S
                elif isinstance(record.get("step"), dict):
                    step = record["step"]
                elif isinstance(record.get("test"), dict):
                    seen.tests.append(record["test"])
                    step = {"name": "between tests"}
    if pending is not None:
        try:
            proc.stdin.close()
        except OSError:
            pass
    seen.out, seen.err = bytes(out), bytes(err)
    seen.deadline = deadline
    return seen


def _record(line: bytes) -> dict:
    """A judge's line as a dict ({} for a line cut short by its end, or anything else)."""
    try:
        record = json.loads(line)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def overran(lab: lab_mod.Lab, student: str, path: Path, timeout: float, raw: dict, notes: list) -> Result:
    """The row of a judge killed from outside at the notebook's deadline: its finished tests kept, the test it
    was running and the rest timeouts (a call it could not interrupt, on what the student's code gave)."""
    step = raw["overran"]
    running = step.get("test") if isinstance(step, dict) else None
    doing = str(step.get("name", "checking your notebook")) if isinstance(step, dict) else "checking"
    finished = {t["id"]: from_judge(t) for t in raw.get("tests", ())}
    tests = []
    for t in lab.tests:
        if t.test_id in finished:
            tests.append(finished[t.test_id])
            continue
        if t.test_id == running:
            message = (
                f"the notebook's time limit ({timeout:g} s) was reached while the grader ran this "
                f"test, in one long call it could not interrupt (a loop over a huge size or a very long "
                f"value your code returned, say); it was stopped from outside. Does your code return "
                f"what the exercise asks for, at the sizes it asks for?"
            )
        else:
            message = f"not run: the notebook's time limit ({timeout:g} s) was reached ({doing})."
        tests.append(TestResult(t.test_id, t.exercise, 0.0, t.points, "timeout", message))
    print(f"cudalearn grade: {path}: the judge overran the time limit ({doing}): killed", file=sys.stderr)
    return Result(student, lab.name, path, tests, notes)
