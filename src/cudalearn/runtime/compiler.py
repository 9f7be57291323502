"""Which Numba CUDA compiler builds the course's kernels, decided once per process (Chapter 0).

`cudalearn.setup()` (`runtime.device`) picks the run mode, then calls `choose` here;
`runtime.numba_backend` hands the chosen package's `cuda` and types to the kernel modules.
The decision itself (`decide`) is a pure function of the mode, `CUDALEARN_NUMBA` and whether
numba_cuda_mlir is installed.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass


class ModeError(RuntimeError):
    """A run mode was asked for that this machine cannot give (Chapter 0)."""


ENV = "CUDALEARN_NUMBA"
NUMBA_CUDA = "numba-cuda"
NUMBA_CUDA_MLIR = "numba-cuda-mlir"
CHOICES = ("auto", NUMBA_CUDA, NUMBA_CUDA_MLIR)
MODULES = {NUMBA_CUDA: "numba.cuda", NUMBA_CUDA_MLIR: "numba_cuda_mlir.cuda"}


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
    value = (os.environ if environ is None else environ).get(ENV, "auto").strip().lower() or "auto"
    if value not in CHOICES:
        raise ModeError(f"{ENV}={value!r} is not a Numba CUDA compiler: use {', '.join(CHOICES)}.")
    return value


def decide(mode: str, asked: str = "auto", installed: bool = False) -> Choice:
    """The compiler for run mode `mode` when `asked` ('auto' or a package) and numba_cuda_mlir `installed`.

    A pure function (the tests call it with every combination). Raises ModeError when the request
    cannot be met: numba-cuda-mlir under the simulator (it has none), or not installed. Chapter 0.
    """
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
