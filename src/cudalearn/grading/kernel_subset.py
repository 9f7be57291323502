"""The CUDA subset a kernel the grader traces may use: its allow-lists and the judge's own modules (labs 3-5).

`rebuild` rebuilds a student's kernel in the judge only when every node of
its `def` stays inside this subset (`kernel_check`), every import it relies
on names one of IMPORTABLE (`kernel_imports`), and every global it reads is
plain data, a Numba object or one of these modules, seen as read-only copies
(`frozen`).
"""

from __future__ import annotations

import ast
import math
import types
from typing import Any

import numpy as np

BUILTINS = (
    "range min max abs len int float bool round divmod pow IndexError ValueError RuntimeError "
    "ZeroDivisionError AssertionError".split()
)
ARRAY_ATTRS = {"shape", "size", "ndim", "dtype", "real", "imag"}
CUDA_ATTRS = {
    "threadIdx": {"x", "y", "z"},
    "blockIdx": {"x", "y", "z"},
    "blockDim": {"x", "y", "z"},
    "gridDim": {"x", "y", "z"},
    "shared": {"array"},
    "local": {"array"},
    "const": {"array_like"},
    "atomic": {
        "add",
        "sub",
        "max",
        "min",
        "nanmax",
        "nanmin",
        "exch",
        "inc",
        "dec",
        "compare_and_swap",
        "cas",
    },
    "fp16": None,  # any public attribute
    **dict.fromkeys(
        "grid gridsize syncthreads syncthreads_count syncthreads_and syncthreads_or syncwarp threadfence "
        "threadfence_block threadfence_system laneid warpsize fma selp activemask lanemask_lt ballot_sync "
        "shfl_sync shfl_up_sync shfl_down_sync shfl_xor_sync all_sync any_sync eq_sync match_any_sync "
        "match_all_sync popc brev clz ffs cbrt".split(),
        set(),
    ),
}
NUMPY_ATTRS = set(
    "float16 float32 float64 int8 int16 int32 int64 uint8 uint16 uint32 uint64 bool_ complex64 complex128 "
    "sqrt exp exp2 log log2 log10 sin cos tan arcsin arccos arctan arctan2 sinh cosh tanh abs absolute "
    "minimum maximum floor ceil trunc rint isnan isinf isfinite sign copysign fabs hypot power inf nan pi e"
    "".split()
)
NUMBA_TYPES = {n for n in NUMPY_ATTRS if n[0] in "fiuc" and n[-1].isdigit()} | {"boolean", "intp", "uintp"}
NODES = (
    ast.Module, ast.FunctionDef, ast.arguments, ast.arg, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For,
    ast.While, ast.If, ast.Break, ast.Continue, ast.Pass, ast.Return, ast.Expr, ast.Raise, ast.Assert,
    ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Constant, ast.Name, ast.Attribute,
    ast.Subscript, ast.Slice, ast.Tuple, ast.Call, ast.keyword, ast.Load, ast.Store, ast.operator,
    ast.unaryop, ast.boolop, ast.cmpop, ast.expr_context,
)  # fmt: skip
IMPORTABLE = {  # module -> the names `from module import ...` may take (None: any public name)
    "numpy": NUMPY_ATTRS,
    "math": None,
    "numba": NUMBA_TYPES | {"cuda"},
    "numba.cuda": set(),  # `cuda.syncthreads()` through the module: the tracer swaps `cuda` itself
}


class Unsafe(ValueError):
    """The kernel's source leaves the CUDA subset the grader can trace safely; the message says where."""


def judge_module(path: str) -> Any:
    """The judge's own module `path`, a key of IMPORTABLE: a student's text never picks what is imported."""
    import numba
    from numba import cuda

    return {"numpy": np, "math": math, "numba": numba, "numba.cuda": cuda}[path]


def is_module(value: Any) -> bool:
    """One of the modules a kernel may name: numba.cuda, math, numpy, numba."""
    import numba
    from numba import cuda

    return any(value is m for m in (cuda, math, np, numba))


def is_numba_object(obj: Any) -> bool:
    """A Numba type (float32) or a jitted function of the judge (an instructor's or a rebuilt one), or a
    warp instruction the course registered with the tracer (Chapter 6's mma.sync, ldmatrix)."""
    from cudalearn.trace import collective

    if collective.name_of(obj) is not None:
        return True
    return type(obj).__module__.split(".")[0] == "numba" and not isinstance(obj, types.ModuleType)


def frozen(value: Any) -> Any:
    """A kernel's global as it sees it: arrays as read-only copies (the judge's own stay untouched)."""
    if isinstance(value, np.ndarray):
        value = value.copy()
        value.flags.writeable = False
        return value
    if isinstance(value, tuple):
        return tuple(frozen(v) for v in value)
    return value


def is_data(value: Any) -> bool:
    """Plain data a kernel may read as a global: None, a number, a string, an array, or a tuple of them."""
    if value is None or isinstance(value, (bool, int, float, complex, str, np.generic, np.ndarray)):
        return True
    return isinstance(value, tuple) and all(is_data(v) for v in value)
