"""run.py's setup choices: PyTorch's CPU build first without an NVIDIA GPU (issue 17); a step line per
install group, a student's set apart from CI's, JupyterLab as root and as a user (issue 31)."""

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run_py():
    """run.py as a module (standard library only; it does nothing on import)."""
    spec = importlib.util.spec_from_file_location("cudalearn_run_py_setup", ROOT / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_without_a_gpu_torch_comes_from_the_cpu_index_first(monkeypatch):
    run = _run_py()
    monkeypatch.setattr(run, "reachable", lambda url, timeout=10.0: True)
    monkeypatch.setattr(sys, "platform", "linux")
    cmd = run.torch_cpu_first(["pip", "install"], gpu=False)
    version = run.pinned("torch")
    assert version and cmd[-1] == f"torch=={version}"
    assert cmd[cmd.index("--extra-index-url") + 1] == run.TORCH_CPU_INDEX
    assert cmd[cmd.index("-c") + 1] == "constraints.txt"


def test_with_a_gpu_or_on_macos_the_registry_build_is_kept(monkeypatch):
    run = _run_py()
    monkeypatch.setattr(run, "reachable", lambda url, timeout=10.0: True)
    monkeypatch.setattr(sys, "platform", "linux")
    assert run.torch_cpu_first(["pip"], gpu=True) is None
    monkeypatch.setattr(sys, "platform", "darwin")
    assert run.torch_cpu_first(["pip"], gpu=False) is None


def test_an_unreachable_cpu_index_falls_back_with_one_line(monkeypatch, capsys):
    run = _run_py()
    monkeypatch.setattr(sys, "platform", "linux")
    # a port nothing listens on: refused at once, as on a CI machine without that host
    assert run.torch_cpu_first(["pip"], gpu=False, index="http://127.0.0.1:9") is None
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "cannot be reached" in out[0] and "package registry" in out[0]


def test_reachable_answers_quickly_for_a_refused_port():
    assert _run_py().reachable("http://127.0.0.1:9/", timeout=2) is False


def test_jupyterlab_gets_allow_root_as_root_and_only_then(monkeypatch):
    """JupyterLab refuses to start as root without --allow-root (containers, cloud notebooks run as root)."""
    run = _run_py()
    monkeypatch.setattr(run.os, "name", "posix")
    monkeypatch.setattr(run.os, "geteuid", lambda: 0)
    assert "--allow-root" in run.course_command([])
    monkeypatch.setattr(run.os, "geteuid", lambda: 1000)
    assert "--allow-root" not in run.course_command([])


def test_jupyterlab_starts_with_the_course_config_first(tmp_path):
    """jupyter-config/ first on JUPYTER_CONFIG_PATH: no news toast, no nbgrader UI (test_jupyterlab.py)."""
    run = _run_py()
    env = run.course_env({"JUPYTER_CONFIG_PATH": "/elsewhere"})
    assert env["JUPYTER_CONFIG_PATH"].split(":") == [str(ROOT / "jupyter-config"), "/elsewhere"]
    assert (ROOT / "jupyter-config" / "labconfig" / "default_setting_overrides.json").is_file()


def test_setup_says_each_step_with_its_time_and_installs_only_what_is_missing(monkeypatch, tmp_path, capsys):
    """A line per install step and its time; pip's own output is not silenced; `test` adds CI's tools."""
    run = _run_py()
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    monkeypatch.setattr(run, "PY", venv / "bin" / "python")
    monkeypatch.setattr(run, "STAMP", venv / ".cudalearn-installed")
    monkeypatch.setattr(run, "torch_cpu_first", lambda pip: None)
    calls = []
    monkeypatch.setattr(run, "_run", lambda cmd, **kw: calls.append([str(c) for c in cmd]) or 0)
    run.setup("course")
    assert [c[-1] for c in calls] == [".[course]"] and not any("-q" in c for c in calls)
    out = capsys.readouterr().out
    assert re.search(r"step 1/1: the course: .*\n.*\n?.*step 1/1 done in \d+ s", out), out
    calls.clear()
    run.setup("test")  # the course is there: only CI's and instructors' tools are added
    assert [c[-1] for c in calls] == [".[test,site]"]
    calls.clear()
    run.setup("course")
    run.setup("test")
    assert calls == [] and ".venv is up to date" in capsys.readouterr().out
