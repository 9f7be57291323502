"""Checks of labs 0-2 (setup, CPU matmul, first kernels), built on `checks` and the tracer.

Visible checks use a few sizes; the hidden tests in the solution notebooks
call the same functions with other sizes (odd sizes, one block, non-multiples
of the block size, random data). Sizes stay small under the simulator.

Answers that are numbers must be of the type asked for (a Python int for a
count or a launch, a tuple of ints for a grid); a usual wrong formula gets a
hint naming it. A kernel check launches with two block shapes (so a
hard-coded block size fails), sizes where rows != columns and the grid stops
covering the output when x and y are swapped, and checks that the inputs are
left unchanged and the output is not read before it is written; then it
traces a small launch on the CPU (`cudalearn.trace`): a race (several threads
writing one element, e.g. every thread looping over the whole array) fails,
and a wrong result or an access outside an array is explained by the
tracer's findings (which thread, which array, which line).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cudalearn import checks, device
from cudalearn.sizes import size

FORBIDDEN_PRODUCTS = ("dot", "vdot", "inner", "matmul", "einsum", "tensordot", "multi_dot", "kron")


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# Kernel checks (labs 0 and 2) ---------------------------------------------------------------


def _race_message(report: Any, out: str) -> str:
    """A trace's first race as a message: each output element must have one thread (labs 0 and 2)."""
    race = report.races[0]
    (b1, t1), (b2, t2) = race.first, race.second
    if b1 != b2 and t1 == t2:
        hint = (
            "the same thread of two different blocks wrote one element: your index ignores the block. "
            "The global index is cuda.grid(1) = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x "
            "(cuda.grid(2) in 2-D)."
        )
    else:
        hint = (
            f"several threads wrote the same element of `{out}`: each element needs exactly one thread. "
            f"Does every thread loop over the whole array? Write only the element(s) of your own global "
            f"index (cuda.grid), or a grid-stride loop that starts at it."
        )
    return (
        f"the tracer found {report.race_count} race(s) in your kernel: two threads accessed one element, "
        f"at least one writing it, with nothing ordering them. The first: {race}. Hint: {hint}"
    )


def _trace_findings(kernel: Any, probe: tuple, out: str) -> str | None:
    """The tracer's finding on a small launch (grid, block, *args): a race, out of bounds, or None."""
    grid, block, *args = probe
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    try:
        report = checks.trace_kernel(kernel, grid, block, *args)
    except AssertionError as e:  # a finding (out of bounds, a barrier skipped), unless it could not trace
        return None if "could not run your kernel" in str(e) else str(e)
    return _race_message(report, out) if report.race_count else None


def _reads_output(kernel: Any, grid: Any, block: Any, args: Sequence[Any], out: int, expected) -> bool:
    """Whether the kernel is right only on a zeroed `args[out]`: it reads out (`+=`) before writing it.

    Run on an output of zeros and on one of ones: right on zeros, and every element wrong on ones was
    written (holds neither the expected value nor the 1 it started with).
    """
    tol = {"rtol": 1e-4, "atol": 1e-4} if np.asarray(expected).dtype.kind == "f" else {"rtol": 0, "atol": 0}
    runs = []
    for fill in (0, 1):
        start = list(args)
        start[out] = np.full_like(args[out], fill)
        try:
            runs.append(checks.run_kernel(kernel, grid, block, *start)[out])
        except AssertionError:
            return False
    zeros, ones = runs
    wrong = ~np.isclose(ones, expected, **tol)
    return bool(np.allclose(zeros, expected, **tol) and wrong.any() and not np.isclose(ones[wrong], 1).any())


def _check_launch(
    kernel: Any,
    grid: Any,
    block: Any,
    args: Sequence[Any],
    out: int,
    expected: np.ndarray,
    *,
    names: Sequence[str],
    probe: tuple,
    tol: dict | None = None,
    hint: Callable[[np.ndarray], str | None] = lambda got: None,
) -> None:
    """Launch a student's kernel and raise naming the cause (labs 0 and 2).

    `args[out]` is the output (filled with the sentinel), `names` the arguments' names in messages.
    In order: an access outside an array (explained by the tracer on the small launch `probe`), an input
    changed, the output read before written (`+=` into an array nobody zeroed), a wrong result (the
    tracer's race or out-of-bounds access if it finds one, else `hint(got)`, else check_close's own).
    """
    try:
        host = checks.run_kernel(kernel, grid, block, *args)
    except AssertionError as e:
        bounds = any(w in str(e) for w in ("outside", "past the end", "before the start", "crashed"))
        found = _trace_findings(kernel, probe, names[out]) if bounds else None
        raise AssertionError(found or str(e)) from None
    for i, (before, after) in enumerate(zip(args, host, strict=True)):
        if i != out and isinstance(before, np.ndarray) and not np.array_equal(before, after, equal_nan=True):
            raise AssertionError(
                f"your kernel changed its input `{names[i]}`: the kernel must only read the inputs and write "
                f"its result into `{names[out]}` (`{names[out]}[...] = ...`). Check which array is on the "
                f"left of the `=`."
            )
    got = host[out]
    try:
        checks.check_close(got, expected, name=names[out], **(tol or {}), block=_block_of(block, got))
        return
    except AssertionError as e:
        failure = str(e)
    if _reads_output(kernel, grid, block, args, out, expected):
        raise AssertionError(
            f"`{names[out]}` is only right when it starts zeroed: your kernel reads `{names[out]}` before "
            f"writing it (e.g. `{names[out]}[...] += ...`), and on a GPU a new output array holds garbage, "
            f"not zeros (the check fills it with {checks.sentinel(got.dtype)}). Sum into a local variable "
            f"(acc = float32(0.0); acc += ...) and store it once: `{names[out]}[...] = acc`."
        ) from None
    found = _trace_findings(kernel, probe, names[out])
    specific = None if found else hint(np.asarray(got))
    if specific:
        raise AssertionError(f"{failure.split(' Hint: ')[0]} Hint: {specific}") from None
    raise AssertionError(found or failure) from None


def _block_of(block: Any, got: Any) -> tuple[int, ...] | None:
    """check_close's `block` for a launch block (x[, y]) over an output of got's shape: (rows, cols) order."""
    b = (block,) if isinstance(block, int) else tuple(block)
    return b[::-1] if np.ndim(got) == len(b) else None


def _check_no_race(kernel: Any, probe: tuple, out: str) -> None:
    """Trace the small launch `probe`: every output element must be written by one thread (labs 0 and 2)."""
    found = _trace_findings(kernel, probe, out)
    if found:
        raise AssertionError(f"your kernel gives the right result, but {found}")


def _stride_hint(got: np.ndarray, expected: np.ndarray, grid: int, threads: int) -> str | None:
    """A 1-D kernel's usual mistakes: a guard one short, a block size typed in (blockIdx.x * 32)."""
    written = np.isclose(got, expected)
    n = got.shape[0]
    if n > 1 and written[:-1].all() and not written[-1]:
        return (
            f"only the last element, [{n - 1}], is wrong: does your guard stop one short "
            f"(`i < out.shape[0] - 1`, or `<=` one element early)? Every i < out.shape[0] has an element."
        )
    for step in (8, 16, 32, 64, 128, 256, 512, 1024):
        idx = (np.arange(grid)[:, None] * step + np.arange(threads)[None, :]).ravel()
        covered = np.zeros(n, bool)
        covered[idx[idx < n]] = True
        if step > threads and grid > 1 and np.array_equal(written, covered):
            return (
                f"the elements written are those of blocks {step} elements apart, but this launch has "
                f"blocks of {threads} threads: did you type the block size into the index (blockIdx.x * "
                f"{step})? Use cuda.blockDim.x, or cuda.grid(1), so the kernel works with any block size."
            )
    return None


def _threads_1d(threads: int | None, default: Sequence[int]) -> list[int]:
    """The block sizes a 1-D kernel check launches with: `threads` if given, else `default`."""
    return [threads] if threads else list(default)


# Chapter 0 -------------------------------------------------------------------


def check_blocks_for(blocks_for: Callable[[int, int], int]) -> None:
    """Lab 0: blocks_for(n, threads) is the fewest blocks of `threads` threads that cover n elements."""
    sizes = [(1, 32), (32, 32), (33, 32), (1000, 256), (1 << 20, 1024), (7, 3), (2**53 + 1, 2)]
    checks.check_function(
        blocks_for,
        [((n, t), -(-n // t)) for n, t in sizes],
        name="blocks_for",
        hint="round the division up with integer arithmetic: (n + threads - 1) // threads.",
        mistakes=[
            (
                lambda n, t: math.ceil(n / t),
                "n / threads is a float division, which rounds for large n (above 2**53): round up with "
                "integer arithmetic, (n + threads - 1) // threads.",
            ),
            (lambda n, t: n // t, "n // threads rounds down: the last n % threads elements get no thread."),
            (
                lambda n, t: n // t + 1,
                "one block too many when n is a multiple of threads: (n + threads - 1) // threads.",
            ),
        ],
        exact_types=True,
    )


def _round_trip(double_on_gpu: Callable[[np.ndarray], Any], x: np.ndarray) -> dict:
    """Lab 0, run where the student's code lives: double_on_gpu(x), x afterwards and the kernels launched."""
    from cudalearn.nn.mlp import count_launches

    with count_launches() as launches:
        try:
            got = double_on_gpu(x)
        except NotImplementedError:
            return {"not_done": True}
    on_device = hasattr(got, "copy_to_host")
    return {
        "got": got.copy_to_host() if on_device else got,
        "device": on_device,
        "x": x,
        "launches": launches.names,
    }


def check_round_trip(double_on_gpu: Callable[[np.ndarray], Any], sizes: Sequence[int] | None = None) -> None:
    """Lab 0: double_on_gpu(x) doubles x on the device with `scale` into a new host array; x unchanged."""
    threads = size("ch0.block")
    for n in sizes or [37, 5, 2 * threads + 3]:
        x = _rng(1).standard_normal(n).astype(np.float32)
        before = x.copy()
        r = checks.student_side(_round_trip, double_on_gpu, x)
        if r.get("not_done"):
            raise AssertionError(f"`double_on_gpu` raised NotImplementedError: {checks.NOT_DONE}")
        if r["device"]:
            raise AssertionError(
                "`double_on_gpu` returned a device array: copy the result back to the host with "
                "`.copy_to_host()` before returning it."
            )
        if "scale" not in r["launches"]:
            what = f"launched {r['launches']}" if r["launches"] else "launched no kernel"
            raise AssertionError(
                f"`double_on_gpu` {what}: it must double x on the device with the course's kernel "
                f"`scale` (scale[blocks, THREADS](d_x, np.float32(2.0))), not with NumPy on the host."
            )
        got = r["got"]
        if not np.array_equal(r["x"], before):
            raise AssertionError(
                "`double_on_gpu` changed its input x on the host: copy x to the device with "
                "cuda.to_device(x) and launch `scale` on the device copy."
            )
        if isinstance(got, np.ndarray) and got.shape == x.shape and not np.allclose(got, 2 * before):
            doubled = np.isclose(got, 2 * before) | (before == 0)
            first = int(np.argmin(doubled))
            if doubled[:first].all() and np.allclose(got[first:], before[first:]):
                raise AssertionError(
                    f"`double_on_gpu(x)` for {n} elements doubled only the first {first}: elements {first} "
                    f"to {n - 1} are unchanged, so the launch had too few threads ({first} = "
                    f"{first // threads} block(s) of {threads}). Hint: launch blocks_for(x.shape[0], "
                    f"THREADS) blocks of THREADS threads."
                )
        checks.check_close(got, 2 * before, name=f"double_on_gpu(x) for {n} elements")


def _index_hint(got: np.ndarray, threads: int) -> str | None:
    """fill_index's usual mistake: the index within the block, not the global one."""
    if got.size > threads and np.array_equal(got, np.arange(got.size) % threads):
        return (
            f"the values restart at 0 in every block of {threads} threads: you wrote the thread's index "
            f"within its block (cuda.threadIdx.x); the global index is cuda.grid(1)."
        )
    return None


def check_fill_index(kernel: Any, sizes: Sequence[int] | None = None, threads: int | None = None) -> None:
    """Lab 0: each thread writes its global index into out[i] (int32), guarded for the last block."""
    probe = (math.ceil(45 / 16), 16, checks.empty_output(45, np.int32))
    for t in _threads_1d(threads, (32, 16)):
        for n in sizes or ([31, 64, 45, 1] if device.mode() == "sim" else [31, 1000, 4097, 1]):
            expected, grid = np.arange(n, dtype=np.int32), math.ceil(n / t)
            _check_launch(
                kernel,
                grid,
                t,
                [checks.empty_output(n, np.int32)],
                0,
                expected,
                names=["out"],
                probe=probe,
                hint=lambda got, t=t, e=expected, g=grid: _index_hint(got, t) or _stride_hint(got, e, g, t),
            )
    _check_no_race(kernel, probe, "out")


# Chapter 1 -------------------------------------------------------------------


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
    from cudalearn import timing

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
    from cudalearn import gpus

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


# Chapter 2 -------------------------------------------------------------------


def _sum_hint(got: np.ndarray, a: np.ndarray, b: np.ndarray) -> str | None:
    """vector_add's usual slip: one input added to itself."""
    for x, name in ((a, "a"), (b, "b")):
        if a.size > 1 and np.allclose(got, x + x):
            return f"`out` is {name} + {name}: you added {name}[i] to itself; out[i] = a[i] + b[i]."
    return None


def check_vector_add(kernel: Any, sizes: Sequence[int] | None = None, threads: int | None = None) -> None:
    """Lab 2: out = a + b for float32 vectors, launched with ceil(n / threads) blocks, two block sizes."""
    sim = device.mode() == "sim"
    rng = _rng(3)

    def problem(n):
        return rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)

    pa, pb = problem(45)
    probe = (math.ceil(45 / 16), 16, pa, pb, checks.empty_output(45, np.float32))
    for t in _threads_1d(threads, (32, 16) if sim else (256, 128)):
        for n in sizes or ([31, 64, 45, 1] if sim else [255, 1 << 20, 1000003, 1]):
            a, b = problem(n)
            out = checks.empty_output(n, np.float32)
            grid = math.ceil(n / t)
            _check_launch(
                kernel,
                grid,
                t,
                [a, b, out],
                2,
                a + b,
                names=["a", "b", "out"],
                probe=probe,
                hint=lambda got, a=a, b=b, g=grid, t=t: (
                    _sum_hint(got, a, b) or _stride_hint(got, a + b, g, t)
                ),
            )
    _check_no_race(kernel, probe, "out")


def check_grid_2d(grid_2d: Callable[[int, int, tuple[int, int]], tuple[int, int]]) -> None:
    """Lab 2: grid_2d(rows, cols, (bx, by)) -> (x blocks covering cols, y blocks covering rows), two ints."""
    shapes = [(1, 1, (16, 16)), (32, 64, (16, 16)), (33, 17, (16, 16)), (100, 10, (32, 8)), (5, 70, (4, 16))]
    checks.check_function(
        grid_2d,
        [((r, c, b), (-(-c // b[0]), -(-r // b[1]))) for r, c, b in shapes],
        name="grid_2d",
        hint="x runs along the columns and y along the rows; round each division up.",
        mistakes=[
            (
                lambda r, c, b: (-(-r // b[1]), -(-c // b[0])),
                "x and y are swapped: the first entry (x) covers the columns, the second (y) the rows.",
            ),
            (
                lambda r, c, b: (-(-r // b[0]), -(-c // b[1])),
                "x and y are swapped: the first entry (x) is ceil(cols / bx), the second ceil(rows / by).",
            ),
            (
                lambda r, c, b: (c // b[0], r // b[1]),
                "// rounds down: the last partial block gets no threads.",
            ),
            (
                lambda r, c, b: (-(-c // b[0]), -(-r // b[0])),
                "the rows are divided by by (block[1]), not bx.",
            ),
        ],
        exact_types=True,
    )


def _matmul_hint(got: np.ndarray, A: np.ndarray, B: np.ndarray, grid: tuple, block: tuple) -> str | None:
    """matmul_naive's usual mistakes: x taken as the row (C[x, y]), a block size typed in, acc reset per k."""
    m, n = got.shape
    written = ~np.isnan(got)
    rows, cols = np.indices((m, n))
    if not written.all() and np.array_equal(
        written, (rows < grid[0] * block[0]) & (cols < grid[1] * block[1])
    ):
        return (
            f"elements with row >= {grid[0] * block[0]} or column >= {grid[1] * block[1]} were never "
            f"written: that is what a thread (x, y) computing C[x, y] covers. Thread (x, y) must compute "
            f"C[y, x]: `col, row = cuda.grid(2)` (x runs along the columns of C; the grid is sized so)."
        )
    for step in (4, 8, 16, 32):
        if (step, step) != tuple(block) and step >= max(block) and not written.all():
            covered_r = np.isin(rows, (np.arange(grid[1])[:, None] * step + np.arange(block[1])).ravel())
            covered_c = np.isin(cols, (np.arange(grid[0])[:, None] * step + np.arange(block[0])).ravel())
            if np.array_equal(written, covered_r & covered_c):
                return (
                    f"the elements written are those of blocks {step} apart, but this launch has blocks of "
                    f"{block}: did you type the block size into the index (blockIdx.x * {step})? Use "
                    f"cuda.blockDim.x and .y, or cuda.grid(2), so the kernel works with any block shape."
                )
    if A.shape[1] > 1 and np.allclose(got, A[:, -1:] * B[-1:, :], rtol=1e-4, atol=1e-5):
        return (
            "C holds only the last product of each sum: set acc = float32(0.0) once, before the loop over k."
        )
    return None


def _matmul_plan(sizes, block) -> list[tuple[tuple[int, int, int], tuple[int, int]]]:
    """(m, k, n) and block of each launch of check_matmul; by default two block shapes, m < n and m > n."""
    if sizes is not None or block is not None:
        block = block or ((8, 8) if device.mode() == "sim" else (16, 16))
        sizes = sizes or ([(16, 16, 16), (13, 7, 11)] if device.mode() == "sim" else [(256, 256, 256)])
        return [(s, block) for s in sizes]
    if device.mode() == "sim":
        return [((16, 16, 16), (8, 8)), ((13, 7, 11), (8, 8)), ((5, 3, 20), (8, 8)), ((20, 3, 6), (4, 8))]
    return [
        ((256, 256, 256), (16, 16)),
        ((257, 100, 31), (16, 16)),
        ((40, 9, 300), (16, 16)),
        ((300, 9, 40), (8, 32)),
    ]


def check_matmul(
    kernel: Any, sizes: Sequence[tuple[int, int, int]] | None = None, block: tuple[int, int] | None = None
) -> None:
    """Lab 2: C = A @ B (float32), thread (x, y) computing C[y, x]; sizes (m, k, n) off the block grid.

    By default it launches with two block shapes and with m < n and m > n, so that a grid sized for
    C[y, x] leaves elements uncovered when the kernel computes C[x, y]. Then it traces a small launch.
    """
    rng = _rng(4)

    def problem(m, k, n):
        return rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)

    pA, pB = problem(3, 2, 5)
    probe = ((2, 2), (4, 2), pA, pB, checks.empty_output((3, 5), np.float32))
    for (m, k, n), blk in _matmul_plan(sizes, block):
        A, B = problem(m, k, n)
        C = checks.empty_output((m, n), np.float32)
        grid = (math.ceil(n / blk[0]), math.ceil(m / blk[1]))
        _check_launch(
            kernel,
            grid,
            blk,
            [A, B, C],
            2,
            A @ B,
            names=["A", "B", "C"],
            probe=probe,
            tol=checks.matmul_tol(k),
            hint=lambda got, A=A, B=B, grid=grid, blk=blk: _matmul_hint(got, A, B, grid, blk),
        )
    _check_no_race(kernel, probe, "C")
