"""Checks of lab 1 (CPU matmul): a product in Python loops, FLOPs, arithmetic intensity, the roofline.

`check_matmul_loops` reads the answer's code, compares its values, and runs it on
matrices that give single elements only; the counting checks name a usual wrong formula.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.lib.mixins as np_mixins

from cudalearn import checks
from cudalearn.checks.simple_kernels import _rng

FORBIDDEN_PRODUCTS = ("dot", "vdot", "inner", "matmul", "einsum", "tensordot", "multi_dot", "kron")

#: what the loops-only rule is, as the exercise text and every message say it
LOOPS_RULE = (
    "the exercise asks for the product written with Python loops over single elements (for i, for j, "
    "for p: acc += A[i, p] * B[p, j]): the check gives your function matrices that allow element reads "
    "(A[i, p], A[i][p]), iterating a row or a column (for a in A[i]), .shape and .T, and refuse every "
    "whole-array NumPy operation (@, np.dot, a broadcast product, .sum(), np.asarray, .tolist(), ...)"
)

#: NumPy functions a loops answer may call on the check's matrices: they read no element
_ALLOWED_FUNCTIONS = ("shape", "ndim", "size", "zeros_like", "empty_like", "ones_like", "full_like")


class _LoopsOnly(np_mixins.NDArrayOperatorsMixin):
    """A read-only matrix for lab 1 that gives single elements and refuses every whole-array operation.

    Indexing to one element gives a float; indexing to a row, a column or a slice gives another
    `_LoopsOnly`, which can be iterated element by element. Every NumPy ufunc or operator on it (@, *, +,
    np.sum), every NumPy function but those of `_ALLOWED_FUNCTIONS`, every conversion to an array or a
    list (np.asarray, np.array, .tolist()) and every other ndarray method (.sum, .dot) raise `_Forbidden`,
    which the check reports with `LOOPS_RULE`.
    """

    __slots__ = ("_data",)

    def __init__(self, data: np.ndarray) -> None:
        object.__setattr__(self, "_data", data)

    shape = property(lambda self: self._data.shape)
    ndim = property(lambda self: self._data.ndim)
    size = property(lambda self: self._data.size)
    dtype = property(lambda self: self._data.dtype)
    T = property(lambda self: _LoopsOnly(self._data.T))

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, (_LoopsOnly, np.ndarray, list)) or (
            isinstance(key, tuple) and any(isinstance(k, (_LoopsOnly, np.ndarray, list)) for k in key)
        ):
            raise _Forbidden("indexing with an array (fancy indexing takes many elements at once)")
        got = self._data[key]
        return _LoopsOnly(got) if isinstance(got, np.ndarray) else float(got)

    def __iter__(self):
        return (self[i] for i in range(len(self._data)))

    def __setitem__(self, key: Any, value: Any) -> None:
        raise _Forbidden("a write into an input matrix (A and B are read only; write C)")

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise _Forbidden("a conversion of a whole matrix to a NumPy array (np.asarray, np.array, ...)")

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        how = "" if method == "__call__" else f".{method}"
        op = "np.matmul or @" if ufunc is np.matmul else f"np.{ufunc.__name__}{how}"
        raise _Forbidden(f"{op} on a whole matrix, a row or a column")

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func.__name__ not in _ALLOWED_FUNCTIONS:
            raise _Forbidden(f"np.{func.__name__} on a whole matrix, a row or a column")
        if func.__name__ in ("shape", "ndim", "size"):
            return getattr(self._data, func.__name__)
        plain = (np.empty(self._data.shape, self._data.dtype), *args[1:])
        return func(*plain, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if hasattr(np.ndarray, name):
            raise _Forbidden(f".{name}" + ("()" if callable(getattr(np.ndarray, name)) else ""))
        raise AttributeError(f"a matrix has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise _Forbidden("an attribute set on an input matrix")

    def __repr__(self) -> str:
        return f"<a {self._data.shape} float64 matrix of lab 1's check: read it element by element>"

    def __reduce__(self):
        raise TypeError("lab 1's matrices stay in the process that made them")


class _Forbidden(Exception):
    """A whole-array NumPy operation done where lab 1 asks for loops over elements."""


# Names that hide what they call from a reader of the code: a product could be behind any of them.
HIDDEN_CALLS = (
    "getattr",
    "setattr",
    "delattr",
    "eval",
    "exec",
    "compile",
    "__import__",
    "globals",
    "vars",
    "operator",
    "importlib",
)
_PRODUCT_DUNDERS = ("__matmul__", "__rmatmul__", "__imatmul__", "__array_ufunc__", "__array_function__")
#: NumPy functions and ndarray methods that work on a whole array (or a row) at once: a loops answer
#: reads single elements, so any of them in its code does the loop inside NumPy
WHOLE_ARRAY = (
    "sum", "prod", "cumsum", "cumprod", "mean", "multiply", "add", "outer", "trace", "asarray",
    "asanyarray", "ascontiguousarray", "asfortranarray", "tolist", "view", "broadcast_to", "newaxis",
    "frombuffer",
)  # fmt: skip


def _product_use(node: Any) -> str | None:
    """What a node of a lab 1 answer uses that is, or may hide, a whole-array operation, or None.

    `@` and NumPy's products, whole-array functions and methods (`WHOLE_ARRAY`: .sum(), np.multiply,
    np.asarray, ...), a `None` or `...` index (a broadcast), names that hide what they call (getattr,
    eval...) and private attributes (the check's matrix's `_data`).
    """
    import ast

    banned = (*FORBIDDEN_PRODUCTS, *HIDDEN_CALLS, *_PRODUCT_DUNDERS, "_LoopsOnly")
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.MatMult):
        return "@"
    if isinstance(node, ast.Attribute) and (node.attr in banned or node.attr in WHOLE_ARRAY):
        if ast.unparse(node.value) == "math":  # math.prod over a generator is a loop
            return None
        numpy = ast.unparse(node.value) in ("np", "numpy", "np.linalg", "numpy.linalg")
        known = node.attr in FORBIDDEN_PRODUCTS or node.attr in WHOLE_ARRAY
        return f"np.{node.attr}" if numpy else f".{node.attr}" if known else node.attr
    if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):  # A[...] = 0 is a write
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if any(isinstance(p, ast.Constant) and (p.value is None or p.value is Ellipsis) for p in parts):
            return "a None or ... index (a broadcast)"
    if isinstance(node, ast.Name) and node.id in banned:
        return node.id
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        modules = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
        for name in modules:
            if name and set(name.split(".")) & set(banned):
                return name
    return None


def _product_in_source(sources: Sequence[str]) -> tuple[str, str] | None:
    """(what, the line) of the first whole-array operation, or name hiding one, in a lab 1 answer, or None.

    The first source (the cell defining matmul_loops) is read whole; of the others (under the grader,
    the lab's other answer cells) only the top-level functions and classes that the code read so far
    names, so np.prod in matmul_flops' cell does not count against matmul_loops. A source that does not
    parse is skipped: such a cell defines nothing, so it cannot hold a helper.
    """
    import ast

    parsed = []
    for source in sources:
        text = textwrap.dedent(source)
        try:
            parsed.append((text, ast.parse(text)))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    if not parsed:
        return None
    read = [(parsed[0][0], parsed[0][1])]
    named = {n.id for n in ast.walk(parsed[0][1]) if isinstance(n, ast.Name)}
    others = [(text, d) for text, tree in parsed[1:] for d in tree.body if hasattr(d, "name")]
    grew = True
    while grew:  # the helpers named by what is read, and the helpers they name
        grew = False
        for text, d in others:
            if d.name in named and all(d is not r for _, r in read):
                read.append((text, d))
                named |= {n.id for n in ast.walk(d) if isinstance(n, ast.Name)}
                grew = True
    for text, tree in read:
        found = [(n.lineno, n.col_offset, w) for n in ast.walk(tree) if (w := _product_use(n)) is not None]
        if found:
            line, _, what = min(found)
            return what, text.splitlines()[line - 1].strip()
    return None


def _loops_only(matmul_loops: Callable[..., Any], A: np.ndarray, B: np.ndarray) -> dict:
    """Lab 1, run where the student's code lives: matmul_loops on matrices that give single elements only."""
    try:
        matmul_loops(_LoopsOnly(A), _LoopsOnly(B))
    except _Forbidden as e:
        return {"forbidden": str(e)}
    except Exception as e:  # noqa: BLE001 - reported to the student with the rule
        return {"error": f"{type(e).__name__}: {e}"}
    return {}


def _element_run(matmul_loops: Callable[..., Any], A: np.ndarray, B: np.ndarray) -> dict:
    """`_loops_only` run where the student's code lives (`checks.student_side`): {} or what it found."""
    return checks.student_side(_loops_only, matmul_loops, A, B)


def _loops_hint(got: Any, A: np.ndarray, B: np.ndarray) -> str:
    """matmul_loops' usual mistakes, from the wrong result."""
    C = A @ B
    if isinstance(got, np.ndarray) and got.shape == C.shape:
        if np.allclose(got, np.cumsum(C.ravel()).reshape(C.shape)) or np.allclose(got, np.cumsum(C, axis=1)):
            return "each C[i, j] holds the sum of the previous ones too: set acc = 0.0 for every (i, j)."
        if np.allclose(got, A[:, -1:] * B[-1:, :]):
            return (
                "C[i, j] holds only the last product: set acc = 0.0 once before the loop over p, not in it."
            )
    return "C[i, j] = sum over p of A[i, p] * B[p, j], with i < m, j < n and p < k."


def check_matmul_loops(
    matmul_loops: Callable[[np.ndarray, np.ndarray], Any], sizes: Sequence[tuple[int, int, int]] | None = None
) -> None:
    """Lab 1: matmul_loops(A, B) equals A @ B for rectangular float64 (m, k, n) sizes, in loops over elements.

    First the answer's code is read (`checks.student_sources`: under the grader, the answer cells it
    holds, never the student's object): `@`, a NumPy product, a whole-array function or method
    (`WHOLE_ARRAY`), a broadcast index or a name that hides what it calls (getattr, eval...) fails; code
    that cannot be read fails too, after the value runs below. Then matmul_loops is called here on plain
    arrays (under the grader through the judge's handle) and its result compared with A @ B computed
    here; no course code running in the student's process decides the values. Last, it is run (as
    `checks.student_side`) on `_LoopsOnly` matrices, which refuse every whole-array operation, so one
    in a helper defined elsewhere, or written in a way the code reading misses, is named too.
    """
    try:
        sources, unread = checks.student_sources(matmul_loops, "matmul_loops"), None
    except AssertionError as e:  # e.g. np.matmul passed itself: the run below may name it; else this fails
        sources, unread = [], e
    found = _product_in_source(sources)
    if found is not None:
        what, line = found
        product = what == "@" or what.split(".")[-1] in FORBIDDEN_PRODUCTS
        whole = what.split(".")[-1] in WHOLE_ARRAY or what.startswith("a None")
        raise AssertionError(
            f"`matmul_loops` uses {what} (in `{line}`): "
            + (
                "the exercise asks for the product written with Python loops (for i, for j, for p: acc += "
                "A[i, p] * B[p, j]), not NumPy's product."
                if product
                else f"{LOOPS_RULE}."
                if whole
                else f"{LOOPS_RULE}; code that computes names at run time or reaches into NumPy's or the "
                "check's machinery (getattr, eval, __matmul__, _data) hides what it calls: call functions "
                "by their names."
            )
        )
    rng = _rng(2)
    runs = []  # (call, A, B) of each size, run again on element-only matrices once all values are right
    for m, k, n in sizes or [(1, 1, 1), (3, 4, 5), (6, 2, 3)]:
        A, B = rng.standard_normal((m, k)), rng.standard_normal((k, n))
        expected = A @ B  # before the call
        A0, B0 = A.copy(), B.copy()
        call = f"matmul_loops(A{A.shape}, B{B.shape})"
        try:
            got = checks.call_student(matmul_loops, "matmul_loops", A, B)
        except IndexError as e:
            raise AssertionError(
                f"`{call}` raised IndexError ({e}): a loop runs past a matrix. i runs over the m = {m} rows "
                f"of A, j over the n = {n} columns of B, p over the k = {k} columns of A (= rows of B); "
                f"the matrices are not square."
            ) from None
        try:
            checks.check_close(got, expected, name=call, rtol=1e-9, atol=1e-12)
        except AssertionError as e:
            if "is wrong at" not in str(e):
                raise
            raise AssertionError(f"{str(e).split(' Hint: ')[0]} Hint: {_loops_hint(got, A0, B0)}") from None
        runs.append((call, A0, B0))
    if unread is not None:  # fails; what the element-only run finds is said too
        found = [r["forbidden"] for _, A, B in runs if "forbidden" in (r := _element_run(matmul_loops, A, B))]
        if found:
            raise AssertionError(
                f"{unread} Run on the check's element-only matrices, it uses {found[0]}: {LOOPS_RULE}."
            )
        raise unread
    for call, A, B in runs:
        r = _element_run(matmul_loops, A, B)
        if "forbidden" in r:
            raise AssertionError(f"`{call}` gives the right values but uses {r['forbidden']}: {LOOPS_RULE}.")
        if "error" in r:
            raise AssertionError(
                f"`{call}` gives the right values on NumPy arrays but raised {r['error']} on the check's "
                f"matrices: {LOOPS_RULE}."
            )


def check_matmul_flops(matmul_flops: Callable[[int, int, int], int]) -> None:
    """Lab 1: FLOPs of an (m,k) @ (k,n) product: one multiply and one add per term, a Python int."""
    from cudalearn.measure import timing

    sizes = [(1, 1, 1), (2, 3, 4), (1024, 1024, 1024), (7, 1, 5), (3, 5, 11)]
    checks.check_function(
        matmul_flops,
        [((m, n, k), timing.matmul_flops(m, n, k)) for m, n, k in sizes],
        name="matmul_flops",
        hint="each of the m*n outputs needs k multiplies and k adds.",
        mistakes=[
            (lambda m, n, k: m * n * k, "you counted one operation per term: each is a multiply AND an add."),
            (
                lambda m, n, k: m * n * (2 * k - 1),
                "the exercise counts k additions per output (one per term, into the accumulator), not k - 1.",
            ),
            (lambda m, n, k: 2 * m * k, "you left out n: there are m * n outputs, each of k terms."),
            (lambda m, n, k: 2 * n * k, "you left out m: there are m * n outputs, each of k terms."),
        ],
        exact_types=True,
    )


def check_intensity(intensity: Callable[..., float]) -> None:
    """Lab 1: FLOP per byte when A, B and C each cross memory exactly once."""
    cases = []
    for m, n, k, b in [(1, 1, 1, 4), (1024, 1024, 1024, 4), (4096, 64, 4096, 2), (8, 8, 8, 8), (3, 5, 7, 1)]:
        cases.append(((m, n, k, b), float(2 * m * n * k / ((m * k + k * n + m * n) * b))))
    checks.check_function(
        intensity,
        cases,
        name="intensity",
        hint="bytes = (m*k + k*n + m*n) * bytes_per_element; FLOPs = 2*m*n*k.",
        mistakes=[
            (
                lambda m, n, k, b: 2 * m * n * k / ((m * k + k * n) * b),
                "you left out C's bytes: C (m, n) crosses memory too (it is written): m*k + k*n + m*n "
                "elements.",
            ),
            (
                lambda m, n, k, b: m * n * k / ((m * k + k * n + m * n) * b),
                "the FLOPs are 2 * m * n * k (a multiply and an add per term).",
            ),
            (
                lambda m, n, k, b: 2 * m * n * k / ((m * k + k * n + m * n) * 4),
                "you used 4 bytes per element: use the argument bytes_per_element.",
            ),
            (
                lambda m, n, k, b: 2 * m * n * k / (m * k + k * n + m * n),
                "you divided by elements, not bytes: multiply by bytes_per_element.",
            ),
            (
                lambda m, n, k, b: 2 * m * n * k // ((m * k + k * n + m * n) * b),
                "// rounds the quotient down to an integer: use / for a float.",
            ),
        ],
    )


def check_attainable(attainable: Callable[[float, float, float], float]) -> None:
    """Lab 1: the roofline, min(peak, intensity x bandwidth), on two machines."""
    from cudalearn.measure import gpus

    machines = [(8100.0, 320.0), (51200.0, 3350.0)]  # T4-like and H100-like: ridge points 25.3 and 15.3
    cases = [
        ((ai, peak, bw), float(gpus.attainable_gflops(ai, peak, bw)))
        for peak, bw in machines
        for ai in (0.25, 100.0, peak / bw, 20.0)
    ]
    t4 = machines[0]
    checks.check_function(
        attainable,
        cases,
        name="attainable",
        hint="below the ridge point bandwidth limits you (intensity * bandwidth), above it the peak does.",
        mistakes=[
            (
                lambda ai, p, bw: min(p, ai * bw * 1e9),
                "FLOP/byte times GB/s is already GFLOP/s: no factor 1e9.",
            ),
            (lambda ai, p, bw: max(p, ai * bw), "min, not max: the lower of the two roofs limits you."),
            (lambda ai, p, bw: ai * bw, "above the ridge point the peak caps the rate: min(peak, ...)."),
            (lambda ai, p, bw: p, "below the ridge point the bandwidth limits you: intensity * bandwidth."),
            (
                lambda ai, p, bw: min(t4[0], ai * t4[1]),
                "you used the T4's figures: use the arguments peak_gflops and bandwidth_gbs.",
            ),
            (
                lambda ai, p, bw: p if ai >= t4[0] / t4[1] else ai * bw,
                "you compared with the T4's ridge point: each machine's is peak_gflops / bandwidth_gbs "
                "(or simply take min(peak, intensity * bandwidth)).",
            ),
        ],
    )
