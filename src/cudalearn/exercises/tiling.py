"""Checks of labs 3-4 (tiling, bank conflicts), built on `checks` and the memory-access tracer.

Each kernel check first runs the student's kernel through `checks.run_kernel`
and compares the result with NumPy, so an unfinished kernel is reported as
"not done yet" before anything else. Only then does it trace the kernel on
the CPU (`cudalearn.trace`, in both modes) to check how it uses memory: no
race, global traffic well below the naive kernel's (lab 3), no shared-memory
bank conflict (lab 4). When a result is wrong and the tracer finds a race,
the race is reported, since it is the likely cause.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cudalearn import checks, device

NAIVE_FACTOR = 3.0  # a tiled kernel must read at least this many times fewer global sectors than naive


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _grid(m: int, n: int, tile: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(griddim, blockdim) of a (tile, tile)-block launch over an (m, n) output."""
    return (math.ceil(n / tile), math.ceil(m / tile)), (tile, tile)


def _block_hint(shape: tuple[int, int], tile: int) -> tuple[int, int]:
    """check_close's `block`: the tile along each axis the array spans more than one tile of, else 0.

    (An array smaller than one tile is all "last partial block", which would make the hint misfire.)
    """
    return tuple(tile if size > tile else 0 for size in shape)


_trace = checks.trace_kernel


def _race_message(report: Any, what: str) -> str:
    """The first race of a trace as a message with the barrier hint."""
    first = report.races[0]
    return (
        f"{what}: the tracer found {report.race_count} race(s) in your kernel. The first: {first}. "
        f"Hint: every thread must finish writing a tile before any thread reads it "
        f"(a cuda.syncthreads() after the loads), and every thread must finish reading it before "
        f"any thread overwrites it with the next tile (a second cuda.syncthreads() at the end of the "
        f"loop body)."
    )


def _check_results(run: Callable[[], None], traced: Callable[[], Any]) -> None:
    """Run the result checks; when one fails (not for "not done yet"), report a race if `traced()` has one.

    `traced` traces the kernel on a small problem: the tracer runs every thread in Python.
    """
    try:
        run()
    except AssertionError as err:
        if checks.NOT_DONE in str(err):
            raise
        try:
            report = traced()
        except AssertionError:
            raise err from None
        if report.race_count:
            msg = _race_message(report, "the result is wrong, and the likely cause is a race")
            raise AssertionError(f"{msg}\n(The result check said: {err})") from None
        raise


def _worst_line(report: Any) -> str:
    """'line N: source (c conflicts)' for the line of a trace with the most bank conflicts."""
    line, stats = max(report.by_line.items(), key=lambda kv: kv[1].bank_conflicts)
    where = line if isinstance(line, int) else f"{stats.file}:{stats.line}"
    return f"line {where}: `{stats.source}` ({stats.bank_conflicts} conflicts)"


# Chapter 3 -------------------------------------------------------------------


def check_global_bytes_tiled(global_bytes_tiled: Callable[[int, int], int]) -> None:
    """Lab 3: bytes of A and B a tiled n x n float32 product reads from global memory, with no cache."""
    cases = [((n, t), 2 * n**3 // t * 4) for n, t in [(16, 16), (64, 16), (1024, 32), (4096, 16), (96, 32)]]
    checks.check_function(
        global_bytes_tiled,
        cases,
        name="global_bytes_tiled",
        hint="there are (n / tile)**2 blocks; each loads n / tile tiles of A and as many of B, each tile "
        "tile * tile float32 values of 4 bytes. That is the naive 2 * n**3 * 4 bytes divided by tile.",
    )


def _matmul_problem(rng: np.random.Generator, m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Random float32 A (m, k) and B (k, n)."""
    return rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)


def _check_matmuls(kernel: Any, tile: int, triples: Sequence[tuple[int, int, int]], seed: int) -> None:
    """Raise unless kernel computes A @ B for each (m, k, n) with (tile, tile) blocks."""
    rng = _rng(seed)
    for m, k, n in triples:
        A, B = _matmul_problem(rng, m, k, n)
        griddim, blockdim = _grid(m, n, tile)
        got = checks.run_kernel(kernel, griddim, blockdim, A, B, checks.empty_output((m, n)))[2]
        checks.check_close(
            got,
            A @ B,
            name=f"C (m, k, n = {m}, {k}, {n})",
            **checks.matmul_tol(k),
            block=_block_hint((m, n), tile),
        )


def _trace_matmul(kernel: Any, tile: int, size: tuple[int, int, int], seed: int):
    """(report, (A, B)) of kernel traced on one (m, k, n) problem with (tile, tile) blocks."""
    m, k, n = size
    A, B = _matmul_problem(_rng(seed), m, k, n)
    griddim, blockdim = _grid(m, n, tile)
    return _trace(kernel, griddim, blockdim, A, B, np.zeros((m, n), np.float32)), (A, B)


def check_matmul_tiled(
    kernel: Any,
    tile: int,
    sizes: Sequence[tuple[int, int, int]] | None = None,
    trace_size: tuple[int, int, int] | None = None,
) -> None:
    """Lab 3: tiled C = A @ B (float32) with (tile, tile) blocks: right off the tile grid, race-free, tiled.

    "Tiled" means far fewer global sectors per output element than matmul_naive on the same launch,
    both counted by the tracer. sizes: (m, k, n) triples run on the device (or simulator);
    trace_size: the small (m, k, n) traced.
    """
    from cudalearn.kernels.matmul import matmul_naive

    sim = device.mode() == "sim"
    triples = sizes or ([(tile + 3, 2 * tile + 5, tile - 3)] if sim else [(256, 256, 256), (300, 77, 129)])
    size = trace_size or (tile + 5, 2 * tile + 7, tile - 3)
    _check_results(
        lambda: _check_matmuls(kernel, tile, triples, seed=5),
        lambda: _trace_matmul(kernel, tile, size, seed=8)[0],
    )
    report, (A, B) = _trace_matmul(kernel, tile, size, seed=8)
    m, k, n = size
    if report.race_count:
        raise AssertionError(
            _race_message(report, f"the result is right, but by luck (m, k, n = {m}, {k}, {n})")
        )
    griddim, blockdim = _grid(m, n, tile)
    naive = _trace(matmul_naive, griddim, blockdim, A, B, np.zeros((m, n), np.float32))
    yours, theirs = report.global_sectors / (m * n), naive.global_sectors / (m * n)
    if report.shared_requests == 0 or yours * NAIVE_FACTOR > theirs:
        why = (
            "it does not use shared memory at all"
            if report.shared_requests == 0
            else f"that is only {theirs / max(yours, 1e-9):.1f} times fewer, and a tiled kernel reads at "
            f"least {NAIVE_FACTOR:g} times fewer"
        )
        raise AssertionError(
            f"your kernel is correct, but it touches {yours:.2f} global-memory sectors per output element, "
            f"against {theirs:.2f} for matmul_naive on the same launch (m, k, n = {m}, {k}, {n}, blocks "
            f"of {tile}x{tile}): {why}. Hint: load each tile of A and B from global memory once, into "
            f"cuda.shared.array((TILE, TILE), float32), and take the inner loop's operands from those tiles."
        )


# Chapter 4 -------------------------------------------------------------------


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
    checks.check_function(
        bank_of,
        cases,
        name="bank_of",
        hint="the element's word index in the row-major array is row * width + col (one float32 per "
        "4-byte word), and the banks take the words in turn: bank = word % 32.",
    )


def _check_no_conflicts(report: Any, what: str) -> None:
    """Raise with the conflict count, the worst line and the padding hint unless the trace has none."""
    if report.bank_conflicts:
        raise AssertionError(
            f"{what} is correct, but the tracer counts {report.bank_conflicts} shared-memory bank conflicts "
            f"({report.shared_wavefronts} wavefronts for {report.shared_requests} warp requests; without "
            f"conflicts each request takes one). The most are on {_worst_line(report)}. Hint: a warp that "
            f"walks down a column of a (32, 32) float32 tile hits one bank 32 times; declare the tile with "
            f"a padding column, (TILE, TILE + 1), so each row starts one bank further on."
        )
    if report.race_count:
        raise AssertionError(_race_message(report, f"{what} is correct, but it is luck"))


def _check_transposes(kernel: Any, tile: int, shapes: Sequence[tuple[int, int]], seed: int) -> None:
    """Raise unless kernel writes src.T for each (m, n) src with (tile, tile) blocks."""
    rng = _rng(seed)
    for m, n in shapes:
        src = rng.standard_normal((m, n)).astype(np.float32)
        griddim, blockdim = _grid(m, n, tile)
        got = checks.run_kernel(kernel, griddim, blockdim, src, checks.empty_output((n, m)))[1]
        checks.check_close(got, src.T, name=f"dst (src {m}x{n})", block=_block_hint((n, m), tile))


def _trace_transpose(kernel: Any, tile: int, shape: tuple[int, int], seed: int):
    """The report of kernel traced as a transpose of one (m, n) src with (tile, tile) blocks."""
    m, n = shape
    src = _rng(seed).standard_normal((m, n)).astype(np.float32)
    griddim, blockdim = _grid(m, n, tile)
    return _trace(kernel, griddim, blockdim, src, np.zeros((n, m), np.float32))


def check_transpose_no_conflict(
    kernel: Any,
    tile: int = 32,
    sizes: Sequence[tuple[int, int]] | None = None,
    trace_size: tuple[int, int] | None = None,
) -> None:
    """Lab 4: dst = src.T (float32) through a shared tile, (tile, tile) blocks, no bank conflict in the trace.

    sizes: (m, n) shapes of src run on the device (or simulator); trace_size: the small one traced.
    """
    from cudalearn.kernels.transpose import make_transpose_tiled

    sim = device.mode() == "sim"
    shapes = sizes or ([(tile + 5, tile - 7)] if sim else [(1024, 1024), (1000, 333)])
    shape = trace_size or (tile + 5, tile - 7)
    _check_results(
        lambda: _check_transposes(kernel, tile, shapes, seed=6),
        lambda: _trace_transpose(kernel, tile, shape, seed=9),
    )
    report = _trace_transpose(kernel, tile, shape, seed=9)
    if report.shared_requests == 0:
        raise AssertionError(
            "your transpose is correct, but it does not use shared memory: without a tile, either the "
            "reads or the writes of a warp go down a column of a matrix (32 sectors each). Keep the shared "
            "tile and remove its bank conflict instead."
        )
    _check_no_conflicts(report, "your transpose")
    ref = _trace_transpose(make_transpose_tiled(tile, 1), tile, shape, seed=9)
    if report.global_sectors > ref.global_sectors:
        raise AssertionError(
            f"your transpose is correct and conflict-free, but it touches {report.global_sectors} global "
            f"sectors where the tiled transpose touches {ref.global_sectors}: a warp should read along a "
            f"row of src and write along a row of dst (neighbouring threads, neighbouring addresses)."
        )


def check_matmul_no_conflict(
    kernel: Any,
    tile: int = 32,
    sizes: Sequence[tuple[int, int, int]] | None = None,
    trace_size: tuple[int, int, int] | None = None,
) -> None:
    """Lab 4: tiled C = A @ B (float32), (tile, tile) blocks, and no bank conflict in the trace.

    sizes: (m, k, n) triples run on the device (or simulator); trace_size: the small one traced.
    """
    sim = device.mode() == "sim"
    triples = sizes or ([(tile - 5, tile + 9, tile - 12)] if sim else [(256, 256, 256), (300, 77, 129)])
    size = trace_size or (tile - 5, tile + 9, tile - 12)
    _check_results(
        lambda: _check_matmuls(kernel, tile, triples, seed=7),
        lambda: _trace_matmul(kernel, tile, size, seed=10)[0],
    )
    report = _trace_matmul(kernel, tile, size, seed=10)[0]
    if report.shared_load_requests == 0:
        raise AssertionError(
            "your kernel is correct, but it reads nothing from shared memory: keep the tiles (the point of "
            "Chapter 3) and remove the bank conflict with a padding column."
        )
    _check_no_conflicts(report, "your kernel")
