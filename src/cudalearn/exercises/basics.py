"""Checks of labs 0-2 (setup, CPU matmul, first kernels), built on `checks`.

Visible checks use a few sizes; the hidden tests in the solution notebooks
call the same functions with other sizes (odd sizes, one block, non-multiples
of the block size, random data). Sizes stay small under the simulator.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cudalearn import checks, device


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# Chapter 0 -------------------------------------------------------------------


def check_blocks_for(blocks_for: Callable[[int, int], int]) -> None:
    """Lab 0: blocks_for(n, threads) is the fewest blocks of `threads` threads that cover n elements."""
    cases = [
        ((n, t), math.ceil(n / t))
        for n, t in [(1, 32), (32, 32), (33, 32), (1000, 256), (1 << 20, 1024), (7, 3)]
    ]
    checks.check_function(
        blocks_for,
        cases,
        name="blocks_for",
        hint="round the division up: (n + threads - 1) // threads; n // threads leaves the tail uncovered.",
    )


def check_round_trip(double_on_gpu: Callable[[np.ndarray], Any]) -> None:
    """Lab 0: double_on_gpu(x) doubles x on the device and returns a host array; x stays untouched."""
    x = _rng(1).standard_normal(37).astype(np.float32)
    before = x.copy()
    got = checks.call_student(double_on_gpu, "double_on_gpu", x)
    if got is not None and hasattr(got, "copy_to_host"):
        raise AssertionError(
            "`double_on_gpu` returned a device array: copy the result back to the host with "
            "`.copy_to_host()` before returning it."
        )
    checks.check_close(got, 2 * before, name="double_on_gpu(x)")
    if not np.array_equal(x, before):
        raise AssertionError(
            "`double_on_gpu` changed its input x on the host: copy x to the device with "
            "cuda.to_device(x) and work on the device copy."
        )


def check_fill_index(kernel: Any, sizes: Sequence[int] | None = None, threads: int = 32) -> None:
    """Lab 0: each thread writes its global index into out[i] (int32), guarded for the last block."""
    for n in sizes or ([1, 31, 64, 45] if device.mode() == "sim" else [1, 31, 1000, 4097]):
        out = checks.empty_output(n, np.int32)
        (got,) = checks.run_kernel(kernel, math.ceil(n / threads), threads, out)
        checks.check_close(got, np.arange(n, dtype=np.int32), name="out", block=(threads,))


# Chapter 1 -------------------------------------------------------------------


def check_matmul_loops(matmul_loops: Callable[[np.ndarray, np.ndarray], Any]) -> None:
    """Lab 1: matmul_loops(A, B) equals A @ B for rectangular float64 matrices."""
    rng = _rng(2)
    for m, k, n in [(1, 1, 1), (3, 4, 5), (6, 2, 3)]:
        A, B = rng.standard_normal((m, k)), rng.standard_normal((k, n))
        got = checks.call_student(matmul_loops, "matmul_loops", A, B)
        checks.check_close(
            np.asarray(got) if got is not None else None,
            A @ B,
            name=f"matmul_loops(A{A.shape}, B{B.shape})",
            rtol=1e-9,
            atol=1e-12,
        )


def check_matmul_flops(matmul_flops: Callable[[int, int, int], int]) -> None:
    """Lab 1: FLOPs of an (m,k) @ (k,n) product: one multiply and one add per term."""
    cases = [((m, n, k), 2 * m * n * k) for m, n, k in [(1, 1, 1), (2, 3, 4), (1024, 1024, 1024), (7, 1, 5)]]
    checks.check_function(
        matmul_flops,
        cases,
        name="matmul_flops",
        hint="each of the m*n outputs needs k multiplies and k adds.",
    )


def check_intensity(intensity: Callable[..., float]) -> None:
    """Lab 1: FLOP per byte when A, B and C each cross memory exactly once."""
    cases = []
    for m, n, k, b in [(1, 1, 1, 4), (1024, 1024, 1024, 4), (4096, 64, 4096, 2), (8, 8, 8, 8)]:
        cases.append(((m, n, k, b), float(2 * m * n * k / ((m * k + k * n + m * n) * b))))
    checks.check_function(
        intensity,
        cases,
        name="intensity",
        hint="bytes = (m*k + k*n + m*n) * bytes_per_element; FLOPs = 2*m*n*k.",
    )


def check_attainable(attainable: Callable[[float, float, float], float]) -> None:
    """Lab 1: the roofline, min(peak, intensity x bandwidth)."""
    cases = [
        ((0.25, 8100.0, 320.0), 80.0),
        ((100.0, 8100.0, 320.0), 8100.0),
        ((25.3125, 8100.0, 320.0), 8100.0),
    ]
    checks.check_function(
        attainable,
        cases,
        name="attainable",
        hint="below the ridge point bandwidth limits you (intensity * bandwidth), above it the peak does.",
    )


# Chapter 2 -------------------------------------------------------------------


def check_vector_add(kernel: Any, sizes: Sequence[int] | None = None, threads: int | None = None) -> None:
    """Lab 2: out = a + b for float32 vectors, launched with ceil(n / threads) blocks."""
    threads = threads or (32 if device.mode() == "sim" else 256)
    rng = _rng(3)
    for n in sizes or ([1, 31, 64, 45] if device.mode() == "sim" else [1, 255, 1 << 20, 1000003]):
        a = rng.standard_normal(n).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        out = checks.empty_output(n, np.float32)
        got = checks.run_kernel(kernel, math.ceil(n / threads), threads, a, b, out)[2]
        checks.check_close(got, a + b, name="out", block=(threads,))


def check_grid_2d(grid_2d: Callable[[int, int, tuple[int, int]], tuple[int, int]]) -> None:
    """Lab 2: grid_2d(rows, cols, (bx, by)) -> (blocks in x covering cols, blocks in y covering rows)."""
    cases = [
        ((r, c, b), (math.ceil(c / b[0]), math.ceil(r / b[1])))
        for r, c, b in [(1, 1, (16, 16)), (32, 64, (16, 16)), (33, 17, (16, 16)), (100, 10, (32, 8))]
    ]
    checks.check_function(
        grid_2d,
        cases,
        name="grid_2d",
        hint="x runs along the columns and y along the rows; round each division up.",
    )


def check_matmul(
    kernel: Any, sizes: Sequence[tuple[int, int, int]] | None = None, block: tuple[int, int] | None = None
) -> None:
    """Lab 2: C = A @ B (float32), thread (x, y) computing C[y, x]; sizes (m, k, n) off the block grid."""
    block = block or ((8, 8) if device.mode() == "sim" else (16, 16))
    rng = _rng(4)
    for m, k, n in sizes or (
        [(16, 16, 16), (13, 7, 11)] if device.mode() == "sim" else [(256, 256, 256), (257, 100, 31)]
    ):
        A = rng.standard_normal((m, k)).astype(np.float32)
        B = rng.standard_normal((k, n)).astype(np.float32)
        C = checks.empty_output((m, n), np.float32)
        grid = (math.ceil(n / block[0]), math.ceil(m / block[1]))
        got = checks.run_kernel(kernel, grid, block, A, B, C)[2]
        checks.check_close(got, A @ B, name="C", **checks.matmul_tol(k), block=(block[1], block[0]))
