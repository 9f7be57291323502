"""numba-cuda-mlir (issue 17): which compiler the toolchain reports, and what the doctor says of it.

CI has no GPU and no numba-cuda-mlir: every environment here is planted (stand-in modules, a dict for
the doctor); only the last tests read this process and the stored compile report. The choice itself
is tested in test_numba_backend.py.
"""

import copy
import re
import sys
import types
from pathlib import Path

from planted_env import GOOD

from cudalearn.compile import toolchain
from cudalearn.course import doctor
from cudalearn.runtime import numba_backend

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "data" / "numba-cuda-mlir" / "compile-report.md"


def row(name, value):
    """A line of the doctor's report, as `doctor.report` aligns it."""
    return f"{name + ':':<20}{value}"


def cuda_module(name, file, simulator=0):
    """sys.modules as a process sees it once `numba.cuda` (named `name`, from `file`) is imported."""
    cuda = types.ModuleType(name)
    cuda.__file__ = file
    config = types.SimpleNamespace(ENABLE_CUDASIM=simulator)
    return {"numba.cuda": cuda, "numba.core.config": config}


def test_backend_is_the_bridge_choice_once_made():
    bridge = types.SimpleNamespace(current=lambda: numba_backend.decide("gpu", "auto", installed=True))
    file = "/venv/lib/python3.11/site-packages/numba_cuda/numba/cuda/__init__.py"
    modules = {"cudalearn.runtime.numba_backend": bridge, **cuda_module("numba.cuda", file)}
    assert toolchain.numba_cuda_backend(modules) == "numba-cuda-mlir"  # a notebook's numba.cuda aside
    bridge.current = lambda: None
    assert toolchain.numba_cuda_backend(modules) == "numba-cuda"


def test_backend_is_none_before_numba_cuda_is_imported():
    assert toolchain.numba_cuda_backend({}) is None
    assert toolchain.numba_cuda_backend({"numba": types.ModuleType("numba")}) is None


def test_backend_numba_cuda_on_the_gpu_target_and_on_the_simulator():
    file = "/venv/lib/python3.11/site-packages/numba_cuda/numba/cuda/__init__.py"
    assert toolchain.numba_cuda_backend(cuda_module("numba.cuda", file)) == "numba-cuda"
    assert toolchain.numba_cuda_backend(cuda_module("numba.cuda", file, 1)) == "numba-cuda (simulator)"


def test_backend_numba_cuda_mlir_when_numba_cuda_is_redirected_to_it():
    file = "/venv/lib/python3.11/site-packages/numba_cuda_mlir/cuda/__init__.py"
    assert toolchain.numba_cuda_backend(cuda_module("numba_cuda_mlir.cuda", file)) == "numba-cuda-mlir"
    assert toolchain.numba_cuda_backend({"numba.cuda": types.ModuleType("numba_cuda_mlir.cuda")}) == (
        "numba-cuda-mlir"
    )


def test_this_process_runs_numba_cuda_on_the_simulator():
    assert "numba.cuda" in sys.modules  # conftest ran cudalearn.setup() in sim mode
    assert toolchain.numba_cuda_backend() == "numba-cuda (simulator)"
    env = doctor.collect()
    assert env["cuda_backend"] == "numba-cuda (simulator)" and "numba-cuda-mlir" in env["versions"]
    assert env["cuda_backend_reason"] == "the simulator is numba-cuda's"
    assert row("kernel compiler", "numba-cuda (simulator); the simulator is numba-cuda's") in doctor.report(
        env
    )


def plant(mlir=None, numba_cuda="0.30.4", backend="numba-cuda", reason=None):
    """test_doctor's good GPU environment with numba-cuda-mlir `mlir` (None: not installed) added."""
    env = copy.deepcopy(GOOD)
    env["versions"] |= {"numba-cuda": numba_cuda, "numba-cuda-mlir": mlir}
    return {**env, "cuda_backend": backend, "cuda_backend_reason": reason}


def test_no_numba_cuda_mlir_is_no_problem_and_reported_not_installed():
    env = plant(reason="numba-cuda-mlir is not installed")
    assert doctor.diagnose(env) == []
    text = doctor.report(env)
    assert row("numba-cuda-mlir", "not installed") in text
    assert row("kernel compiler", "numba-cuda; numba-cuda-mlir is not installed") in text
    assert toolchain.NUMBA_CUDA_MLIR_STATUS not in text


def test_numba_cuda_mlir_beside_numba_cuda_not_chosen_is_reported_with_what_works_not_a_problem():
    env = plant(mlir="0.6.0", reason="CUDALEARN_NUMBA=numba-cuda")
    assert doctor.diagnose(env) == []
    text = doctor.report(env)
    assert row("numba-cuda-mlir", "0.6.0") in text and row("kernel compiler", "numba-cuda; CUDALEARN") in text
    assert " ".join(text.split()).count(" ".join(toolchain.NUMBA_CUDA_MLIR_STATUS.split())) == 1
    assert "numba-cuda-mlir is installed, not used here" in text


def test_numba_cuda_mlir_without_numba_cuda_blocks_with_the_pin_as_fix():
    (problem,) = doctor.diagnose(plant(mlir="0.6.0", numba_cuda=None, backend=None))
    assert problem.blocking and "without numba-cuda" in problem.title
    assert f"numba-cuda[cu12]=={doctor.PIN_NUMBA_CUDA}" in problem.fix
    assert row("kernel compiler", "not chosen yet") in doctor.report(plant(backend=None))


def test_numba_cuda_mlir_compiling_the_kernels_is_a_warning_that_says_why_what_works_and_how_back():
    env = plant(mlir="0.6.0", backend="numba-cuda-mlir", reason="installed, and the mode is gpu")
    (problem,) = doctor.diagnose(env)
    assert not problem.blocking and "compiled by numba-cuda-mlir" in problem.title
    assert "Chosen because: installed, and the mode is gpu." in problem.detail
    assert toolchain.NUMBA_CUDA_MLIR_STATUS in problem.detail
    assert "CUDALEARN_NUMBA=numba-cuda before cudalearn.setup()" in problem.fix
    text = doctor.report(env)
    assert row("kernel compiler", "numba-cuda-mlir; installed, and the mode is gpu") in text
    assert "[warning] the course's kernels are compiled by numba-cuda-mlir" in text
    assert "not used here" not in text


def _counts(text):
    """A compile report's (compiles ok, compiles, kernels, numba-cuda-mlir's ok, given to numba-cuda-mlir)."""
    pattern = (
        r"\*\*(\d+) of (\d+) compiles succeeded\*\* \((\d+) kernels.*?"
        r"numba-cuda-mlir compiled (\d+) of the (\d+)"
    )
    (found,) = re.findall(pattern, text, re.S)
    return tuple(map(int, found))


def _kernel_rows(text):
    """The kernels of a compile report's table, in its order."""
    return re.findall(r"^\| `(cudalearn\.[\w.]+)` \|", text, re.M)


def test_the_status_the_doctor_prints_is_the_stored_compile_report():
    text = REPORT.read_text()
    version = re.search(r"numba-cuda-mlir (\d+\.\d+\.\d+)", text).group(1)
    (ok, total, kernels, mlir_ok, mlir_given) = _counts(text)
    assert total == 2 * kernels, "every kernel compiled for sm_75 and sm_90"
    status = toolchain.NUMBA_CUDA_MLIR_STATUS
    assert status.startswith(f"numba-cuda-mlir {version} has no simulator")
    if ok == total:
        assert f"all {kernels} kernels compile" in status
        return
    assert f"{ok // 2} of the {kernels} kernels compile" in status
    failing = set(re.findall(r"^\| `cudalearn\.kernels\.\w+\.(\w+)` \| FAIL", text, re.M))
    assert failing and all(name in status for name in failing), failing


def test_the_compile_report_has_one_table_of_every_kernel_once():
    """The report the script writes, and the stored one: one summary and one row per kernel, no repeat."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("check_mlir", ROOT / "scripts" / "check_numba_cuda_mlir.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    results = {
        f"cudalearn.chapters.k.{name}@{sm}": {"ok": True, "compiler": "numba-cuda-mlir", "ptx_lines": 9}
        for name in ("a", "b")
        for sm in ("sm_75", "sm_90")
    }
    results["cudalearn.chapters.k.b@sm_90"] = {"error": "TypingError: x", "compiler": "numba-cuda-mlir"}
    written = script.section(results, 1.0)
    assert _counts(written) == (3, 4, 2, 3, 4)
    assert _kernel_rows(written) == ["cudalearn.chapters.k.a", "cudalearn.chapters.k.b"]
    assert "| `cudalearn.chapters.k.b` | ok (9 PTX lines) | FAIL [1] |" in written
    stored = REPORT.read_text()
    rows = _kernel_rows(stored)
    assert len(rows) == len(set(rows)) == _counts(stored)[2], "a kernel listed twice, or a table repeated"
