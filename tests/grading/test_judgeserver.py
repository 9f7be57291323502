"""Judges forked from the grade run's judge server grade exactly as judges started afresh (grading)."""

import os
import signal
import time

import nbformat
import pytest
from mutations import runner

from cudalearn.grading import Limits, grader, judgeserver
from cudalearn.grading import lab as lab_mod

pytestmark = pytest.mark.grader


def _results(tmp_path, monkeypatch, lab, entries, servers: bool):
    if not servers:
        monkeypatch.setattr(grader.Servers, "start", classmethod(lambda cls, plan: cls()))
    started = []
    real = grader.subprocess.Popen

    def popen(*a, **k):
        started.append(a[0])
        return real(*a, **k)

    monkeypatch.setattr(grader.subprocess, "Popen", popen)
    got = runner.grade_all(lab, entries, tmp_path, jobs=1)
    monkeypatch.undo()
    rows = {s: [(t.test_id, t.status, t.points, t.message) for t in r.tests] for s, r in got.items()}
    return rows, started


def test_forked_judges_grade_as_started_ones(tmp_path, monkeypatch):
    """Lab 03 (compiles, traces and times out a kernel): the solution and two wrong answers, both ways."""
    wrong = [m for m in runner.corpus("03") if not m.is_valid][:2]
    forked, started = _results(tmp_path / "forked", monkeypatch, "03", wrong, servers=True)
    assert not any("'cudalearn.grading.judge'" in str(cmd) for cmd in started), "every judge was forked"
    fresh, started = _results(tmp_path / "fresh", monkeypatch, "03", wrong, servers=False)
    assert any("'cudalearn.grading.judge'" in str(cmd) for cmd in started)
    assert forked == fresh
    assert forked["solution"] and all(status == "passed" for _, status, _, _ in forked["solution"])


def test_a_forked_judges_exit_status_reaches_the_grader():
    plan = lab_mod.load(runner.solution_path("00"))
    server = judgeserver.Server(judgeserver.preload_for(plan))
    try:
        judge = server.judge({**os.environ})
        os.kill(judge.pid, signal.SIGKILL)  # killed before its job (as by its memory limit)
        out, err = judge.communicate(b"{}", timeout=60)
        assert judge.returncode == -signal.SIGKILL and out == b""
        judge = server.judge({**os.environ})
        out, err = judge.communicate(b"not json", timeout=120)
        assert judge.returncode == 1 and b"JSONDecodeError" in err, "as a started judge: code 1, traceback"
    finally:
        server.close()


def test_the_grader_falls_back_to_starting_judges_without_a_server(tmp_path, monkeypatch):
    """A server that is gone: every judge is started as before, and grading goes on."""
    plan = lab_mod.load(runner.solution_path("00"))
    servers = grader.Servers(judges=judgeserver.Server(()))
    servers.judges.close()
    nb = nbformat.read(runner.solution_path("00"), as_version=4)
    t0 = time.monotonic()
    r = grader.grade_one(plan, "s", runner.solution_path("00"), Limits(), nb, servers=servers)
    assert r.total == r.max_total and time.monotonic() - t0 < 300


def test_no_judge_is_forked_outside_the_simulator(monkeypatch):
    """A CUDA context does not survive a fork: in any other mode the server forks nothing (the grader then
    starts each judge), shown here in compile mode, which a machine without a GPU has too."""
    monkeypatch.setenv("CUDALEARN_MODE", "compile")
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    server = judgeserver.Server(())
    try:
        with pytest.raises(OSError):  # "did not fork", or the connection reset by the server it ended
            server.judge({**os.environ}, timeout=120)
    finally:
        server.close()


def test_the_server_preloads_what_judges_import_on_first_use():
    """IPython's shell for every lab, the speed module (nbformat) for a lab with speed points only, and
    torch._dynamo (which PyTorch's optimisers import when first made) where the lab imports torch."""
    preload = {
        lab: judgeserver.preload_for(lab_mod.load(runner.solution_path(lab))) for lab in ("00", "03", "07")
    }
    assert "IPython.core.interactiveshell" in judgeserver._PRELOAD
    assert "cudalearn.grading.speed" in preload["03"] and "cudalearn.grading.speed" not in preload["00"]
    assert "torch._dynamo" in preload["07"] and "torch._dynamo" not in preload["03"]
