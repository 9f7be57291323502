"""Checks of lab 6 (register blocking, tensor-core precisions), built on `checks` and the tracer.

The kernel check runs the student's register-blocked kernel through `checks.run_kernel` on sizes
off the tile grid (an unfinished kernel is reported as "not done yet" first, one that adds into C
as such, a wrong result with the race or barrier error the tracer finds), then traces one block of
it on the CPU to check that it really keeps its operands in registers: per step along k, each thread
may read shared memory TM + TN times, not once per multiply-add, and it stores each element of C
once, and traces it once more with other values in its tile names, so that a tile size typed in as a
number fails. On a GPU it then times the kernel against cuBLAS FP32 and prints the fraction it reaches. The
capability check tries every compute capability from sm_35 to sm_120.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cudalearn import checks
from cudalearn.chapters.ch06 import tile_names
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
    thread and step along k, and each element of C stored once; then traces it with other tile sizes in
    BM, BN, BK, TM and TN (`tile_names`: a size typed in as a number fails there). On a GPU, also prints the
    kernel's speed as a fraction of cuBLAS FP32 at n = `bench_n` (default: the size `ch6.lab_bench_n`).
    """
    sim = device.mode() == "sim"
    triples = sizes or (
        [(BM, BK, BN), (BM + 5, 3 * BK + 1, BN - 3)] if sim else [(256, 256, 256), (300, 77, 129)]
    )
    for i, (m, k, n) in enumerate(triples):
        _run(kernel, BM, BN, BK, TM, TN, m, k, n, seed=20 + i)
    _check_registers(kernel, BM, BN, BK, TM, TN)
    tile_names.check_follows_tile_names(kernel, BM, BN, BK, TM, TN)
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


# Exercises 4 and 5 (deep dive 06d): the A fragment of mma.m16n8k16, and one warp's tile --------------

FRAGMENT_RULE = (
    "groupID = lane >> 2 and threadID_in_group = lane % 4; a_i sits on row groupID for a0, a1, a4, a5 "
    "and groupID + 8 for a2, a3, a6, a7, column 2 * threadID_in_group + (i & 1), plus 8 for i >= 4 "
    "(PTX ISA, 'Matrix Fragments for mma.m16n8k16 with floating point type')"
)


def check_a_fragment(a_fragment: Callable[[int, int], tuple[int, int]]) -> None:
    """Lab 6: (row, col) of element a_i (i = 0..7) that lane `lane` holds of mma.m16n8k16's A (16 x 16)."""
    from cudalearn.chapters.ch06.kernels import mma

    table = mma.fragment("m16n8k16", "A")
    wrong = []
    for lane in range(32):
        for i in range(8):
            got = checks.call_student(a_fragment, "a_fragment", lane, i)
            want = tuple(int(v) for v in table[lane, i])
            if not isinstance(got, tuple) or tuple(got) != want:
                wrong.append(f"a_fragment({lane}, {i}) is {got!r}, expected {want}")
    if wrong:
        raise AssertionError(
            f"a_fragment is wrong for {len(wrong)} of 256 (lane, i): "
            + "; ".join(wrong[:3])
            + f". Hint: {FRAGMENT_RULE}."
        )


def _warp_tile_run(kernel: Any, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """C of a one-warp-a-tile kernel on float16 A (m, k), B (n, k): grid (n / 8, m / 16), 32 threads."""
    (m, _), n = A.shape, B.shape[0]
    words = (np.ascontiguousarray(A).view(np.uint32), np.ascontiguousarray(B).view(np.uint32))
    return checks.run_kernel(kernel, (n // 8, m // 16), 32, *words, checks.empty_output((m, n)))[2]


def _pair(words: np.ndarray, value: Any) -> str:
    """Where the word `value` sits in `words` (a uint32 view of float16 X): 'X[r, 2w..2w + 1]', or '?'."""
    found = np.argwhere(words == np.uint32(int(value) & 0xFFFFFFFF))
    return f"[{found[0][0]}, {2 * found[0][1]}..{2 * found[0][1] + 1}]" if len(found) else " (no word of it)"


def _warp_tile_cause(kernel: Any, A: np.ndarray, B: np.ndarray) -> str:
    """The first register of the first tile that a lane passed to mma_m16n8k8 wrong (what it holds and what
    it should), recorded by the tracer; or, with every fragment right, the store."""
    from cudalearn.trace import collective

    a, b = A.view(np.uint32), B.view(np.uint32)
    with collective.recording("mma_m16n8k8") as calls:
        _warp_tile_run(kernel, A, B)
    for step, lanes in enumerate(calls[:2]):  # the first tile, k 0-7 then k 8-15
        for lane, args in enumerate(lanes):
            g, t, w = lane >> 2, lane & 3, 4 * step
            names = ("a0", "a1", "b0") if step == 0 else ("a2", "a3", "b1")  # the k16 step's registers
            where = (("A", a, g, t + w), ("A", a, g + 8, t + w), ("B", b, g, t + w))
            want = dict(zip(names, where, strict=True))
            for (reg, (name, X, r, c)), got in zip(want.items(), args[:3], strict=True):
                if int(got) != int(X[r, c]):
                    k = f"k {8 * step}-{8 * step + 7}"
                    return (
                        f"your {name} fragment is wrong: in the first tile's mma_m16n8k8 for {k}, lane {lane}"
                        f" passes as {reg} the float16 pair {name}{_pair(X, got)}, where the fragment wants"
                        f" {name}[{r}, {2 * c}..{2 * c + 1}]. " + (FRAGMENT_RULE if name == "A" else B_RULE)
                    )
    return (
        "every lane passes the right registers to mma_m16n8k8, so the store of d0..d3 is wrong: d0, d1 "
        "sit on row groupID, d2, d3 on row groupID + 8, at columns 2 * threadID_in_group and + 1"
    )


STORE_HINT = (
    "check a0..a3 (rows groupID and groupID + 8, k words t and t + 4), b0, b1 (row c0 + groupID of B, k"
    " words t and t + 4) and the store (d0, d1 on row groupID, d2, d3 on row groupID + 8, columns 2t, 2t + 1)"
)
B_RULE = (
    "b0 holds k = 2 * threadID_in_group and + 1 of column groupID of B.T, which is row c0 + groupID of B,"
    " and b1 the same 8 values of k further: B[c0 + g, kw + t] and B[c0 + g, kw + t + 4]"
)


def check_mma_warp_tile(kernel: Any, sizes: Sequence[tuple[int, int, int]] | None = None) -> None:
    """Lab 6: C = A @ B.T, one warp a 16 x 8 tile with mma.sync m16n8k16; A (m, k) and B (n, k) float16,
    passed as uint32 words, C (m, n) float32; grid (n / 8, m / 16), 32 threads a block. Run on the CPU
    tracer under the simulator (every lane's fragment as the PTX ISA defines it)."""
    for m, k, n in sizes or [(16, 16, 8), (32, 48, 24)]:
        rng = np.random.default_rng(m + k + n)
        A = rng.standard_normal((m, k)).astype(np.float16)
        B = rng.standard_normal((n, k)).astype(np.float16)
        got = _warp_tile_run(kernel, A, B)
        want = A.astype(np.float32) @ B.T.astype(np.float32)
        name = f"C (m, k, n = {m}, {k}, {n})"
        if np.isnan(got).all():
            raise AssertionError(
                f"`{name}` is never written (all NaN): store d0..d3 after the loop, each lane its four"
                " elements. Hint: C[r0 + g, c0 + 2 * t] = d0, C[r0 + g, c0 + 2 * t + 1] = d1, and the"
                " same on row r0 + g + 8 for d2, d3."
            )
        bad = ~np.isclose(got, want, rtol=1e-3, atol=1e-3)
        if bad.any():
            r, c = (int(v) for v in np.argwhere(bad)[0])
            lane, i = 4 * (r % 8) + (c % 8) // 2, 2 * (r % 16 >= 8) + c % 2
            why = _warp_tile_cause(kernel, A, B) if device.mode() == "sim" else ""
            raise AssertionError(
                f"`{name}` is wrong at {int(bad.sum())} of {bad.size} elements; first C[{r}, {c}] is"
                f" {got[r, c]!r}, expected {want[r, c]!r} (lane {lane} stores it as d{i})."
                + (f" Why, from the registers the tracer saw: {why}." if why else f" Hint: {STORE_HINT}.")
            )
