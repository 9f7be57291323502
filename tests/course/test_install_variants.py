"""pip resolves each install run.py can choose (no GPU, driver >= 580, driver 525-579) against the package
index this machine can reach (`pip install --dry-run`); opt-in: CUDALEARN_RESOLVE=1, about a minute each."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(
    os.environ.get("CUDALEARN_RESOLVE") != "1",
    reason="needs the package index and about a minute per variant: CUDALEARN_RESOLVE=1 runs it",
)


def _run_py():
    """run.py as a module (standard library only; it does nothing on import)."""
    spec = importlib.util.spec_from_file_location("cudalearn_run_py_variants", ROOT / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _resolve(run, cuda, tmp_path, isolated: bool) -> dict[str, str]:
    """pip's resolution of what run.py installs for plan `cuda`: {name: version}."""
    report = tmp_path / "report.json"
    torch = f"torch=={run.pinned('torch')}" + (f"+{cuda.torch_build}" if cuda.torch_build else "")
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q"]
    cmd += ["--isolated"] if isolated else []  # the registry alone: no find-links with a +cpu torch
    cmd += ["--report", str(report), "-c", str(run.constraints_for(cuda, tmp_path)), torch]
    cmd += ["-e", f"{ROOT}[course,{cuda.extra}]"]
    if cuda.torch_index:
        cmd += ["--extra-index-url", cuda.torch_index]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return {
        i["metadata"]["name"].lower(): i["metadata"]["version"]
        for i in json.loads(report.read_text())["install"]
    }


def test_no_gpu_resolves_cpu_torch_with_cuda_12_nvrtc(tmp_path):
    run = _run_py()
    cuda = run.plan("linux", gpu=False, choice="")
    if not run.reachable(cuda.torch_index + "/torch/"):
        cuda = cuda._replace(torch_index=None)  # as run.py then does: pip's configured sources (a mirror)
    got = _resolve(run, cuda, tmp_path, isolated=False)
    assert got["torch"] == f"{run.pinned('torch')}+cpu"
    assert got["nvidia-cuda-nvrtc-cu12"] == run.pinned("nvidia-cuda-nvrtc-cu12")
    assert got["cuda-toolkit"].startswith("12.") and "nvidia-cuda-nvrtc" not in got


def test_a_driver_580_resolves_the_registry_torch_with_cuda_13_nvrtc(tmp_path):
    run = _run_py()
    got = _resolve(run, run.plan("linux", gpu=True, driver="580.65.06", choice=""), tmp_path, isolated=True)
    assert got["torch"] == run.pinned("torch")  # the registry's build: CUDA 13
    assert got["cuda-toolkit"].startswith("13.") and got["cuda-bindings"].startswith("13.")
    assert got["nvidia-cuda-nvrtc"].startswith("13.") and not [n for n in got if n.endswith("-cu12")]


def test_a_driver_550_resolves_pytorchs_cuda_12_build_with_cuda_12_nvrtc(tmp_path):
    run = _run_py()
    cuda = run.plan("linux", gpu=True, driver="550.54.15", choice="")
    if not run.reachable(cuda.torch_index + "/torch/"):
        pytest.skip(f"{cuda.torch_index} cannot be reached from here: this variant is not checked")
    got = _resolve(run, cuda, tmp_path, isolated=True)
    assert got["torch"] == f"{run.pinned('torch')}+{cuda.torch_build}"
    assert got["cuda-toolkit"].startswith("12.") and not [n for n in got if n.endswith("-cu13")]
