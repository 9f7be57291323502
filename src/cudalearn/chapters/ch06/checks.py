"""Checks of lab 6 (register blocking, tensor-core precisions), built on `checks` and the tracer.

The kernel check runs the student's register-blocked kernel through `checks.run_kernel` on sizes
off the tile grid (an unfinished kernel is reported as "not done yet" first, one that adds into C
as such, a wrong result with the race or barrier error the tracer finds), then traces one block of
it on the CPU to check that it really keeps its operands in registers: per step along k, each thread
may read shared memory TM + TN times, not once per multiply-add, and it stores each element of C
once. On a GPU it then times the kernel against cuBLAS FP32 and prints the fraction it reaches. The
capability check tries every compute capability from sm_35 to sm_120.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cudalearn import checks
from cudalearn.runtime import device, launch

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


def _problem(m: int, k: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded float32 A (m, k) and B (k, n)."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)


def _run(kernel: Any, BM: int, BN: int, BK: int, TM: int, TN: int, m: int, k: int, n: int, seed: int) -> None:
    """Raise unless kernel computes A @ B for one (m, k, n) with 1-D blocks of (BM//TM)*(BN//TN) threads."""
    A, B = _problem(m, k, n, seed)
    grid = (launch.blocks(n, BN), launch.blocks(m, BM))
    threads = _tiles(BM, BN, TM, TN)
    got = checks.run_kernel(kernel, grid, threads, A, B, checks.empty_output((m, n)))[2]
    name = f"C (m, k, n = {m}, {k}, {n})"
    if np.isnan(got).all():  # nothing written, or sums that started from C's NaN sentinel?
        zeroed = checks.run_kernel(kernel, grid, threads, A, B, np.zeros((m, n), np.float32))[2]
        if np.allclose(zeroed, A @ B, **checks.matmul_tol(k)):
            raise AssertionError(
                f"`{name}` is right only when C starts at zero: your kernel adds into C (`C[r, c] += ...`), "
                f"which holds whatever was in memory before the launch (here NaN). Hint: accumulate in "
                f"`acc` (registers) and store `C[r, c] = acc[i, j]` once, after the loop over tiles."
            )
    try:
        checks.check_close(
            got, A @ B, name=name, **checks.matmul_tol(k), block=checks.tile_hint((m, n), (BM, BN))
        )
    except AssertionError as e:
        found = str(e).split(" Hint: ")[0]  # a precise cause below replaces the generic hint
        hint = _result_hint(got, A, B, BM, BN, BK)
        if hint:
            raise AssertionError(f"{found} Hint: {hint}") from None
        why = _sanitize(kernel, BM, BN, BK, TM, TN)
        if why:
            raise AssertionError(f"{found}\nWhy, from one block of your kernel: {why}") from None
        raise


def _result_hint(got: np.ndarray, A: np.ndarray, B: np.ndarray, BM: int, BN: int, BK: int) -> str:
    """What a wrong C holds, when it is one of the known mistakes: the last product along k only, the
    last tile's products only, or the right values of each (BM, BN) tile in the wrong places; else ''."""
    k = A.shape[1]
    tol = checks.matmul_tol(k)
    last = np.outer(A[:, -1], B[-1, :])  # what C holds when each product overwrites acc
    if k % BK == 0 and np.allclose(got, last, **tol):
        return (
            "C holds only the last product a[i] * b[j] along k: add each product into acc "
            "(`acc[i, j] += ...`) instead of assigning it."
        )
    k0 = (k - 1) // BK * BK  # where the last tile along k starts
    if k0 and np.allclose(got, A[:, k0:] @ B[k0:, :], **tol):
        return (
            f"C holds only the products of the last tile along k (k = {k0} to {k - 1}): acc is set to zero "
            f"at every tile. Zero acc once, before the loop over tiles (`for k0 in range(0, K, BK)`)."
        )
    want = A @ B
    tiles = [(r, c) for r in range(0, got.shape[0], BM) for c in range(0, got.shape[1], BN)]
    with np.errstate(invalid="ignore"):
        same_values = all(
            np.allclose(
                np.sort(got[r : r + BM, c : c + BN], None), np.sort(want[r : r + BM, c : c + BN], None), **tol
            )
            for r, c in tiles
        )
    if same_values:
        return (
            "each (BM, BN) tile of C holds the right values, but in the wrong places: the store must put "
            "acc[i, j] at the row and column whose a[i] and b[j] it multiplied, C[row0 + ty * TM + i, "
            "col0 + tx * TN + j] when a[i] = sA[ty * TM + i, k] and b[j] = sB[k, tx * TN + j]."
        )
    return ""


def _findings(report: Any) -> str:
    """The tracer's first race, barrier error or uninitialised shared read, with its fix, or ''."""
    if report.race_count:
        return report.race_message(
            "a cuda.syncthreads() after the tiles are loaded and another one before the next tiles "
            "overwrite them."
        )
    if getattr(report, "barrier_error_count", 0):
        hint = "no `return`, and no barrier inside a condition, before the last barrier."
        return f"the tracer found {report.barrier_errors[0]}. Hint: {hint}"
    if getattr(report, "uninitialized_reads", 0):
        hint = "read sA and sB only after the barrier that follows their loading."
        return f"the tracer found {report.uninitialized[0]}. Hint: {hint}"
    return ""


def _trace_block(kernel: Any, BM: int, BN: int, BK: int, TM: int, TN: int) -> Any:
    """The tracer's report of one full (BM, BN) block of the kernel, two tiles along k."""
    A, B = _problem(BM, 2 * BK, BN, 11)
    threads = _tiles(BM, BN, TM, TN)
    return checks.trace_kernel(kernel, (1, 1), threads, A, B, np.zeros((BM, BN), np.float32))


def _sanitize(kernel: Any, BM: int, BN: int, BK: int, TM: int, TN: int) -> str:
    """Why a wrong result is wrong, when the tracer can say it on one block (race, barrier...), or ''."""
    try:
        return _findings(_trace_block(kernel, BM, BN, BK, TM, TN))
    except AssertionError as e:  # the tracer's own message (an access outside an array...)
        return str(e)


def _check_registers(kernel: Any, BM: int, BN: int, BK: int, TM: int, TN: int) -> None:
    """Trace one full block on the CPU: raise on a race, over TM + TN shared reads a k, or extra stores."""
    threads, k = _tiles(BM, BN, TM, TN), 2 * BK  # two tiles: a store inside the tile loop happens twice
    report = _trace_block(kernel, BM, BN, BK, TM, TN)
    found = _findings(report)
    if found:
        raise AssertionError(f"your kernel gives the right result, but {found}")
    warps = launch.blocks(threads, 32)
    reads = report.shared_load_requests / (warps * k)  # shared reads per thread and per step along k
    if reads < (TM + TN) / SLACK:
        raise AssertionError(
            f"your kernel gives the right result, but each thread reads shared memory only {reads:.1f} "
            f"times per step along k, where the register-blocked kernel reads TM + TN = {TM + TN}: its "
            f"a and b come from somewhere else, global memory (A and B) most likely, which the block "
            f"already loaded into sA and sB so that each element is fetched from global memory once per "
            f"block. Hint: a[i] = sA[ty * TM + i, k] and b[j] = sB[k, tx * TN + j]."
        )
    if reads > SLACK * (TM + TN):
        raise AssertionError(
            f"your kernel is correct, but each thread reads shared memory {reads:.0f} times per step "
            f"along k, where a register-blocked kernel reads TM + TN = {TM + TN} times: TM values of A "
            f"into `a`, TN values of B into `b`, then TM * TN = {TM * TN} multiply-adds "
            f"`acc[i, j] += a[i] * b[j]` from registers only. Hint: load a and b before the i, j loops."
        )
    stores = report.global_store_requests / (warps * TM * TN)  # stores per output element of C
    if stores > 1:
        raise AssertionError(
            f"your kernel is correct, but it stores each element of C {stores:g} times for {k // BK} tiles "
            f"along k (traced on one ({BM}, {BN}) block): a store inside the loop over tiles writes the "
            f"partial sums to global memory. Hint: write `acc` into C once, after the loop over tiles."
        )
    _check_partial_block(kernel, BM, BN, BK, TM, TN)


def _check_partial_block(kernel: Any, BM: int, BN: int, BK: int, TM: int, TN: int) -> None:
    """Trace a block that sticks out of C (its threads outside C skip the store): raise on a barrier
    some of them do not reach, or a race, that a full block cannot show."""
    m, n = max(1, BM - 3), max(1, BN - 3)
    A, B = _problem(m, 2 * BK, n, 12)
    try:
        report = checks.trace_kernel(
            kernel, (1, 1), _tiles(BM, BN, TM, TN), A, B, np.zeros((m, n), np.float32)
        )
        found = _findings(report)
    except AssertionError as e:
        found = str(e)
    if found:
        raise AssertionError(
            f"your kernel gives the right result on full blocks, but traced on a block that sticks out of C "
            f"(m, n = {m}, {n}, with BM, BN = {BM}, {BN}), {found}"
        )


def _fraction_of_cublas(kernel: Any, BM: int, BN: int, TM: int, TN: int, n: int) -> None:
    """On a GPU: time the kernel and cuBLAS FP32 on (n, n) matrices and print the fraction it reaches."""
    import torch

    from cudalearn.measure import timing
    from cudalearn.runtime import numba_backend, precision
    from cudalearn.runtime.device import torch_device

    cuda = numba_backend.cuda_for(kernel)  # the kernel's package's arrays

    dev = torch_device()
    rng = np.random.default_rng(3)
    A = rng.standard_normal((n, n), dtype=np.float32)
    B = rng.standard_normal((n, n), dtype=np.float32)
    dA, dB, dC = cuda.to_device(A), cuda.to_device(B), cuda.device_array((n, n), np.float32)
    tA, tB = torch.from_numpy(A).to(dev), torch.from_numpy(B).to(dev)
    tC = torch.empty((n, n), device=dev)
    grid = (launch.blocks(n, BN), launch.blocks(n, BM))
    threads = _tiles(BM, BN, TM, TN)
    with precision.fp32():  # cuBLAS in true FP32 (no TF32), as your kernel
        yours = timing.gpu_time(lambda: kernel[grid, threads](dA, dB, dC), warmup=1, repeat=5)
        cublas = timing.gpu_time(lambda: torch.matmul(tA, tB, out=tC), warmup=1, repeat=5)
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

    Checks the result on (m, k, n) `sizes` off the tile grid (a wrong one explained by the tracer when
    it finds a race or a barrier error), then traces one block: at most about TM + TN shared reads per
    thread and step along k, and each element of C stored once. On a GPU, also prints the kernel's speed as a
    fraction of cuBLAS FP32 at n = `bench_n` (default: the size `ch6.lab_bench_n`).
    """
    sim = device.mode() == "sim"
    triples = sizes or (
        [(BM, BK, BN), (BM + 5, 3 * BK + 1, BN - 3)] if sim else [(256, 256, 256), (300, 77, 129)]
    )
    for i, (m, k, n) in enumerate(triples):
        _run(kernel, BM, BN, BK, TM, TN, m, k, n, seed=20 + i)
    _check_registers(kernel, BM, BN, BK, TM, TN)
    if device.mode() == "gpu":
        from cudalearn.runtime.sizes import size

        _fraction_of_cublas(kernel, BM, BN, TM, TN, bench_n or size("ch6.lab_bench_n"))


#: compute capabilities check_autocast_dtype tries: Kepler to Blackwell, every tensor-core boundary
CAPABILITIES = (
    (3, 5),
    (5, 2),
    (6, 0),
    (6, 1),
    (7, 0),
    (7, 2),
    (7, 5),
    (8, 0),
    (8, 6),
    (8, 7),
    (8, 9),
    (9, 0),
    (10, 0),
    (12, 0),
)


def autocast_expected(cc: tuple[int, int]) -> Any:
    """Lab 6's rule: torch.bfloat16 from sm_80 on, torch.float16 on sm_70 to sm_7x, None below sm_70."""
    import torch

    if tuple(cc) >= (8, 0):
        return torch.bfloat16
    return torch.float16 if tuple(cc) >= (7, 0) else None


def check_autocast_dtype(
    autocast_dtype: Callable[[tuple[int, int]], Any], ccs: Sequence | None = None
) -> None:
    """Lab 6: the 16-bit type for torch.autocast on compute capability cc, or None without tensor cores.

    bfloat16 from sm_80 (Ampere) on, float16 on sm_70 to sm_75 (Volta, Turing: the T4), None below;
    tried on every capability of `CAPABILITIES` (or `ccs`), all mismatches reported at once.
    """
    wrong = []
    for cc in ccs or CAPABILITIES:
        got = checks.call_student(autocast_dtype, "autocast_dtype", tuple(cc))
        want = autocast_expected(cc)
        if got != want or type(got) is not type(want):
            wrong.append(f"autocast_dtype({tuple(cc)}) is {got!r}, expected {want!r}")
    if wrong:
        raise AssertionError(
            f"autocast_dtype is wrong for {len(wrong)} of {len(ccs or CAPABILITIES)} compute capabilities: "
            + "; ".join(wrong)
            + ". Hint: compare the tuple cc with (8, 0) and (7, 0): bfloat16 tensor cores start with sm_80 "
            "(A100; every later GPU has them, sm_86, sm_89, sm_90, sm_100, sm_120...), float16 ones with "
            "sm_70 (V100; the T4 is sm_75); below sm_70 there are no tensor cores and autocast would only "
            "lose precision: return None."
        )
