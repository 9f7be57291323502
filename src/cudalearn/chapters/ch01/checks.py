"""Checks of lab 1 (CPU matmul): a product in Python loops, FLOPs, arithmetic intensity, the roofline.

`check_matmul_loops` reads the answer's code and runs it on arrays that
refuse NumPy's products; the counting checks name a usual wrong formula.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cudalearn import checks
from cudalearn.checks.simple_kernels import _rng

FORBIDDEN_PRODUCTS = ("dot", "vdot", "inner", "matmul", "einsum", "tensordot", "multi_dot", "kron")


class _LoopsOnly(np.ndarray):
    """An ndarray on which @, .dot, np.dot, np.matmul, np.einsum and the like raise `_Forbidden` (lab 1)."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if ufunc is np.matmul:
            raise _Forbidden("np.matmul or @")
        inputs = tuple(np.asarray(a) if isinstance(a, _LoopsOnly) else a for a in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        if func.__name__ in FORBIDDEN_PRODUCTS:
            raise _Forbidden(f"np.{func.__name__}")
        return super().__array_function__(func, types, args, kwargs)

    def __matmul__(self, other):
        raise _Forbidden("@")

    def __rmatmul__(self, other):
        raise _Forbidden("@")

    def dot(self, *args, **kwargs):
        raise _Forbidden(".dot")


class _Forbidden(Exception):
    """A NumPy product called where lab 1 asks for loops."""


# Names that hide what they call from a reader of the code: a product could be behind any of them.
HIDDEN_CALLS = (
    "getattr",
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


def _product_use(node: Any) -> str | None:
    """What a node of a lab 1 answer uses that is or may hide a product (`@`, np.dot, getattr...), or None."""
    import ast

    banned = (*FORBIDDEN_PRODUCTS, *HIDDEN_CALLS, *_PRODUCT_DUNDERS, "_LoopsOnly")
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.MatMult):
        return "@"
    if isinstance(node, ast.Attribute) and node.attr in banned:
        numpy = ast.unparse(node.value) in ("np", "numpy", "np.linalg", "numpy.linalg")
        return (
            f"np.{node.attr}" if numpy else f".{node.attr}" if node.attr in FORBIDDEN_PRODUCTS else node.attr
        )
    if isinstance(node, ast.Name) and node.id in banned:
        return node.id
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        modules = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
        for name in modules:
            if name and set(name.split(".")) & set(banned):
                return name
    return None


def _product_in_source(sources: Sequence[str]) -> tuple[str, str] | None:
    """(what, the line) of the first NumPy product, or name hiding one, in a lab 1 answer's sources, or None.

    A source that does not parse is skipped: such a cell defines nothing, so it cannot hold a helper.
    """
    import ast

    for source in sources:
        text = textwrap.dedent(source)
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        found = [(n.lineno, n.col_offset, w) for n in ast.walk(tree) if (w := _product_use(n)) is not None]
        if found:
            line, _, what = min(found)
            return what, text.splitlines()[line - 1].strip()
    return None


def _loops_only(matmul_loops: Callable[..., Any], A: np.ndarray, B: np.ndarray) -> dict:
    """Lab 1, run where the student's code lives: matmul_loops(A, B) on arrays refusing NumPy's products."""
    try:
        got = matmul_loops(A.view(_LoopsOnly), B.view(_LoopsOnly))
    except _Forbidden as e:
        return {"forbidden": str(e)}
    except NotImplementedError:
        return {"not_done": True}
    except IndexError as e:
        return {"index_error": str(e)}
    return {"got": np.asarray(got) if isinstance(got, np.ndarray) else got}


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
    """Lab 1: matmul_loops(A, B) equals A @ B for rectangular float64 (m, k, n) sizes, with no NumPy product.

    First the answer's code is read (`checks.student_sources`: under the grader, the answer cells it
    holds, never the student's object): `@`, a NumPy product, or a name that hides what it calls
    (getattr, eval...) fails; code that cannot be read fails too, after the run below. Then A and B
    are given as arrays on which @, .dot, np.dot, np.matmul, np.einsum and the like raise, in the
    process where the student's code runs (`checks.student_side`), which names a product called from
    a helper defined elsewhere. Expected values are computed before the call, which gets views of A
    and B.
    """
    try:
        sources, unread = checks.student_sources(matmul_loops, "matmul_loops"), None
    except AssertionError as e:  # e.g. np.matmul passed itself: the run below may name it; else this fails
        sources, unread = [], e
    found = _product_in_source(sources)
    if found is not None:
        what, line = found
        product = what == "@" or what.split(".")[-1] in FORBIDDEN_PRODUCTS
        raise AssertionError(
            f"`matmul_loops` uses {what} (in `{line}`): the exercise asks for the product written with "
            f"Python loops (for i, for j, for p: acc += A[i, p] * B[p, j]), not NumPy's product"
            + (
                "."
                if product
                else "; code that computes names at run time or reaches into NumPy's or the check's "
                "machinery (getattr, eval, __matmul__, _LoopsOnly) hides what it calls: call functions "
                "by their names."
            )
        )
    rng = _rng(2)
    for m, k, n in sizes or [(1, 1, 1), (3, 4, 5), (6, 2, 3)]:
        A, B = rng.standard_normal((m, k)), rng.standard_normal((k, n))
        expected = A @ B  # before the call: the student's function gets views of A and B
        A0, B0 = A.copy(), B.copy()
        call = f"matmul_loops(A{A.shape}, B{B.shape})"
        r = checks.student_side(_loops_only, matmul_loops, A, B)
        if r.get("not_done"):
            raise AssertionError(f"`matmul_loops` raised NotImplementedError: {checks.NOT_DONE}")
        if "forbidden" in r:
            raise AssertionError(
                f"`{call}` uses {r['forbidden']}: the exercise asks for the product written with Python "
                f"loops (for i, for j, for p: acc += A[i, p] * B[p, j]), not NumPy's product."
            )
        if "index_error" in r:
            raise AssertionError(
                f"`{call}` raised IndexError ({r['index_error']}): a loop runs past a matrix. i runs over "
                f"the m = {m} rows of A, j over the n = {n} columns of B, p over the k = {k} columns of A "
                f"(= rows of B); the matrices are not square."
            )
        got = r["got"]
        try:
            checks.check_close(got, expected, name=call, rtol=1e-9, atol=1e-12)
        except AssertionError as e:
            if "is wrong at" not in str(e):
                raise
            raise AssertionError(f"{str(e).split(' Hint: ')[0]} Hint: {_loops_hint(got, A0, B0)}") from None
    if unread is not None:
        raise unread


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
