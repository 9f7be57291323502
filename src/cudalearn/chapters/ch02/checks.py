"""Checks of lab 2 (first kernels): vector add, a 2-D launch grid, the naive matmul.

Visible checks use a few sizes; the hidden tests in the solution notebook
call the same functions with other sizes (odd sizes, one block,
non-multiples of the block size, random data). Kernels are checked as
`simple_kernels` says; a launch grid must be a tuple of Python ints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cudalearn import checks
from cudalearn.checks.sentinels import is_sentinel
from cudalearn.checks.simple_kernels import _check_launch, _check_no_race, _rng, _stride_hint, _threads_1d
from cudalearn.runtime import device, launch


def _sum_hint(got: np.ndarray, a: np.ndarray, b: np.ndarray) -> str | None:
    """vector_add's usual slip: one input added to itself."""
    for x, name in ((a, "a"), (b, "b")):
        if a.size > 1 and np.allclose(got, x + x):
            return f"`out` is {name} + {name}: you added {name}[i] to itself; out[i] = a[i] + b[i]."
    return None


def check_vector_add(kernel: Any, sizes: Sequence[int] | None = None, threads: int | None = None) -> None:
    """Lab 2: out = a + b for float32 vectors, launched with ceil(n / threads) blocks, two block sizes."""
    sim = device.mode() == "sim"
    rng = _rng(3)

    def problem(n):
        return rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)

    pa, pb = problem(45)
    probe = (launch.blocks(45, 16), 16, pa, pb, checks.empty_output(45, np.float32))
    for t in _threads_1d(threads, (32, 16) if sim else (256, 128)):
        for n in sizes or ([31, 64, 45, 1] if sim else [255, 1 << 20, 1000003, 1]):
            a, b = problem(n)
            out = checks.empty_output(n, np.float32)
            grid = launch.blocks(n, t)
            _check_launch(
                kernel,
                grid,
                t,
                [a, b, out],
                2,
                a + b,
                names=["a", "b", "out"],
                probe=probe,
                hint=lambda got, a=a, b=b, g=grid, t=t: (
                    _sum_hint(got, a, b) or _stride_hint(got, a + b, g, t)
                ),
            )
    _check_no_race(kernel, probe, "out")


def check_grid_2d(grid_2d: Callable[[int, int, tuple[int, int]], tuple[int, int]]) -> None:
    """Lab 2: grid_2d(rows, cols, (bx, by)) -> (x blocks covering cols, y blocks covering rows), two ints."""
    shapes = [(1, 1, (16, 16)), (32, 64, (16, 16)), (33, 17, (16, 16)), (100, 10, (32, 8)), (5, 70, (4, 16))]
    checks.check_function(
        grid_2d,
        [((r, c, b), launch.grid_2d(r, c, b)[0]) for r, c, b in shapes],
        name="grid_2d",
        hint="x runs along the columns and y along the rows; round each division up.",
        mistakes=[
            (
                lambda r, c, b: (-(-r // b[1]), -(-c // b[0])),
                "x and y are swapped: the first entry (x) covers the columns, the second (y) the rows.",
            ),
            (
                lambda r, c, b: (-(-r // b[0]), -(-c // b[1])),
                "x and y are swapped: the first entry (x) is ceil(cols / bx), the second ceil(rows / by).",
            ),
            (
                lambda r, c, b: (c // b[0], r // b[1]),
                "// rounds down: the last partial block gets no threads.",
            ),
            (
                lambda r, c, b: (-(-c // b[0]), -(-r // b[0])),
                "the rows are divided by by (block[1]), not bx.",
            ),
            (
                lambda r, c, b: (-(-c // b[1]), -(-r // b[0])),
                "block is (bx, by), x first: bx = block[0] divides the columns, by = block[1] the rows.",
            ),
        ],
        exact_types=True,
    )


def _typed_block_hint(written: np.ndarray, grid: tuple, block: tuple) -> str | None:
    """A 2-D kernel's block size typed into its index (blockIdx.x * 8), from the elements written (lab 2).

    written: which elements of the (rows, cols) output the launch of `grid` blocks of `block` = (bx, by)
    threads wrote. Blocks `step` apart leave gaps, or (a GPU's larger blocks) overlap and leave more than a
    block of rows or columns unwritten (a guard's mistake leaves at most one partial block).
    """
    m, n = written.shape
    rows, cols = np.indices((m, n))
    for step in (4, 8, 16, 32):
        reach = ((grid[1] - 1) * step + block[1], (grid[0] - 1) * step + block[0])
        ambiguous = step < max(block) and (m - reach[0] <= block[1] and n - reach[1] <= block[0])
        if (step, step) != tuple(block) and not written.all() and not ambiguous:
            covered_r = np.isin(rows, (np.arange(grid[1])[:, None] * step + np.arange(block[1])).ravel())
            covered_c = np.isin(cols, (np.arange(grid[0])[:, None] * step + np.arange(block[0])).ravel())
            if np.array_equal(written, covered_r & covered_c):
                return (
                    f"the elements written are those of blocks {step} apart, but this launch has blocks of "
                    f"{tuple(block)}: did you type the block size into the index (blockIdx.x * {step})? Use "
                    f"cuda.blockDim.x and .y, or cuda.grid(2), so the kernel works with any block shape."
                )
    return None


def _matmul_hint(got: np.ndarray, A: np.ndarray, B: np.ndarray, grid: tuple, block: tuple) -> str | None:
    """matmul_naive's usual mistakes: x taken as the row (C[x, y]), a block size typed in, acc reset per k."""
    m, n = got.shape
    written = ~is_sentinel(got)  # a NaN the kernel computed was written
    rows, cols = np.indices((m, n))
    if not written.all() and np.array_equal(
        written, (rows < grid[0] * block[0]) & (cols < grid[1] * block[1])
    ):
        return (
            f"elements with row >= {grid[0] * block[0]} or column >= {grid[1] * block[1]} were never "
            f"written: that is what a thread (x, y) computing C[x, y] covers. Thread (x, y) must compute "
            f"C[y, x]: `col, row = cuda.grid(2)` (x runs along the columns of C; the grid is sized so)."
        )
    typed = _typed_block_hint(written, grid, block)
    if typed:
        return typed
    if A.shape[1] > 1 and np.allclose(got, A[:, -1:] * B[-1:, :], rtol=1e-4, atol=1e-5):
        return (
            "C holds only the last product of each sum: set acc = float32(0.0) once, before the loop over k."
        )
    k = A.shape[1]
    for part, which in (
        (slice(1, k), "the first product of its sum (k = 0)"),
        (slice(0, k - 1), f"the last product of its sum (k = {k - 1})"),
    ):
        if k > 1 and np.allclose(got, A[:, part] @ B[part, :], rtol=1e-4, atol=1e-4):
            return (
                f"each element of C misses {which}: the loop over k must run over all {k} values, "
                f"`for k in range(A.shape[1])`."
            )
    moved = _moved_lines(got, A @ B)
    if moved:
        return moved
    if block[0] != block[1] and written.any() and not written.all():
        by_x = (np.arange(grid[1])[:, None] * block[0] + np.arange(block[1])).ravel()  # rows, if y used bx
        if np.array_equal(written.any(axis=1), np.isin(np.arange(m), by_x)):
            return (
                f"the rows written are those of blocks {block[0]} rows apart, but this launch's blocks are "
                f"{block[1]} threads tall: the row needs cuda.blockDim.y (`row = cuda.blockIdx.y * "
                f"cuda.blockDim.y + cuda.threadIdx.y`), or `col, row = cuda.grid(2)`."
            )
    return None


def _moved_lines(got: np.ndarray, expected: np.ndarray) -> str | None:
    """A hint when every wrong C[i, j] is a right sum of another column (or row) of C (lab 2).

    Then the sums are right and the column of B (or row of A) the loop reads is not: B[k, row] for
    B[k, col], a column off by one, a fixed column.
    """
    wrong = ~np.isclose(got, expected, rtol=1e-4, atol=1e-4)
    if not wrong.any() or np.isnan(got[wrong]).any():
        return None
    rows, cols = np.nonzero(wrong)
    for axis, line, index in ((1, "column", "B[k, col]"), (0, "row", "A[row, k]")):
        if expected.shape[axis] < 2:
            continue
        # for each wrong element, the lines of its row (column) of A @ B that hold its value
        lines = expected[rows, :] if axis == 1 else expected[:, cols].T
        match = np.isclose(lines, got[wrong][:, None], rtol=1e-4, atol=1e-4)
        if not match.any(axis=1).all():
            continue
        first = int(np.argmax(match[0]))
        i, j = int(rows[0]), int(cols[0])
        mine, other = (j, "row") if axis == 1 else (i, "column")
        swapped = all(match[t, rows[t] if axis == 1 else cols[t]] for t in range(len(rows)))
        why = (
            f" it is the one numbered like this thread's {other}: your loop reads "
            f"{'B[k, row]' if axis == 1 else 'A[col, k]'}, where {index} belongs"
            if swapped
            else f" the {line} your loop reads is wrong"
        )
        return (
            f"C[{i}, {j}] is the sum of {line} {first} of A @ B, not of {line} {mine}, and every wrong "
            f"element is a right sum of another {line}:{why}. "
            f"Thread (x, y) reads {index}, with `col, row = cuda.grid(2)`."
        )
    return None


def _matmul_plan(sizes, block) -> list[tuple[tuple[int, int, int], tuple[int, int]]]:
    """(m, k, n) and block of each launch of check_matmul; by default two block shapes, m < n and m > n."""
    if sizes is not None or block is not None:
        block = block or ((8, 8) if device.mode() == "sim" else (16, 16))
        sizes = sizes or ([(16, 16, 16), (13, 7, 11)] if device.mode() == "sim" else [(256, 256, 256)])
        return [(s, block) for s in sizes]
    if device.mode() == "sim":
        return [((16, 16, 16), (8, 8)), ((13, 7, 11), (8, 8)), ((5, 3, 20), (8, 8)), ((20, 3, 6), (4, 8))]
    return [
        ((256, 256, 256), (16, 16)),
        ((257, 100, 31), (16, 16)),
        ((40, 9, 300), (16, 16)),
        ((300, 9, 40), (8, 32)),
    ]


def check_matmul(
    kernel: Any, sizes: Sequence[tuple[int, int, int]] | None = None, block: tuple[int, int] | None = None
) -> None:
    """Lab 2: C = A @ B (float32), thread (x, y) computing C[y, x]; sizes (m, k, n) off the block grid.

    By default it launches with two block shapes and with m < n and m > n, so that a grid sized for
    C[y, x] leaves elements uncovered when the kernel computes C[x, y]. Then it traces a small launch.
    """
    rng = _rng(4)

    def problem(m, k, n):
        return rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)

    pA, pB = problem(3, 2, 5)
    probe = ((2, 2), (4, 2), pA, pB, checks.empty_output((3, 5), np.float32))
    for (m, k, n), blk in _matmul_plan(sizes, block):
        A, B = problem(m, k, n)
        C = checks.empty_output((m, n), np.float32)
        grid, _ = launch.grid_2d(m, n, blk)
        _check_launch(
            kernel,
            grid,
            blk,
            [A, B, C],
            2,
            A @ B,
            names=["A", "B", "C"],
            probe=probe,
            tol=checks.matmul_tol(k),
            hint=lambda got, A=A, B=B, grid=grid, blk=blk: _matmul_hint(got, A, B, grid, blk),
        )
    _check_no_race(kernel, probe, "C")
