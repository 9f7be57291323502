"""The judge: runs a lab's checks and hidden tests on one submission without running its code (instructors).

Started by the grader as `python -I -B -m cudalearn.grading.judge`; the job
(the solution notebook's cells, the student's answer code, the limits)
arrives on standard input, the result leaves on standard output as JSON.
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

import base64
import builtins
import inspect
import json
import keyword
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import types
from typing import Any

import numpy as np

from cudalearn.grading import wire
from cudalearn.grading.process import Sandbox, _status_text, make_private


class GradingInterrupt(BaseException):
    """The student's process timed out or died; a BaseException so no check can swallow it."""

    status = "crashed"


class TimeLimit(GradingInterrupt):
    """The student's code ran past the time limit."""

    status = "timeout"


class JudgeTimeLimit(TimeLimit):
    """The judge's own work on a cell (a trace of the student's kernel) ran past the notebook's time limit."""


class ProcessDied(GradingInterrupt):
    """The student's process died (exit, signal, crash) or broke the channel."""

    status = "crashed"


class GraderFailure(BaseException):
    """The grader itself could not work (a student process that cannot start): never blamed on a student."""


class SubmissionError(Exception):
    """An exception raised by the student's code that is not a builtin one (e.g. a Numba typing error)."""


def _exception(err: dict) -> BaseException:
    """Rebuild a student's exception from its description: a builtin type or SubmissionError, never theirs."""
    name, message = str(err.get("type", "Exception")), str(err.get("message", ""))
    cls = getattr(builtins, name, None)
    exc: BaseException
    if (
        err.get("module") == "builtins"
        and isinstance(cls, type)
        and issubclass(cls, Exception)
        and not issubclass(cls, (SystemExit, KeyboardInterrupt, GeneratorExit))
    ):
        try:
            exc = cls(message)
        except Exception:
            exc = SubmissionError(f"{name}: {message}")
    elif name == "KeyboardInterrupt":
        exc = SubmissionError(
            f"KeyboardInterrupt: the process running your code received SIGINT (at {err.get('at', '?')})"
        )
    elif name == "SystemExit":
        exc = SubmissionError(f"your code called sys.exit() ({message or 'no code'})")
    else:
        exc = SubmissionError(f"{name}: {message}")
    exc.student_where = str(err.get("where", ""))  # type: ignore[attr-defined]
    return exc


class Remote:
    """A handle on an object in the student's process: calls and reads go there, only data comes back."""

    def __init__(self, judge: Judge, generation: int, meta: dict) -> None:
        d = self.__dict__
        d["_cl_judge"], d["_cl_gen"], d["_cl_id"] = judge, generation, meta.get("id")
        name = meta.get("name")
        if isinstance(name, str) and name.isidentifier():
            d["__name__"] = d["__qualname__"] = name
        d["__signature__"] = _signature(meta.get("sig"))

    def _cl_op(self, op: str, **fields: Any) -> Any:
        return self._cl_judge.request(op, self, fields)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__") or name.startswith("_cl_"):
            raise AttributeError(name)
        if name in ("py_func", "fn") and self.__dict__.get("_cl_trace"):
            return self._cl_judge.rebuilt(self.__dict__["_cl_trace"])  # for the tracer, never the student's
        return self._cl_op("getattr", name=name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("the grader does not set attributes on the student's objects")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._cl_judge.call(self, args, kwargs)

    def _cl_sources(self) -> list[str]:
        """`checks.student_sources`: the answer cells the judge holds for this name, never asked of it."""
        name = self.__dict__.get("_cl_trace")
        return self._cl_judge.sources_of(name) if name else []

    def _cl_experiment(self, experiment: Any, args: tuple, kwargs: dict) -> Any:
        """`checks.student_side`: experiment(this object, *args) run in the student's process; data back."""
        return self._cl_judge.experiment(self, experiment, args, kwargs)

    def __getitem__(self, key: Any) -> Any:
        return self._cl_op("getitem", key=key)

    def __len__(self) -> int:
        return int(self._cl_op("len"))

    def __iter__(self):
        return iter(self._cl_op("list"))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = np.asarray(self._cl_op("array"))
        return a.astype(dtype) if dtype is not None else a

    def __bool__(self) -> bool:
        return bool(self._cl_op("bool"))

    def __float__(self) -> float:
        return float(self._cl_op("num", kind="float"))

    def __int__(self) -> int:
        return int(self._cl_op("num", kind="int"))

    __index__ = __int__

    def __repr__(self) -> str:
        try:
            return str(self._cl_op("repr"))
        except Exception:
            return f"<{type(self).__name__} from the student's notebook>"


_REMOTE_TYPES: dict[str, type] = {}


def _remote_type(name: Any) -> type:
    """A Remote subclass named after the student's type, so checks' messages say 'got a list'."""
    name = name if isinstance(name, str) and name.isidentifier() else "object"
    if name not in _REMOTE_TYPES:
        _REMOTE_TYPES[name] = type(name, (Remote,), {"__module__": "student"})
    return _REMOTE_TYPES[name]


def _signature(sig: Any) -> inspect.Signature | None:
    if not isinstance(sig, list):
        return None
    try:
        params = [
            inspect.Parameter(name, inspect._ParameterKind(kind))
            for name, kind in sig
            if isinstance(name, str) and name.isidentifier() and type(kind) is int
        ]
        return inspect.Signature(params)
    except (ValueError, TypeError):
        return None


def _write_back(orig: Any, new: Any) -> None:
    """Copy an array the student's code wrote into the judge's own array, in place."""
    if not isinstance(new, np.ndarray):
        return
    if isinstance(orig, np.ndarray):
        if orig.shape == new.shape and orig.flags.writeable:
            np.copyto(orig, new, casting="unsafe")
    elif wire._is_device_array(orig):
        if tuple(orig.shape) == new.shape:
            orig.copy_to_device(np.ascontiguousarray(new, dtype=orig.dtype))
    else:
        tensor = wire._torch_tensor_type()
        if tensor is not None and isinstance(orig, tensor) and tuple(orig.shape) == new.shape:
            import torch

            with torch.no_grad():
                orig.copy_(torch.from_numpy(new).to(orig.dtype))


class Judge:
    """Runs one job: the plan's cells in order, answers in the sandbox, everything else here."""

    def __init__(self, job: dict) -> None:
        self.job = job
        self.limits = job["limits"]
        self.cell_timeout = float(job["cell_timeout"])
        self.deadline = time.monotonic() + float(job["timeout"])
        self.cell_deadline = self.deadline
        self.judge_since = time.monotonic()
        self.env = dict(os.environ)
        self.user = job.get("user")
        self.sandbox: Sandbox | None = None
        self.generation = 0
        self.restarts = 0
        self.max_restarts = len(job["names"]) + 2
        self.history: list[tuple[str, str]] = []  # (name, code) replayed into a fresh process
        self.answers: dict[int, dict] = {}  # exercise -> {"status", "message"}
        self.bound: dict[int, list[str]] = {}
        self.notes: list[str] = []
        self.isolation: dict = {}
        self.rebuilder: Any = None
        self.noops: dict[str, Any] = {}  # no-op kernels named after the student's, for _replay
        self.probe: Any = None
        self.untraceable: dict[str, str] = {}  # kernel -> why the tracer cannot be given it
        self.ns, self.transform = _namespace()

    # The channel ----------------------------------------------------------------

    def _start(self) -> Sandbox:
        """Start a student process; after a crash, replay the context and answers that ran before."""
        if self.sandbox is not None:
            self.sandbox.kill()
            self.restarts += 1
        if self.restarts > self.max_restarts:
            raise ProcessDied(
                f"the grader gave up after restarting your notebook's process {self.max_restarts} times"
            )
        self.generation += 1
        try:
            box = Sandbox(self.limits, self.env, self.user)
        except OSError as e:
            raise GraderFailure(f"could not start a process for the student's code: {e}") from None
        self.sandbox = box
        try:
            hello, _, _ = box.receive(time.monotonic() + 120)
        except (wire.ProtocolError, wire.Deadline) as e:
            raise GraderFailure(
                f"the process for the student's code did not start: {e}\n{box.tail()}"
            ) from None
        self.isolation = {k: hello.get(k) for k in ("landlock", "capabilities_dropped")}
        saved = self.cell_deadline
        try:
            for name, code in self.history:  # replay what ran before, each cell with its own time limit
                self._start_cell_clock()
                self._exchange(box, {"op": "exec", "name": name, "code": code}, [], replay=True)
            for ex, names in self.bound.items():
                self._start_cell_clock()
                self._bind(ex, names)
        finally:
            self.cell_deadline = saved
        return box

    def _live(self) -> Sandbox:
        if self.sandbox is None or not self.sandbox.alive():
            return self._start()
        return self.sandbox

    def _start_cell_clock(self) -> None:
        """A cell's time limit starts now; it counts the student's process's time, not the judge's."""
        self.cell_deadline = time.monotonic() + self.cell_timeout
        self.judge_since = time.monotonic()

    def _exchange(self, box: Sandbox, header: dict, buffers: list, replay: bool = False) -> Any:
        box.seq += 1
        header = dict(header, seq=box.seq)
        # The checks' own work since the last request (a compile, a trace) is not the student's time.
        self.cell_deadline += time.monotonic() - self.judge_since
        deadline = min(self.cell_deadline, self.deadline)
        try:
            wire.send(box.to_child, header, buffers)
            while True:
                reply, payload, spans = box.receive(deadline)
                if reply.get("seq") == box.seq:
                    break
            self.judge_since = time.monotonic()
        except wire.Deadline:
            box.kill()
            limit = "the notebook's" if self.deadline <= self.cell_deadline else "a cell's"
            raise TimeLimit(
                f"your code was still running when {limit} time limit was reached "
                f"({self._limit_seconds(limit)} s); is there an endless loop?"
            ) from None
        except (wire.ProtocolError, OSError) as e:
            closed = isinstance(e, (wire.ChannelClosed, OSError))
            if closed:
                try:
                    box.proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    pass
            code = box.proc.poll()
            box.kill()
            tail = box.tail()
            memory = "MemoryError" in tail or "Cannot allocate memory" in tail
            why = _status_text(code) if closed else f"it broke the channel ({e})"
            died = ProcessDied(
                f"the Python process running your notebook died while running your code: {why}"
                + (
                    f" (out of memory: the limit is {self.limits['memory_bytes'] >> 20} MiB)"
                    if memory
                    else ""
                )
                + "."
            )
            died.status = "memory" if memory else "crashed"
            died.output = tail  # type: ignore[attr-defined]
            raise died from None
        if "error" in reply:
            err = reply["error"] if isinstance(reply["error"], dict) else {}
            if err.get("type") in ("CudaAPIError", "CudaDriverError"):
                box.kill()  # its CUDA context is lost and it exits: the next request starts a fresh process
            if replay:
                return None
            raise _exception(err)
        decoder = wire.Decoder(payload, spans, self._from_ref)
        try:
            value = decoder.decode(reply.get("value"))
            back = decoder.decode(reply.get("back")) if "back" in reply else []
            events = decoder.decode(reply.get("events")) if "events" in reply else None
        except wire.ProtocolError as e:
            raise SubmissionError(f"the value your code returned could not be read: {e}") from None
        return value, back, events

    def _limit_seconds(self, which: str) -> float:
        return float(self.job["timeout"]) if which == "the notebook's" else self.cell_timeout

    def _from_ref(self, node: dict) -> Remote:
        return _remote_type(node.get("type"))(self, self.generation, node)

    def _to_ref(self, obj: Any) -> dict:
        """A handle on the student's object, or a judge's object (a config, a module) pickled for the sandbox.

        Pickles go one way only, judge to sandbox: what the instructor's cells built is rebuilt there
        from its state. Nothing the sandbox sends is ever unpickled.
        """
        if isinstance(obj, Remote):
            if obj._cl_gen != self.generation:
                raise ProcessDied("this object belonged to a process of your notebook that died earlier")
            return {"$": "r", "id": obj._cl_id}
        try:
            data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:
            raise TypeError(
                f"the grader cannot pass a {type(obj).__name__} to the student's code ({e}): a check that "
                f"needs it there runs that part through checks.student_side"
            ) from None
        return {"$": "r", "pickle": base64.b64encode(data).decode("ascii")}

    def request(self, op: str, remote: Remote | None, fields: dict) -> Any:
        """Send one request about `remote` (or the namespace) and return the decoded value."""
        box = self._live()
        if remote is not None and remote._cl_gen != self.generation:
            raise ProcessDied("this object belonged to a process of your notebook that died earlier")
        enc = wire.Encoder(self._to_ref)
        header = {"op": op, "id": remote._cl_id if remote is not None else None}
        for key, value in fields.items():
            header[key] = enc.encode(value) if key == "key" else value
        value, _, _ = self._exchange(box, header, enc.buffers)
        return value

    def _invoke(self, remote: Remote, op: str, args: tuple, kwargs: dict, **fields: Any) -> tuple[Any, Any]:
        """Send a call-like request (`op`) about `remote` with args and kwargs; (value, arrays written)."""
        box = self._live()
        enc = wire.Encoder(self._to_ref)
        header = {"op": op, "id": remote._cl_id, **fields}
        header.update(args=enc.encode(list(args)), kwargs=enc.encode(kwargs))
        if remote._cl_gen != self.generation:
            raise ProcessDied("this object belonged to a process of your notebook that died earlier")
        value, back, events = self._exchange(box, header, enc.buffers)
        self._replay(events)
        return value, back

    def call(self, remote: Remote, args: tuple, kwargs: dict) -> Any:
        """Call a student's function or kernel launch; copy arrays it wrote back into the judge's."""
        value, back = self._invoke(remote, "call", args, kwargs)
        for key, new in back if isinstance(back, list) else []:
            if type(key) is int and 0 <= key < len(args):
                _write_back(args[key], new)
            elif isinstance(key, str) and key in kwargs:
                _write_back(kwargs[key], new)
        return value

    def experiment(self, remote: Remote, experiment: Any, args: tuple, kwargs: dict) -> Any:
        """Run the package's function `experiment(student object, *args)` in the student's process."""
        module, name = getattr(experiment, "__module__", ""), getattr(experiment, "__qualname__", "")
        if (
            not module.startswith("cudalearn.")
            or not name.isidentifier()
            or getattr(sys.modules.get(module), name, None) is not experiment
        ):
            raise GraderFailure(
                f"checks.student_side needs a module-level cudalearn function, got {experiment!r}"
            )
        return self._invoke(remote, "experiment", args, kwargs, module=module, function=name)[0]

    def _replay(self, events: Any) -> None:
        """Replay the student's kernel launches and host copies through the judge's own (maybe counted) Numba.

        A check that counts launches or copies (chapter 5) wraps Numba's entry points in the judge; the
        student's code ran elsewhere, so each launch is replayed as a no-op kernel of the same name and
        each device-to-host copy as a one-element copy.
        """
        if not (isinstance(events, list) and len(events) == 2):
            return
        launches, copies = events
        from numba import cuda

        for name in launches if isinstance(launches, list) else []:
            name = (
                name
                if isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)
                else "kernel"
            )
            if name not in self.noops:  # named without compiling any text: the name is the student's
                code = _noop.__code__.replace(co_name=name, co_qualname=name)
                self.noops[name] = cuda.jit(types.FunctionType(code, {}, name))
            self.noops[name][1, 1]()
        if type(copies) is int and copies > 0:
            if self.probe is None:
                self.probe = cuda.to_device(np.zeros(1, np.float32))
            for _ in range(min(copies, 10_000)):
                self.probe.copy_to_host()

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

    def _bind(self, ex: int, names: list[str]) -> None:
        for name in names:
            try:
                value = self.request("get", None, {"name": name})
            except NameError:
                self.ns.pop(name, None)
                continue
            if isinstance(value, Remote):
                value.__dict__["_cl_trace"] = name  # a kernel the tracer may ask for: rebuilt from source
            self.ns[name] = value

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
            where = getattr(e, "student_where", "")
            msg = f"{type(e).__name__}: {e}" if not isinstance(e, SubmissionError) else str(e)
            status = "error"
            if isinstance(e, MemoryError):
                status, msg = (
                    "memory",
                    f"MemoryError: out of memory (the limit is {self.limits['memory_bytes'] >> 20} MiB)",
                )
            self.answers[ex] = {"status": status, "message": msg + (f" ({where})" if where else "")}
            self.notes.append(f"exercise {ex}: your exercise cell raised {self.answers[ex]['message']}")
            self.history.append((name, code))
        self.bound[ex] = names
        try:
            self._start_cell_clock()
            self._bind(ex, names)
        except GradingInterrupt as e:
            self.notes.append(f"exercise {ex}: could not read your definitions: {e}")

    def _context(self, cell: dict) -> None:
        self._start_cell_clock()
        try:
            self._exchange(
                self._live(), {"op": "exec", "name": f"cell {cell['index']}", "code": cell["student"]}, []
            )
            self.history.append((f"cell {cell['index']}", cell["student"]))
        except GradingInterrupt:
            pass
        except Exception as e:
            self.history.append((f"cell {cell['index']}", cell["student"]))
            self.notes.append(f"cell {cell['index'] + 1} of the lab failed in your notebook's process: {e}")
        self._start_cell_clock()
        try:
            self._run_here(cell["source"], f"cell {cell['index']}")
        except GradingInterrupt as e:
            self.notes.append(f"cell {cell['index'] + 1} of the lab: {e}")
        except Exception as e:
            self.notes.append(f"cell {cell['index'] + 1} of the lab raised {type(e).__name__}: {e}")

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
        return {**result, **outcome, "points": cell["points"] if outcome["status"] == "passed" else 0.0}

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
            limit = self.limits["memory_bytes"] >> 20
            where = getattr(e, "student_where", "")
            return {
                "status": "memory",
                "message": f"your code ran out of memory (the limit is {limit} MiB)"
                + (f", in your {where}" if where else "")
                + ".",
            }
        except NameError as e:
            return self._undefined(e, cell["exercise"])
        except Exception as e:
            where = getattr(e, "student_where", "")
            msg = str(e) if isinstance(e, SubmissionError) else f"{type(e).__name__}: {e}"
            return {"status": "error", "message": msg + (f" (raised in your {where})" if where else "")}
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
        where = getattr(e, "student_where", "")
        return {
            "status": "error",
            "message": f"NameError: {e}"
            + (f" (raised in your {where})" if where else "")
            + ". Only the code "
            "in the exercise cells is graded: define any helper inside the exercise cell that uses it.",
        }

    def run(self) -> dict:
        tests = []
        names = {int(k): v for k, v in self.job["names"].items()}
        for cell in self.job["cells"]:
            role = cell["role"]
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
        if self.sandbox is not None:
            self.sandbox.kill()
        return {"tests": tests, "notes": self.notes, "isolation": self.isolation, "restarts": self.restarts}


def _noop() -> None:
    """The body of the no-op kernels `Judge._replay` launches under the student's kernel names."""


def _namespace() -> tuple[dict, Any]:
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        from IPython.core.interactiveshell import InteractiveShell
        from traitlets.config import Config
    except ImportError:  # no IPython: plain Python cells, magics skipped
        from cudalearn.grading.sandbox import without_magics

        return {"__name__": "__main__"}, without_magics
    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
    return shell.user_ns, TransformerManager().transform_cell


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
        import cudalearn

        cudalearn.setup(quiet=True)  # the mode first, then Numba's own copy_to_host, before any lab cell
        wire.keep_host_copies()
        from cudalearn import ptx

        ptx.prestart()  # the compile for a real GPU, that every kernel check runs, warms up meanwhile
        result = Judge(job).run()
    except BaseException as e:  # a grader bug or a broken lab, never the student's fault
        import traceback

        result = {"fatal": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-4000:]}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    json.dump(result, out)
    out.flush()


if __name__ == "__main__":
    main()
