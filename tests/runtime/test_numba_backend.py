"""runtime.numba_backend: which Numba CUDA compiler the course's kernels use (issue 17), without a GPU.

The main environment has no numba-cuda-mlir: its presence is planted (a flag to the pure `decide`,
or a stand-in `numba_cuda_mlir` package on sys.path of a child process). What the real package
compiles is `scripts/check_numba_cuda_mlir.py`'s report; what it runs, `scripts/mlir_gpu_smoke.py`.
"""

import importlib
import os
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

from cudalearn.chapters import kernel_modules
from cudalearn.compile import toolchain
from cudalearn.runtime import compiler, device, numba_backend

ROOT = Path(__file__).resolve().parents[2]
MLIR, NUMBA_CUDA = numba_backend.NUMBA_CUDA_MLIR, numba_backend.NUMBA_CUDA

# The modules another change is rewriting; each still imports numba itself until it lands (the
# report of scripts/check_numba_cuda_mlir.py names them too).
NOT_ON_THE_BRIDGE_YET: set[str] = set()


@pytest.mark.parametrize(
    "mode, asked, installed, package",
    [
        ("gpu", "auto", True, MLIR),
        ("gpu", "auto", False, NUMBA_CUDA),
        ("gpu", NUMBA_CUDA, True, NUMBA_CUDA),
        ("gpu", MLIR, True, MLIR),
        ("compile", "auto", True, NUMBA_CUDA),  # the PTX tests stay on the pinned compiler
        ("compile", MLIR, True, MLIR),  # ... unless asked (scripts/check_numba_cuda_mlir.py)
        ("sim", "auto", True, NUMBA_CUDA),
        ("sim", NUMBA_CUDA, True, NUMBA_CUDA),
    ],
)
def test_the_choice_by_mode_request_and_installation(mode, asked, installed, package):
    chosen = numba_backend.decide(mode, asked, installed)
    assert (chosen.package, chosen.mode) == (package, mode) and chosen.reason
    assert chosen.label == (f"{package} (simulator)" if mode == "sim" else package)


def test_numba_cuda_mlir_asked_for_where_it_cannot_be_is_refused_in_words():
    with pytest.raises(device.ModeError, match="only numba-cuda has.*unset CUDALEARN_NUMBA"):
        numba_backend.decide("sim", MLIR, installed=True)
    with pytest.raises(device.ModeError, match="not installed: pip install"):
        numba_backend.decide("gpu", MLIR, installed=False)


def test_the_request_is_read_from_the_environment():
    assert numba_backend.requested({}) == "auto"
    assert numba_backend.requested({"CUDALEARN_NUMBA": " Numba-CUDA-MLIR "}) == MLIR
    assert numba_backend.requested({"CUDALEARN_NUMBA": ""}) == "auto"
    with pytest.raises(device.ModeError, match="is not a Numba CUDA compiler"):
        numba_backend.requested({"CUDALEARN_NUMBA": "numba-mlir"})


def test_the_choice_is_made_once_per_process(monkeypatch):
    monkeypatch.setattr(compiler, "_CHOICE", None)
    monkeypatch.setattr(compiler, "mlir_installed", lambda: True)
    monkeypatch.setenv("CUDALEARN_NUMBA", "auto")
    first = numba_backend.choose("gpu")
    assert first.package == MLIR and "installed, and the mode is gpu" in first.reason
    monkeypatch.setenv("CUDALEARN_NUMBA", "numba-cuda")
    assert numba_backend.choose("gpu") is first and numba_backend.current() is first


def test_this_process_runs_numba_cuda_on_the_simulator():
    import numba
    import numba.cuda

    chosen = numba_backend.current()  # conftest's setup() chose it
    assert chosen.label == "numba-cuda (simulator)" and toolchain.numba_cuda_backend() == chosen.label
    from cudalearn.runtime.numba_backend import SIMULATOR, cuda, float32, libdevice, uint32

    assert cuda is numba.cuda and float32 is numba.float32 and uint32 is numba.uint32 and SIMULATOR
    assert libdevice is importlib.import_module("numba.cuda.libdevice")
    assert all(getattr(numba_backend, name) is getattr(numba, name) for name in numba_backend.TYPES)
    with pytest.raises(AttributeError, match="no attribute 'config'"):
        numba_backend.config  # noqa: B018  (the simulator switch is SIMULATOR, one name)


def test_every_kernel_module_takes_its_numba_names_from_the_bridge():
    direct = set()
    for module in kernel_modules():
        source = Path(importlib.util.find_spec(module).origin).read_text(encoding="utf-8")
        if re.search(r"^\s*(from numba(\.cuda)? import|import numba\b)", source, re.M):
            direct.add(module)
        elif "cudalearn.runtime.numba_backend import" not in source:
            direct.add(module)  # no numba name at all would be odd for a kernel module
    waiting = NOT_ON_THE_BRIDGE_YET
    assert direct <= waiting, (
        f"{direct - waiting}: import cuda and the types from cudalearn.runtime.numba_backend"
    )
    assert direct == waiting, f"{waiting - direct} moved to the bridge: drop it from NOT_ON_THE_BRIDGE_YET"


def test_kernel_modules_get_the_bridge_cuda():
    from cudalearn.chapters.ch00 import kernels as basics
    from cudalearn.chapters.ch03 import kernels as tiled
    from cudalearn.chapters.ch05.kernels import elementwise

    assert basics.cuda is tiled.cuda is elementwise.cuda is numba_backend.cuda_module()


def test_cuda_of_names_the_package_of_a_kernel(monkeypatch):
    import numba.cuda

    from cudalearn.chapters.ch00 import kernels as basics

    assert numba_backend.cuda_of(basics.vector_add) is numba.cuda  # a simulated kernel
    assert numba_backend.cuda_of(basics.vector_add.py_func) is numba.cuda  # its plain function
    stand_in = types.ModuleType("numba_cuda_mlir.cuda")
    monkeypatch.setitem(sys.modules, "numba_cuda_mlir.cuda", stand_in)
    dispatcher = type("MLIRDispatcher", (), {"__module__": "numba_cuda_mlir.descriptor"})()
    assert numba_backend.cuda_of(dispatcher) is stand_in
    namespace = {"cuda": stand_in}
    exec("def kernel(a):\n    a[0] = 1\n", namespace)
    assert numba_backend.cuda_of(namespace["kernel"]) is stand_in  # the tracer swaps this one
    assert numba_backend.loaded_cuda_modules() == [numba.cuda, stand_in]


def test_is_type_knows_numba_types_not_numpy_ones():
    import numba

    assert numba_backend.is_type(numba.float32) and numba_backend.is_type(numba.uint32)
    assert not numba_backend.is_type(np.float32) and not numba_backend.is_type(1.0)


KERNEL = """
import numpy as np
import numba_cuda_mlir.cuda as cuda


def stride_two(inp, out):
    s = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    s[t] = inp[t]
    s[t + 32] = inp[t + 32]
    cuda.syncthreads()
    out[t] = s[2 * t]
"""


def test_the_tracer_runs_a_kernel_whose_cuda_is_numba_cuda_mlirs(tmp_path, monkeypatch):
    from cudalearn.trace import trace

    stand_in = types.ModuleType("numba_cuda_mlir.cuda")
    stand_in.syncthreads = lambda: None
    package = types.ModuleType("numba_cuda_mlir")
    package.__path__, package.cuda = [], stand_in
    monkeypatch.setitem(sys.modules, "numba_cuda_mlir", package)
    monkeypatch.setitem(sys.modules, "numba_cuda_mlir.cuda", stand_in)
    (tmp_path / "mlir_kernel.py").write_text(KERNEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    kernel = importlib.import_module("mlir_kernel").stride_two
    inp = np.arange(64, dtype=np.float32)
    rep = trace(kernel, 1, 32, inp, np.zeros(32, np.float32))
    assert np.array_equal(rep.outputs[1], inp[::2])
    assert rep.bank_conflicts == 1  # one warp reads s[2t]: 2-way, one extra wavefront, as for numba.cuda


STAND_IN = '''
"""A stand-in numba_cuda_mlir: just what importing the course's kernel modules touches."""
import sys, types

import numba

cuda = types.ModuleType("numba_cuda_mlir.cuda")
sys.modules["numba_cuda_mlir.cuda"] = cuda


class MLIRDispatcher:
    def __init__(self, fn, **options):
        self.py_func, self.__name__ = fn, fn.__name__


def jit(fn=None, **options):
    if fn is None or isinstance(fn, str):
        return lambda f: MLIRDispatcher(f, **options)
    return MLIRDispatcher(fn)


MLIRDispatcher.__module__ = cuda.__name__
cuda.jit = jit
for name in ("boolean int8 int16 int32 int64 uint8 uint16 uint32 uint64 float32 float64 complex64 "
             "complex128 void").split():
    setattr(cuda, name, getattr(numba, name))  # the types' identity is not what this test checks
libdevice = types.ModuleType("numba_cuda_mlir.cuda.libdevice")
sys.modules[libdevice.__name__] = cuda.libdevice = libdevice
'''


def _child(code, tmp_path, **env):
    """Run `code` in a fresh Python with the stand-in numba_cuda_mlir importable and `env` set."""
    (tmp_path / "numba_cuda_mlir").mkdir(exist_ok=True)
    (tmp_path / "numba_cuda_mlir" / "__init__.py").write_text(STAND_IN)
    keep = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "CUDALEARN_MODE")}
    path = os.pathsep.join([str(tmp_path), str(ROOT / "src"), keep.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**keep, "PYTHONPATH": path, **env},
        timeout=300,
    )


def test_forced_numba_cuda_mlir_reaches_every_kernel_module_and_the_doctor(tmp_path):
    r = _child(
        """
        import cudalearn
        from cudalearn.course import doctor
        from cudalearn.compile import toolchain
        from cudalearn.chapters.ch10.kernels import attention
        from cudalearn.chapters.ch00 import kernels as basics
        from cudalearn.chapters.ch05.kernels import elementwise, linear
        from cudalearn.chapters.ch03 import kernels as tiled
        print(cudalearn.setup(quiet=True).mode, toolchain.numba_cuda_backend())
        print({m.cuda.__name__ for m in (attention, basics, elementwise, linear, tiled)})
        print(type(basics.vector_add).__module__, elementwise.SIMULATOR)
        env = doctor.collect()
        print(doctor.report(env))
        """,
        tmp_path,
        CUDALEARN_MODE="compile",
        CUDALEARN_NUMBA="numba-cuda-mlir",
    )
    assert r.returncode == 0, r.stderr
    mode, modules, kinds, *report = r.stdout.splitlines()
    assert mode == "compile numba-cuda-mlir" and modules == "{'numba_cuda_mlir.cuda'}"
    assert kinds == "numba_cuda_mlir.cuda False"
    text = "\n".join(report)
    assert "kernel compiler:    numba-cuda-mlir; CUDALEARN_NUMBA=numba-cuda-mlir" in text
    assert "[warning] the course's kernels are compiled by numba-cuda-mlir" in text
    assert "CUDALEARN_NUMBA=numba-cuda before cudalearn.setup()" in text


def test_numba_cuda_mlir_forced_under_the_simulator_stops_setup(tmp_path):
    r = _child("import cudalearn; cudalearn.setup()", tmp_path, CUDALEARN_MODE="sim", CUDALEARN_NUMBA=MLIR)
    assert r.returncode != 0 and "ModeError" in r.stderr and "only numba-cuda has" in r.stderr


def test_numba_cuda_mlir_forced_but_missing_stops_setup_with_the_install_command():
    if numba_backend.mlir_installed():
        pytest.skip("numba-cuda-mlir is installed here")
    keep = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM",)}
    r = subprocess.run(
        [sys.executable, "-c", "import cudalearn; cudalearn.setup()"],
        capture_output=True,
        text=True,
        env={**keep, "CUDALEARN_MODE": "compile", "CUDALEARN_NUMBA": MLIR},
        timeout=300,
    )
    assert r.returncode != 0 and "not installed: pip install" in r.stderr, r.stderr
