"""Lab 10, exercise 3: `softmax_rows`, the numerically stable softmax of each row, one warp per row.

Large logits (exp without the max subtracted overflows) and rows longer and shorter than a warp,
compared with the float64 softmax; a wrong result is matched against `mistakes.softmax_mistakes`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cudalearn import checks
from cudalearn.chapters.ch10 import mistakes
from cudalearn.chapters.ch10.checks._harness import (
    BLOCK_SIZES,
    WARP,
    _check_shuffles,
    _launches,
    _run,
    _sizes,
    _smallest,
    _traced,
    _wrong,
)
from cudalearn.chapters.ch10.kernels.softmax import softmax_reference
from cudalearn.runtime import launch


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


def _out_of_bounds(e: Any) -> str:
    """softmax_rows' own cause of an access outside x or y (a warp past the last row), or ''."""
    if (
        e.array in ("x", "y")
        and len(e.index) == 2
        and e.index[0] >= e.shape[0]
        and 0 <= e.index[1] < e.shape[1]
    ):
        return (
            f"Hint: row {e.index[0]} does not exist (x has {e.shape[0]} rows): the launch rounds the "
            f"rows' warps up to whole blocks, so the last block may hold warps past the last row. Such a "
            f"warp returns before it touches x, all its lanes together (`if row >= x.shape[0]: return`, "
            f"before any shuffle)."
        )
    return ""


def _warp_sum_note(kernel: Any) -> str:
    """'Exercise 2's check fails too ...' when the warp_sums beside the kernel (whose warp_sum softmax_rows
    calls) fails its own check on a small case, else ''. A wrong softmax may come from there."""
    from cudalearn.chapters.ch10.checks.warp_sums import check_warp_sums

    other = getattr(getattr(kernel, "py_func", kernel), "__globals__", {}).get("warp_sums")
    if other is None:
        return ""
    try:
        check_warp_sums(other, cases=[40], threads=32)
    except AssertionError:
        return (
            "exercise 2's check fails too, and softmax_rows calls its warp_sum for the row's sum: make "
            "exercise 2 pass first, then run this check again. "
        )
    except Exception:  # noqa: BLE001 - best effort: no note when exercise 2's kernel cannot even run
        return ""
    return ""


def check_softmax_rows(
    kernel: Any, cases: Sequence[tuple[int, int]] | None = None, threads: int | None = None
) -> None:
    """Lab 10: softmax_rows(x, y): y = softmax of each row of x (rows, cols) float32, one warp per row.

    Launched with launch.blocks(rows * 32, threads) blocks of `threads` threads
    (warp w = cuda.grid(1) // 32 handles row w; there may be warps past the
    last row). The logits are large (rows offset by 100 to 130, a spike past
    column 32): exp without the max subtracted overflows; row 1's are below
    -88 (offset by -100 to -130): a max that starts at 0 gives 0 / 0. Rows longer and
    shorter than 32, and by default one of 300 columns (10 a lane: longer than any fixed unroll of
    the lanes' loops). threads None: blocks of 64, and the largest case again with blocks of 32
    (`BLOCK_SIZES`). Compared with float64 within rtol (cols/32 + 8) * u (the float32 additions of the
    row's sum and the roundings of exp and /).
    """
    if threads is not None and threads % WARP:
        raise AssertionError(f"threads = {threads}: a block of whole warps has a multiple of 32 threads.")
    sizes = _sizes([(3, 70), (2, 20), (5, 300)], [(4096, 1000), (3, 70), (2, 20), (5, 300)], cases)
    rng = np.random.default_rng(30 + len(sizes))
    rows, cols = _smallest(sizes)
    first = threads or BLOCK_SIZES[0]
    report = _traced(
        kernel,
        launch.blocks(rows * WARP, first),
        first,
        _logits(rng, rows, cols),
        np.zeros((rows, cols), np.float32),
        what=f"for x ({rows}, {cols}) (traced)",
        hint="each row belongs to one warp; lanes write only their own columns.",
        bounds_hint=_out_of_bounds,
    )
    for (rows, cols), block in _launches(sizes, threads):
        x = _logits(rng, rows, cols)
        expected = softmax_reference(x)
        griddim = launch.blocks(rows * WARP, block)
        got = _run(kernel, griddim, block, x, checks.empty_output((rows, cols)), bounds_hint=_out_of_bounds)[
            1
        ]
        rtol, atol = (cols // WARP + 8) * 2 * checks.FLOAT32_ROUNDOFF, 1e-30
        name = f"y for x ({rows}, {cols}), blocks of {block} threads"
        if _same(got, expected, rtol, atol):
            continue
        if np.isnan(got).any():  # computed NaN, or never written? Run again on a sentinel softmax never gives
            refill = np.full((rows, cols), -1.0, np.float32)
            unwritten = _run(kernel, griddim, block, x, refill, bounds_hint=_out_of_bounds)[1] == -1.0
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
                f"warp r (cuda.grid(1) // 32, counted over the whole grid: a block of {block} threads holds "
                f"{block // WARP} warp(s), so a number of warps per block typed in fits one block size), "
                f"and its lane l (cuda.laneid, 0 to 31 in every warp) writes columns l, l + 32, l + 64, ... "
                f"up to the row's end (`for j in range(lane, n, 32)`, however long the row: {cols} columns "
                f"here)."
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
        _wrong(
            got,
            expected,
            name=name,
            rtol=rtol,
            atol=atol,
            hint=_warp_sum_note(kernel) + hint,
            unwritten=unwritten,
        )
    rows, cols = _smallest(sizes)
    _check_shuffles(
        report,
        rows,
        2 * 5,
        what="softmax rows are",
        where=f"for x ({rows}, {cols})",
        how="the row's max by warp_max (a butterfly, five shfl_xor_sync), its sum by warp_sum (five more), "
        "each lane over its own columns j = lane, lane + 32, ...; no lane does the whole row.",
    )
