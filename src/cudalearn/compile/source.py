"""A kernel's Python function and the syntax tree it may be read from, for the compiler's checks (all labs).

The grader rebuilds a student's kernel from its verified syntax tree (`grading.rebuild`) and registers
that tree here (`use_tree`); the tracer and the compile-error messages then read it back from here,
never from source text a student controls.
"""

from __future__ import annotations

import ast
import copy
import types
import weakref
from typing import Any

T4 = (7, 5)  # Colab's GPU: the compute capability every check compiles for

_VERIFIED: weakref.WeakKeyDictionary[types.FunctionType, ast.FunctionDef] = weakref.WeakKeyDictionary()


def kernel_function(kernel: Any) -> Any:
    """The plain Python function of a @cuda.jit kernel (real, simulated, or the grader's handle), or None."""
    try:
        fn = getattr(kernel, "py_func", None)  # the grader's handle rebuilds it in the judge
    except Exception:  # noqa: BLE001  (a handle that cannot rebuild it: no compile check)
        fn = None
    if not isinstance(fn, types.FunctionType):
        fn = getattr(kernel, "fn", None) if type(kernel).__name__ == "FakeCUDAKernel" else None
    if not isinstance(fn, types.FunctionType) and isinstance(kernel, types.FunctionType):
        fn = kernel
    return fn if isinstance(fn, types.FunctionType) else None


def _jitted_py_func(obj: Any) -> Any:
    """The Python function of a Numba CUDA dispatcher or simulator kernel object, else None."""
    name = type(obj).__name__
    if name == "FakeCUDAKernel":
        return obj.fn
    if name in ("CUDADispatcher", "Dispatcher") and type(obj).__module__.startswith("numba"):
        return getattr(obj, "py_func", None)
    return None


def use_tree(fn, fdef) -> None:
    """Read `fn` from `fdef`, the def it was compiled from, never from its source (the grader's rebuild).

    `fdef` keeps the line numbers of the text it was parsed from.
    """
    _VERIFIED[fn] = copy.deepcopy(fdef)


def verified_tree(fn):
    """A copy of the def `use_tree` registered for fn, or None (for the tracer and the compile messages)."""
    verified = _VERIFIED.get(fn)
    return None if verified is None else copy.deepcopy(verified)
