"""Lab 10, exercise 2: `warp_sums`, one sum per warp by shuffles (`warp_sum`), lane 0 writing it.

Traced first (lanes in lockstep: a shuffle some lanes do not reach is an error), then compared with
the float64 sum of each warp's 32 elements; a wrong result is matched against `mistakes.warp_mistakes`.
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
    _traced,
    _wrong,
)
from cudalearn.runtime import launch


def _out_of_bounds(e: Any) -> str:
    """warp_sums' own cause of an access outside out (whole warps past the end of x), or ''."""
    if e.array == "out" and e.index and e.index[0] >= e.shape[0]:
        return (
            f"Hint: whole warps lie past the end of x (the launch rounds n up to whole blocks), and out has "
            f"one element per warp that holds an element of x, {e.shape[0]} here: lane 0 of warp w writes "
            f"out[w] only `if w < out.shape[0]` (its lanes still call warp_sum first, with 0)."
        )
    return ""


def _typed_in_warps(got: np.ndarray, expected: np.ndarray, n: int, block: int, tol: np.ndarray) -> int | None:
    """k when got is what `w = cuda.blockIdx.x * k + cuda.threadIdx.x // 32` writes (k warps a block typed
    in, for another block size than this launch's `block`), else None."""
    per_block, blocks = block // WARP, launch.blocks(n, block)
    for k in (1, 2, 4, 8):
        if k == per_block:
            continue
        out = np.full(got.shape, np.nan)
        for b in range(blocks):
            for j in range(per_block):
                w, real = b * k + j, b * per_block + j
                if w < out.shape[0]:
                    out[w] = expected[real] if real < expected.shape[0] else 0.0
        same = np.isnan(out) == np.isnan(got)
        if same.all() and np.all(np.abs(np.nan_to_num(got - out)) <= tol):
            return k
    return None


def check_warp_sums(kernel: Any, cases: Sequence[int] | None = None, threads: int | None = None) -> None:
    """Lab 10: warp_sums(x, out): out[w] = sum of x[32w : 32w + 32], x (n,) float32, cases n, 1-D blocks.

    Launched with launch.blocks(n, threads) blocks of `threads` (a multiple of
    32) threads, so the last warp is partial when n is not a multiple of 32 and
    whole warps may lie past the end of x; out has launch.blocks(n, 32) elements.
    threads None: blocks of 64, and the largest case again with blocks of 32
    (`BLOCK_SIZES`). Compared with the float64 sums within gamma_5 * sum|x| (5
    additions per element); the tracer runs the smallest case first, lanes in
    lockstep.
    """
    if threads is not None and threads % WARP:
        raise AssertionError(f"threads = {threads}: a block of whole warps has a multiple of 32 threads.")
    sizes = _sizes([101, 10, 64], [(1 << 20) + 7, 101, 10], cases)
    rng = np.random.default_rng(20 + len(sizes))
    small = min(sizes)
    x = rng.standard_normal(small).astype(np.float32)
    first = threads or BLOCK_SIZES[0]
    report = _traced(
        kernel,
        launch.blocks(small, first),
        first,
        x,
        np.zeros(launch.blocks(small, WARP), np.float32),
        what=f"for n = {small} (traced)",
        hint="each out[w] is written by one lane of warp w only.",
        bounds_hint=_out_of_bounds,
    )
    for n, block in _launches(sizes, threads):
        x = rng.standard_normal(n).astype(np.float32)
        w = launch.blocks(n, WARP)
        warps = np.zeros((w, WARP))
        warps.reshape(-1)[:n] = x
        expected = warps.sum(axis=1)
        out = checks.empty_output(w, np.float32)
        got = _run(kernel, launch.blocks(n, block), block, x, out, bounds_hint=_out_of_bounds)[1]
        tol = checks.gamma(5) * np.abs(warps).sum(axis=1) + 1e-30
        name = f"out for n = {n} ({w} warps, blocks of {block} threads)"
        if got.shape == expected.shape and np.all(np.abs(got - expected) <= tol):
            continue
        if np.isnan(got).all():
            raise AssertionError(f"your kernel wrote nothing into `{name}`: {checks.NOT_DONE}")
        hint = (
            "lane 0 of warp w = cuda.grid(1) // 32 writes out[w] (if w < out.shape[0]); every lane, in x or "
            "past its end (with 0), calls warp_sum, whose loop adds shfl_xor_sync(FULL_MASK, v, offset) for "
            "offset = 16, 8, 4, 2, 1."
        )
        typed = _typed_in_warps(got, expected, n, block, tol)
        if typed is not None:
            hint = (
                f"the warp's index is computed for blocks of {WARP * typed} threads ({typed} warp(s) a "
                f"block, typed in), but this launch has blocks of {block} threads: w = cuda.grid(1) // 32 "
                f"counts the warps over the whole grid, whatever the block size."
            )
        elif np.isnan(got).any():
            written = ~np.isnan(got)
            per_block = block // WARP
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
    _check_shuffles(
        report,
        launch.blocks(small, first) * first // WARP,
        5,
        what="warp sums are",
        where=f"for n = {small}",
        how="warp_sum adds cuda.shfl_xor_sync(FULL_MASK, v, offset) for offset = 16, 8, 4, 2, 1 (five "
        "shuffles); every lane of every warp calls it, and lane 0 writes the result.",
    )
