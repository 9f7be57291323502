"""Checks of lab 10 (softmax and reductions): a block sum, a warp-shuffle sum, a row softmax, the online rule.

Every kernel is compared with a float64 NumPy sum or softmax, with a
tolerance derived from how many float32 additions each input goes through.
The tracer (`cudalearn.trace`, the course's sanitizer) runs each kernel on a
small launch first: races, barrier errors, a shuffle some lanes of its mask
do not reach (`WarpError`: undefined behaviour on a GPU), and the number of
atomics, which must be one per block. Under the simulator the shuffle
kernels run on the tracer (`checks.run_kernel` sends them there). A wrong
result is matched against what the usual mistakes compute, emulated lane by
lane in NumPy, so the message names the mistake. Visible checks use a few
sizes; the hidden tests call the same functions with others.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cudalearn import checks
from cudalearn.chapters.ch10 import mistakes
from cudalearn.chapters.ch10.kernels.softmax import softmax_reference
from cudalearn.runtime import device, launch

WARP = 32


# The tracer, as every check of this lab calls it ---------------------------------------------------


def _tracer_problem(e: Exception) -> str:
    """A tracer exception as the sentence a student reads."""
    name = type(e).__name__
    if name == "TraceOutOfBounds":
        return f"your kernel indexed outside an array (found by the tracer): {e}"
    if name == "WarpError":
        return (
            f"the tracer found a warp-level error, undefined behaviour on a GPU (it may hang or return "
            f"garbage): {e}"
        )
    return f"the tracer could not run your kernel: {e}"


def _traced(
    kernel: Any, griddim: Any, blockdim: Any, *args: Any, what: str, hint: str, **sanitizer_hints: str
) -> Any:
    """The tracer's report of one launch on copies of args; any finding raised as an AssertionError.

    hint: the fix of a race; sanitizer_hints (init_hint, return_hint): report.sanitizer_message's.
    """
    from cudalearn.trace import TraceError, trace

    copies = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    try:
        report = trace(kernel, griddim, blockdim, *copies)
    except (TraceError, IndexError) as e:
        raise AssertionError(f"{what}: {_tracer_problem(e)}") from None
    problem = report.sanitizer_message(**sanitizer_hints)
    if problem:
        raise AssertionError(f"{what}: {problem}")
    if report.race_count:
        raise AssertionError(f"{what}: {report.race_message(hint)}")
    return report


def _run(kernel: Any, griddim: Any, blockdim: Any, *args: Any) -> list[Any]:
    """checks.run_kernel, with a tracer's finding (a shuffle run on the tracer in sim mode) as a message."""
    from cudalearn.trace import TraceError

    try:
        return checks.run_kernel(kernel, griddim, blockdim, *args)
    except TraceError as e:
        raise AssertionError(_tracer_problem(e)) from None


def _sizes(default_sim: list, default_gpu: list, cases: Sequence | None) -> list:
    """The cases given, else the mode's default."""
    if cases:
        return list(cases)
    return default_gpu if device.mode() == "gpu" else default_sim


def _wrong(got: np.ndarray, expected: np.ndarray, *, name: str, rtol: float, atol: float, hint: str) -> None:
    """Raise check_close's message (which element, expected vs got, the largest error) with our hint."""
    try:
        checks.check_close(got, expected.astype(np.float32), name=name, rtol=rtol, atol=atol)
    except AssertionError as e:
        raise AssertionError(str(e).split(" Hint: ")[0] + f" Hint: {hint}") from None
    raise AssertionError(
        f"`{name}` is wrong (within float32's rounding of the expected values). Hint: {hint}"
    )


def _smallest(cases: Sequence[tuple]) -> tuple:
    """The case with the fewest elements: the one traced (the tracer runs every thread in Python)."""
    return min(cases, key=lambda c: math.prod(c[:2]) if isinstance(c, tuple) else c)


# Exercise 1: array_sum --------------------------------------------------------------------------

SUM_BARRIERS = (
    "every thread writes its partial sum into the shared array, then cuda.syncthreads(), before any "
    "thread reads another's; and each step of the tree ends with a cuda.syncthreads() that every thread "
    "of the block reaches (outside the `if tid < stride:`), before the next step reads what it wrote "
    "(the last 32 threads too: a warp does not run in lockstep, so its steps need a barrier as well). "
    "Nothing orders the blocks: they add to out[0] only through cuda.atomic.add."
)
SUM_INIT = (
    "every thread of the block writes its slot, s[tid] = acc, before the cuda.syncthreads() that precedes "
    "the tree, also a thread with no element of x (past the end of the array): its acc is still "
    "float32(0.0), the identity of a sum, so the tree reads 0 there, never undefined shared memory."
)
SUM_RETURN = (
    "a thread with no element of x (past the end of the array) must not return: it takes part in the "
    "tree, with acc = float32(0.0) (the identity of a sum) in its slot, and reaches every "
    "cuda.syncthreads(); the grid-stride loop simply runs zero times for it."
)


def _check_sum_value(got: float, x: np.ndarray, block: int, blocks: int, exact: bool) -> None:
    """Raise unless got is sum(x) (exactly for integer data, else within the float32 bound)."""
    n = x.shape[0]
    expected = float(x.astype(np.float64).sum())
    k = -(-n // (block * blocks)) + int(math.log2(block)) + blocks  # additions per element, at most
    tol = 0.0 if exact else checks.gamma(k) * float(np.abs(x.astype(np.float64)).sum())
    if math.isfinite(got) and abs(got - expected) <= tol:
        return
    data = "small integers (every partial sum is exact in float32)" if exact else "normal floats"
    name = f"out[0] for n = {n} {data}, {blocks} blocks of {block} threads"
    if got == 0.0 and expected != 0.0:
        raise AssertionError(
            f"`{name}` is 0.0, as the check set it before the launch: your kernel added nothing to out[0]. "
            f"{checks.NOT_DONE} (If you did write code: each block adds its sum with "
            f"cuda.atomic.add(out, 0, s[0]).)"
        )
    if math.isnan(got):
        hint = (
            "NaN: a NaN was added. A shared array starts with undefined contents (the tracer fills it with "
            "NaN): every thread must write its slot, with 0 for a thread that has no element."
        )
    else:
        named = [why for why, v in mistakes.sum_mistakes(x, block, blocks).items() if abs(got - v) <= tol]
        hint = (
            named[0]
            if named
            else (
                "compare with the NumPy sum on a small n: each thread adds its grid-stride elements, the "
                "block's tree halves the stride from BLOCK // 2 down to 1, and thread 0 adds s[0] to out[0]."
            )
        )
    where = "" if exact else f" (allowed error {tol:.3g}, the float32 bound for {k} additions per element)"
    raise AssertionError(f"`{name}` is {got!r}, expected {expected!r}{where}. Hint: {hint}")


def check_array_sum(kernel: Any, block: int, cases: Sequence[tuple[int, int]] | None = None) -> None:
    """Lab 10: array_sum(x, out) adds sum(x), x (n,) float32, to out[0]; cases (n, blocks) of `block` threads.

    out starts as [0.0]. Each case runs twice: small integers, whose float32
    sums are exact in any order (so a lost or doubled element shows exactly),
    and normal floats, compared with the float64 sum within gamma_k * sum|x|,
    k the float32 additions each element goes through (its thread's
    grid-stride loop, the tree's log2(block) steps, the blocks' atomics).
    The tracer then checks a small case: no race, every barrier reached, and
    one atomic per block.
    """
    if block < WARP or block & (block - 1):
        raise AssertionError(f"BLOCK is {block}: the tree halves it to 1, so use a power of two >= 32.")
    sizes = _sizes([(1000, 3), (200, 4)], [((1 << 20) + 3, 120), (1000, 3), (200, 4)], cases)
    rng = np.random.default_rng(10 + len(sizes))
    runs = []
    for n, blocks in sizes:
        bound = min(8, (1 << 24) // n)  # |partial sums| <= bound * n <= 2**24: every one exact in float32
        if bound:
            runs.append((rng.integers(-bound, bound + 1, n).astype(np.float32), blocks, True))
        runs.append((rng.standard_normal(n).astype(np.float32), blocks, False))
    small = _smallest(sizes)
    x_small = rng.integers(-8, 9, small[0]).astype(np.float32)

    where = f"for n = {small[0]} with {small[1]} blocks of {block} threads (traced)"

    def traced():
        return _traced(
            kernel,
            small[1],
            block,
            x_small,
            np.zeros(1, np.float32),
            what=where,
            hint=SUM_BARRIERS,
            init_hint=SUM_INIT,
            return_hint=SUM_RETURN,
        )

    for x, blocks, exact in runs:
        try:
            got = _run(kernel, blocks, block, x, np.zeros(1, np.float32))[1]
            _check_sum_value(float(got[0]), x, block, blocks, exact)
        except AssertionError as err:
            if checks.NOT_DONE in str(err) or "float64" in str(err):
                raise
            try:
                traced()
            except AssertionError as found:
                cause = str(found).removeprefix(f"{where}: ")
                raise AssertionError(f"the sum is wrong, and the tracer says why: {cause}") from None
            raise
    report = traced()
    atomics = report.atomics
    if atomics != small[1]:
        n, blocks = small
        per = f"{atomics / blocks:g} per block" if blocks else ""
        hint = (
            "each thread first sums its grid-stride elements into a register, the block adds those in shared "
            "memory, and only thread 0 adds the block's total: one atomic per block, so the atomics on "
            "out[0], which the hardware serialises, are as few as the blocks."
        )
        if atomics == 0:
            hint = "out[0] receives each block's sum through cuda.atomic.add(out, 0, s[0])."
        raise AssertionError(
            f"your kernel's sum is right, but for n = {n} with {blocks} blocks of {block} threads it made "
            f"{atomics} atomic operations ({per}), expected {blocks}: one per block. Hint: {hint}"
        )


# Exercise 2: warp_sum and warp_sums -----------------------------------------------------------------


def check_warp_sums(kernel: Any, cases: Sequence[int] | None = None, threads: int = 64) -> None:
    """Lab 10: warp_sums(x, out): out[w] = sum of x[32w : 32w + 32], x (n,) float32, cases n, 1-D blocks.

    Launched with launch.blocks(n, threads) blocks of `threads` (a multiple of
    32) threads, so the last warp is partial when n is not a multiple of 32 and
    whole warps may lie past the end of x; out has launch.blocks(n, 32) elements.
    Compared with the float64 sums within gamma_5 * sum|x| (5 additions per
    element); the tracer runs the smallest case first, lanes in lockstep.
    """
    if threads % WARP:
        raise AssertionError(f"threads = {threads}: a block of whole warps has a multiple of 32 threads.")
    sizes = _sizes([101, 10, 64], [(1 << 20) + 7, 101, 10], cases)
    rng = np.random.default_rng(20 + len(sizes))
    small = min(sizes)
    x = rng.standard_normal(small).astype(np.float32)
    _traced(
        kernel,
        launch.blocks(small, threads),
        threads,
        x,
        np.zeros(launch.blocks(small, WARP), np.float32),
        what=f"for n = {small} (traced)",
        hint="each out[w] is written by one lane of warp w only.",
    )
    for n in sizes:
        x = rng.standard_normal(n).astype(np.float32)
        w = launch.blocks(n, WARP)
        warps = np.zeros((w, WARP))
        warps.reshape(-1)[:n] = x
        expected = warps.sum(axis=1)
        out = checks.empty_output(w, np.float32)
        got = _run(kernel, launch.blocks(n, threads), threads, x, out)[1]
        tol = checks.gamma(5) * np.abs(warps).sum(axis=1) + 1e-30
        name = f"out for n = {n} ({w} warps, blocks of {threads} threads)"
        if got.shape == expected.shape and np.all(np.abs(got - expected) <= tol):
            continue
        if np.isnan(got).all():
            raise AssertionError(f"your kernel wrote nothing into `{name}`: {checks.NOT_DONE}")
        hint = (
            "lane 0 of warp w = cuda.grid(1) // 32 writes out[w] (if w < out.shape[0]); every lane, in x or "
            "past its end (with 0), calls warp_sum, whose loop adds shfl_xor_sync(FULL_MASK, v, offset) for "
            "offset = 16, 8, 4, 2, 1."
        )
        if np.isnan(got).any():
            written = ~np.isnan(got)
            per_block = threads // WARP
            warp_ids = np.arange(w)
            if np.array_equal(written, warp_ids % per_block == 0) and per_block > 1:
                hint = (
                    "only the first warp of each block wrote its sum: `cuda.threadIdx.x == 0` is lane 0 of "
                    "the block's first warp only; every warp's lane 0 writes, `cuda.laneid == 0` (the "
                    "thread's index within its warp, cuda.threadIdx.x % 32). " + hint
                )
            elif np.array_equal(written, warp_ids < per_block) and w > per_block:
                hint = (
                    f"only out[0] to out[{per_block - 1}] were written, by every block in turn (a race): "
                    f"cuda.threadIdx.x // 32 numbers the warps within one block, so every block writes the "
                    f"same {per_block} elements; the warp's index in the whole grid is cuda.grid(1) // 32. "
                    + hint
                )
            else:
                hint = (
                    f"{int(np.isnan(got).sum())} warp(s) wrote nothing (out still holds the check's NaN "
                    f"there): the first is warp {int(np.argmax(np.isnan(got)))}. " + hint
                )
        else:
            for why, value in mistakes.warp_mistakes(warps).items():
                if np.all(np.abs(got - value) <= tol + checks.gamma(6) * np.abs(value)):
                    hint = why
                    break
        _wrong(got, expected, name=name, rtol=0, atol=float(tol.max()), hint=hint)


# Exercise 3: softmax_rows ----------------------------------------------------------------------------


def _logits(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """Large logits: rows offset by 100 to 130 (exp of them overflows float32), one spike beyond column 32.

    Row 0's largest value is its last column, 100 above the rest: a max taken over only some of the
    columns (or none) makes exp overflow there. Row 1 is offset by -100 to -130 instead (exp of them
    underflows to 0): a max that starts at 0 rather than -inf gives 0 / 0 there.
    """
    offset = rng.uniform(100, 130, (rows, 1))
    offset[1:2] *= -1
    x = rng.standard_normal((rows, cols)) * 3 + offset
    x[0, -1] = x[0].max() + 100
    if rows > 1:
        x[1, rng.integers(cols)] -= 1000  # a probability that underflows to 0: still fine
    return x.astype(np.float32)


def _same(got: np.ndarray, value: np.ndarray, rtol: float, atol: float, where: Any = True) -> bool:
    """Whether got is `value` (NaN where it is NaN, inf where it is inf), at the elements `where`."""
    value = np.asarray(value, dtype=np.float64)
    if got.shape != value.shape:
        return False
    close = np.isclose(got.astype(np.float64), value, rtol=rtol, atol=atol, equal_nan=True)
    return bool(np.all(close | ~np.asarray(where)))


def check_softmax_rows(
    kernel: Any, cases: Sequence[tuple[int, int]] | None = None, threads: int = 64
) -> None:
    """Lab 10: softmax_rows(x, y): y = softmax of each row of x (rows, cols) float32, one warp per row.

    Launched with launch.blocks(rows * 32, threads) blocks of `threads` threads
    (warp w = cuda.grid(1) // 32 handles row w; there may be warps past the
    last row). The logits are large (rows offset by 100 to 130, a spike past
    column 32): exp without the max subtracted overflows; row 1's are below
    -88 (offset by -100 to -130): a max that starts at 0 gives 0 / 0. Rows longer and
    shorter than 32. Compared with float64 within rtol (cols/32 + 8) * u
    (the float32 additions of the row's sum and the roundings of exp and /).
    """
    if threads % WARP:
        raise AssertionError(f"threads = {threads}: a block of whole warps has a multiple of 32 threads.")
    sizes = _sizes([(3, 70), (2, 20)], [(4096, 1000), (3, 70), (2, 20)], cases)
    rng = np.random.default_rng(30 + len(sizes))
    rows, cols = _smallest(sizes)
    _traced(
        kernel,
        launch.blocks(rows * WARP, threads),
        threads,
        _logits(rng, rows, cols),
        np.zeros((rows, cols), np.float32),
        what=f"for x ({rows}, {cols}) (traced)",
        hint="each row belongs to one warp; lanes write only their own columns.",
    )
    for rows, cols in sizes:
        x = _logits(rng, rows, cols)
        expected = softmax_reference(x)
        griddim = launch.blocks(rows * WARP, threads)
        got = _run(kernel, griddim, threads, x, checks.empty_output((rows, cols)))[1]
        rtol, atol = (cols // WARP + 8) * 2 * checks.FLOAT32_ROUNDOFF, 1e-30
        name = f"y for x ({rows}, {cols})"
        if _same(got, expected, rtol, atol):
            continue
        if np.isnan(got).any():  # computed NaN, or never written? Run again on a sentinel softmax never gives
            refill = np.full((rows, cols), -1.0, np.float32)
            unwritten = _run(kernel, griddim, threads, x, refill)[1] == -1.0
            if unwritten.all():
                raise AssertionError(f"your kernel wrote nothing into `{name}`: {checks.NOT_DONE}")
        else:
            unwritten = np.zeros_like(got, dtype=bool)
        hint = None
        z = x.astype(np.float64)
        normal = np.exp(z - z.max(axis=1, keepdims=True)) >= 1e-30  # where float32 keeps its precision
        for why, value in mistakes.softmax_mistakes(x).items():
            if _same(np.where(unwritten, np.nan, got), value, 1e-4, 1e-12, where=normal):
                hint = why
                break
        if hint is None and unwritten.any():
            r, c = np.argwhere(unwritten)[0]
            hint = (
                f"{int(unwritten.sum())} element(s) were never written, the first y[{r}, {c}]: row r is "
                f"warp r (cuda.grid(1) // 32, counted over the whole grid), and its lane l (cuda.laneid, "
                f"0 to 31 in every warp) writes columns l, l + 32, ... of row r."
            )
        if hint is None and not np.isfinite(got[normal]).all():  # not only 0 / 0 where an exp underflows
            hint = (
                "some y are inf or NaN: exp overflows float32 above 88.7; subtract the row's maximum (over "
                "all its columns, combined across the lanes with warp_max) before exp."
            )
        if hint is None:
            sums = np.nansum(got.astype(np.float64), axis=1)
            bad = np.abs(sums - 1) > 1e-4
            hint = (
                f"row {int(np.argmax(bad))} sums to {sums[np.argmax(bad)]:.6g}, not 1: every element is "
                f"divided by the sum of the whole row's exp(x - m) (complete only after every lane's loop "
                f"and the warp_sum: divide in a pass of its own), which every lane of the warp must hold."
                if bad.any()
                else "the rows sum to 1 but the values are off: is every exp(x[j] - m) taken with the row's "
                "max m and the element's own x[j]?"
            )
        _wrong(got, expected, name=name, rtol=rtol, atol=atol, hint=hint)


# Exercise 4: the online-softmax combine rule ---------------------------------------------------------


def _state(x: np.ndarray) -> tuple[float, float]:
    """(max, sum of exp(x - max)) of a chunk, two passes in float64: what a combine must reproduce."""
    m = float(x.max())
    return m, float(np.exp(x - m).sum())


def _answer(combine: Callable, a: tuple, b: tuple) -> tuple[float, float]:
    """combine(*a, *b) as two floats, or an AssertionError saying what it returned."""
    call = f"online_combine({a[0]!r}, {a[1]!r}, {b[0]!r}, {b[1]!r})"
    try:
        got = checks.call_student(combine, "online_combine", *a, *b)
    except (OverflowError, ZeroDivisionError, ValueError) as e:
        raise AssertionError(
            f"`{call}` raised {type(e).__name__}: {e}. With m = max(m_a, m_b), the factors exp(m_a - m) and "
            f"exp(m_b - m) are at most 1: nothing overflows."
        ) from None
    if got is None:
        raise AssertionError(f"`{call}` is None: {checks.NOT_DONE} (Did your function `return m, d`?)")
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise AssertionError(f"`{call}` is {got!r}: return a pair (m, d), e.g. `return m, d`.")
    try:
        m, d = float(got[0]), float(got[1])
    except (TypeError, ValueError):
        raise AssertionError(f"`{call}` is {got!r}: m and d must be numbers.") from None
    return m, d


def _same_state(got: tuple, expected: tuple) -> bool:
    """m equal, d within 1e-12 relative (NaN matching NaN, for the mistakes' values)."""
    m_ok = got[0] == expected[0] or (math.isnan(got[0]) and math.isnan(float(expected[0])))
    return m_ok and bool(np.isclose(got[1], expected[1], rtol=1e-12, atol=0, equal_nan=True))


PROBES = (((3.0, 2.0), (5.0, 4.0)), ((5.0, 4.0), (3.0, 2.0)), ((-math.inf, 0.0), (2.5, 1.5)))


def _check_probes(online_combine: Callable) -> None:
    """Raise unless online_combine is right on three small pairs; name the mistake that gives all it gave."""
    answers = []
    for a, b in PROBES:
        m = max(a[0], b[0])
        expected = (m, a[1] * math.exp(a[0] - m) + b[1] * math.exp(b[0] - m))
        answers.append((a, b, expected, _answer(online_combine, a, b)))
    wrong = [(a, b, e, g) for a, b, e, g in answers if not _same_state(g, e)]
    if not wrong:
        return
    a, b, expected, got = wrong[0]
    named = [
        why
        for why in mistakes.combine_mistakes(*PROBES[0])
        if all(_same_state(g, mistakes.combine_mistakes(pa, pb)[why]) for pa, pb, _, g in answers)
    ]
    hint = (
        "m = max(m_a, m_b), d = d_a * exp(m_a - m) + d_b * exp(m_b - m): each sum moved to the new max's "
        "scale, then added."
    )
    if named:
        hint = named[0]
    elif math.isnan(got[0]) or math.isnan(got[1]):
        hint = (
            "NaN: with the empty state (-inf, 0), take m = max(m_a, m_b) first; then exp(m_a - m) is "
            "exp(-inf) = 0, while a difference of two infinities, or 0 * inf, is NaN. " + hint
        )
    call = f"online_combine({a[0]}, {a[1]}, {b[0]}, {b[1]})"
    raise AssertionError(f"`{call}` is {got!r}, expected {expected!r}. Hint: {hint}")


def check_online_combine(
    online_combine: Callable[[float, float, float, float], tuple],
    cases: Sequence[tuple[int, int]] | None = None,
) -> None:
    """Lab 10: online_combine(m_a, d_a, m_b, d_b) -> (m, d), two chunks' state together; cases (n, chunks).

    A state is (m, d) = (max of the chunk, sum of exp(x - m)) (Milakov and
    Gimelshein, 2018). Three small pairs first, then folding the chunks'
    states from (-inf, 0), left to right and as a tree, must give the two-pass
    (max(x), sum(exp(x - max(x)))) in float64: m exactly, d to 1e-12. The
    logits are near 1000, where exp overflows float64.
    """
    _check_probes(online_combine)
    rng = np.random.default_rng(40 + len(cases or ()))
    for n, chunks in cases or [(50, 5), (17, 3), (64, 8)]:
        x = rng.standard_normal(n) * 4 + 1000.0
        cuts = np.sort(rng.choice(np.arange(1, n), chunks - 1, replace=False))
        states = [_state(c) for c in np.split(x, cuts)]
        expected = _state(x)
        left = (-math.inf, 0.0)
        for st in states:
            left = _answer(online_combine, left, st)
        level = states
        while len(level) > 1:
            pairs = [level[i : i + 2] for i in range(0, len(level), 2)]
            level = [_answer(online_combine, *p) if len(p) == 2 else p[0] for p in pairs]
        for order, got in (("left to right from (-inf, 0)", left), ("as a tree, pairs of pairs", level[0])):
            if not _same_state(got, expected):
                raise AssertionError(
                    f"folding the states of {chunks} chunks of {n} logits {order} gives (m, d) = {got!r}, "
                    f"expected the two-pass {expected!r} (m exactly, d to 1e-12). Hint: m = max(m_a, m_b), "
                    f"d = d_a * exp(m_a - m) + d_b * exp(m_b - m); the logits are near 1000, where exp(x) "
                    f"alone overflows even float64."
                )
