"""Checks of lab 6 (register blocking, tensor-core precisions), built on `checks` and the tracer.

The kernel check runs the student's register-blocked kernel through `checks.run_kernel` on sizes
off the tile grid (an unfinished kernel is reported as "not done yet" first), then traces one block
of it on the CPU to check that it really keeps its operands in registers: per step along k, each
thread may read shared memory TM + TN times, not once per multiply-add. On a GPU it then times the
kernel against cuBLAS FP32 and prints the fraction it reaches.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cudalearn import checks, device

SLACK = 1.25  # the tracer may count a few more shared reads than TM + TN per k (a kernel's own choices)


def check_reads_per_fma(reads_per_fma: Callable[[int, int], float]) -> None:
    """Lab 6: shared-memory reads per multiply-add of a thread that computes a (TM, TN) block of C."""
    cases = [((tm, tn), (tm + tn) / (tm * tn)) for tm, tn in [(1, 1), (8, 1), (4, 4), (8, 8)]]
    checks.check_function(
        reads_per_fma,
        cases,
        name="reads_per_fma",
        hint="per step along k the thread reads TM values of A and TN values of B into registers, "
        "then does TM * TN multiply-adds with them.",
    )


def _tiles(BM: int, BN: int, TM: int, TN: int) -> int:
    """Threads per block of a (BM, BN) tile with (TM, TN) outputs a thread; raise if they do not divide."""
    if BM % TM or BN % TN:
        raise AssertionError(f"TM={TM} must divide BM={BM} and TN={TN} must divide BN={BN}")
    return (BM // TM) * (BN // TN)


def _hint(shape: tuple[int, int], tiles: tuple[int, int]) -> tuple[int, int]:
    """check_close's `block` hint: the tile along each axis the array spans more than one tile of."""
    return tuple(t if s > t else 0 for s, t in zip(shape, tiles, strict=True))


def _run(kernel: Any, BM: int, BN: int, TM: int, TN: int, m: int, k: int, n: int, seed: int) -> None:
    """Raise unless kernel computes A @ B for one (m, k, n) with 1-D blocks of (BM//TM)*(BN//TN) threads."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((m, k)).astype(np.float32)
    B = rng.standard_normal((k, n)).astype(np.float32)
    grid = (math.ceil(n / BN), math.ceil(m / BM))
    got = checks.run_kernel(kernel, grid, _tiles(BM, BN, TM, TN), A, B, checks.empty_output((m, n)))[2]
    checks.check_close(
        got,
        A @ B,
        name=f"C (m, k, n = {m}, {k}, {n})",
        **checks.matmul_tol(k),
        block=_hint((m, n), (BM, BN)),
    )


def _check_registers(kernel: Any, BM: int, BN: int, BK: int, TM: int, TN: int) -> None:
    """Trace one full block on the CPU: raise when threads read shared memory more than TM + TN times a k."""
    from cudalearn.trace import TraceError, TraceOutOfBounds, trace

    threads = _tiles(BM, BN, TM, TN)
    k = 2 * BK
    rng = np.random.default_rng(11)
    A = rng.standard_normal((BM, k)).astype(np.float32)
    B = rng.standard_normal((k, BN)).astype(np.float32)
    try:
        report = trace(kernel, (1, 1), threads, A, B, np.zeros((BM, BN), np.float32))
    except TraceOutOfBounds as e:
        raise AssertionError(f"the tracer found an access outside an array: {e}") from None
    except TraceError as e:
        raise AssertionError(f"the tracer could not run your kernel: {e}") from None
    if report.race_count:
        raise AssertionError(
            f"your kernel gives the right result, but the tracer found {report.race_count} race(s): "
            f"{report.races[0]}. Hint: a cuda.syncthreads() after the tiles are loaded and another one "
            f"before the next tiles overwrite them."
        )
    warps = math.ceil(threads / 32)
    reads = report.shared_load_requests / (warps * k)  # shared reads per thread and per step along k
    if reads > SLACK * (TM + TN):
        raise AssertionError(
            f"your kernel is correct, but each thread reads shared memory {reads:.0f} times per step "
            f"along k, where a register-blocked kernel reads TM + TN = {TM + TN} times: TM values of A "
            f"into `a`, TN values of B into `b`, then TM * TN = {TM * TN} multiply-adds "
            f"`acc[i, j] += a[i] * b[j]` from registers only. Hint: load a and b before the i, j loops."
        )


def _fraction_of_cublas(kernel: Any, BM: int, BN: int, TM: int, TN: int, n: int) -> None:
    """On a GPU: time the kernel and cuBLAS FP32 on (n, n) matrices and print the fraction it reaches."""
    import torch
    from numba import cuda

    from cudalearn import timing, torch_device

    dev = torch_device()
    rng = np.random.default_rng(3)
    A = rng.standard_normal((n, n), dtype=np.float32)
    B = rng.standard_normal((n, n), dtype=np.float32)
    dA, dB, dC = cuda.to_device(A), cuda.to_device(B), cuda.device_array((n, n), np.float32)
    tA, tB = torch.from_numpy(A).to(dev), torch.from_numpy(B).to(dev)
    tC = torch.empty((n, n), device=dev)
    grid = (math.ceil(n / BN), math.ceil(n / BM))
    threads = _tiles(BM, BN, TM, TN)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")  # cuBLAS in true FP32 (no TF32), as your kernel
    try:
        yours = timing.gpu_time(lambda: kernel[grid, threads](dA, dB, dC), warmup=1, repeat=5)
        cublas = timing.gpu_time(lambda: torch.matmul(tA, tB, out=tC), warmup=1, repeat=5)
    finally:
        torch.set_float32_matmul_precision(before)
    flops = 2 * n**3
    rate, ref = timing.gflops(flops, yours.median_ms), timing.gflops(flops, cublas.median_ms)
    print(
        f"on this GPU, n = {n}: your kernel {rate / 1e3:.3g} TFLOP/s, cuBLAS FP32 {ref / 1e3:.3g} TFLOP/s: "
        f"{rate / ref:.0%} of cuBLAS"
    )


def check_regblock_matmul(
    kernel: Any,
    BM: int,
    BN: int,
    BK: int,
    TM: int,
    TN: int,
    sizes: Sequence[tuple[int, int, int]] | None = None,
    bench_n: int | None = None,
) -> None:
    """Lab 6: register-blocked C = A @ B (float32), 1-D blocks of (BM // TM) * (BN // TN) threads.

    Checks the result on (m, k, n) `sizes` off the tile grid, then traces one block: at most about
    TM + TN shared reads per thread and step along k. On a GPU, also prints the kernel's speed as a
    fraction of cuBLAS FP32 at n = `bench_n` (default: the size `ch6.lab_bench_n`).
    """
    sim = device.mode() == "sim"
    triples = sizes or (
        [(BM, BK, BN), (BM + 5, 3 * BK + 1, BN - 3)] if sim else [(256, 256, 256), (300, 77, 129)]
    )
    for i, (m, k, n) in enumerate(triples):
        _run(kernel, BM, BN, TM, TN, m, k, n, seed=20 + i)
    _check_registers(kernel, BM, BN, BK, TM, TN)
    if device.mode() == "gpu":
        from cudalearn import size

        _fraction_of_cublas(kernel, BM, BN, TM, TN, bench_n or size("ch6.lab_bench_n"))


def check_autocast_dtype(
    autocast_dtype: Callable[[tuple[int, int]], Any], ccs: Sequence | None = None
) -> None:
    """Lab 6: the 16-bit type for torch.autocast on compute capability cc, or None without tensor cores.

    bfloat16 from sm_80 (Ampere) on, float16 on sm_70 and sm_75 (Volta, Turing: the T4), None below.
    """
    import torch

    def expected(cc):
        if tuple(cc) >= (8, 0):
            return torch.bfloat16
        return torch.float16 if tuple(cc) >= (7, 0) else None

    for cc in ccs or [(9, 0), (7, 5), (6, 1)]:
        got = checks.call_student(autocast_dtype, "autocast_dtype", cc)
        want = expected(cc)
        if got != want:
            raise AssertionError(
                f"autocast_dtype({cc}) is {got!r}, expected {want!r}. Hint: bfloat16 tensor cores start "
                f"with sm_80 (A100), float16 ones with sm_70 (V100); the T4 is sm_75; below sm_70 there "
                f"are no tensor cores, and autocast would only lose precision: return None."
            )
