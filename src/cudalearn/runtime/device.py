"""Where the course runs: `gpu` (a CUDA device) or `sim` (Numba's CUDA simulator).

Chapter 0 introduces it. `setup()` must run before `numba.cuda` is imported,
because Numba reads `NUMBA_ENABLE_CUDASIM` once, at that import: every
notebook's first cell calls `cudalearn.setup()`. Right after the mode it fixes
which Numba CUDA compiler the course's kernels use (`cudalearn.runtime.numba_backend`).
Importing the package has no side effect; a kernels module imported before
`setup()` runs a quiet `setup()` itself (it asks `numba_backend` for its names);
`numba.cuda` imported before `setup()` on a machine without a GPU makes
`setup()` raise `ModeError` saying so, never a driver error.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import sys
from dataclasses import dataclass, field, replace

from cudalearn.runtime import compiler
from cudalearn.runtime.compiler import ModeError  # noqa: F401  (cudalearn.runtime.device.ModeError)

MODES = ("gpu", "sim", "compile")  # 'compile': real CUDA target, no device needed (PTX tests)
MODE_ENV = "CUDALEARN_MODE"
SIM_SWITCH_INTERVAL = 1e-4  # seconds; the simulator runs one Python thread per CUDA thread


@dataclass(frozen=True)
class RunInfo:
    """The mode chosen for this process and the device it found (Chapter 0)."""

    mode: str
    device: str
    compute_capability: tuple[int, int] | None = None
    sms: int | None = None
    memory_bytes: int | None = None
    reason: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    compiler: str = ""  # 'numba-cuda-mlir 0.6.0' when that compiles the kernels (numba_backend)

    def line(self) -> str:
        """One line that says the mode and the device, printed by `setup()`."""
        if self.mode == "gpu":
            cc = self.compute_capability
            parts = [self.device]
            if cc:
                parts.append(f"sm_{cc[0]}{cc[1]}")
            if self.sms:
                parts.append(f"{self.sms} SMs")
            if self.memory_bytes:
                parts.append(f"{self.memory_bytes / 2**30:.0f} GiB")
            compiler = f"; kernels compiled by {self.compiler}" if self.compiler else ""
            return "cudalearn: mode=gpu on " + ", ".join(parts) + compiler + "; timings are real GPU timings."
        if self.mode == "compile":
            return "cudalearn: mode=compile (real CUDA target, compiling to PTX only; nothing runs)."
        return (
            "cudalearn: mode=sim (Numba CUDA simulator, no GPU used"
            + (f": {self.reason}" if self.reason else "")
            + "); sizes are small and timings are NOT GPU timings, "
            "reference results from a real GPU are shown instead."
        )


_INFO: RunInfo | None = None


def _driver_device_count() -> tuple[int, str]:
    """Count CUDA devices through the driver library alone, without importing Numba."""
    names = ["libcuda.so.1", "libcuda.so", "nvcuda.dll"]
    lib = None
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is None:
        return 0, "no NVIDIA driver library (libcuda) on this machine"
    if lib.cuInit(0) != 0:
        return 0, "the NVIDIA driver is installed but cuInit failed (no usable GPU?)"
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0, "the NVIDIA driver could not count devices"
    if count.value == 0:
        return 0, "the NVIDIA driver sees no GPU"
    return count.value, ""


def _numba_cuda_imported() -> bool:
    return "numba.cuda" in sys.modules


def _simulator_active() -> bool:
    """True when numba.cuda has been imported as the simulator."""
    from numba import config

    return bool(config.ENABLE_CUDASIM)


def _requested_mode(mode: str | None) -> str:
    requested = (mode or os.environ.get(MODE_ENV, "auto")).strip().lower()
    if requested not in (*MODES, "auto"):
        raise ModeError(f"{MODE_ENV}={requested!r} is not a mode: use 'gpu', 'sim' or 'auto' (the default).")
    return requested


def _decide(requested: str) -> tuple[str, str]:
    """Return (mode, reason) for a requested mode: 'gpu', 'sim' or 'auto'."""
    if _numba_cuda_imported():
        # Too late to choose: numba.cuda already decided at import.
        actual = "sim" if _simulator_active() else "gpu"
        if requested == "compile" and actual == "gpu":
            return "compile", "compile only"
        if requested not in ("auto", actual):
            raise ModeError(
                f"numba.cuda was imported before cudalearn.setup() and is running in "
                f"'{actual}' mode, so '{requested}' cannot be chosen now. Restart the "
                f"kernel and run the setup cell first."
            )
        if actual == "gpu" and requested != "compile":
            count, why = _driver_device_count()
            if not count:
                raise ModeError(
                    "numba.cuda was imported before cudalearn.setup() (a kernels module, or numba.cuda "
                    f"itself) and chose the GPU target, but {why}. Restart the kernel and run the setup "
                    "cell (`cudalearn.setup()`) before any other import."
                )
        return actual, "numba.cuda was imported first" if actual == "sim" else ""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" and requested != "gpu":
        return "sim", "NUMBA_ENABLE_CUDASIM=1 is set"
    if requested == "sim":
        return "sim", f"{MODE_ENV}=sim"
    if requested == "compile":
        if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
            raise ModeError(f"{MODE_ENV}=compile needs the real CUDA target: unset NUMBA_ENABLE_CUDASIM.")
        return "compile", "compile only"
    count, why = _driver_device_count()
    if count:
        if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
            raise ModeError(
                f"{MODE_ENV}=gpu but NUMBA_ENABLE_CUDASIM=1 is also set; unset it "
                f"(`del os.environ['NUMBA_ENABLE_CUDASIM']` before any import of numba.cuda)."
            )
        return "gpu", ""
    if requested == "gpu":
        raise ModeError(
            f"{MODE_ENV}=gpu was asked for, but {why}. On Colab choose Runtime > Change "
            f"runtime type > T4 GPU; on your own machine check `nvidia-smi`; or unset "
            f"{MODE_ENV} to run the course on the simulator."
        )
    return "sim", why


def _gpu_info(cuda) -> RunInfo:
    """The device as `cuda` (numba.cuda or numba_cuda_mlir.cuda, the chosen compiler's) sees it."""
    dev = cuda.get_current_device()
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    free, total = cuda.current_context().get_memory_info()
    return RunInfo(
        mode="gpu",
        device=name,
        compute_capability=tuple(dev.compute_capability),
        sms=int(dev.MULTIPROCESSOR_COUNT),
        memory_bytes=int(total),
    )


def setup(mode: str | None = None, *, quiet: bool = False) -> RunInfo:
    """Choose the run mode once per process, prepare it and print one line (Chapter 0).

    `mode` is 'gpu', 'sim' or None (read `CUDALEARN_MODE`, default 'auto':
    gpu when the NVIDIA driver sees a device, else sim). A second call
    returns the first answer; asking for a different mode later raises.
    """
    global _INFO
    requested = _requested_mode(mode)
    if _INFO is not None:
        if requested not in ("auto", _INFO.mode):
            raise ModeError(
                f"this process already runs in '{_INFO.mode}' mode; restart the kernel "
                f"to switch to '{requested}'."
            )
        if not quiet:
            print(_INFO.line())
        return _INFO
    chosen, reason = _decide(requested)
    from cudalearn.runtime import compat

    chosen_compiler = compiler.choose(chosen)  # raises ModeError for a compiler this mode cannot have
    compat.apply()  # before any kernel compiles: numba-cuda 0.30 under numpy 2.5
    if chosen == "sim":
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        sys.setswitchinterval(SIM_SWITCH_INTERVAL)
        from numba import cuda  # noqa: F401  (imports the simulator now)

        from cudalearn.runtime import simfix

        simfix.apply()
        info = RunInfo(mode="sim", device="Numba CUDA simulator", reason=reason)
    elif chosen == "compile":
        from numba import cuda  # noqa: F401  (the real target; nothing is launched)

        info = RunInfo(mode="compile", device="none (compiling to PTX only)", reason=reason)
    else:
        info = _gpu_info(importlib.import_module(compiler.MODULES[chosen_compiler.package]))
        if chosen_compiler.package == compiler.NUMBA_CUDA_MLIR:
            from importlib.metadata import version

            info = replace(info, compiler=f"numba-cuda-mlir {version('numba-cuda-mlir')}")
    _INFO = info
    if not quiet:
        print(info.line())
    return info


def info() -> RunInfo:
    """The RunInfo of this process, running a quiet `setup()` if needed (Chapter 0)."""
    return _INFO if _INFO is not None else setup(quiet=True)


def mode() -> str:
    """'gpu' or 'sim' for this process ('compile' only in the PTX tests) (Chapter 0)."""
    return info().mode


def device_count() -> int:
    """How many CUDA devices this process can use; 0 under the simulator (Chapter 0)."""
    if mode() != "gpu":
        return 0
    cuda = importlib.import_module(compiler.MODULES[compiler.choose("gpu").package])
    return len(cuda.gpus)


def torch_device() -> str:
    """'cuda' in gpu mode, else 'cpu': where the chapters put their PyTorch tensors (Chapter 0)."""
    return "cuda" if mode() == "gpu" else "cpu"


def cpu_name() -> str:
    """This machine's CPU: its model where the system names it (Linux), and its architecture (Chapter 11)."""
    import platform

    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            model = next((line.partition(":")[2].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    parts = dict.fromkeys(p for p in (model or platform.processor(), platform.machine()) if p)
    return ", ".join(parts) or "model unknown"


@contextlib.contextmanager
def one_torch_thread():
    """PyTorch on one CPU thread in the block (Chapters 8-9's checks: small models run faster)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
