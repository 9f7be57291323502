"""The judge's end of the channel to the student's process: start, replay, requests, replies (grading).

`Channel` starts a confined student process (`process.Sandbox`), and after a
crash a fresh one into which it replays the context and the answers that ran
before. Each request has a deadline, for its sending as for its reply: the
cell's time limit, which counts the student's process's time and not the
judge's own work, or the notebook's. A reply is decoded as data; the
student's objects come back as `Remote` handles. The judge's own objects
cross the other way pickled, one way only.
"""

from __future__ import annotations

import base64
import keyword
import os
import pickle
import subprocess
import sys
import time
import types
from typing import Any

import numpy as np

from cudalearn.grading import wire
from cudalearn.grading.errors import (
    GraderFailure,
    ProcessDied,
    SubmissionError,
    ThreadsLeft,
    TimeLimit,
    rebuilt_exception,
)
from cudalearn.grading.process import Sandbox, _status_text
from cudalearn.grading.remote import Remote, remote_type, write_back


class Channel:
    """The student's process of one job, as the judge talks to it; the judge's cells bind names in `ns`."""

    def __init__(self, job: dict, ns: dict) -> None:
        self.job = job
        self.ns = ns
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
        self.bound: dict[int, list[str]] = {}
        self.isolation: dict = {}
        self.noops: dict[str, Any] = {}  # no-op kernels named after the student's, for _replay
        self.probe: Any = None

    def _start(self) -> Sandbox:
        """Start a student process; after a crash, replay the context and answers that ran before."""
        if self.sandbox is not None:
            self.sandbox.kill()
            self.restarts += 1
        started = time.monotonic()
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
            # Starting the process and replaying the cells before is the grader's work, not this cell's time.
            self.cell_deadline = saved + (time.monotonic() - started)
            self.judge_since = time.monotonic()
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
            # The deadline holds for sending too: a process that stops reading cannot hold the judge.
            wire.send(box.to_child, header, buffers, deadline=deadline)
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
                + (f" (out of memory: the limit is {self.memory_mib} MiB)" if memory else "")
                + "."
            )
            died.status = "memory" if memory else "crashed"
            died.output = tail  # type: ignore[attr-defined]
            raise died from None
        if "threads_left" in reply:
            box.kill()  # it ended itself: the next request starts a fresh process
            raise ThreadsLeft(
                f"your code left {reply['threads_left']} thread(s) running when it returned; the grader "
                "cannot end a thread alone, so it ended your notebook's process (the next cell or call "
                "starts a fresh one). Join every thread you start (thread.join()) before your function or "
                "cell ends."
            )
        if "error" in reply:
            err = reply["error"] if isinstance(reply["error"], dict) else {}
            if err.get("type") in ("CudaAPIError", "CudaDriverError"):
                box.kill()  # its CUDA context is lost and it exits: the next request starts a fresh process
            if replay:
                return None
            raise rebuilt_exception(err)
        decoder = wire.Decoder(payload, spans, self._from_ref)
        try:
            value = decoder.decode(reply.get("value"))
            back = decoder.decode(reply.get("back")) if "back" in reply else []
            events = decoder.decode(reply.get("events")) if "events" in reply else None
        except wire.ProtocolError as e:
            raise SubmissionError(f"the value your code returned could not be read: {e}") from None
        return value, back, events

    @property
    def memory_mib(self) -> int:
        """The student's process's memory limit in MiB, as the feedback states it."""
        return self.limits["memory_bytes"] >> 20

    def _limit_seconds(self, which: str) -> float:
        return float(self.job["timeout"]) if which == "the notebook's" else self.cell_timeout

    def _from_ref(self, node: dict) -> Remote:
        return remote_type(node.get("type"))(self, self.generation, node)

    def _check_alive(self, remote: Remote) -> None:
        """Raise ProcessDied if `remote` is a handle on an object of a student's process that died since."""
        if remote._cl_gen != self.generation:
            raise ProcessDied("this object belonged to a process of your notebook that died earlier")

    def _to_ref(self, obj: Any) -> dict:
        """A handle on the student's object, or a judge's object (a config, a module) pickled for the sandbox.

        Pickles go one way only, judge to sandbox: what the instructor's cells built is rebuilt there
        from its state. Nothing the sandbox sends is ever unpickled.
        """
        if isinstance(obj, Remote):
            self._check_alive(obj)
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
        if remote is not None:
            self._check_alive(remote)
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
        self._check_alive(remote)
        value, back, events = self._exchange(box, header, enc.buffers)
        self._replay(events)
        return value, back

    def call(self, remote: Remote, args: tuple, kwargs: dict) -> Any:
        """Call a student's function or kernel launch; copy arrays it wrote back into the judge's."""
        value, back = self._invoke(remote, "call", args, kwargs)
        for key, new in back if isinstance(back, list) else []:
            if type(key) is int and 0 <= key < len(args):
                write_back(args[key], new)
            elif isinstance(key, str) and key in kwargs:
                write_back(kwargs[key], new)
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

    def _bind(self, ex: int, names: list[str]) -> None:
        """Bind exercise `ex`'s names in `ns` to handles on the student's objects (unbound: not defined)."""
        for name in names:
            try:
                value = self.request("get", None, {"name": name})
            except NameError:
                self.ns.pop(name, None)
                continue
            if isinstance(value, Remote):
                value.__dict__["_cl_trace"] = name  # a kernel the tracer may ask for: rebuilt from source
            self.ns[name] = value


def _noop() -> None:
    """The body of the no-op kernels `Channel._replay` launches under the student's kernel names."""
