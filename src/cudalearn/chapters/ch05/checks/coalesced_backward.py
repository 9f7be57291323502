"""Checks of lab 5's backward pass: dA = (dZ @ WT) * (A > 0) with pre-transposed weights, coalesced.

`check_backward_input` checks the results (a wrong one explained by a traced
small launch, as in `fusion`), then `check_backward_coalesced` traces it:
every warp load coalesced and no more sectors than a coalesced kernel needs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from cudalearn import checks
from cudalearn.chapters.ch05.checks.fusion import UNZEROED, _explain_wrong, _known_mistake, _trace
from cudalearn.checks.sentinels import is_sentinel
from cudalearn.checks.simple_kernels import _rng
from cudalearn.runtime import device, launch

MAX_SECTORS_PER_LOAD = 4.0  # 32 lanes x 4 bytes = 128 bytes = 4 sectors of 32 bytes: a coalesced load
MAX_EXTRA_SECTORS = 1.25  # backward_input may touch 25% more sectors than the coalesced minimum


def _backward_problem(rng: np.random.Generator, m: int, n: int, k: int):
    """dZ (m, n), W (k, n) and its transpose WT (n, k), A (m, k) >= 0 with about half zeros."""
    dZ = rng.standard_normal((m, n)).astype(np.float32)
    W = (rng.standard_normal((k, n)) / math.sqrt(n)).astype(np.float32)
    A = np.maximum(rng.standard_normal((m, k)), 0).astype(np.float32)
    return dZ, W, np.ascontiguousarray(W.T), A


def _backward_spec(dZ, WT, A) -> np.ndarray:
    return ((dZ.astype(np.float64) @ WT) * (A > 0)).astype(np.float32)


def _backward_hint(got: np.ndarray, dZ, WT, A, tol: dict) -> str:
    """A hint when dA is a well-known wrong variant of (dZ @ WT) * (A > 0), else ''."""
    G = dZ.astype(np.float64) @ WT
    variants = [
        (
            G,
            "it is dZ @ WT without the ReLU's mask: multiply by (A > 0), i.e. store 0 where "
            "A[row, col] <= 0.",
        ),
        (
            np.maximum(G, 0),
            "it is masked by the sign of the sum: the mask is the forward's, A > 0 "
            "(A[row, col] > float32(0.0)), not the gradient's sign.",
        ),
        (
            G * A,
            "it is (dZ @ WT) * A: the ReLU's derivative is 1 where A > 0 and 0 elsewhere, a mask "
            "(A > 0), not A.",
        ),
    ]
    return _known_mistake(got, variants, tol)


def check_backward_input(
    kernel: Any,
    block: tuple[int, int] | None = None,
    sizes: Sequence[tuple[int, int, int]] | None = None,
    seed: int = 8,
) -> None:
    """Lab 5: dA = (dZ @ WT) * (A > 0), thread (x, y) on dA[y, x]; then the tracer: coalesced loads.

    Sizes are (m, n, k): dZ (m, n), WT (n, k), A and dA (m, k); without `block`, every size is run with
    two block shapes, so a block size typed into the index fails. The traced
    launch has warps of 32 neighbouring x; every global load of a warp
    must touch at most 4 sectors on average (128 bytes: coalesced), and all
    loads together at most MAX_EXTRA_SECTORS times a coalesced kernel's.
    """
    rng = _rng(seed)
    sim = device.mode() == "sim"
    shapes = [block] if block else [(8, 8), (16, 4)] if sim else [(16, 16), (32, 8)]  # a block typed in fails
    plan = [
        (blk, size)
        for blk in shapes
        for size in sizes or ([(5, 10, 12), (16, 7, 9)] if sim else [(256, 128, 64), (100, 33, 257)])
    ]
    for block, (m, n, k) in plan:
        dZ, _, WT, A = _backward_problem(rng, m, n, k)
        grid, _ = launch.grid_2d(m, k, block)
        got = checks.run_kernel(kernel, grid, block, dZ, WT, A, checks.empty_output((m, k)))[3]
        tol = {"rtol": 1e-4, "atol": 1e-4 * math.sqrt(n)}
        try:
            checks.check_close(
                got,
                _backward_spec(dZ, WT, A),
                name=f"dA (m, n, k = {m}, {n}, {k})",
                **tol,
            )
        except AssertionError as err:
            hint = "" if checks.NOT_DONE in str(err) else _backward_hint(got, dZ, WT, A, tol)
            if not hint and checks.NOT_DONE not in str(err):
                hint = _block_shape_hint(kernel, block, tol, seed)
            if not hint and is_sentinel(got).any():  # elements left unwritten (not a computed NaN)
                hint = (
                    f"the launch has ceil(k / {block[0]}) blocks along x and ceil(m / {block[1]}) along y: "
                    f"thread (x, y) must compute dA[y, x] (col, row = cuda.grid(2)); a kernel that takes "
                    f"its row from x leaves part of dA unwritten."
                )
            sm, sn, sk = 5, 3, 7
            sdZ, _, sWT, sA = _backward_problem(_rng(seed), sm, sn, sk)
            small = ((1, 1), (8, 8), sdZ, sWT, sA, checks.empty_output((sm, sk)))
            raise _explain_wrong(err, kernel, small, 3, hint) from None
    check_backward_coalesced(kernel)


def _block_shape_hint(kernel: Any, block: tuple[int, int], tol: dict, seed: int) -> str:
    """'right with blocks of (8, 8), wrong with (16, 4)': a block size typed into the index, or '' (lab 5).

    The probe for each other block shape is an output of 3 x 5 of its blocks (not square, several blocks
    along each axis), so a kernel that swaps x and y, or covers the output with one block, is not right there.
    """
    for other in ((8, 8), (16, 16)):
        if other == tuple(block):
            continue
        m, n, k = 3 * other[1], 3, 5 * other[0]
        dZ, _, WT, A = _backward_problem(_rng(seed), m, n, k)
        grid, _ = launch.grid_2d(m, k, other)
        try:
            got = checks.run_kernel(kernel, grid, other, dZ, WT, A, checks.empty_output((m, k)))[3]
        except AssertionError:
            continue
        if np.allclose(got, _backward_spec(dZ, WT, A), **tol):
            return (
                f"your kernel is right with blocks of {other} and wrong with blocks of {tuple(block)}: it "
                f"depends on the block shape. Did you type the block size into the index (blockIdx.x * "
                f"{other[0]})? Use cuda.grid(2), or cuda.blockDim.x and .y, so any block shape works."
            )
    return ""


def _backward_ideal_sectors(m: int, n: int, k: int) -> int:
    """Global load sectors of a coalesced backward_input, warps of 32 neighbouring x, k a multiple of 32.

    Each warp reads dZ[row, j] for j < n (one float32: 1 sector each), the row WT[j, col..col+31]
    (128 bytes: 4 sectors each) and A[row, col..col+31] once (4 sectors).
    """
    return (m * k // 32) * (n * (1 + 4) + 4)


def check_backward_coalesced(kernel: Any, size: tuple[int, int, int] = (64, 8, 64)) -> None:
    """Lab 5: traced, warps of 32 neighbouring x: each load line <= 4 sectors a request, few in all.

    size (m, n, k), k a multiple of 32: with m = k the grid covers dA whichever of x and y a
    kernel takes for the columns, so a swapped kernel gets its result right
    and is caught by its sector count.
    """
    m, n, k = size
    dZ, _, WT, A = _backward_problem(_rng(9), m, n, k)
    block = (32, 2)
    report, seen = _trace(kernel, *launch.grid_2d(m, k, block), dZ, WT, A, checks.empty_output((m, k)))
    if 3 in seen and seen[3].early_reads:
        raise AssertionError("your kernel " + UNZEROED.format(name=seen[3].name, where=seen[3].first_early))
    checks.check_close(
        report.outputs[3], _backward_spec(dZ, WT, A), name="dA (traced)", atol=1e-4 * math.sqrt(n)
    )
    for line, stats in report.by_line.items():
        if stats.global_load_requests:
            per = stats.global_load_sectors / stats.global_load_requests
            if per > MAX_SECTORS_PER_LOAD:
                where = line if isinstance(line, int) else f"{stats.file}:{stats.line}"
                raise AssertionError(
                    f"line {where} of your kernel, `{stats.source}`: a warp's loads touch {per:.1f} sectors "
                    f"of 32 bytes on average (at most {MAX_SECTORS_PER_LOAD:g} when 32 neighbouring threads "
                    f"read 32 neighbouring float32): neighbouring threads (neighbouring x) read addresses "
                    f"far apart. Hint: take col from x (col, row = cuda.grid(2)) so that a warp reads a row "
                    f"of WT, WT[j, col], and the same dZ[row, j] (a broadcast)."
                )
    ideal = _backward_ideal_sectors(m, n, k)
    got = report.global_load_sectors
    if got > MAX_EXTRA_SECTORS * ideal:
        needs = {"dZ": m * k * n, "WT": m * k * n, "A": m * k}  # element loads: one per thread and term
        names = {0: "dZ", 1: "WT", 2: "A"}
        extra = [
            (seen[p].loads.sum() / needs[a], a, seen[p].where(0))
            for p, a in names.items()
            if p in seen and seen[p].loads.sum() > needs[a]
        ]
        worst = max(extra) if extra else None
        which = f" `{worst[1]}` is read {worst[0]:.1f} times as often as needed ({worst[2]})" if worst else ""
        raise AssertionError(
            f"traced on (m, n, k) = ({m}, {n}, {k}) with warps of 32 neighbouring x, your kernel's loads "
            f"touch {got:,} sectors of 32 bytes; a coalesced kernel needs {ideal:,} (per warp: {n} reads "
            f"of dZ[row, j], 1 sector each, {n} rows of WT, 4 sectors each, and A once, 4 sectors), and "
            f"the check allows {MAX_EXTRA_SECTORS:g} times that.{which}. Hint: read each input once per "
            f"thread and term: A[row, col] once, outside the loop over j."
        )
