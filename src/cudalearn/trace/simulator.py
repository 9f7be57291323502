"""What Numba's CUDA simulator cannot run, and running such a kernel on the tracer instead (Chapter 10).

Numba's simulator has no warp intrinsics (`cuda.shfl_down_sync`..., numba#8433) and no `cuda.syncwarp`;
`simulator_lacks` finds the first such call in a kernel or its device functions, read from their syntax
trees, and `run` executes the kernel with `cudalearn.trace` and writes its results back like a launch;
`launch` is the launch of a kernel that may use warp intrinsics: on a GPU the launch itself, under the
simulator `run` when the simulator lacks what the kernel calls.
"""

import ast
import functools
import sys

import numpy as np

from cudalearn.trace import collective, execute
from cudalearn.trace.model import TraceError
from cudalearn.trace.report import TraceReport


@functools.cache
def _simulator_names():
    """(module names, atomic names) the simulator's `cuda` defines (read once: every launch asks)."""
    from numba.cuda.simulator import kernelapi

    module = {n for n in dir(kernelapi.FakeCUDAModule) if not n.startswith("_")}
    module |= {"gridDim", "blockDim"}  # set by its __init__
    atomic = {n for n in dir(kernelapi.FakeCUDAAtomic) if not n.startswith("_")}
    return module, atomic


def _cuda_paths(fn, cuda_module, seen):
    """(line, column, 'cuda.x' or 'cuda.atomic.x') of each attribute of numba.cuda that fn uses, in
    source order, with those of each device function where it is first called."""
    if id(fn) in seen:
        return []
    seen.add(id(fn))
    try:
        _, fdef = execute._function_tree(fn)
    except TraceError:  # no readable source: the simulator runs it, as before Chapter 10
        return []
    env = {**fn.__globals__, **execute._cells(fn)}
    resolve = execute._SyncToYield(env, cuda_module, "")._resolve
    found, callees = [], []
    for node in ast.walk(fdef):
        if isinstance(node, ast.Attribute) and resolve(node.value) is cuda_module:
            found.append((node.lineno, node.col_offset, f"cuda.{node.attr}"))
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "atomic"
            and resolve(node.value.value) is cuda_module
        ):
            found.append((node.lineno, node.col_offset, f"cuda.atomic.{node.attr}"))
        elif isinstance(node, ast.Name) and type(env.get(node.id)).__module__.startswith("numba"):
            obj = env.get(node.id)  # e.g. `from numba.cuda import shfl_down_sync`
            if execute._is_cuda_function(obj):
                callees.append((node.lineno, node.col_offset, obj))
            elif cuda_module is not None and callable(obj) and not _is_type(obj):
                name = node.id if getattr(cuda_module, node.id, None) is obj else None
                name = name or next(
                    (n for n in dir(cuda_module) if getattr(cuda_module, n, None) is obj), None
                )
                if name and not name.startswith("_"):
                    found.append((node.lineno, node.col_offset, f"cuda.{name}"))
        if isinstance(node, ast.Call):
            target = resolve(node.func)
            if collective.name_of(target):  # mma.sync, ldmatrix (Chapter 6): the tracer's warp events
                found.append((node.lineno, node.col_offset, f"ptx.{collective.name_of(target)}"))
            if execute._is_cuda_function(target) and not isinstance(node.func, ast.Name):
                callees.append((node.lineno, node.col_offset, target))
    out = []
    for line, col, item in sorted(found + callees, key=lambda t: t[:2]):
        if isinstance(item, str):
            out.append((line, col, item))
        else:  # a device function: its names where it is called
            out += _cuda_paths(execute._python_function(item), cuda_module, seen)
    return out


def simulator_lacks(kernel) -> str | None:
    """'cuda.shfl_down_sync': the first CUDA name kernel or its device functions use that Numba's
    simulator does not define, else None (Chapter 10)."""
    fn = execute._python_function(kernel)  # read anew each time: a notebook may redefine a device function
    cuda_module = sys.modules.get("numba.cuda")
    module, atomic = _simulator_names()
    for _, _, path in _cuda_paths(fn, cuda_module, set()):
        parts = path.split(".")
        if parts[1] == "atomic" and len(parts) == 3:
            if parts[2] not in atomic:
                return path
        elif parts[1] not in module:
            return path
    return None


def _is_type(value):
    """A numba type (float32 imported from numba is also cuda.f4): a conversion, not a CUDA call."""
    from numba.core import types

    return isinstance(value, (types.Type, types.NumberClass))


def run(kernel, griddim, blockdim, *args) -> TraceReport:
    """kernel[griddim, blockdim](*args) on the CPU through the tracer, the results written back into
    the arguments like a launch: numpy arrays in place, device arrays with copy_to_device (Chapter 10)."""
    report = execute.trace(kernel, griddim, blockdim, *args)
    for arg, out in zip(args, report.outputs, strict=True):
        if out is arg:
            continue  # a scalar
        if isinstance(arg, np.ndarray):
            arg[...] = out
        elif hasattr(arg, "copy_to_device"):
            arg.copy_to_device(out)
        elif hasattr(arg, "copy_"):  # a torch tensor
            import torch

            arg.copy_(torch.from_numpy(out))
    return report


_TRACED: set = set()  # kernels whose "ran on the tracer" line was printed


def launch(kernel, griddim, blockdim, *args) -> None:
    """kernel[griddim, blockdim](*args), the launch of a kernel that may use warp intrinsics (Chapter 10).

    On a GPU it is that launch and nothing else. Under the simulator a kernel that calls what the
    simulator lacks (`cudalearn.trace.simulator_lacks`: the warp shuffles, votes, syncwarp) runs on the
    CPU through `run` instead, its results written back into the arguments, with one
    printed line per kernel saying so.
    """
    from cudalearn.runtime import device

    if device.mode() != "sim":
        kernel[griddim, blockdim](*args)
        return
    lacks = simulator_lacks(kernel)
    if lacks is None:
        kernel[griddim, blockdim](*args)
        return
    name = execute._python_function(kernel).__name__
    if name not in _TRACED:
        _TRACED.add(name)
        print(
            f"{name} calls {lacks}, which Numba's simulator does not implement:\n"
            "cudalearn.trace ran it on the CPU, the 32 lanes of each warp in lockstep."
        )
    run(kernel, griddim, blockdim, *args)
