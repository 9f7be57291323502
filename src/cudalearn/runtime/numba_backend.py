"""Which Numba CUDA compiler builds the course's kernels: numba-cuda or numba-cuda-mlir (Chapter 0).

numba-cuda (`numba.cuda`, pinned at 0.30.4) is in maintenance mode; its successor numba-cuda-mlir
compiles the same kernels through MLIR, installs as the module `numba_cuda_mlir` (no `numba.cuda`)
and has no simulator. Every module of the package that defines kernels takes its numba names
from here, never from `numba`:

    from cudalearn.runtime.numba_backend import cuda, float32, uint32

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
import sys

from cudalearn.runtime import compiler, device
from cudalearn.runtime.compiler import (  # noqa: F401  (the bridge's names, decided there)
    CHOICES,
    ENV,
    MODULES,
    NUMBA_CUDA,
    NUMBA_CUDA_MLIR,
    Choice,
    choose,
    current,
    decide,
    mlir_installed,
    requested,
)

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


def choice() -> Choice:
    """This process's compiler, choosing the run mode first (a quiet `cudalearn.setup()`) if needed."""
    if compiler.current() is None:
        device.mode()  # setup() calls choose()
    if compiler.current() is None:  # the mode was set up by a path that did not choose (a test reset it)
        return compiler.choose(device.mode())
    return compiler.current()


def cuda_module():
    """The `cuda` module of this process's compiler: numba.cuda or numba_cuda_mlir.cuda (Chapter 0)."""
    return importlib.import_module(MODULES[choice().package])


def loaded_cuda_modules() -> list:
    """The `cuda` modules imported in this process so far, numba.cuda first (none imported here)."""
    return [sys.modules[name] for name in MODULES.values() if name in sys.modules]


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


def allow_dynamic_shared(kernel, args: tuple, nbytes: int) -> None:
    """Let `kernel`, compiled for the types of `args`, launch with `nbytes` of dynamic shared memory (06d).

    Above 48 KB a kernel must opt in: cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
    in CUDA C++ (Programming Guide, "Shared Memory", compute capability 8.x and 9.x). numba-cuda 0.30.4
    has no option for it, so this sets it the way numba-cuda sets a kernel's shared-memory carveout:
    cuKernelSetAttribute on the compiled kernel, for the current device.
    """
    from numba import typeof
    from numba.cuda.cudadrv import driver as drv

    cufunc = kernel.compile(tuple(typeof(a) for a in args))._codelibrary.get_cufunc()
    attr = drv.binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    drv.driver.cuKernelSetAttribute(attr, int(nbytes), cufunc.handle, cufunc.device.id)


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
        return importlib.import_module(MODULES[choice().package] + ".libdevice")
    if name == "SIMULATOR":
        return choice().mode == "sim"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
