"""The grade run's compile server (compile/forkserver.py): one warm process forks a worker per judge."""

import os
import re
import signal
import time

import pytest

from cudalearn.compile import forkserver, ptx

pytestmark = pytest.mark.compile


def scale(x, factor):  # a kernel's plain function: what a judge sends to its worker
    i = x.shape[0] - 1
    x[i] = x[i] * factor


def _same_code(a, b):
    """Two compile answers alike but for Numba's per-process version tag in mangled names (`B2v1B`)."""
    tag = re.compile(r"B\d+v\d+B")
    return a[0] == b[0] and tag.sub("BvB", a[1]) == tag.sub("BvB", b[1])


def _wait(predicate, seconds=60.0):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is no worker: the server reaps its workers (SIGCHLD ignored)
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


@pytest.fixture
def server():
    s = forkserver.Server()
    yield s
    s.close()


def _judge_worker(server, monkeypatch):
    """A ptx._Worker as a judge makes it: from the environment the grader sets for the judge."""
    sock, pid = server.worker()
    fd = os.dup(sock.fileno())  # the judge's inherited copy
    sock.close()
    monkeypatch.setenv(ptx.WORKER_ENV, f"{fd}:{pid}")
    worker = ptx._Worker()
    assert ptx.WORKER_ENV not in os.environ, "the judge takes its worker once; its sandbox never sees it"
    return worker, pid


def test_a_forked_worker_compiles_as_a_started_one_and_later_workers_reuse_its_result(server, monkeypatch):
    sig = ptx.signature_types("void(float32[::1], float32)")
    payload = ptx._payload(scale)
    started = ptx._Worker()  # the judge's own worker, started as outside a grade run
    try:
        want = started.request(payload, sig, ptx.T4)
    finally:
        started.close()
    assert want[0] == "ok" and ".target sm_75" in want[1]
    first, pid = _judge_worker(server, monkeypatch)
    assert _same_code(first.request(payload, sig, ptx.T4), want)
    assert _wait(lambda: server.cached() == (1, 1)), "the worker reported what it compiled"
    second, _ = _judge_worker(server, monkeypatch)
    again = first.request(payload, sig, ptx.T4)
    assert second.request(payload, sig, ptx.T4) == again, "a later judge's worker answers from the results"
    bad = ptx._payload(lambda x: cuda_undefined_name(x))  # noqa: F821
    assert second.request(bad, ptx.signature_types("void(float32[::1])"), ptx.T4)[0] == "error"
    assert _wait(lambda: server.cached() == (2, 2)), "scale came from the results (no second report)"
    first.close()
    second.close()
    assert _wait(lambda: not _alive(pid)), "a closed worker is killed"


def test_a_worker_ends_when_its_judge_goes_away(server):
    sock, pid = server.worker()
    assert _alive(pid)
    sock.close()  # the judge died: its end of the socket closes
    assert _wait(lambda: not _alive(pid)), "the worker must not outlive its judge"


def test_the_grader_kills_the_judges_worker_when_the_judge_ends(tmp_path, monkeypatch):
    """A judge that leaves its worker (killed mid-compile, say) leaves no process behind."""
    from cudalearn.grading import grader

    pids = []
    real = forkserver.Server.worker

    def spy(self, *a, **k):
        sock, pid = real(self, *a, **k)
        pids.append(pid)
        return sock, pid

    monkeypatch.setattr(forkserver.Server, "worker", spy)
    sub = tmp_path / "sub" / "alice"
    sub.mkdir(parents=True)
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    (sub / "lab.ipynb").write_bytes((root / "labs" / "00-setup.ipynb").read_bytes())
    results = grader.grade("00", [tmp_path / "sub"], out=None, root=root)
    assert results[0].max_total > 0 and pids, "graded, with a worker from the server"
    assert _wait(lambda: not any(_alive(p) for p in pids), 30), "no compile worker outlives its judge"
    assert all(os.getpgid(os.getpid()) != p for p in pids)


def test_the_server_dies_with_the_grader_process_group_signal(server):
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait()
    with pytest.raises(OSError):
        server.worker(timeout=5)


def test_a_worker_report_is_data_the_server_checks():
    """The server reads what workers report as JSON of a fixed shape: a pickle, a forged status or a record
    over the cap is dropped, and nothing of it is executed."""
    import json
    import pickle
    import struct

    def record(data: bytes) -> int:
        r, w = os.pipe()
        os.write(w, struct.pack(">Q", len(data)) + data)
        os.close(w)
        return r

    cache = {}
    good = json.dumps(["ab" * 32, ["float32"], [7, 5], "ok", ".target sm_75"]).encode()
    assert forkserver._keep(record(good), cache) and cache == {
        (bytes.fromhex("ab" * 32), ("float32",), (7, 5)): ("ok", ".target sm_75")
    }
    for bad in (
        pickle.dumps(("k", ("ok", "x"))),
        json.dumps(["ab" * 32, ["float32"], [7, 5], "unavailable", "x"]).encode(),
        json.dumps(["short", [], [7, 5], "ok", "x"]).encode(),
    ):
        assert not forkserver._keep(record(bad), cache)
    r, w = os.pipe()
    os.write(w, struct.pack(">Q", forkserver.MAX_REPORT + 1))
    os.close(w)
    assert not forkserver._keep(r, cache) and len(cache) == 1


def test_a_failed_request_ends_the_server_so_no_late_reply_is_misread():
    server = forkserver.Server()
    try:
        with pytest.raises(OSError):
            server.worker(timeout=0.001)  # NVVM is still loading: no reply in time
        assert server.broken and server.proc.poll() is not None
        with pytest.raises(OSError, match="ended after an earlier failure"):
            server.worker()
    finally:
        server.close()
