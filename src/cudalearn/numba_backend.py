"""Which Numba CUDA compiler builds the course's kernels: numba-cuda or numba-cuda-mlir (Chapter 0).

numba-cuda (`numba.cuda`, pinned at 0.30.4) is in maintenance mode; its successor numba-cuda-mlir
compiles the same kernels through MLIR, installs as the module `numba_cuda_mlir` (no `numba.cuda`)
and has no simulator. Every module of the package that defines kernels takes its numba names
from here, never from `numba`:

    from cudalearn.numba_backend import cuda, float32, uint32

and gets numba-cuda-mlir's `cuda` and scalar types when the mode is 'gpu' and numba_cuda_mlir is
installed, numba-cuda's otherwise (always under the simulator, and in the 'compile' mode of the
PTX tests). The environment variable `CUDALEARN_NUMBA` overrides that: `numba-cuda`,
`numba-cuda-mlir`, or `auto` (the default). Importing this module decides nothing: the choice is
made once per process, right after the run mode, by `cudalearn.setup()`, or by the first name
asked of this module (which runs a quiet `setup()` first), so every kernel module of a process
gets the same package.

The names: `cuda`; numba's scalar types (`TYPES`); `libdevice`; `SIMULATOR` (True under the
simulator: device code there is Python). Host code that launches the course's kernels uses the
same `cuda` (`to_device`, `device_array`, `synchronize`, events), so that a kernel and its arrays
come from one package; host code handed a kernel (a student's, compiled by the notebook's own
`from numba import cuda`) uses `cuda_of(kernel)`.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass

ENV = "CUDALEARN_NUMBA"
NUMBA_CUDA = "numba-cuda"
NUMBA_CUDA_MLIR = "numba-cuda-mlir"
CHOICES = ("auto", NUMBA_CUDA, NUMBA_CUDA_MLIR)
#: numba's scalar types a kernel module may import from here (both packages define each as cuda.<name>).
TYPES = (
    "boolean",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "void",
)
_MODULES = {NUMBA_CUDA: "numba.cuda", NUMBA_CUDA_MLIR: "numba_cuda_mlir.cuda"}


@dataclass(frozen=True)
class Choice:
    """The compiler this process's kernels use, the run mode it was chosen for, and why (Chapter 0)."""

    package: str  # NUMBA_CUDA or NUMBA_CUDA_MLIR
    mode: str  # 'gpu', 'sim' or 'compile'
    reason: str

    @property
    def label(self) -> str:
        """'numba-cuda', 'numba-cuda (simulator)' or 'numba-cuda-mlir': what the doctor prints."""
        return f"{self.package} (simulator)" if self.mode == "sim" else self.package


def mlir_installed() -> bool:
    """Whether numba_cuda_mlir can be imported here (found, not imported) (Chapter 0)."""
    try:
        return importlib.util.find_spec("numba_cuda_mlir") is not None
    except (ImportError, ValueError):
        return False


def requested(environ=None) -> str:
    """The compiler `CUDALEARN_NUMBA` asks for: 'auto' (unset), 'numba-cuda' or 'numba-cuda-mlir'."""
    from cudalearn.device import ModeError

    value = (os.environ if environ is None else environ).get(ENV, "auto").strip().lower() or "auto"
    if value not in CHOICES:
        raise ModeError(f"{ENV}={value!r} is not a Numba CUDA compiler: use {', '.join(CHOICES)}.")
    return value


def decide(mode: str, asked: str = "auto", installed: bool = False) -> Choice:
    """The compiler for run mode `mode` when `asked` ('auto' or a package) and numba_cuda_mlir `installed`.

    A pure function (the tests call it with every combination). Raises ModeError when the request
    cannot be met: numba-cuda-mlir under the simulator (it has none), or not installed. Chapter 0.
    """
    from cudalearn.device import ModeError

    if mode == "sim":
        if asked == NUMBA_CUDA_MLIR:
            raise ModeError(
                f"{ENV}=numba-cuda-mlir, but this process runs the simulator, which only numba-cuda has. "
                f"Run on a GPU (CUDALEARN_MODE=gpu), or unset {ENV}."
            )
        return Choice(NUMBA_CUDA, mode, "the simulator is numba-cuda's")
    if asked == NUMBA_CUDA:
        return Choice(NUMBA_CUDA, mode, f"{ENV}=numba-cuda")
    if asked == NUMBA_CUDA_MLIR:
        if not installed:
            raise ModeError(
                f"{ENV}=numba-cuda-mlir, but numba_cuda_mlir is not installed: "
                f'pip install "numba-cuda-mlir[cu12]", or unset {ENV}.'
            )
        return Choice(NUMBA_CUDA_MLIR, mode, f"{ENV}=numba-cuda-mlir")
    if mode != "gpu":
        return Choice(NUMBA_CUDA, mode, f"{mode} mode uses numba-cuda unless {ENV}=numba-cuda-mlir")
    if installed:
        return Choice(NUMBA_CUDA_MLIR, mode, f"installed, and the mode is gpu ({ENV}=numba-cuda to go back)")
    return Choice(NUMBA_CUDA, mode, "numba-cuda-mlir is not installed")


_CHOICE: Choice | None = None


def choose(mode: str) -> Choice:
    """Fix this process's compiler for run mode `mode`, once (`cudalearn.setup()` calls it) (Chapter 0)."""
    global _CHOICE
    if _CHOICE is None:
        _CHOICE = decide(mode, requested(), mlir_installed())
    return _CHOICE


def current() -> Choice | None:
    """This process's compiler, or None while no mode is chosen; never chooses (the doctor) (Chapter 0)."""
    return _CHOICE


def choice() -> Choice:
    """This process's compiler, choosing the run mode first (a quiet `cudalearn.setup()`) if needed."""
    if _CHOICE is None:
        from cudalearn import device

        device.mode()  # setup() calls choose()
    if _CHOICE is None:  # the mode was set up by a path that did not choose (a test that reset it)
        from cudalearn import device

        return choose(device.mode())
    return _CHOICE


def cuda_module():
    """The `cuda` module of this process's compiler: numba.cuda or numba_cuda_mlir.cuda (Chapter 0)."""
    return importlib.import_module(_MODULES[choice().package])


def loaded_cuda_modules() -> list:
    """The `cuda` modules imported in this process so far, numba.cuda first (none imported here)."""
    return [sys.modules[name] for name in _MODULES.values() if name in sys.modules]


def cuda_of(obj):
    """The `cuda` module behind a kernel, a device function or the plain function of one (Chapter 0).

    numba_cuda_mlir.cuda for numba-cuda-mlir's dispatchers, numba.cuda for numba-cuda's (and the
    simulator's); for a plain Python function, the loaded `cuda` module its globals name, else
    numba.cuda if it is imported, else None. Host code handed a kernel copies its arrays with it.
    """
    package = type(obj).__module__ or ""
    if package.startswith("numba_cuda_mlir"):
        return sys.modules["numba_cuda_mlir.cuda"]
    fn = getattr(obj, "py_func", None) or getattr(obj, "fn", None) or obj
    names = getattr(fn, "__globals__", None)
    if names is not None and not package.startswith("numba"):
        loaded = loaded_cuda_modules()
        found = [m for m in loaded if any(v is m for v in names.values())]
        if found:
            return found[-1]
    return sys.modules.get("numba.cuda")


def cuda_for(kernel):
    """`cuda_of(kernel)`, or this process's compiler's `cuda` when nothing names one: the module whose
    arrays and launches host code handed `kernel` uses (checks, exercises, `launch.prepared`)."""
    return cuda_of(kernel) or cuda_module()


def is_type(value) -> bool:
    """Whether value is a numba scalar or array type of either package (`float32`, `cuda.float32`)."""
    for name in ("numba.core.types", "numba_cuda_mlir.numba_cuda.types"):
        types = sys.modules.get(name)  # a type of a package means the package is imported
        if types is not None and isinstance(value, types.Type):
            return True
    return False


def synchronize() -> None:
    """Wait for the GPU work of every Numba CUDA package this process imported (Chapter 0)."""
    for cuda in loaded_cuda_modules():
        cuda.synchronize()


def __getattr__(name):
    """`cuda`, `libdevice`, `SIMULATOR` and the scalar types of this process's compiler (PEP 562)."""
    if name == "cuda":
        return cuda_module()
    if name in TYPES:
        return getattr(cuda_module(), name)
    if name == "libdevice":
        return importlib.import_module(_MODULES[choice().package] + ".libdevice")
    if name == "SIMULATOR":
        return choice().mode == "sim"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
