"""The process that runs one submission's code, confined, and answers the judge in data only (instructors).

Started by the judge as `python -I -B -m cudalearn.grading.sandbox IN OUT`
(two pipe descriptors), in an empty temporary folder, with a minimal
environment, inside its cgroup when the judge could make one. Before it runs
any student code it confines itself (`confinement`: its namespaces, the
student's user, resource limits, capabilities, `landlock`).

Then it loops: receive a request, run it (`server`), reply with a value that
is data (see `wire`) or a numbered handle on an object that stays here.
Processes that a cell or a call of the student's code leaves running are
ended when it returns (`end_leftovers`): a fork storm's sleepers would
otherwise hold the cgroup's process count, and the next cell could not
start a thread. A thread it leaves running cannot be ended alone, so the
process ends instead (`stray_threads`): the reply says so, the judge
fails that cell or call and starts a fresh process for the next one. Any
request can run the student's code (a property, a `__repr__`), so both
sweeps follow every request.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from cudalearn.grading import process, wire
from cudalearn.grading.confinement import confine
from cudalearn.grading.server import Server, describe

MESSAGE_LIMIT = 256 << 20  # bytes in one request from the judge (a check's input arrays)
THREAD_STACK = 512 << 10  # bytes of stack per thread


def end_leftovers(in_namespace: bool, rounds: int = 50) -> int:
    """SIGKILL the processes the student's code left running and reap them; how many (grading, every lab).

    In the PID namespace that is every process but its init (1) and this one; without a namespace, this
    process's descendants (an escaped orphan is left to the judge's cgroup and subreaper).
    """
    me, ended = os.getpid(), set()
    for _ in range(rounds):
        table = process.process_table()
        if in_namespace:
            found = set(table) - {1, me}
        else:
            found, frontier = set(), {me}
            while frontier:
                frontier = {pid for pid, (ppid, _) in table.items() if ppid in frontier} - found
                found |= frontier
        if not found:
            break
        process.sigkill(found)
        ended |= found
        _reap()
    _reap()
    return len(ended)


def _threads(python_only: bool) -> set:
    """This process's threads: its OS threads (Linux) and its Python threads (`threading` or `_thread`)."""
    found = {("py", ident) for ident in sys._current_frames()}
    if not python_only:
        try:
            found |= {("os", tid) for tid in os.listdir("/proc/self/task")}
        except OSError:
            pass
    return found


def stray_threads(before: set, python_only: bool, wait: float = 1.0) -> int:
    """How many threads the request started that are still running (after `wait` s for them to end).

    `python_only` on a GPU, where the CUDA driver and its libraries start threads of their own in C.
    """
    end = time.monotonic() + wait
    while True:
        left = _threads(python_only) - before
        if not left or time.monotonic() > end:
            return len({ident for kind, ident in left if kind == "py"} or left)
        time.sleep(0.01)


def _reap() -> None:
    """Collect this process's ended children, so they no longer count in the cgroup's process limit."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(argv: list[str]) -> None:
    """Entry point: confine, say hello, then serve the judge's requests until the channel closes."""
    fd_in, fd_out = int(argv[0]), int(argv[1])
    header, _, _ = wire.recv(fd_in, limit=1 << 20)
    workdir = os.getcwd()
    applied = confine(header, workdir, (fd_in, fd_out))
    # The simulator runs a Python thread per CUDA thread (1024 in a 32x32 block): with the default 8 MiB
    # stacks, RLIMIT_DATA would count 8 GiB of address space for one block.
    threading.stack_size(THREAD_STACK)
    from cudalearn.runtime import device

    python_only = device.setup(quiet=True).mode == "gpu"
    server = Server()
    wire.send(fd_out, {"hello": True, "pid": os.getpid(), **applied})
    while True:
        try:
            req, payload, spans = wire.recv(fd_in, limit=MESSAGE_LIMIT)
        except wire.ChannelClosed:
            os._exit(0)
        seq = req.get("seq")
        before = _threads(python_only)
        try:
            reply, buffers = server.handle(req, payload, spans)
        except BaseException as e:  # the student's error (or SystemExit): reported, never fatal here
            reply, buffers = {"error": describe(e)}, []
        stray = stray_threads(before, python_only)
        end_leftovers(bool(applied.get("namespaces")))
        if stray:
            reply, buffers = {"threads_left": stray}, []
        reply["seq"] = seq
        wire.send(fd_out, reply, buffers)
        if stray:
            os._exit(4)  # a thread cannot be ended alone: the process ends, and the judge starts a fresh one
        if "error" in reply and reply["error"]["type"] in ("CudaAPIError", "CudaDriverError"):
            os._exit(3)  # the CUDA context is lost (an illegal address...): the judge starts a new process


if __name__ == "__main__":
    main(sys.argv[1:])
