"""run.py's setup choices: PyTorch's CPU build first without an NVIDIA GPU (issue 17); a step line per
install group, a student's set apart from CI's, JupyterLab as root and as a user (issue 31)."""

import importlib.util
import json
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run_py():
    """run.py as a module (standard library only; it does nothing on import)."""
    spec = importlib.util.spec_from_file_location("cudalearn_run_py_setup", ROOT / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_without_a_gpu_torch_is_the_cpu_build_with_cuda_12_nvrtc():
    run = _run_py()
    p = run.plan("linux", gpu=False, choice="")
    assert (p.extra, p.torch_index, p.torch_build) == ("cu12", run.TORCH_CPU_INDEX, "cpu")
    assert "no NVIDIA GPU" in p.why and "cudalearn[cu12]" in p.why


@pytest.mark.parametrize(
    "driver, extra, index, build",
    [
        ("580.65.06", "cu13", None, None),  # CUDA 13.0 needs 580: the registry's torch (its CUDA 13 build)
        ("590.44.01", "cu13", None, None),
        ("579.99", "cu12", "TORCH_CU12_INDEX", "cu126"),  # CUDA 12 only: PyTorch's CUDA 12 build
        ("525.60.13", "cu12", "TORCH_CU12_INDEX", "cu126"),
        ("470.256.02", "cu12", "TORCH_CPU_INDEX", "cpu"),  # older than CUDA 12: CPU build, sim mode
    ],
)
def test_a_linux_driver_picks_torch_and_the_cuda_extra(driver, extra, index, build):
    run = _run_py()
    p = run.plan("linux", gpu=True, driver=driver, choice="")
    assert (p.extra, p.torch_index, p.torch_build) == (extra, index and getattr(run, index), build)
    assert driver in p.why and f"cudalearn[{extra}]" in p.why and "\n" not in p.why


def test_an_unreadable_driver_or_a_wrong_choice_stops_with_what_to_do():
    run = _run_py()
    with pytest.raises(SystemExit, match="CUDALEARN_CUDA=cu13 .*580.* cu12 .*525 to 579"):
        run.plan("linux", gpu=True, driver="", choice="")
    with pytest.raises(SystemExit, match="use cpu, cu12 or cu13"):
        run.plan("linux", gpu=False, choice="cu11")


def test_the_choice_can_be_made_by_hand_and_macos_or_windows_keep_the_registry():
    run = _run_py()
    p = run.plan("linux", gpu=False, choice="cu13")
    assert (p.extra, p.torch_index) == ("cu13", None) and "CUDALEARN_CUDA=cu13" in p.why
    assert run.plan("darwin", gpu=False, choice="")[:3] == ("cu12", None, None)
    assert run.plan("win32", gpu=True, choice="")[:3] == ("cu12", None, None)


def test_the_driver_version_is_read_from_proc_or_nvidia_smi(tmp_path, monkeypatch):
    run = _run_py()
    proc = tmp_path / "version"
    proc.write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
    )
    assert run.driver_version(proc) == "550.54.15"
    proc.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build\n")
    assert run.driver_version(proc) == "580.95.05"
    smi = type("Done", (), {"stdout": "575.57.08\n575.57.08\n"})  # one line per GPU
    monkeypatch.setattr(run.subprocess, "run", lambda *a, **kw: smi)
    assert run.driver_version(tmp_path / "absent") == "575.57.08"


def test_torch_comes_first_by_its_local_version_from_pytorchs_index(monkeypatch):
    run = _run_py()
    monkeypatch.setattr(run, "reachable", lambda url, timeout=10.0: True)
    version = run.pinned("torch")
    for p, index in [
        (run.plan("linux", gpu=False, choice=""), run.TORCH_CPU_INDEX),
        (run.plan("linux", gpu=True, driver="550.54.15", choice=""), run.TORCH_CU12_INDEX),
    ]:
        cmd = run.torch_first(["pip", "install"], p, "c.txt")
        assert version and cmd[-1] == f"torch=={version}+{p.torch_build}"
        assert cmd[cmd.index("--extra-index-url") + 1] == index and cmd[cmd.index("-c") + 1] == "c.txt"
    assert run.torch_first(["pip"], run.plan("linux", gpu=True, driver="580.65.06", choice=""), "c") is None


def test_an_unreachable_index_says_so_in_one_line_and_a_failed_cpu_build_falls_back(capsys):
    run = _run_py()
    cpu = run.plan("linux", gpu=False, choice="")._replace(torch_index="http://127.0.0.1:9")  # refused
    cmd = run.torch_first(["pip"], cpu, "c.txt")
    assert "--extra-index-url" not in cmd and cmd[-1].endswith("+cpu")  # pip's configured sources only
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "cannot be reached" in out[0] and "package registry" in out[0]
    fallback = run.torch_failed(cpu)
    assert (fallback.extra, fallback.torch_index) == ("cu13", None)  # the registry's torch is CUDA 13
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "package registry" in out[0] and "cudalearn[cu13]" in out[0]


def test_a_failed_cuda_12_build_stops_with_what_to_do():
    """No pip backtracking into the registry's CUDA 13 torch, which this driver cannot run."""
    run = _run_py()
    with pytest.raises(SystemExit, match="update the NVIDIA driver to 580 .*CUDALEARN_CUDA=cpu"):
        run.torch_failed(run.plan("linux", gpu=True, driver="550.54.15", choice=""))


def test_each_plan_gets_constraints_that_admit_its_torch(tmp_path):
    run = _run_py()
    pins = lambda path: dict(line.split("==") for line in path.read_text().splitlines() if "==" in line)  # noqa: E731
    cpu = run.constraints_for(run.plan("linux", gpu=False, choice=""), tmp_path)
    assert cpu == ROOT / "constraints.txt" and pins(cpu)["cuda-toolkit"].startswith("12.")
    cu13 = pins(run.constraints_for(run.plan("linux", gpu=True, driver="580.65.06", choice=""), tmp_path))
    assert cu13["cuda-toolkit"].startswith("13.") and cu13["cuda-bindings"].startswith("13.")
    assert not [n for n in cu13 if n.endswith("-cu12")] and cu13["torch"] == run.pinned("torch")
    cu12 = pins(run.constraints_for(run.plan("linux", gpu=True, driver="550.54.15", choice=""), tmp_path))
    assert not [n for n in cu12 if n.startswith(run.CUDA_PINS)]  # PyTorch's CUDA 12 build pins its own
    assert cu12["torch"] == run.pinned("torch") and cu12["numba-cuda"] == cu13["numba-cuda"]


def test_pyproject_leaves_the_cuda_wheels_to_the_cu12_and_cu13_extras():
    """numba-cuda[cu12] in the base dependencies conflicts with the registry's torch (cuda-toolkit 13)."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in meta["dependencies"] if d.startswith("numba-cuda[")]
    for major in ("12", "13"):
        assert meta["optional-dependencies"][f"cu{major}"] == [f"numba-cuda[cu{major}]>=0.30.4,<0.31"]


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


def _fake_venv(run, monkeypatch, tmp_path, cuda, torch_ok=True):
    """run.setup against a .venv in tmp_path with pip replaced by a recorder; returns the recorded calls."""
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    (venv / "bin" / "python").touch()
    monkeypatch.setattr(run, "VENV", venv)
    monkeypatch.setattr(run, "PY", venv / "bin" / "python")
    monkeypatch.setattr(run, "STAMP", venv / ".cudalearn-installed")
    monkeypatch.setattr(run, "plan", lambda: cuda)
    monkeypatch.setattr(run, "reachable", lambda url, timeout=10.0: True)
    calls = []

    def pip(cmd, **kw):
        calls.append([str(c) for c in cmd])
        return 0 if torch_ok or "+" not in calls[-1][-1] else 1  # the torch step: torch==2.13.0+cpu

    monkeypatch.setattr(run, "_run", pip)
    return calls


def test_setup_says_each_step_with_its_time_and_installs_only_what_is_missing(monkeypatch, tmp_path, capsys):
    """A line per install step and its time; pip's own output is not silenced; `test` adds CI's tools."""
    run = _run_py()
    calls = _fake_venv(run, monkeypatch, tmp_path, run.plan("linux", gpu=False, choice=""))
    run.setup("course")
    version = run.pinned("torch")
    assert [c[-1] for c in calls] == [f"torch=={version}+cpu", ".[course,cu12]"]
    assert not any("-q" in c for c in calls)
    out = capsys.readouterr().out
    assert "CUDA: no NVIDIA GPU found" in out
    assert re.search(r"step 2/2: the course: .*\n.*\n?.*step 2/2 done in \d+ s", out), out
    calls.clear()
    run.setup("test")  # the course is there: only CI's and instructors' tools are added
    assert [c[-1] for c in calls] == [".[test,site]"]
    calls.clear()
    run.setup("course")
    run.setup("test")
    assert calls == [] and ".venv is up to date" in capsys.readouterr().out


def test_a_failed_cpu_build_installs_the_registry_torch_with_cu13_and_keeps_that_choice(
    monkeypatch, tmp_path
):
    run = _run_py()
    calls = _fake_venv(run, monkeypatch, tmp_path, run.plan("linux", gpu=False, choice=""), torch_ok=False)
    run.setup("course")
    assert calls[-1][-2:] == [".[course,cu13]", f"torch==={run.pinned('torch')}"]  # the registry's build
    constraints = Path(calls[-1][calls[-1].index("-c") + 1])
    assert "cuda-toolkit==13." in constraints.read_text()
    assert json.loads(run.STAMP.read_text())["cuda"] == ["cu13", None, None]
    calls.clear()
    run.setup("test")  # CI's tools go into that .venv with its constraints, not constraints.txt's CUDA 12
    assert [c[-1] for c in calls] == [".[test,site]"] and Path(
        calls[0][calls[0].index("-c") + 1]
    ) == constraints
