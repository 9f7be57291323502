"""run.py's setup choices (issue 17): PyTorch's CPU build first on a machine without an NVIDIA GPU."""

import importlib.util
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
