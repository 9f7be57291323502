"""A warm compile worker for every judge of a grade run, forked from one process (grading).

Every kernel check compiles the student's kernel for a real GPU in a worker process with Numba's
real target (`ptx`): a fresh Python that imports Numba and loads NVVM, about a second of CPU before
its first compile. A grade run starts one `Server` instead: it does that work once, then forks a
worker for each judge, a fresh process that serves that judge alone over a socket pair and inherits
NVVM loaded. It also keeps every compile result its workers report, so a later worker answers a
kernel that an earlier submission compiled (the same pickled function, signature and target, hence
the same PTX but for Numba's per-process numbering of mangled names, which no check reads) without
compiling it again; a worker that times out reports nothing.

Nothing of a student's reaches the server except the verified kernels their judges send to its
workers, and a worker is a separate process that the grader ends with its judge. Student code never
sees the socket: the judge's sandbox inherits no file descriptor of the judge.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable

from cudalearn.compile import ptx

_FORK, _COUNT = b"F", b"N"


class ForkServer:
    """A grade run's warm process that forks on request, over a control socket (compile, judge servers)."""

    def __init__(self, argv: Callable[[int], list[str]], env: dict) -> None:
        """Start `argv(fd)`, fd being the server's end of the control socket; `env` its environment."""
        mine, theirs = socket.socketpair()
        self.proc = subprocess.Popen(
            argv(theirs.fileno()),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(theirs.fileno(),),
            env=env,
        )
        theirs.close()
        self.control = mine
        self._lock = threading.Lock()
        self.broken = False

    def request(self, message: bytes, fds: list[int], timeout: float, reply: int = 4) -> bytes:
        """Send a message (and descriptors); return the server's whole reply of `reply` bytes.

        Any failure (a timeout, a short reply, a server that ended) ends the server for good and raises
        OSError: a reply that came late must never be read as the answer to the next request."""
        with self._lock:  # one request at a time: the grader's threads share the server
            if self.broken:
                raise OSError("the server was ended after an earlier failure")
            try:
                socket.send_fds(self.control, [message], fds)
                self.control.settimeout(timeout)  # the first request waits for the server's start
                data = b""
                while len(data) < reply:
                    chunk = self.control.recv(reply - len(data))
                    if not chunk:
                        break
                    data += chunk
                if len(data) < reply:
                    raise OSError("the server ended without a reply")
                return data
            except BaseException:
                self._end()
                raise

    def _end(self) -> None:
        self.broken = True
        self.control.close()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        """End the server (what it forked ends with its judge, or the grader kills it)."""
        with self._lock:
            self._end()


class Server(ForkServer):
    """The grade run's compile server: `worker()` forks a fresh worker and returns its socket and pid."""

    def __init__(self) -> None:
        die = "sys.platform.startswith('linux') and __import__('ctypes').CDLL(None).prctl(1, 9, 0, 0, 0)"
        boot = "import sys; {die}; from cudalearn.compile.forkserver import _main; _main({fd})"
        super().__init__(lambda fd: [sys.executable, "-c", boot.format(die=die, fd=fd)], ptx.worker_env())

    def worker(self, timeout: float = 240.0) -> tuple[socket.socket, int]:
        """(the judge's end of a socket pair, the pid of the worker forked to serve its other end)."""
        mine, theirs = socket.socketpair()
        try:
            reply = self.request(_FORK, [theirs.fileno()], timeout)  # the first waits for NVVM to load
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        return mine, struct.unpack(">i", reply)[0]

    def cached(self) -> tuple[int, int]:
        """(results the server keeps for the workers it will fork, compiles its workers reported)."""
        return struct.unpack(">ii", self.request(_COUNT, [], 60, reply=8))  # the reply is whole, or OSError


def _main(fd: int) -> None:
    """The server: load Numba's real target and NVVM, then fork a worker for each request."""
    if sys.platform.startswith("linux"):  # PR_SET_DUMPABLE 0: no process of its user may ptrace it or
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # read its memory; its workers inherit that
    control = socket.socket(fileno=fd)
    ptx._pretend_device(ptx.T4)
    ptx._compile_here(ptx._warm_up_kernel, ptx.signature_types("void(float32[::1])"), ptx.T4)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers are reaped as they end
    cache: dict = {}
    reported = 0  # compiles the workers reported (a result asked for again is answered from the cache)
    reports: list[int] = []  # the read ends of the workers' report pipes, one a worker
    while True:
        ready, _, _ = select.select([control, *reports], [], [])
        for r in [r for r in ready if r in reports]:
            if _keep(r, cache):
                reported += 1
            else:
                os.close(r)
                reports.remove(r)
        if control not in ready:
            continue
        try:
            msg, fds, _, _ = socket.recv_fds(control, 1, 1)
        except OSError:
            return
        if msg == _COUNT:
            control.sendall(struct.pack(">ii", len(cache), reported))
            continue
        if not msg or not fds:
            return  # the grader ended
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker: this judge's socket and its report pipe, nothing else of the server
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            control.close()
            os.close(r)
            for other in reports:
                os.close(other)
            _serve(socket.socket(fileno=fds[0]), cache, w)
            os._exit(0)
        os.close(fds[0])
        os.close(w)
        reports.append(r)
        control.sendall(struct.pack(">i", pid))


def _read_exact(fd: int, n: int) -> bytes:
    """n bytes from fd, or fewer at its end."""
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            break
        data += chunk
    return data


#: the largest report a worker may send (a kernel's PTX and its key): a longer one ends its pipe
MAX_REPORT = 16 << 20


def _keep(fd: int, cache: dict) -> bool:
    """Read one result a worker reported into the cache; False at the pipe's end or at a bad record.

    A record is JSON, never a pickle: a worker compiles students' kernels, so what it says is data the
    server checks (a digest, signature and target as the key, a status and a text as the result)."""
    head = _read_exact(fd, 8)
    if len(head) < 8:
        return False
    n = struct.unpack(">Q", head)[0]
    if n > MAX_REPORT:
        return False
    data = _read_exact(fd, n)
    if len(data) < n:
        return False  # a worker killed mid-write: the record is dropped
    try:
        digest, sig, cc, status, text = json.loads(data)
        ok = (
            isinstance(digest, str)
            and len(digest) == 64
            and all(isinstance(t, str) for t in sig)
            and all(isinstance(c, int) for c in cc)
            and status in ("ok", "error")
            and isinstance(text, str)
        )
    except (ValueError, TypeError):
        return False
    if not ok:
        return False
    cache[(bytes.fromhex(digest), tuple(sig), tuple(cc))] = (status, text)
    return True


def _serve(sock: socket.socket, cache: dict, report: int) -> None:
    """A worker: answer its judge's (payload, sig, cc) requests as `ptx._serve` does, from the cache
    the server had when it forked this worker, else by compiling (and reporting what it compiled)."""
    import hashlib

    os.setsid()  # its own group: the grader kills it by pid, never the server with it
    reader, writer = sock.makefile("rb"), sock.makefile("wb")
    while (request := ptx._read(reader)) is not None:
        payload, sig, cc = request
        key = (hashlib.sha256(payload).digest(), tuple(str(t) for t in sig), tuple(cc))
        answer = cache.get(key)
        if answer is None:
            answer = ptx.answer(payload, sig, cc)
            if answer[0] != "unavailable":
                cache[key] = answer
                data = json.dumps([key[0].hex(), list(key[1]), list(key[2]), *answer]).encode()
                record = memoryview(struct.pack(">Q", len(data)) + data)
                while record:
                    record = record[os.write(report, record) :]
        ptx._write(writer, answer)
