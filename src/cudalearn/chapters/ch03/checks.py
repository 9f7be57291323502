"""Checks of lab 3 (tiling), and the tiled-matmul checking that lab 4 reuses, built on the tracer.

Each kernel check first runs the student's kernel through `checks.run_kernel`
and compares the result with NumPy, so an unfinished kernel is reported as
"not done yet" before anything else. When a result is wrong, the check traces
the kernel on a small launch (`cudalearn.trace`, the course's sanitizer) and
reports what the tracer names as the cause: a thread that returns before or
skips a barrier, a shared element read before any thread wrote it, a race,
an access outside an array; failing that, it reruns the kernel on sizes that
are multiples of the tile to say which partial tiles it gets wrong. When the
result is right, the trace checks how the kernel uses memory: no sanitizer
finding, C stored once per element, and global traffic no worse than the
course's own tiled kernel (lab 3; lab 4's checks are in `bank_conflicts`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cudalearn import checks
from cudalearn.chapters.ch03 import kernels as tiled
from cudalearn.checks.answer_types import INT_FIX, INT_RULE, int_problem
from cudalearn.checks.simple_kernels import _rng
from cudalearn.runtime import device, launch

NAIVE_FACTOR = 3.0  # a tiled kernel must read at least this many times fewer global sectors than naive
COALESCING_SLACK = 1.5  # sectors per load request allowed above the course's kernel's on the same launch

READS_OUTPUT = (
    "your kernel gives the right C when C starts filled with zeros, and NaN everywhere when it does not "
    "(the check fills C with NaN first): it reads C before writing it (`C[row, col] += ...`). A GPU's "
    "memory is not zeroed for you. Sum into a float32 local variable (`acc = float32(0.0)`, "
    "`acc += ...`) and write C[row, col] = acc once, after the tile loop."
)


_trace = checks.trace_kernel


# The sanitizer's findings, as messages with the lab's hint --------------------


def _race_message(report: Any, what: str, race_hint: str | None = None) -> str:
    """The first race of a trace as a message with the barrier hint (the tiles' by default), after `what`."""
    return f"{what}: {report.race_message(race_hint)}"


def _traced_cause(traced: Callable[[], Any], race_hint: str | None = None) -> str | None:
    """What the tracer names as the cause of a wrong result (sanitizer, memcheck, race), or None."""
    try:
        report = traced()
    except AssertionError as e:  # checks.trace_kernel raised: synccheck, initcheck or out of bounds
        msg = str(e)
        return None if msg.startswith("the tracer could not run") else msg
    if report.race_count:
        return report.race_message(race_hint)
    return None


def _check_results(
    run: Callable[[], None],
    traced: Callable[[], Any],
    probe: Callable[[], str | None] | None = None,
    zeroed: Callable[[], bool] | None = None,
    init_probe: bool = False,
    race_hint: str | None = None,
) -> None:
    """Labs 3-4: run the result checks; a wrong result is explained by the tracer, else by `probe`.

    traced(): the kernel traced on a small problem (the tracer runs every thread in Python).
    probe(): a hint from rerunning the kernel on other sizes, or None. zeroed(): whether the
    kernel is right when its output starts as zeros (it reads its output before writing it).
    init_probe: an unwritten shared read gets probe's hint rather than the sanitizer's zero-fill one.
    race_hint: the barrier hint of a race, when the kernel's barriers are not a tiled matmul's two.
    """
    try:
        run()
        return
    except AssertionError as err:
        msg = str(err)
    if checks.NOT_DONE in msg:
        if zeroed is not None and zeroed():
            raise AssertionError(READS_OUTPUT)
        raise AssertionError(msg)
    out_of_bounds = msg.startswith("your kernel indexed outside")
    if not out_of_bounds and " is wrong at " not in msg:  # e.g. run_kernel's compile check: as it is
        raise AssertionError(msg)
    cause = _traced_cause(traced, race_hint)
    if cause is not None and "(initcheck)" in cause and init_probe and probe is not None:
        hint = probe()  # the sanitizer's zero-fill hint is for tiles that stick out of a matrix
        cause = cause.split(" Hint: ")[0] + (f" Hint: {hint}" if hint else "")
    if cause is not None and out_of_bounds:  # the tracer names the array, index, line and thread
        raise AssertionError(f"the result check stopped at an out-of-bounds access; {cause}")
    if cause is not None:
        raise AssertionError(
            f"the result is wrong, and the tracer says why: {cause}\n(The result check said: "
            f"{msg.split(' Hint: ')[0]})"
        )
    hint = probe() if probe is not None else None
    if hint is not None:
        raise AssertionError(msg.split(" Hint: ")[0] + f" Hint: {hint}")
    raise AssertionError(msg)


def _clean_trace(traced: Callable[[], Any], what: str, race_hint: str | None = None) -> Any:
    """The trace of a kernel whose result is right; raise if the sanitizer or race check finds it lucky."""
    try:
        report = traced()
    except AssertionError as e:
        if str(e).startswith("the tracer could not run"):
            raise
        raise AssertionError(f"{what} is right, but by luck: {e}") from None
    if report.race_count:
        raise AssertionError(_race_message(report, f"{what} is right, but by luck", race_hint))
    return report


# Answers that are numbers: the value, its type, and a hint for the usual mistake --


def _check_int_answers(
    fn: Callable[..., Any],
    cases: Sequence[tuple[tuple, int]],
    *,
    name: str,
    hint: str,
    mistakes: Sequence[tuple[Callable[..., int], str]],
) -> None:
    """Labs 3-4: raise unless fn(*args) is the int expected (`answer_types.is_int`); name a mistake that
    gives every value fn gave."""
    got = []
    for args, _ in cases:
        call = f"{name}({', '.join(map(repr, args))})"
        value = checks.call_student(fn, name, *args)
        if value is None:
            checks.check_equal(value, 0, name=call)
        why = int_problem(value)
        if why is not None:
            raise AssertionError(
                f"`{call}` {why}: the exercise asks for an int ({INT_RULE}). Hint: {INT_FIX}"
            )
        got.append(value)
    named = [
        why
        for formula, why in mistakes
        if all(formula(*a) == g for (a, _), g in zip(cases, got, strict=True))
    ]
    for (args, expected), value in zip(cases, got, strict=True):
        call = f"{name}({', '.join(map(repr, args))})"
        checks.check_equal(value, expected, name=call, hint=named[0] if named else hint)


# Chapter 3 -------------------------------------------------------------------

_BYTES_MISTAKES = (
    (
        lambda n, t: 8 * n**3,
        "that is the naive kernel's traffic: with tiles, each value read from global "
        "memory serves a whole tile of outputs, so the traffic is divided by the tile size.",
    ),
    (lambda n, t: 2 * n**3 // t, "that counts float32 values, not bytes: each is 4 bytes."),
    (lambda n, t: 4 * n**3 // t, "that is the traffic of one matrix: each block loads tiles of A AND of B."),
    (lambda n, t: 8 * n**3 // t**2, "you divided by the tile size twice: each tile has tile * tile values."),
    (
        lambda n, t: 8 * n**2 * t,
        "count the blocks: (n / tile)**2 of them, each loading n / tile tiles of A and as many of B.",
    ),
)


def check_global_bytes_tiled(global_bytes_tiled: Callable[[int, int], int]) -> None:
    """Lab 3: bytes of A and B a tiled n x n float32 product reads from global memory, with no cache."""
    cases = [((n, t), 2 * n**3 // t * 4) for n, t in [(16, 16), (64, 16), (1024, 32), (4096, 16), (96, 32)]]
    _check_int_answers(
        global_bytes_tiled,
        cases,
        name="global_bytes_tiled",
        hint="there are (n / tile)**2 blocks; each loads n / tile tiles of A and as many of B, each tile "
        "tile * tile float32 values of 4 bytes. That is the naive 2 * n**3 * 4 bytes divided by tile.",
        mistakes=_BYTES_MISTAKES,
    )


def _matmul_problem(rng: np.random.Generator, m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Random float32 A (m, k) and B (k, n)."""
    return rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)


def _run_matmul(kernel: Any, tile: int, m: int, k: int, n: int, seed: int, out: np.ndarray | None = None):
    """(C, A @ B) of kernel launched with (tile, tile) blocks on one random (m, k, n) problem."""
    A, B = _matmul_problem(_rng(seed), m, k, n)
    griddim, blockdim = launch.square(m, n, tile)
    C = checks.empty_output((m, n)) if out is None else out
    expected = A @ B  # before the launch (which gets copies of A and B all the same)
    return checks.run_kernel(kernel, griddim, blockdim, A, B, C)[2], expected


def _check_matmuls(kernel: Any, tile: int, triples: Sequence[tuple[int, int, int]], seed: int) -> None:
    """Raise unless kernel computes A @ B for each (m, k, n) with (tile, tile) blocks."""
    for i, (m, k, n) in enumerate(triples):
        got, expected = _run_matmul(kernel, tile, m, k, n, seed + i)
        checks.check_close(
            got,
            expected,
            name=f"C (m, k, n = {m}, {k}, {n})",
            **checks.matmul_tol(k),
            block=checks.tile_hint((m, n), tile),
        )


def _matmul_right(kernel: Any, tile: int, size: tuple[int, int, int], zeros: bool = False) -> bool:
    """Whether kernel's C is A @ B on one problem (C starting as zeros, or as the NaN sentinel)."""
    m, k, n = size
    try:
        got, expected = _run_matmul(
            kernel, tile, m, k, n, seed=3, out=np.zeros((m, n), np.float32) if zeros else None
        )
    except AssertionError:
        return False
    return bool(np.allclose(got, expected, **checks.matmul_tol(k)))


# what each thread of a lab's kernel loads and adds, for the indexing hint
LAB3_TILES = (
    "it loads A[row, k0 + tx] into sA[ty, tx], B[k0 + ty, col] into sB[ty, tx], adds sA[ty, k] * sB[k, tx]"
)
LAB4_TILES = (
    "it loads A[row, k0 + tx] into sA[ty, tx], B[k0 + ty, col] into sBt[tx, ty], adds sA[ty, k] * sBt[tx, k]"
)


def _loop_mistake(kernel: Any, tile: int, size: tuple[int, int, int]) -> str | None:
    """Labs 3-4: the loop mistake whose partial sum the kernel's C equals on `size` (whole tiles), or None.

    A reset accumulator keeps the last tile's products only, `range(TILE - 1)` drops the last k of every
    tile, a tile loop one short (`range((K - 1) // TILE)` here) drops the last tile.
    """
    m, k, n = size
    try:
        got, _ = _run_matmul(kernel, tile, m, k, n, seed=3)
    except AssertionError:
        return None
    A, B = (x.astype(np.float64) for x in _matmul_problem(_rng(3), m, k, n))
    ks = np.arange(k)
    for keep, why in (
        (
            ks >= k - tile,
            "C holds the products of the last tile along k only: the accumulator is reset inside the tile "
            "loop. Start it once, acc = float32(0.0), before the loop over the tiles.",
        ),
        (
            ks % tile != tile - 1,
            "C misses the last k of every tile: the inner loop stops one short. Loop over range(TILE).",
        ),
        (
            ks < k - tile,
            "C misses the last tile along k: the tile loop stops one tile short. Loop over "
            "(K + TILE - 1) // TILE tiles.",
        ),
    ):
        if np.allclose(got, A[:, keep] @ B[keep, :], **checks.matmul_tol(k)):
            return (
                f"your kernel is wrong even when m, k and n are multiples of TILE ({m}, {k}, {n}), and {why}"
            )
    return None


def _matmul_probe(kernel: Any, tile: int, tiles: str) -> str | None:
    """Labs 3-4: which sizes a wrong tiled matmul gets right, as a hint (whole tiles, partial k, m, n)."""
    if not _matmul_right(kernel, tile, (2 * tile, 2 * tile, tile)):
        loop = _loop_mistake(kernel, tile, (2 * tile, 2 * tile, tile))
        if loop is not None:
            return loop
        return (
            f"your kernel is wrong even when m, k and n are multiples of TILE ({2 * tile}, {2 * tile}, "
            f"{tile}), so the indexing or the loop bounds are off, not the partial tiles. Thread (tx, ty) = "
            f"(cuda.threadIdx.x, cuda.threadIdx.y) of block (bx, by) computes "
            f"C[by * TILE + ty, bx * TILE + tx]; {tiles}: check each index of your loads, inner loop and "
            f"store against that."
        )
    fixed = _fixed_tile_count(kernel, tile)
    if fixed is not None:
        return fixed
    if not _matmul_right(kernel, tile, (2 * tile, 2 * tile + 3, tile)):
        return (
            f"your kernel is right when k is a multiple of TILE and wrong when it is not "
            f"(k = {2 * tile + 3}): the last, partial tile along k is missing or wrong. Loop over all "
            f"(K + TILE - 1) // TILE tiles (K // TILE drops the last one), and load a zero where "
            f"k0 + tx or k0 + ty is outside A or B."
        )
    if not _matmul_right(kernel, tile, (tile + 3, tile, 2 * tile - 3)):
        return (
            "your kernel is right when m and n are multiples of TILE and wrong when they are not: guard the "
            "loads of rows of A and columns of B outside the matrices (load zeros there) and the final write "
            "to C, without skipping a barrier."
        )
    return None


def _fixed_tile_count(kernel: Any, tile: int) -> str | None:
    """Labs 3-4: 'sums only the first 3 tiles along k' when C sums the same few tiles for two long k, or None.

    Run with k = 3 and 4 tiles and a bit: a tile loop of a fixed count sums the same number of tiles for
    both (a `K // TILE` loop sums 3 and 4, and is named by the partial-tile probe instead).
    """
    counts = []
    for k in (3 * tile + 1, 4 * tile + 1):
        try:
            got, _ = _run_matmul(kernel, tile, tile, k, tile, seed=3)
        except AssertionError:
            return None
        A, B = (x.astype(np.float64) for x in _matmul_problem(_rng(3), tile, k, tile))
        summed = [
            s
            for s in range(1, 7)
            if np.allclose(got, A[:, : s * tile] @ B[: s * tile, :], **checks.matmul_tol(k))
        ]
        if not summed:
            return None
        counts.append(summed[0])
    if counts[0] != counts[1]:
        return None
    return (
        f"on k = {3 * tile + 1} and k = {4 * tile + 1} ({-(-(3 * tile + 1) // tile)} and "
        f"{-(-(4 * tile + 1) // tile)} tiles of {tile}) your kernel sums only the first {counts[0]} tile(s) "
        f"along k: its tile loop runs a fixed number of times. Compute the count from K: "
        f"range((K + TILE - 1) // TILE), so any k works."
    )


def _trace_matmul(kernel: Any, tile: int, size: tuple[int, int, int], seed: int):
    """The report of kernel traced on one random (m, k, n) problem with (tile, tile) blocks."""
    m, k, n = size
    A, B = _matmul_problem(_rng(seed), m, k, n)
    griddim, blockdim = launch.square(m, n, tile)
    return _trace(kernel, griddim, blockdim, A, B, np.zeros((m, n), np.float32))


@functools.lru_cache(maxsize=32)
def _reference_trace(kind: str, tile: int, size: tuple[int, ...], seed: int):
    """The trace of the course's matmul of `kind` (naive, tiled, bt) on a check's problem (labs 3-4)."""
    from cudalearn.chapters.ch02.kernels.matmul import matmul_naive

    kernel = {"naive": lambda: matmul_naive, "tiled": lambda: tiled.make_tiled_matmul(tile)}.get(
        kind, lambda: tiled.make_matmul_bt_tiled(tile, 1)
    )()
    return _trace_matmul(kernel, tile, size, seed)


def _check_stores(report: Any, size: tuple[int, int, int], tile: int) -> None:
    """Raise when a matmul's warps store to global memory more than once each (C is written once)."""
    m, k, n = size
    (gx, gy), (bx, by) = launch.square(m, n, tile)
    warps = gx * gy * launch.blocks(bx * by, 32)
    if report.global_store_requests > warps:
        raise AssertionError(
            f"your kernel is correct, but its {warps} warps make {report.global_store_requests} store "
            f"requests to global memory (m, k, n = {m}, {k}, {n}, TILE = {tile}): they write C more than "
            f"once. Hint: the store `C[row, col] = acc` belongs after the tile loop, not inside it: each "
            f"output is written once, when its sum is complete."
        )


def _load_counts(report: Any, ref: Any) -> str:
    """'its global loads make R warp requests touching S sectors, where the course's kernel ...'."""
    return (
        f"its global loads make {report.global_load_requests} warp requests touching "
        f"{report.global_load_sectors} sectors of 32 bytes, where the course's kernel makes "
        f"{ref.global_load_requests} touching {ref.global_load_sectors} on the same launch"
    )


def _check_coalesced(report: Any, ref: Any, what: str) -> None:
    """Raise when a kernel's global load requests touch far more sectors each than the course's kernel's."""
    mine = report.global_load_sectors / max(report.global_load_requests, 1)
    theirs = ref.global_load_sectors / max(ref.global_load_requests, 1)
    if mine > COALESCING_SLACK * theirs:
        raise AssertionError(
            f"{what} is correct, but {_load_counts(report, ref)}: {mine:.1f} sectors a request against "
            f"{theirs:.1f}, so the loads are not coalesced. Hint: neighbouring threads of a warp "
            f"(consecutive cuda.threadIdx.x) must read neighbouring addresses: tx = cuda.threadIdx.x "
            f"indexes the columns (col = bx * TILE + tx, A[row, k0 + tx]) and ty = cuda.threadIdx.y the rows."
        )


def _check_load_total(report: Any, ref: Any, what: str) -> None:
    """Raise when a kernel's global loads touch more sectors in all than the course's kernel's."""
    if report.global_load_sectors > ref.global_load_sectors:
        raise AssertionError(
            f"{what} is correct, but {_load_counts(report, ref)}. Hint: at each tile step every thread "
            f"loads one element of each tile from global memory, once; the inner loop reads only the "
            f"shared tiles."
        )


def check_matmul_tiled(
    kernel: Any,
    tile: int,
    sizes: Sequence[tuple[int, int, int]] | None = None,
    trace_size: tuple[int, int, int] | None = None,
) -> None:
    """Lab 3: tiled C = A @ B (float32) with (tile, tile) blocks: right off the tile grid, race-free, tiled.

    "Tiled" means far fewer global sectors per output element than matmul_naive on the same launch,
    no more than the course's tiled kernel, and C stored once, all counted by the tracer.
    sizes: (m, k, n) triples run on the device (or simulator); trace_size: the small (m, k, n) traced.
    """
    sim = device.mode() == "sim"
    # k runs over 5 tiles here; the hidden tests run more, so a tile loop of a fixed count fails one of them
    triples = sizes or ([(tile + 3, 4 * tile + 5, tile - 3)] if sim else [(256, 256, 256), (300, 77, 129)])
    size = tuple(trace_size or (tile + 5, 2 * tile + 7, tile - 3))
    _check_results(
        lambda: _check_matmuls(kernel, tile, triples, seed=5),
        lambda: _trace_matmul(kernel, tile, size, seed=8),
        probe=lambda: _matmul_probe(kernel, tile, LAB3_TILES),
        zeroed=lambda: _matmul_right(kernel, tile, triples[0], zeros=True),
    )
    m, k, n = size
    report = _clean_trace(
        lambda: _trace_matmul(kernel, tile, size, seed=8), f"your result (m, k, n = {m}, {k}, {n})"
    )
    naive, ref = _reference_trace("naive", tile, size, 8), _reference_trace("tiled", tile, size, 8)
    _check_stores(report, size, tile)
    if report.shared_requests:
        _check_coalesced(report, ref, "your kernel")
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
    _check_load_total(report, ref, "your kernel")
