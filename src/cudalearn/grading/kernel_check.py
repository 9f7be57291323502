"""The syntax-tree verifier: each node of a student kernel's `def` checked against the CUDA subset (labs 3-5).

`check_def` walks the def the judge is about to rebuild (`rebuild`): each
node's type, each constant, each name (its globals resolved by the
rebuilder), then each store, attribute chain and call against what those
names are. Nothing is run here; a node outside the subset raises `Unsafe`
saying where.
"""

from __future__ import annotations

import ast
import builtins
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from cudalearn.grading.kernel_subset import (
    ARRAY_ATTRS,
    BUILTINS,
    CUDA_ATTRS,
    NODES,
    NUMBA_TYPES,
    NUMPY_ATTRS,
    Unsafe,
    is_numba_object,
    judge_module,
)


def is_jit(decorator: ast.expr) -> tuple[bool, bool]:
    """(is a cuda.jit decorator, with device=True) for one decorator node."""
    call = decorator if isinstance(decorator, ast.Call) else None
    target = call.func if call else decorator
    text = ast.unparse(target)
    device = bool(call) and any(
        k.arg == "device" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in call.keywords
    )
    return text.endswith("jit"), device


def check_def(fdef: ast.FunctionDef, resolve: Callable[[str, str], Any], imported: set[str]) -> dict:
    """Check every node of a kernel's def; return the namespace to compile it in.

    `resolve(name, where)` gives a global name's value (and may rebuild a device function, adding to
    `imported`, the names resolved to the judge's own module or object, which calls may name).
    """
    args = fdef.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
        raise Unsafe(f"line {fdef.lineno}: a kernel takes plain positional parameters only")
    if args.defaults or any(a.annotation for a in args.args) or fdef.returns:
        raise Unsafe(f"line {fdef.lineno}: no default values or annotations in a traced kernel")
    local = {a.arg for a in args.args}
    for node in ast.walk(fdef):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            local.add(node.id)
    env: dict[str, Any] = {"__builtins__": {n: getattr(builtins, n) for n in BUILTINS}}
    nodes = list(ast.walk(ast.Module(body=fdef.body, type_ignores=[])))
    for node in nodes:  # first each node's type, and the global names resolved
        where = f"line {getattr(node, 'lineno', fdef.lineno)}"
        if not isinstance(node, NODES):
            raise Unsafe(f"{where}: `{type(node).__name__}` is not allowed in a kernel the grader traces")
        if isinstance(node, ast.Constant) and not isinstance(
            node.value, (int, float, complex, str, type(None))
        ):
            raise Unsafe(f"{where}: this constant is not allowed in a kernel")
        if isinstance(node, ast.Name):
            if node.id.startswith("__"):
                raise Unsafe(f"{where}: names starting with __ are not allowed")
            if isinstance(node.ctx, ast.Load) and node.id not in local and node.id not in env:
                env[node.id] = resolve(node.id, where)
    for node in nodes:  # then attributes and calls, against what those names are
        where = f"line {getattr(node, 'lineno', fdef.lineno)}"
        if isinstance(node, (ast.Attribute, ast.Subscript)) and not isinstance(node.ctx, ast.Load):
            _check_store(node, local, where)
        if isinstance(node, ast.Attribute):
            _check_attribute(node, local, env, where)
        if isinstance(node, ast.Call):
            _check_call(node.func, local, env, imported, where)
    return env


def _check_store(node: ast.Attribute | ast.Subscript, local: set, where: str) -> None:
    """A kernel stores into its own arrays only: never an attribute, never a global's element."""
    if isinstance(node, ast.Attribute):
        raise Unsafe(f"{where}: `{ast.unparse(node)} = ...` assigns an attribute; a kernel cannot")
    root = node.value
    while isinstance(root, (ast.Subscript, ast.Attribute)):
        root = root.value
    if not (isinstance(root, ast.Name) and root.id in local):
        raise Unsafe(
            f"{where}: `{ast.unparse(node)} = ...` writes into a global; a kernel writes only into "
            f"the arrays it is passed and its own shared or local arrays"
        )


def _chain(node: ast.expr) -> list[str] | None:
    """['cuda', 'threadIdx', 'x'] for `cuda.threadIdx.x`; None when the chain does not start at a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def _check_attribute(node: ast.Attribute, local: set, env: dict, where: str) -> None:
    """An attribute chain: an array's own (shape, dtype...) or an allowed name of an allowed module."""
    chain = _chain(node)
    if chain is None or any(p.startswith("_") for p in chain[1:]):
        raise Unsafe(f"{where}: `{ast.unparse(node)}` is not an attribute the grader can trace")
    root = chain[0]
    if root in local:
        if len(chain) != 2 or chain[1] not in ARRAY_ATTRS:
            raise Unsafe(f"{where}: `{ast.unparse(node)}`: only {sorted(ARRAY_ATTRS)} of an array")
        return
    if not _allowed_path(env.get(root), chain[1:]):
        hint = _misspelt_cuda(chain) if env.get(root) is judge_module("numba.cuda") else ""
        raise Unsafe(f"{where}: `{ast.unparse(node)}` is not allowed in a kernel the grader traces{hint}")


def _allowed_path(obj: Any, path: list[str]) -> bool:
    """Whether `obj.path...` is a name of the subset: CUDA_ATTRS of cuda, math's, NUMPY_ATTRS, NUMBA_TYPES."""
    import numba
    from numba import cuda

    if obj is cuda:
        first, rest = path[0], path[1:]
        allowed = CUDA_ATTRS.get(first, "missing")
        if allowed == "missing" or len(rest) > 1:
            return False
        return not rest or allowed is None or rest[0] in allowed
    if obj is math:
        return len(path) == 1
    if obj is np:
        return len(path) == 1 and path[0] in NUMPY_ATTRS
    if obj is numba:
        if path[0] == "cuda":
            return len(path) == 1 or _allowed_path(cuda, path[1:])
        return len(path) == 1 and path[0] in NUMBA_TYPES
    return False


def _check_call(func: ast.expr, local: set, env: dict, imported: set[str], where: str) -> None:
    """A call of an allowed module's name, a builtin of BUILTINS, a Numba object or an imported name."""
    if isinstance(func, ast.Attribute):
        return  # checked as an attribute chain on an allowed module
    if isinstance(func, ast.Name) and func.id not in local:
        target = env.get(func.id)
        if func.id in BUILTINS or is_numba_object(target) or func.id in imported:
            return
    raise Unsafe(f"{where}: the call `{ast.unparse(func)}(...)` is not allowed in a kernel the grader traces")


def _misspelt_cuda(chain: list[str]) -> str:
    """'; `cuda.syncthread` is no CUDA name: did you mean `cuda.syncthreads`?' for a name CUDA_ATTRS lacks."""
    import difflib

    if chain[1] in CUDA_ATTRS:
        return ""
    close = difflib.get_close_matches(chain[1], list(CUDA_ATTRS), n=1)
    return f"; `cuda.{chain[1]}` is no CUDA name" + (f": did you mean `cuda.{close[0]}`?" if close else "")
