"""The judge: runs a lab's checks and hidden tests on one submission without running its code (instructors).

Started by the grader as `python -I -B -m cudalearn.grading.judge`; the job
(the solution notebook's cells, the student's answer code, the limits)
arrives on standard input, the result leaves on standard output as JSON
lines: `{"clock": seconds}` when its notebook clock starts, `{"step": ...}`
before each cell or test, one `{"test": ...}` per test as it finishes, then
the whole result. The grader holds the judge to that clock from outside
(`watch`), and a judge killed midway (its memory limit, a call its own
alarm could not stop) so still reports the tests it finished.
The judge makes itself non-dumpable first, so no process of the same user
can read its memory (where the hidden tests are) through ptrace or /proc.

It executes only the instructor's cells. The student's answer cells run in
a separate, confined process (`sandbox`), started by the judge; each name
an exercise asks for is bound in the judge to a `Remote` handle, so when a
check calls `blocks_for(33, 32)` or launches `kernel[grid, block](x, out)`,
the call runs in the student's process and only data comes back (arrays
written by a kernel are copied back into the judge's arrays). Numpy, the
checks and `cudalearn` that decide the verdict live in the judge, where no
student code ever ran.

A crash, a timeout or a memory error of the student's process fails the
test that was running; the judge then starts a fresh process, replays the
context and the answers that did not crash, and goes on with the next test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import time
from typing import Any

from cudalearn.grading import wire
from cudalearn.grading.blame import Blame
from cudalearn.grading.cells import notebook_namespace
from cudalearn.grading.channel import Channel
from cudalearn.grading.errors import GradingInterrupt, JudgeTimeLimit, student_message, where_suffix
from cudalearn.grading.process import make_private
from cudalearn.grading.remote import Remote

RAISED_IN = " (raised in your {})"  # where a test's exception was raised, in the student's cells


class Judge(Channel):
    """Runs one job: the plan's cells in order, answers in the sandbox, everything else here."""

    def __init__(self, job: dict) -> None:
        ns, self.transform = notebook_namespace()
        super().__init__(job, ns)
        self.answers: dict[int, dict] = {}  # exercise -> {"status", "message"}
        self.notes: list[str] = []
        self.rebuilder: Any = None
        self.untraceable: dict[str, str] = {}  # kernel -> why the tracer cannot be given it
        self.blame = Blame({int(k): v for k, v in job["answers"].items()})  # helpers of broken exercises
        self.emit: Any = lambda record: None  # tells the grader (main: a JSON line): steps, finished tests

    # Cells ------------------------------------------------------------------------

    def _run_here(self, source: str, name: str) -> None:
        """Run an instructor's cell here, stopped at the notebook's time limit (+1 s) whatever it is doing.

        The judge's own work (a trace of the student's kernel, rebuilt here, whose loops the student
        wrote) counts against the notebook's limit; waits on the student's process have their own
        deadlines, which come first.
        """
        code = self.transform(source)

        def overrun(signum: int, frame: Any) -> None:
            raise JudgeTimeLimit(
                f"the grader was still checking your answer (e.g. tracing your kernel, whose loops run here "
                f"one thread at a time) when the notebook's time limit ({self.job['timeout']:g} s) was "
                f"reached; does a loop of your kernel run much longer for some sizes or threads?"
            )

        previous = signal.signal(signal.SIGALRM, overrun)
        signal.setitimer(signal.ITIMER_REAL, max(self.deadline - time.monotonic(), 0) + 1.0)
        try:
            exec(compile(code, f"<{name}>", "exec"), self.ns)
        except JudgeTimeLimit:
            if self.sandbox is not None:
                self.sandbox.kill()  # the alarm may have cut an exchange short: start afresh if needed
            raise
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    def sources_of(self, name: str) -> list[str]:
        """The graded answer cell of the exercise defining `name`, then the other answer cells ([]: none).

        The other cells come too because a function there can be what `name` calls.
        """
        mine = [str(n) for n, names in self.job["names"].items() if name in names]
        if not mine or not isinstance(self.job["answers"].get(mine[0]), str):
            return []
        cells = sorted(self.job["answers"].items(), key=lambda kv: kv[0] != mine[0])
        return [code for _, code in cells if isinstance(code, str)]

    def rebuilt(self, name: str) -> Any:
        """The kernel `name` rebuilt in the judge from the answer cells' source, for the memory tracer."""
        from cudalearn.grading import rebuild

        if self.rebuilder is None:
            answers = {int(k): v for k, v in self.job["answers"].items()}
            fetch = lambda n: self.request("get", None, {"name": n})  # noqa: E731
            self.rebuilder = rebuild.Rebuilder(answers, self.ns, fetch, Remote)
        try:
            return self.rebuilder.function(name)
        except rebuild.Unsafe as e:
            self.untraceable[name] = str(e)
            raise AttributeError("py_func") from None

    def _answer(self, ex: int, names: list[str], code: str | None) -> None:
        for name in names:
            self.ns.pop(name, None)
        if code is None:
            self.answers[ex] = {"status": "error", "message": "no answer found"}
            self.blame.failed(ex, "has no answer in your notebook")
            return
        name = f"exercise {ex}"
        self._start_cell_clock()
        try:
            self._exchange(self._live(), {"op": "exec", "name": name, "code": code}, [])
            self.answers[ex] = {"status": "ok"}
            self.history.append((name, code))
        except GradingInterrupt as e:
            self.answers[ex] = {"status": e.status, "message": str(e)}
            self.notes.append(f"exercise {ex}: your exercise cell did not finish: {e}")
        except Exception as e:
            status, msg = "error", student_message(e)
            if isinstance(e, MemoryError):
                status, msg = "memory", f"MemoryError: out of memory (the limit is {self.memory_mib} MiB)"
            self.answers[ex] = {"status": status, "message": msg + where_suffix(e, " ({})")}
            self.notes.append(f"exercise {ex}: your exercise cell raised {self.answers[ex]['message']}")
            self.history.append((name, code))
        if self.answers[ex]["status"] != "ok":
            self.blame.failed(ex, f"did not run ({self.answers[ex]['message']})")
        self.bound[ex] = names
        try:
            self._start_cell_clock()
            self._bind(ex, names)
        except GradingInterrupt as e:
            self.notes.append(f"exercise {ex}: could not read your definitions: {e}")

    def _context(self, cell: dict) -> None:
        self._start_cell_clock()
        there, at = "", 0  # how the cell failed in the student's process, if it did, and its note
        try:
            self._exchange(
                self._live(), {"op": "exec", "name": f"cell {cell['index']}", "code": cell["student"]}, []
            )
            self.history.append((f"cell {cell['index']}", cell["student"]))
        except GradingInterrupt:
            pass
        except Exception as e:
            self.history.append((f"cell {cell['index']}", cell["student"]))
            there, at = str(e), len(self.notes)
            self.notes.append(f"cell {cell['index'] + 1} of the lab failed in your notebook's process: {e}")
        self._start_cell_clock()
        try:
            self._run_here(cell["source"], f"cell {cell['index']}")
        except GradingInterrupt as e:
            self.notes.append(f"cell {cell['index'] + 1} of the lab: {e}")
        except Exception as e:
            note = f"cell {cell['index'] + 1} of the lab raised {type(e).__name__}: {e}"
            if there and str(e) in there:  # the same failure in both processes: one note says so
                self.notes[at] = f"{note} (in your notebook's process too)"
            else:
                self.notes.append(note)

    def _test(self, cell: dict) -> dict:
        """Run one test cell here; its result: status, points and message (the check's own words)."""
        result = {"id": cell["test_id"], "exercise": cell["exercise"], "max": cell["points"], "points": 0.0}
        if time.monotonic() >= self.deadline:
            return {
                **result,
                "status": "timeout",
                "message": f"not run: the notebook's time limit ({self.job['timeout']:g} s) was reached.",
            }
        self.untraceable.clear()
        outcome = self._outcome(cell)
        if outcome["status"] != "passed":
            outcome["message"] += "".join(
                f" (cudalearn grade could not trace `{k}`: {v})" for k, v in self.untraceable.items()
            )
            outcome["message"] += self.blame.hint(cell["exercise"])
            self.blame.failed(cell["exercise"], f"failed its own test {cell['test_id']}")
        result = {**result, **outcome, "points": cell["points"] if outcome["status"] == "passed" else 0.0}
        if cell.get("speed"):
            from cudalearn.grading import speed

            result["speed"] = speed.judge_speed(self, cell, outcome["status"] == "passed")
        return result

    def _not_run(self, cell: dict) -> dict:
        """A test not run because a kernel timed for speed ran past its limit (`grading.speed.stuck`)."""
        from cudalearn.grading import speed

        return {
            "id": cell["test_id"],
            "exercise": cell["exercise"],
            "max": cell["points"],
            "points": 0.0,
            "status": "timeout",
            "message": speed.STUCK.format(limit=speed.LIMIT_MS),
        }

    def _outcome(self, cell: dict) -> dict:
        """{"status", "message"} of one test cell run here ("output" too when the student's process died)."""
        self._start_cell_clock()
        try:
            self._run_here(cell["source"], f"test {cell['test_id']}")
        except AssertionError as e:
            return {"status": "failed", "message": str(e)}
        except GradingInterrupt as e:
            return {"status": e.status, "message": str(e), "output": getattr(e, "output", "")}
        except MemoryError as e:
            return {
                "status": "memory",
                "message": f"your code ran out of memory (the limit is {self.memory_mib} MiB)"
                + where_suffix(e, ", in your {}")
                + ".",
            }
        except NameError as e:
            return self._undefined(e, cell["exercise"])
        except Exception as e:
            return {"status": "error", "message": student_message(e) + where_suffix(e, RAISED_IN)}
        return {"status": "passed", "message": ""}

    def _undefined(self, e: NameError, ex: int) -> dict:
        name = getattr(e, "name", None) or str(e)
        for number, names in {**self.job["names"]}.items():
            if name in names:
                answer = self.answers.get(int(number), {"status": "error", "message": "not run"})
                if answer["status"] == "ok":
                    return {
                        "status": "error",
                        "message": f"your exercise {number} cell did not define `{name}`.",
                    }
                if answer.get("message") == "no answer found":
                    return {
                        "status": "error",
                        "message": f"no cell of your notebook defines `{name}` (exercise {number}).",
                    }
                status = answer["status"] if answer["status"] in ("timeout", "crashed", "memory") else "error"
                return {
                    "status": status,
                    "message": f"`{name}` is not defined because your exercise {number} cell did not run: "
                    f"{answer.get('message', '')}",
                }
        owner = self.blame.owner(name, besides=ex)
        if owner is not None and self.answers.get(owner, {}).get("status") != "ok":
            answer = self.answers.get(owner, {"message": "not run"})
            return {
                "status": "error",
                "message": f"`{name}` is not defined: your exercise {owner} cell defines it, and that cell "
                f"did not run ({answer.get('message', '')}). Fix exercise {owner} first.",
            }
        return {
            "status": "error",
            "message": f"NameError: {e}" + where_suffix(e, RAISED_IN) + ". Only the code "
            "in the exercise cells is graded: define any helper inside the exercise cell that uses it.",
        }

    def run(self) -> dict:
        tests = []
        names = {int(k): v for k, v in self.job["names"].items()}
        for cell in self.job["cells"]:
            role = cell["role"]
            if _speed_stuck():  # a kernel past the speed limit holds the GPU: nothing more runs here
                if role == "test":
                    tests.append(self._not_run(cell))
                    self.emit({"test": tests[-1]})
                continue
            if role == "test":
                self.emit({"step": {"name": f"running {cell['test_id']}", "test": cell["test_id"]}})
            else:
                self.emit({"step": {"name": f"running cell {cell['index'] + 1} of the lab"}})
            if role == "answer":
                if time.monotonic() < self.deadline:
                    self._answer(
                        cell["exercise"],
                        names[cell["exercise"]],
                        self.job["answers"].get(str(cell["exercise"])),
                    )
            elif role == "context":
                if time.monotonic() < self.deadline:
                    self._context(cell)
            elif role == "test":
                tests.append(self._test(cell))
                self.emit({"test": tests[-1]})  # kept by the grader even if the judge dies later
        if self.sandbox is not None:
            self.sandbox.kill()
        return {"tests": tests, "notes": self.notes, "isolation": self.isolation, "restarts": self.restarts}


def _speed_stuck() -> bool:
    """Whether a kernel timed for speed ran past its limit in this judge (`grading.speed.stuck`)."""
    speed = sys.modules.get("cudalearn.grading.speed")  # imported only by a lab with speed points
    return speed is not None and speed.stuck()


def main() -> None:
    """Entry point: read the job on stdin, print the result as JSON on the original stdout."""
    make_private(subreaper=True)
    job = json.loads(sys.stdin.read())
    out = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the instructor's cells print; keep that away from the result
    os.environ.setdefault("MPLBACKEND", "Agg")
    scratch = tempfile.mkdtemp(prefix="cudalearn-judge-")
    os.environ["IPYTHONDIR"] = os.path.join(scratch, ".ipython")
    os.chdir(scratch)
    try:
        from cudalearn.runtime import device

        device.setup(quiet=True)  # the mode first, then Numba's own copy_to_host, before any lab cell
        wire.keep_host_copies()
        from cudalearn.compile import ptx

        ptx.prestart()  # the compile for a real GPU, that every kernel check runs, warms up meanwhile
        ptx.require()  # a compile check that cannot compile (worker timeout, kernel not rebuilt) fails
        judge = Judge(job)

        def emit(record: dict) -> None:
            out.write(json.dumps(record) + "\n")
            out.flush()

        judge.emit = emit
        emit({"clock": max(judge.deadline - time.monotonic(), 0.0)})  # the grader's deadline starts now
        result = judge.run()
    except BaseException as e:  # a grader bug or a broken lab, never the student's fault
        import traceback

        result = {"fatal": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-4000:]}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    json.dump(result, out)
    out.flush()
    if _speed_stuck():
        os._exit(0)  # a kernel past the time limit still runs: no atexit may wait for it; the driver ends it


if __name__ == "__main__":
    main()
