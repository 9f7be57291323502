"""Lab 6: whether a register-blocked kernel follows its tile names, traced again with other tile sizes.

The lab's kernel reads its tile sizes from the notebook's constants BM, BN, BK, TM and TN, which
differ between the simulator and a GPU. A kernel that has one of them typed in as a number (`ty * 3`
where `ty * TM` belongs) is right for that one configuration only, and the checks of that configuration
cannot tell. So the check traces the same code once more on the CPU with other values in those names
(`retiled`), and names the number typed in when it finds one (`typed_in`).
"""

from __future__ import annotations

import ast
import inspect
import itertools
import linecache
import types
from typing import Any

import numpy as np

from cudalearn import checks
from cudalearn.compile import source
from cudalearn.runtime import launch

#: the names lab 6's kernel reads its tile sizes from, as the exercise's cell defines them
TILE_NAMES = ("BM", "BN", "BK", "TM", "TN")


def other_tiles(BM: int, BN: int, BK: int, TM: int, TN: int) -> dict[str, int]:
    """Small tile sizes (and THREADS) each different from the given one's, with every thread count too."""
    tm = next(v for v in itertools.count(2) if v != TM)
    tn = next(v for v in itertools.count(2) if v not in (TN, tm))
    bk = next(v for v in itertools.count(3) if v != BK)
    rows = next(v for v in itertools.count(3) if v != BM // TM and tm * v != BM)  # threads down the tile
    threads = (BM // TM) * (BN // TN)
    cols = next(v for v in itertools.count(3) if v != BN // TN and tn * v != BN and rows * v != threads)
    return {"BM": tm * rows, "BN": tn * cols, "BK": bk, "TM": tm, "TN": tn, "THREADS": rows * cols}


def _function(kernel: Any) -> types.FunctionType:
    """The Python function of a @cuda.jit kernel (simulator, GPU or the grader's rebuilt one)."""
    if isinstance(kernel, types.FunctionType):
        return kernel
    fn = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None)
    if not isinstance(fn, types.FunctionType):
        raise AssertionError(f"found no Python function to trace in this {type(kernel).__name__}")
    return fn


def retiled(kernel: Any, sizes: dict[str, int]) -> types.FunctionType:
    """The kernel's function with `sizes` in its globals and closure variables of those names."""
    fn = _function(kernel)
    glb = {**fn.__globals__, **sizes}
    cells = tuple(
        types.CellType(sizes[name]) if name in sizes else cell
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True)
    )
    new = types.FunctionType(fn.__code__, glb, fn.__name__, fn.__defaults__, cells or None)
    tree = source.verified_tree(fn)  # the grader's rebuilt kernel is traced from its verified tree only
    if tree is not None:
        source.use_tree(new, tree)
    return new


def _names(code: types.CodeType) -> set[str]:
    """Global names a code object and the code objects nested in it read."""
    out = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _names(c)
    return out


def other_ints(kernel: Any) -> list[str]:
    """'TX = 8': the int constants other than the tile names that the kernel reads from its module."""
    fn = _function(kernel)
    skip = {*TILE_NAMES, "THREADS"}
    return [
        f"{name} = {value}"
        for name in sorted(_names(fn.__code__) - skip)
        if isinstance(value := fn.__globals__.get(name), int | np.integer) and not isinstance(value, bool)
    ]


def _tree(fn: types.FunctionType) -> ast.AST | None:
    """The kernel's def with its real line numbers, or None when its source cannot be read."""
    tree = source.verified_tree(fn)
    if tree is not None:
        return tree
    try:
        lines, start = inspect.getsourcelines(fn)
        text = "".join(lines)
        tree = ast.parse("if 1:\n" + text if text[:1] in " \t" else text)
    except (OSError, TypeError, SyntaxError):
        return None
    ast.increment_lineno(tree, start - (2 if text[:1] in " \t" else 1))
    return tree


def typed_in(kernel: Any, BM: int, BN: int, BK: int, TM: int, TN: int) -> list[str]:
    """Numbers in the kernel equal to a tile size: "line 40, `a[i] = sA[ty * 3 + i, k]`: 3 is TM here"."""
    fn = _function(kernel)
    tree = _tree(fn)
    if tree is None:
        return []
    values: dict[int, list[str]] = {}
    sizes = {"BM": BM, "BN": BN, "BK": BK, "TM": TM, "TN": TN, "BM // TM": BM // TM, "BN // TN": BN // TN}
    sizes["THREADS"] = sizes["BM // TM"] * sizes["BN // TN"]
    for name, value in sizes.items():
        if value >= 2:  # 0 and 1 are the numbers of any loop
            values.setdefault(value, []).append(name)
    fdef = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), None)
    body = [] if fdef is None else [n for stmt in fdef.body for n in ast.walk(stmt)]
    found = []
    for node in body:
        if isinstance(node, ast.Constant) and type(node.value) is int and node.value in values:
            line = linecache.getline(fn.__code__.co_filename, node.lineno).strip()
            where = f"line {node.lineno}" + (f", `{line}`" if line else "")
            found.append(
                (
                    node.lineno,
                    node.col_offset,
                    f"{where}: {node.value} is {' or '.join(values[node.value])} here",
                )
            )
    return [text for *_, text in sorted(found)]


def check_follows_tile_names(kernel: Any, BM: int, BN: int, BK: int, TM: int, TN: int) -> None:
    """Lab 6: trace the kernel with other tile sizes in its tile names; raise unless it still gives A @ B."""
    given = {"BM": BM, "BN": BN, "BK": BK, "TM": TM, "TN": TN}
    other = other_tiles(BM, BN, BK, TM, TN)
    m, k, n = other["BM"] + 2, 2 * other["BK"] + 1, other["BN"] + 4  # 2 x 2 blocks, the last ones partial
    rng = np.random.default_rng(13)
    A = rng.standard_normal((m, k)).astype(np.float32)
    B = rng.standard_normal((k, n)).astype(np.float32)
    grid = (launch.blocks(n, other["BN"]), launch.blocks(m, other["BM"]))
    try:
        report = checks.trace_kernel(
            retiled(kernel, other), grid, other["THREADS"], A, B, np.zeros((m, n), np.float32), sanitize=False
        )
        bad = ~np.isclose(report.outputs[2], A @ B, **checks.matmul_tol(k))
        found = f"{int(bad.sum())} of the {m * n} elements of C are wrong" if bad.any() else ""
    except AssertionError as e:  # the tracer's finding (an access outside sA...), without its general advice
        found = str(e).split("\n")[0].rstrip(".")
    if not found:
        return
    show = lambda d: ", ".join(f"{name} = {d[name]}" for name in TILE_NAMES)  # noqa: E731
    numbers = typed_in(kernel, BM, BN, BK, TM, TN)
    where = f" ({'; '.join(numbers[:3])})" if numbers else ""
    others = other_ints(kernel)
    also = (
        f" Your kernel also reads {', '.join(others)} from the notebook, which the check leaves as they are: "
        f"if one is computed from the tile sizes, compute it inside the kernel from their names."
        if others
        else ""
    )
    raise AssertionError(
        f"your kernel is right with this notebook's tile sizes ({show(given)}) but not with other ones "
        f"({show(other)}, THREADS = {other['THREADS']}), the same code traced on the CPU: {found}. The cause "
        f"is a tile size typed in as a number where the tile's name belongs{where}: such a kernel works "
        f"for one tile configuration only (a GPU's sizes are not the simulator's).{also} Hint: index with "
        f"the names, as in `sA[ty * TM + i, k]`, `range(BK)` and `col0 + tx * TN + j`, never their values."
    )
