"""Lab 10, exercise 1: `array_sum`, a grid-stride sum, a tree in shared memory and one atomic per block.

Checked against the float64 sum (exactly for small integers), then traced: no race, every barrier
reached, one atomic per block, and the tree's sequential addressing (no bank conflict, no warp issuing
a step for a few scattered busy lanes). A wrong sum is matched against the usual mistakes
(`mistakes.sum_mistakes`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from cudalearn import checks
from cudalearn.chapters.ch10 import mistakes
from cudalearn.chapters.ch10.checks._harness import WARP, _run, _sizes, _smallest, _traced

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


def _tolerance(x: np.ndarray, block: int, blocks: int, exact: bool) -> tuple[float, int]:
    """(allowed error, additions per element): 0 on integer data, else gamma_k * sum|x| for k additions."""
    k = -(-x.shape[0] // (block * blocks)) + int(math.log2(block)) + blocks  # additions per element, at most
    return (0.0 if exact else checks.gamma(k) * float(np.abs(x.astype(np.float64)).sum())), k


def _check_sum_case(results: list[tuple[float, np.ndarray, bool]], block: int, blocks: int) -> None:
    """Raise unless every (got, x, exact) run of one case gave sum(x) (exactly for integer data).

    A wrong sum is named after the usual mistake (`mistakes.sum_mistakes`) only when that mistake gives
    every run's value: on small integers alone two different mistakes may well give the same number.
    """
    right = [
        abs(g - float(x.astype(np.float64).sum())) <= _tolerance(x, block, blocks, e)[0]
        for g, x, e in results
    ]
    wrong = [r for r, ok in zip(results, right, strict=True) if not (ok and math.isfinite(r[0]))]
    if not wrong:
        return
    got, x, exact = wrong[0]
    n = x.shape[0]
    expected = float(x.astype(np.float64).sum())
    tol, k = _tolerance(x, block, blocks, exact)
    data = "small integers (every partial sum is exact in float32)" if exact else "normal floats"
    name = f"out[0] for n = {n} {data}, {blocks} blocks of {block} threads"
    if got == 0.0 and expected != 0.0 and all(g == 0.0 for g, _, _ in results):
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
        known = [
            (g, mistakes.sum_mistakes(xr, block, blocks), _tolerance(xr, block, blocks, e)[0])
            for g, xr, e in results
        ]
        # a mistake's own float32 rounding differs from the right sum's: 1e-4 relative on normal floats
        named = [
            why
            for why in known[0][1]
            if all(abs(g - m[why]) <= t + (0 if t == 0 else 1e-4 * abs(m[why])) for g, m, t in known)
        ]
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


def _scattered_store(report: Any) -> list[int] | None:
    """The lanes of the first shared store request whose lanes are not the first ones of their warp, or None.

    In sequential addressing the threads that add at stride s are tid < s: in each warp a run of lanes
    from lane 0 (the whole warp, or its first s lanes). Interleaved addressing's busy threads are the
    multiples of 2 s, lanes 0, 2, 4, ... of every warp: scattered, the warp divergent.
    """
    for requests in report.kept_requests.values():
        for req in requests:
            lanes = sorted(set(req.lanes))
            if req.store and lanes != list(range(len(lanes))):
                return lanes
    return None


def _check_sequential(report: Any, block: int, blocks: int) -> None:
    """Raise unless the traced tree is sequential addressing: no bank conflict, no scattered busy lanes."""
    sequential = (
        "sequential addressing, which the exercise asks for: at each step the threads tid < stride add "
        "s[tid + stride] into s[tid], for stride = BLOCK // 2, BLOCK // 4, ..., 1, so the busy threads are "
        "the first ones (whole warps, the others skip the `if`) and the words they touch are consecutive "
        "(32 banks, one wavefront per request)."
    )
    where = f"your kernel's sum is right, but traced with {blocks} blocks of {block} threads"
    if report.bank_conflicts:
        raise AssertionError(
            f"{where} its shared-memory requests had {report.bank_conflicts} bank conflict(s): the threads "
            f"of a warp touch words 2 * stride apart (a strided index such as `index = 2 * stride * tid`), "
            f"which share banks. Hint: {sequential}"
        )
    lanes = _scattered_store(report)
    if lanes is not None:
        shown = ", ".join(map(str, lanes[:6])) + (", ..." if len(lanes) > 6 else "")
        raise AssertionError(
            f"{where} a warp stored into shared memory from its lanes {shown} only: the busy threads of a "
            f"step are spread over the warp, and over every warp of a larger block (interleaved addressing, "
            f"`if tid % (2 * stride) == 0`), so each warp issues the addition for a few busy lanes "
            f"(divergent warps). Hint: {sequential}"
        )


def check_array_sum(kernel: Any, block: int, cases: Sequence[tuple[int, int]] | None = None) -> None:
    """Lab 10: array_sum(x, out) adds sum(x), x (n,) float32, to out[0]; cases (n, blocks) of `block` threads.

    out starts as [0.0]. Each case runs twice: small integers, whose float32
    sums are exact in any order (so a lost or doubled element shows exactly),
    and normal floats, compared with the float64 sum within gamma_k * sum|x|,
    k the float32 additions each element goes through (its thread's
    grid-stride loop, the tree's log2(block) steps, the blocks' atomics).
    The tracer then checks a small case: no race, every barrier reached,
    one atomic per block, and sequential addressing (no bank conflict, the
    busy lanes of each shared store the first ones of their warp).
    """
    if block < WARP or block & (block - 1):
        raise AssertionError(f"BLOCK is {block}: the tree halves it to 1, so use a power of two >= 32.")
    sizes = _sizes([(1000, 3), (200, 4)], [((1 << 20) + 3, 120), (1000, 3), (200, 4)], cases)
    rng = np.random.default_rng(10 + len(sizes))
    runs = []
    for case in sizes:
        n, blocks = case
        bound = min(8, (1 << 24) // n)  # |partial sums| <= bound * n <= 2**24: every one exact in float32
        if bound:
            runs.append((rng.integers(-bound, bound + 1, n).astype(np.float32), blocks, True, case))
        runs.append((rng.standard_normal(n).astype(np.float32), blocks, False, case))
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

    for case in sizes:
        results = []
        for x, blocks, exact, _ in (r for r in runs if r[3] is case):
            got = _run(kernel, blocks, block, x, np.zeros(1, np.float32))[1]
            results.append((float(got[0]), x, exact))
        try:
            _check_sum_case(results, block, case[1])
        except AssertionError as err:
            if checks.NOT_DONE in str(err):
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
    _check_sequential(report, block, small[1])
