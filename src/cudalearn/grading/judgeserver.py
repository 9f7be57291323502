"""Judges forked from one warm process of a grade run, instead of a fresh Python each (instructors).

A judge starts by choosing the run mode and importing NumPy, Numba, the checks and the tracer (and,
for the labs that use it, PyTorch): about a second of CPU before it reads its job, and as much again
for what it imports later (IPython's shell, nbformat for speed points, torch._dynamo for an
optimiser). A grade run starts one `Server` that does that once, with the modules the lab's own
cells import and what those import on first use (`preload_for`), and then
forks a judge for each submission: a fresh process, in its own session, with its standard input,
output and error on the grader's pipes and the grader's environment, that runs `judge.main` as a
judge started by `python -m cudalearn.grading.judge` does. The server runs no job and no student
code ever: every judge starts from the same untouched state, and one judge's work never reaches
another's. It reports each judge's exit status on a pipe of that judge's own, so the grader still
says how a judge ended. It forks under the simulator only: in gpu mode the judge's CUDA context
would not survive a fork, so there the server ends at once and the grader starts each judge.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import socket
import struct
import subprocess

from cudalearn.compile import forkserver
from cudalearn.grading import python_command

_MODULE = "cudalearn.grading.judgeserver"
#: what every judge imports before its job: the mode's Numba, the checks, the tracer, the judge itself
_PRELOAD = (
    "numpy",
    "numba.cuda",
    "cudalearn.checks",
    "cudalearn.trace",
    "cudalearn.exercises",
    "cudalearn.grading.judge",
    "cudalearn.compile.ptx",
    "cudalearn.grading.rebuild",
    # the judge's notebook namespace (`cells.notebook_namespace`): IPython's shell and cell transformer
    "IPython.core.interactiveshell",
    "IPython.core.inputtransformer2",
    "traitlets.config",
)
#: what a module the lab imports imports itself on first use, in every judge that uses it: PyTorch's
#: optimisers and torch.fx import torch._dynamo (with SymPy and Triton), over a second of CPU per judge
_ON_FIRST_USE = {"torch": ("torch._dynamo",)}


class Judge:
    """A forked judge as the grader sees it: its pid, pipes and exit status (what a Popen gives: the grader's
    `watch` writes its job and reads its lines, then `wait`s for it)."""

    def __init__(self, pid: int, stdin, stdout, stderr, status: int) -> None:
        self.pid, self.stdin, self.stdout, self.stderr, self._status = pid, stdin, stdout, stderr, status
        self.returncode: int | None = None

    def communicate(self, data: bytes, timeout: float) -> tuple[bytes, bytes]:
        """Write the job, read the output and error to their end; raise TimeoutExpired past `timeout`."""
        import time

        try:
            self.stdin.write(data)
            self.stdin.close()
        except BrokenPipeError:
            pass
        out, err = bytearray(), bytearray()
        streams = {self.stdout.fileno(): out, self.stderr.fileno(): err}
        deadline = time.monotonic() + timeout
        while streams:
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired("judge", timeout, bytes(out), bytes(err))
            for fd in select.select(list(streams), [], [], left)[0]:
                chunk = os.read(fd, 1 << 16)
                if chunk:
                    streams[fd].extend(chunk)
                else:
                    del streams[fd]
        self.returncode = self._read_status(max(deadline - time.monotonic(), 0) + 5)
        self.stdout.close()
        self.stderr.close()
        return bytes(out), bytes(err)

    def wait(self, timeout: float) -> int | None:
        """The judge's exit code (negative: a signal; None: unknown), as Popen.wait; TimeoutExpired past
        `timeout`. Its output pipes are closed once it has ended."""
        if self._status is None:
            return self.returncode
        if not select.select([self._status], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired("judge", timeout)
        self.returncode = self._read_status(0)
        self._status = None
        for stream in (self.stdout, self.stderr):
            stream.close()
        return self.returncode

    def _read_status(self, timeout: float) -> int | None:
        ready = select.select([self._status], [], [], timeout)[0]
        raw = os.read(self._status, 4) if ready else b""
        os.close(self._status)
        if len(raw) < 4:
            return None
        status = struct.unpack(">i", raw)[0]
        return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


class Server(forkserver.ForkServer):
    """The grade run's judge server: `judge(env)` forks a judge and returns it."""

    def __init__(self, preload: tuple[str, ...] = ()) -> None:
        argv = lambda fd: python_command(_MODULE, str(fd), json.dumps(list(preload)))  # noqa: E731
        super().__init__(argv, {**os.environ, "MPLBACKEND": "Agg"})

    def judge(self, env: dict, fd_env: dict[str, int] | None = None, timeout: float = 300.0) -> Judge:
        """Fork a judge with this environment; `fd_env` names variables whose value starts with a
        descriptor of this process ("FD:...") that the judge gets too (renumbered in its variable)."""
        fd_env = fd_env or {}
        pipes = [os.pipe() for _ in range(4)]  # stdin, stdout, stderr, exit status
        theirs = [pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][1], *fd_env.values()]
        try:
            reply = self.request(json.dumps([env, list(fd_env)]).encode(), theirs, timeout)
        except BaseException:
            for fd in (pipes[0][1], pipes[1][0], pipes[2][0], pipes[3][0]):
                os.close(fd)
            raise
        finally:
            for fd in theirs[:4]:
                os.close(fd)
        pid = struct.unpack(">i", reply)[0]
        return Judge(
            pid,
            os.fdopen(pipes[0][1], "wb"),
            os.fdopen(pipes[1][0], "rb"),
            os.fdopen(pipes[2][0], "rb"),
            pipes[3][0],
        )


def preload_for(plan) -> tuple[str, ...]:
    """The modules a lab's own cells (context and tests) import, those of the checks they call, what those
    import on first use, and, for a lab with speed points, the judge's speed module (it imports nbformat:
    a second of CPU)."""
    import ast

    from cudalearn import exercises
    from cudalearn.grading import speed
    from cudalearn.grading.cells import without_magics

    names = []
    for cell in plan.cells:
        if cell.role not in ("context", "test"):
            continue
        try:
            tree = ast.parse(without_magics(cell.source))
        except SyntaxError:
            continue
        for node in tree.body:  # top-level imports only: the setup cell's Colab branch never runs here
            if isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if node.value.id == "exercises" and node.attr in exercises._WHERE:
                    names.append(f"cudalearn.{exercises._WHERE[node.attr]}")
    names += [later for name in names for later in _ON_FIRST_USE.get(name, ())]
    if speed.declarations(plan):
        names.append("cudalearn.grading.speed")
    return tuple(dict.fromkeys(names))


def _main(fd: int, preload: list[str]) -> None:
    """The server: choose the mode, import what every judge of the lab imports, fork on request."""
    import sys

    from cudalearn.grading import wire
    from cudalearn.grading.process import make_private
    from cudalearn.runtime import device

    make_private()  # it holds no hidden test, but every judge is forked from it: none may ptrace it
    if device.setup(quiet=True).mode != "sim":  # the mode first, as judge.main chooses it
        return  # a GPU's context does not survive a fork: the grader starts every judge afresh there
    wire.keep_host_copies()  # then the host copies, as judge.main does
    for name in (*_PRELOAD, *preload):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001  (a module the lab's cells name but this machine lacks)
            pass
    control = socket.socket(fileno=fd)
    status_of: dict[int, int] = {}  # judge pid -> the write end of its status pipe
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select; judges are reaped below
    while True:
        _reap(status_of)
        try:
            ready = select.select([control, wake_r], [], [])[0]
        except InterruptedError:
            continue
        if wake_r in ready:
            os.read(wake_r, 4096)
        if control not in ready:
            continue
        try:
            msg, fds, _, _ = socket.recv_fds(control, 1 << 20, 16)
        except OSError:
            return
        if not msg:
            return  # the grader ended
        env, fd_env = json.loads(msg)
        pid = os.fork()
        if pid == 0:
            _child(fds, env, fd_env, control, wake_r, wake_w, status_of)
        for f in fds[:3] + fds[4:]:
            os.close(f)
        status_of[pid] = fds[3]
        control.sendall(struct.pack(">i", pid))
    sys.exit(0)


def _reap(status_of: dict[int, int]) -> None:
    """Collect ended judges and write each one's wait status to its own pipe."""
    while status_of:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = status_of.pop(pid, None)
        if fd is not None:
            try:
                os.write(fd, struct.pack(">i", status))
            except OSError:
                pass
            os.close(fd)


def _fresh_random_state() -> None:
    """Seed Python's, NumPy's and PyTorch's global generators from the OS, as a fresh judge's are (a forked
    one would share the server's: every student's unseeded draws the same)."""
    import random
    import sys

    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if "torch" in sys.modules:
        sys.modules["torch"].seed()


def _child(fds, env, fd_env, control, wake_r, wake_w, status_of) -> None:
    """In the forked judge: its own session and descriptors, the grader's environment, then the judge."""
    import ctypes
    import sys
    import tempfile

    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG: it dies with the server
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    control.close()
    for f in (wake_r, wake_w, fds[3], *status_of.values()):
        os.close(f)
    os.setsid()
    for target, f in enumerate(fds[:3]):
        os.dup2(f, target)
        os.close(f)
    for name, f in zip(fd_env, fds[4:], strict=True):
        env[name] = f"{f}:{env[name].split(':', 1)[1]}" if ":" in env[name] else str(f)
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None  # the grader's TMPDIR for this notebook, not one the server may have cached
    _fresh_random_state()
    from cudalearn.grading import judge

    code = 0
    try:
        judge.main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001  (as Python itself: the traceback on stderr, code 1)
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


if __name__ == "__main__":
    import sys

    _main(int(sys.argv[1]), json.loads(sys.argv[2]))
