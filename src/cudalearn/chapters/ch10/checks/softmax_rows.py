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
from cudalearn.chapters.ch10.checks._harness import WARP, _run, _sizes, _smallest, _traced, _wrong
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
