"""Checks of lab 4 (bank conflicts): the bank of a shared element, a conflict-free transpose and matmul.

The kernels are checked as lab 3's (`tiling`: results, explained by the
tracer when wrong), then the trace must show no bank conflict while the
transposed tile is kept.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cudalearn import checks
from cudalearn.chapters.ch03.checks import (
    LAB4_TILES,
    _check_coalesced,
    _check_int_answers,
    _check_load_total,
    _check_matmuls,
    _check_results,
    _check_stores,
    _clean_trace,
    _matmul_probe,
    _matmul_right,
    _reference_trace,
    _trace,
    _trace_matmul,
)
from cudalearn.chapters.ch04 import kernels as transposes
from cudalearn.checks.simple_kernels import _rng
from cudalearn.runtime import device, launch


def _worst_line(report: Any) -> str:
    """'line N: source (c conflicts)' for the line of a trace with the most bank conflicts."""
    line, stats = max(report.by_line.items(), key=lambda kv: kv[1].bank_conflicts)
    where = line if isinstance(line, int) else f"{stats.file}:{stats.line}"
    return f"line {where}: `{stats.source}` ({stats.bank_conflicts} conflicts)"


_BANK_MISTAKES = (
    (
        lambda r, c, w: c % 32,
        "your answer gives the bank as if every row were 32 words long (row * 32 + col, or col alone, "
        "which is the same modulo 32): a row is `width` words long, and the padded tile of this lab has 33.",
    ),
    (
        lambda r, c, w: (c * w + r) % 32,
        "that is the column-major word index; the array is row-major: word = row * width + col.",
    ),
    (
        lambda r, c, w: (4 * (r * w + c)) % 32,
        "that is the byte address modulo 32; a bank holds 4-byte words: "
        "bank = word % 32, with word = row * width + col.",
    ),
    (lambda r, c, w: (r * w + c) % 33, "there are 32 banks, whatever the width: bank = word % 32."),
)


def check_bank_of(bank_of: Callable[[int, int, int], int]) -> None:
    """Lab 4: the bank (0-31) of element [row, col] of a float32 shared array with `width` columns."""
    cases = [
        ((r, c, w), (r * w + c) % 32)
        for r, c, w in [
            (0, 0, 32),
            (0, 5, 32),
            (1, 0, 32),
            (7, 3, 32),
            (1, 0, 33),
            (5, 0, 33),
            (31, 31, 33),
            (2, 1, 16),
            (3, 4, 17),
            (10, 20, 64),
        ]
    ]
    _check_int_answers(
        bank_of,
        cases,
        name="bank_of",
        hint="the element's word index in the row-major array is row * width + col (one float32 per "
        "4-byte word), and the banks take the words in turn: bank = word % 32.",
        mistakes=_BANK_MISTAKES,
    )


TRANSPOSE_BARRIER_HINT = (
    "the transpose has no loop, so it needs one barrier: every thread must finish writing the tile "
    "(`tile[ty, tx] = ...`) before any thread reads it down a column (`tile[tx, ty]`), so one "
    "cuda.syncthreads(), with its parentheses, between the two, reached by every thread (outside the ifs)."
)


def _check_no_conflicts(report: Any, what: str) -> None:
    """Raise with the conflict count, the worst line and the padding hint unless the trace has none."""
    if report.bank_conflicts:
        raise AssertionError(
            f"{what} is correct, but the tracer counts {report.bank_conflicts} shared-memory bank conflicts "
            f"({report.shared_wavefronts} wavefronts for {report.shared_requests} warp requests; without "
            f"conflicts each request takes one). The most are on {_worst_line(report)}. Hint: a warp that "
            f"walks down a column of a (32, 32) float32 tile hits one bank 32 times; declare the tile with "
            f"a padding column, shape (TILE, TILE + 1), so each row starts one bank further on. Write that "
            f"width as a number, cuda.shared.array((TILE, 33), float32), or as a module-level constant "
            f"(`TILE_PAD = TILE + 1` above the kernel): a shape computed inside the kernel does not compile "
            f"for a real GPU."
        )


def _check_transposes(kernel: Any, tile: int, shapes: Sequence[tuple[int, int]], seed: int) -> None:
    """Raise unless kernel writes src.T for each (m, n) src with (tile, tile) blocks."""
    rng = _rng(seed)
    for m, n in shapes:
        src = rng.standard_normal((m, n)).astype(np.float32)
        griddim, blockdim = launch.square(m, n, tile)
        got = checks.run_kernel(kernel, griddim, blockdim, src, checks.empty_output((n, m)))[1]
        checks.check_close(got, src.T, name=f"dst (src {m}x{n})", block=checks.tile_hint((n, m), tile))


def _transpose_probe(kernel: Any, tile: int) -> str | None:
    """Lab 4: a hint for a wrong transpose, from a run on a src of whole tiles."""
    src = _rng(4).standard_normal((2 * tile, tile)).astype(np.float32)
    griddim, blockdim = launch.square(2 * tile, tile, tile)
    try:
        got = checks.run_kernel(kernel, griddim, blockdim, src, checks.empty_output((tile, 2 * tile)))[1]
    except AssertionError:
        got = None
    if got is not None and np.array_equal(got, src.T):
        return (
            "your transpose is right when m and n are multiples of TILE and wrong when they are not: guard "
            "the read (row < src.shape[0] and col < src.shape[1]) and the write (out_row < dst.shape[0] and "
            "out_col < dst.shape[1]), each with its own indices."
        )
    return (
        "your transpose is wrong even on a src of whole tiles. Block (bx, by) reads the tile of src at rows "
        "by * TILE + ty, columns bx * TILE + tx, into tile[ty, tx]; it writes the tile of dst at rows "
        "bx * TILE + ty, columns by * TILE + tx (the block indices swap), from tile[tx, ty] (so do the "
        "thread indices)."
    )


def _trace_transpose(kernel: Any, tile: int, shape: tuple[int, int], seed: int):
    """The report of kernel traced as a transpose of one (m, n) src with (tile, tile) blocks."""
    m, n = shape
    src = _rng(seed).standard_normal((m, n)).astype(np.float32)
    griddim, blockdim = launch.square(m, n, tile)
    return _trace(kernel, griddim, blockdim, src, np.zeros((n, m), np.float32))


@functools.lru_cache(maxsize=32)
def _reference_transpose(tile: int, shape: tuple[int, int], seed: int):
    """The trace of the course's tiled transpose on a check's problem (lab 4)."""
    return _trace_transpose(transposes.make_transpose_tiled(tile, 1), tile, shape, seed)


def check_transpose_no_conflict(
    kernel: Any,
    tile: int = 32,
    sizes: Sequence[tuple[int, int]] | None = None,
    trace_size: tuple[int, int] | None = None,
) -> None:
    """Lab 4: dst = src.T (float32) through a shared tile, (tile, tile) blocks, no bank conflict in the trace.

    sizes: (m, n) shapes of src run on the device (or simulator); trace_size: the small one traced.
    """
    sim = device.mode() == "sim"
    shapes = sizes or ([(tile + 5, tile - 7)] if sim else [(1024, 1024), (1000, 333)])
    shape = tuple(trace_size or (tile + 5, tile - 7))
    try:
        _check_results(
            lambda: _check_transposes(kernel, tile, shapes, seed=6),
            lambda: _trace_transpose(kernel, tile, shape, seed=9),
            probe=lambda: _transpose_probe(kernel, tile),
            init_probe=True,
            race_hint=TRANSPOSE_BARRIER_HINT,
        )
    except AssertionError as e:
        if "out-of-bounds write to dst" not in str(e):
            raise
        found = str(e).split(" The thread is not a surplus thread")[0]  # its generic hint speaks of loads
        raise AssertionError(
            f"{found}\nHint: the write to dst needs its own guard, `if out_row < dst.shape[0] and out_col < "
            f"dst.shape[1]:`. dst is the transpose, so its partial blocks lie along the other axes: the "
            f"read's guard (row, col against src's shape) does not cover the write."
        ) from None
    report = _clean_trace(
        lambda: _trace_transpose(kernel, tile, shape, seed=9), "your transpose", TRANSPOSE_BARRIER_HINT
    )
    if report.shared_requests == 0:
        raise AssertionError(
            "your transpose is correct, but it does not use shared memory: without a tile, either the "
            "reads or the writes of a warp go down a column of a matrix (32 sectors each). Keep the shared "
            "tile and remove its bank conflict instead."
        )
    _check_no_conflicts(report, "your transpose")
    ref = _reference_transpose(tile, shape, 9)
    if report.global_sectors > ref.global_sectors:
        raise AssertionError(
            f"your transpose is correct and conflict-free, but it touches {report.global_sectors} global "
            f"sectors where the tiled transpose touches {ref.global_sectors}: a warp should read along a "
            f"row of src and write along a row of dst (neighbouring threads, neighbouring addresses)."
        )


def _stores_a_column(report: Any, tile: int) -> bool:
    """Whether some warp stores down a column of a shared array (its lanes' addresses span many rows)."""
    for requests in report.kept_requests.values():
        for r in requests:
            if (
                r.store
                and len(r.addresses) > 1
                and max(r.addresses) - min(r.addresses) >= 2 * (tile + 1) * r.itemsize
            ):
                return True
    return False


def check_matmul_no_conflict(
    kernel: Any,
    tile: int = 32,
    sizes: Sequence[tuple[int, int, int]] | None = None,
    trace_size: tuple[int, int, int] | None = None,
) -> None:
    """Lab 4: tiled C = A @ B (float32), (tile, tile) blocks, B tile kept transposed, no bank conflict.

    sizes: (m, k, n) triples run on the device (or simulator); trace_size: the small one traced.
    """
    sim = device.mode() == "sim"
    # k runs over 3 tiles here; the hidden tests run more, so a tile loop of a fixed count fails one of them
    triples = sizes or ([(tile - 5, 2 * tile + 9, tile - 12)] if sim else [(256, 256, 256), (300, 77, 129)])
    size = tuple(trace_size or (tile - 5, tile + 9, tile - 12))
    _check_results(
        lambda: _check_matmuls(kernel, tile, triples, seed=7),
        lambda: _trace_matmul(kernel, tile, size, seed=10),
        probe=lambda: _matmul_probe(kernel, tile, LAB4_TILES),
        zeroed=lambda: _matmul_right(kernel, tile, triples[0], zeros=True),
    )
    report = _clean_trace(lambda: _trace_matmul(kernel, tile, size, seed=10), "your result")
    if report.shared_load_requests == 0:
        raise AssertionError(
            "your kernel is correct, but it reads nothing from shared memory: keep the tiles (the point of "
            "Chapter 3) and remove the bank conflict with a padding column."
        )
    _check_no_conflicts(report, "your kernel")
    if not _stores_a_column(report, tile):
        raise AssertionError(
            "your kernel is correct and conflict-free, but it no longer keeps the B tile transposed: no warp "
            "stores down a column of a shared tile. The exercise is to keep `sBt[tx, ty] = b` and "
            "`sBt[tx, k]` in the inner loop, and remove their conflict by changing the tile's shape: "
            "(TILE, TILE + 1), the width written as a number or a module constant."
        )
    ref = _reference_trace("bt", tile, size, 10)
    _check_stores(report, size, tile)
    _check_coalesced(report, ref, "your kernel")
    _check_load_total(report, ref, "your kernel")
