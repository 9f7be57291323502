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
from cudalearn.chapters.ch10.checks._harness import WARP, _run, _sizes, _traced, _wrong
from cudalearn.runtime import launch


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
