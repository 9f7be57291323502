"""The student's process as the judge starts, confines from outside and ends it (instructors' grading).

`Sandbox` spawns `python -m cudalearn.grading.sandbox` with a scrubbed
environment in a fresh folder, drains what it prints, and kills its whole
process tree when the test is over; `make_private` keeps the judge's and
grader's memory (the hidden tests) away from same-user processes.
"""

from __future__ import annotations

import collections
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Any

from cudalearn.grading import python_command, wire

SANDBOX_MODULE = "cudalearn.grading.sandbox"
MESSAGE_LIMIT = 1 << 30  # bytes in one reply from the student's process
ENV_KEEP = (
    "PATH",
    "LANG",
    "LC_ALL",
    "CUDALEARN_MODE",
    "CUDA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
)


BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _status_text(returncode: int | None) -> str:
    if returncode is None:
        return "it stopped answering"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"it was killed by {name}"
    return f"it exited with code {returncode}"


class Sandbox:
    """One confined student process and the pipes to it."""

    def __init__(self, limits: dict, env: dict, user: str | None) -> None:
        self.workdir = tempfile.mkdtemp(prefix="cudalearn-sandbox-")
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        kw: dict[str, Any] = {}
        if user:
            import pwd

            pw = pwd.getpwnam(user)
            os.chown(self.workdir, pw.pw_uid, pw.pw_gid)
            kw = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
        os.chmod(self.workdir, 0o700)
        env = {k: v for k, v in env.items() if k in ENV_KEEP or k.startswith("NUMBA_")}
        # One BLAS thread: OpenBLAS reserves a buffer per core when it loads (scipy, torch); on a 16-core
        # H200 host that overran the memory limit and died with SIGINT. Graders run notebooks side by side.
        env.update({k: "1" for k in BLAS_THREADS})
        env.update(
            HOME=self.workdir,
            TMPDIR=self.workdir,
            IPYTHONDIR=os.path.join(self.workdir, ".ipython"),
            MPLCONFIGDIR=os.path.join(self.workdir, ".matplotlib"),
            MPLBACKEND="Agg",
        )
        self.proc = subprocess.Popen(
            python_command(SANDBOX_MODULE, str(to_child_r), str(from_child_w)),
            pass_fds=(to_child_r, from_child_w),
            cwd=self.workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            **kw,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self.output: collections.deque[bytes] = collections.deque(maxlen=64)
        self._drain = threading.Thread(target=self._read_output, daemon=True)
        self._drain.start()
        self.seq = 0
        self.closed = False
        try:
            wire.send(self.to_child, {**limits, "judge_pid": os.getpid()})
        except OSError:
            pass  # it died at once: receive() reports it

    def _read_output(self) -> None:
        assert self.proc.stdout is not None
        for chunk in iter(lambda: self.proc.stdout.read1(4096), b""):
            self.output.append(chunk)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, chars: int = 1500) -> str:
        """The last lines the student's process printed (for crash feedback)."""
        text = b"".join(self.output).decode("utf-8", "replace")
        return text[-chars:].strip()

    def receive(self, deadline: float) -> tuple[dict, memoryview, list]:
        return wire.recv(self.from_child, limit=MESSAGE_LIMIT, deadline=deadline, alive=self.alive)

    def kill(self) -> None:
        """Kill the student's process group and any process it left behind, then remove its folder (once)."""
        if self.closed:
            return
        self.closed = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the group outlives its leader: kill it even if it died
        except (ProcessLookupError, PermissionError):
            if self.proc.poll() is None:
                self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        _kill_orphans()
        for fd in (self.to_child, self.from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        self._drain.join(timeout=2)
        shutil.rmtree(self.workdir, ignore_errors=True)


def _kill_orphans() -> None:
    """Kill processes re-parented to the judge (it is their subreaper): a student's escaped children."""
    me = os.getpid()
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me:
            try:
                os.kill(int(entry), signal.SIGKILL)
                os.waitpid(int(entry), os.WNOHANG)
            except (ProcessLookupError, ChildProcessError, PermissionError):
                pass


def make_private(subreaper: bool = False) -> None:
    """Make this process non-dumpable: no process of the same user can ptrace it or read its memory.

    With `subreaper`, orphans of its children (a student's escaped
    processes) are re-parented to it, so `_kill_orphans` can end them.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
        if subreaper:
            libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
