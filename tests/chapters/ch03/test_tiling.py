"""Chapters 3-4: tiled matmuls, transposes, what the tracer counts, the labs' checks, the benchmark."""

import io
import math
from contextlib import redirect_stdout

import numpy as np
import pytest
from numba import cuda, float32

from cudalearn import checks, exercises
from cudalearn.chapters.ch02.kernels.matmul import matmul_naive
from cudalearn.chapters.ch03 import kernels as tiled
from cudalearn.chapters.ch04 import kernels as transpose
from cudalearn.trace import trace

RIGHT_MATMULS = [name for name in tiled.TILES if "one_barrier" not in name]


def problem(m, k, n, seed=0):
    """Random float32 A (m, k), B (k, n)."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)


def traced_matmul(kernel, tile, m, k, n):
    """The trace of a tiled-launch matmul on random inputs, and A @ B."""
    A, B = problem(m, k, n)
    grid, block = tiled.launch_config(m, n, tile)
    return trace(kernel, grid, block, A, B, np.zeros((m, n), np.float32)), A @ B


def line_of(report, text):
    """The traced source line that contains text."""
    return next(line for line, stats in report.by_line.items() if text in stats.source)


# --- the kernels, under the simulator, off the tile grid ---


@pytest.mark.parametrize("name", RIGHT_MATMULS)
def test_tiled_matmuls_are_right_on_sizes_off_the_tile_grid(name):
    tile = tiled.TILES[name]
    m, k, n = tile - 3, 2 * tile + 3, tile - 9  # k spans 3 tiles, the last partial; one partial block
    A, B = problem(m, k, n)
    grid, block = tiled.launch_config(m, n, tile)
    C = checks.run_kernel(getattr(tiled, name), grid, block, A, B, checks.empty_output((m, n)))[2]
    checks.check_close(C, A @ B, name=f"C of {name}", rtol=1e-4, atol=1e-4 * math.sqrt(k))


@pytest.mark.parametrize("name", list(transpose.SIGNATURES))
def test_transposes_are_right_on_rectangular_sizes(name):
    tile = 16 if name in ("transpose_naive", "transpose_tiled16") else 32
    m, n = (23, 11) if tile == 16 else (29, 27)  # two partial blocks with 16, one with 32
    src = np.arange(m * n, dtype=np.float32).reshape(m, n)
    grid, block = transpose.launch_config(m, n, tile)
    dst = checks.run_kernel(getattr(transpose, name), grid, block, src, checks.empty_output((n, m)))[1]
    checks.check_close(dst, src.T, name=f"dst of {name}")


# --- what the tracer counts ---


def test_tiling_cuts_global_sectors_per_output():
    """Sectors per output: N/8 (naive, 16-wide blocks), N/64 (T = 16), N/128 (T = 32), plus 1/8 for stores."""
    n = 32
    per_output = {}
    for name, kernel, tile in (
        ("naive", matmul_naive, 16),
        ("tiled16", tiled.matmul_tiled16, 16),
        ("tiled32", tiled.matmul_tiled32, 32),
    ):
        rep, expected = traced_matmul(kernel, tile, n, n, n)
        checks.check_close(rep.outputs[2], expected, name=name, rtol=1e-4, atol=1e-3)
        assert rep.race_count == 0
        per_output[name] = rep.global_sectors / n**2
    assert per_output == {"naive": n / 8 + 1 / 8, "tiled16": n / 64 + 1 / 8, "tiled32": n / 128 + 1 / 8}


def test_row_access_tiled_matmuls_have_no_bank_conflict():
    for kernel, tile in (
        (tiled.matmul_tiled16, 16),
        (tiled.matmul_tiled32, 32),
        (tiled.matmul_tiled32_padded, 32),
    ):
        rep, _ = traced_matmul(kernel, tile, tile + 3, tile + 5, tile)
        assert rep.shared_load_bank_conflicts == 0 and rep.bank_conflicts == 0
        assert rep.shared_load_requests > 0


def test_transposed_tile_is_32_way_at_t32_and_padding_removes_it():
    unpadded, _ = traced_matmul(tiled.matmul_bt_tiled32, 32, 32, 32, 32)
    read = unpadded.shared_request(line_of(unpadded, "sBt[tx, k]"), array="sBt", store=False)
    store = unpadded.shared_request(line_of(unpadded, "sBt[tx, ty] ="), array="sBt", store=True)
    assert read.wavefronts == 32 and read.bank_conflicts == 31
    assert store.wavefronts == 32
    # 32 warps: one 32-way store and 32 reads of sBt (31 conflicts each); sA's reads are broadcasts
    assert unpadded.bank_conflicts == 32 * 31 + 32 * 32 * 31
    padded, _ = traced_matmul(tiled.matmul_bt_tiled32_padded, 32, 32, 32, 32)
    assert padded.bank_conflicts == 0 and padded.shared_wavefronts == padded.shared_requests


def test_padding_at_t16_leaves_a_two_way_store_conflict():
    rep, _ = traced_matmul(tiled.matmul_bt_tiled16_padded, 16, 16, 16, 16)
    assert rep.shared_request(line_of(rep, "sBt[tx, k]"), array="sBt", store=False).wavefronts == 1
    assert rep.shared_request(line_of(rep, "sBt[tx, ty] ="), array="sBt", store=True).wavefronts == 2


def test_transpose_conflicts_and_sectors():
    src = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    reports = {
        name: trace(getattr(transpose, name), (2, 2), (32, 32), src, np.zeros_like(src))
        for name in ("transpose_naive", "transpose_tiled32", "transpose_tiled32_padded")
    }
    for rep in reports.values():
        np.testing.assert_array_equal(rep.outputs[1], src.T)
    assert (
        reports["transpose_naive"].global_store_sectors == 8 * reports["transpose_naive"].global_load_sectors
    )
    assert (
        reports["transpose_tiled32"].global_store_sectors == reports["transpose_tiled32"].global_load_sectors
    )
    assert reports["transpose_tiled32"].bank_conflicts == 128 * 31  # every load request of 128 warps
    assert reports["transpose_tiled32_padded"].bank_conflicts == 0


def test_missing_second_barrier_is_a_race_on_the_tiles():
    good, expected = traced_matmul(tiled.matmul_tiled16, 16, 32, 32, 32)
    bad, _ = traced_matmul(tiled.matmul_tiled16_one_barrier, 16, 32, 32, 32)
    assert good.race_count == 0
    assert bad.race_count > 0 and {r.array for r in bad.races} <= {"sA", "sB"}
    assert not np.allclose(bad.outputs[2], expected, atol=1e-3)


# --- the labs' checks ---


@cuda.jit
def unfinished(A, B, C):
    pass


@cuda.jit
def transpose_unfinished(src, dst):
    pass


@cuda.jit
def matmul_tiled_flag_race(A, B, C):
    """A right tiled product (TILE = 16) whose threads all write one shared flag: a harmless-looking race."""
    sA = cuda.shared.array((16, 16), float32)
    sB = cuda.shared.array((16, 16), float32)
    flag = cuda.shared.array(1, float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * 16 + ty
    col = cuda.blockIdx.x * 16 + tx
    K = A.shape[1]
    acc = float32(0.0)
    for t in range((K + 15) // 16):
        a = float32(0.0)
        if row < A.shape[0] and t * 16 + tx < K:
            a = A[row, t * 16 + tx]
        b = float32(0.0)
        if t * 16 + ty < K and col < B.shape[1]:
            b = B[t * 16 + ty, col]
        sA[ty, tx] = a
        sB[ty, tx] = b
        flag[0] = float32(1.0)  # every thread writes the same element: a write-write race
        cuda.syncthreads()
        for k in range(16):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


def failure(check, *args, **kwargs):
    """The message of the AssertionError the check raises (the test fails if it passes)."""
    with pytest.raises(AssertionError) as err:
        check(*args, **kwargs)
    return str(err.value)


def test_lab3_check_passes_on_the_solution_and_fails_on_planted_errors():
    exercises.check_matmul_tiled(tiled.matmul_tiled16, 16)
    assert checks.NOT_DONE in failure(exercises.check_matmul_tiled, unfinished, 16)
    race = failure(exercises.check_matmul_tiled, tiled.matmul_tiled16_one_barrier, 16)
    assert "race" in race and "syncthreads" in race and ("sA[" in race or "sB[" in race), race
    assert "thread (" in race
    lucky = failure(exercises.check_matmul_tiled, matmul_tiled_flag_race, 16)
    assert "by luck" in lucky and "flag[0]" in lucky, lucky
    naive = failure(exercises.check_matmul_tiled, matmul_naive, 16)
    assert "sectors per output element" in naive and "shared" in naive, naive


def test_lab3_small_checks():
    exercises.check_global_bytes_tiled(lambda n, tile: 8 * n**3 // tile)
    # the one int rule (checks.answer_types.is_int): a NumPy integer passes here as in the hidden tests
    exercises.check_global_bytes_tiled(lambda n, tile: np.int64(8 * n**3 // tile))
    as_bool = failure(exercises.check_global_bytes_tiled, lambda n, tile: n > 0)
    assert "a bool, where an int is asked for" in as_bool, as_bool
    naive = failure(exercises.check_global_bytes_tiled, lambda n, tile: 8 * n**3)
    assert "naive kernel's traffic" in naive and "tile" in naive, naive
    as_float = failure(exercises.check_global_bytes_tiled, lambda n, tile: 8 * n**3 / tile)
    assert "a float" in as_float and "an int" in as_float, as_float
    assert "not bytes" in failure(exercises.check_global_bytes_tiled, lambda n, tile: 2 * n**3 // tile)
    # a value no listed mistake gives gets the general hint
    assert "(n / tile)**2 blocks" in failure(exercises.check_global_bytes_tiled, lambda n, tile: 7)


@cuda.jit
def matmul_tiled_store_in_loop(A, B, C):
    """A right tiled product (TILE = 16) that writes C after every tile step: more stores than outputs."""
    sA = cuda.shared.array((16, 16), float32)
    sB = cuda.shared.array((16, 16), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * 16 + ty
    col = cuda.blockIdx.x * 16 + tx
    K = A.shape[1]
    acc = float32(0.0)
    for t in range((K + 15) // 16):
        a = float32(0.0)
        if row < A.shape[0] and t * 16 + tx < K:
            a = A[row, t * 16 + tx]
        b = float32(0.0)
        if t * 16 + ty < K and col < B.shape[1]:
            b = B[t * 16 + ty, col]
        sA[ty, tx] = a
        sB[ty, tx] = b
        cuda.syncthreads()
        for k in range(16):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc


@cuda.jit
def matmul_tiled_drops_last_tile(A, B, C):
    """The tiled product (TILE = 16) over K // 16 tiles: wrong exactly when k is not a multiple of 16."""
    sA = cuda.shared.array((16, 16), float32)
    sB = cuda.shared.array((16, 16), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * 16 + ty
    col = cuda.blockIdx.x * 16 + tx
    acc = float32(0.0)
    for t in range(A.shape[1] // 16):
        a = float32(0.0)
        if row < A.shape[0]:
            a = A[row, t * 16 + tx]
        b = float32(0.0)
        if col < B.shape[1]:
            b = B[t * 16 + ty, col]
        sA[ty, tx] = a
        sB[ty, tx] = b
        cuda.syncthreads()
        for k in range(16):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def matmul_tiled_resets_acc(A, B, C):
    """The tiled product with the accumulator reset at every tile."""
    sA = cuda.shared.array((16, 16), float32)
    sB = cuda.shared.array((16, 16), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * 16 + ty
    col = cuda.blockIdx.x * 16 + tx
    K = A.shape[1]
    acc = float32(0.0)
    for t in range((K + 15) // 16):
        k0 = t * 16
        acc = float32(0.0)
        a = float32(0.0)
        if row < A.shape[0] and k0 + tx < K:
            a = A[row, k0 + tx]
        b = float32(0.0)
        if k0 + ty < K and col < B.shape[1]:
            b = B[k0 + ty, col]
        sA[ty, tx] = a
        sB[ty, tx] = b
        cuda.syncthreads()
        for k in range(16):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def matmul_tiled_inner_short(A, B, C):
    """The tiled product whose inner loop runs over range(TILE - 1)."""
    sA = cuda.shared.array((16, 16), float32)
    sB = cuda.shared.array((16, 16), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * 16 + ty
    col = cuda.blockIdx.x * 16 + tx
    K = A.shape[1]
    acc = float32(0.0)
    for t in range((K + 15) // 16):
        k0 = t * 16
        a = float32(0.0)
        if row < A.shape[0] and k0 + tx < K:
            a = A[row, k0 + tx]
        b = float32(0.0)
        if k0 + ty < K and col < B.shape[1]:
            b = B[k0 + ty, col]
        sA[ty, tx] = a
        sB[ty, tx] = b
        cuda.syncthreads()
        for k in range(15):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def matmul_tiled_one_tile_short(A, B, C):
    """The tiled product over range((K - 1) // TILE) tiles."""
    sA = cuda.shared.array((16, 16), float32)
    sB = cuda.shared.array((16, 16), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * 16 + ty
    col = cuda.blockIdx.x * 16 + tx
    K = A.shape[1]
    acc = float32(0.0)
    for t in range((K - 1) // 16):
        k0 = t * 16
        a = float32(0.0)
        if row < A.shape[0] and k0 + tx < K:
            a = A[row, k0 + tx]
        b = float32(0.0)
        if k0 + ty < K and col < B.shape[1]:
            b = B[k0 + ty, col]
        sA[ty, tx] = a
        sB[ty, tx] = b
        cuda.syncthreads()
        for k in range(16):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def matmul_accumulates_in_c(A, B, C):
    """A naive product that adds into C: right only when C starts zeroed."""
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        for k in range(A.shape[1]):
            C[row, col] += A[row, k] * B[k, col]


def test_lab3_check_names_the_cause_of_planted_errors():
    stores = failure(exercises.check_matmul_tiled, matmul_tiled_store_in_loop, 16)
    assert "more than once" in stores and "after the tile loop" in stores, stores
    last = failure(exercises.check_matmul_tiled, matmul_tiled_drops_last_tile, 16)
    assert "k is a multiple of TILE" in last and "(K + TILE - 1) // TILE" in last, last
    assert "reads C before writing it" in failure(exercises.check_matmul_tiled, matmul_accumulates_in_c, 16)


@pytest.mark.parametrize(
    "kernel,cause",
    [
        (matmul_tiled_resets_acc, "the accumulator is reset inside the tile loop"),
        (matmul_tiled_inner_short, "misses the last k of every tile"),
        (matmul_tiled_one_tile_short, "misses the last tile along k"),
    ],
)
def test_lab3_probe_names_loop_mistakes_not_indexing(kernel, cause):
    """A reset accumulator or a loop one short is not "the indexing is off" (D11)."""
    msg = failure(exercises.check_matmul_tiled, kernel, 16)
    assert cause in msg and "indexing" not in msg, msg


@cuda.jit
def transpose_no_barrier(src, dst):
    """The padded tiled transpose (TILE = 32) without its cuda.syncthreads(): a race on the tile."""
    tile = cuda.shared.array((32, 33), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * 32 + ty
    col = cuda.blockIdx.x * 32 + tx
    if row < src.shape[0] and col < src.shape[1]:
        tile[ty, tx] = src[row, col]
    out_row = cuda.blockIdx.x * 32 + ty
    out_col = cuda.blockIdx.y * 32 + tx
    if out_row < dst.shape[0] and out_col < dst.shape[1]:
        dst[out_row, out_col] = tile[tx, ty]


def test_lab4_transpose_race_gets_the_one_barrier_hint():
    """The transpose has no loop: its race hint is one barrier, not the tiled matmul's two (D12)."""
    race = failure(exercises.check_transpose_no_conflict, transpose_no_barrier, 32)
    assert "race" in race and "needs one barrier" in race, race
    assert "end of the loop body" not in race and "compare your indexing" not in race, race


def test_lab4_transpose_check():
    exercises.check_transpose_no_conflict(transpose.transpose_tiled32_padded, 32)
    conflict = failure(exercises.check_transpose_no_conflict, transpose.transpose_tiled32, 32)
    assert "bank conflicts" in conflict and "line " in conflict and "TILE + 1" in conflict, conflict
    assert "TILE_PAD = TILE + 1` above the kernel" in conflict and "(TILE, 33)" in conflict, conflict
    assert "tile[tx, ty]" in conflict  # the worst line's source
    assert checks.NOT_DONE in failure(exercises.check_transpose_no_conflict, transpose_unfinished, 32)
    assert "shared memory" in failure(exercises.check_transpose_no_conflict, transpose.transpose_naive, 32)


def test_lab4_matmul_check():
    exercises.check_matmul_no_conflict(tiled.matmul_bt_tiled32_padded, 32)
    conflict = failure(exercises.check_matmul_no_conflict, tiled.matmul_bt_tiled32, 32)
    assert "bank conflicts" in conflict and "sBt[tx, k]" in conflict and "TILE + 1" in conflict, conflict
    assert checks.NOT_DONE in failure(exercises.check_matmul_no_conflict, unfinished, 32)
    exercises.check_bank_of(lambda row, col, width: (row * width + col) % 32)
    assert "every row were 32 words" in failure(exercises.check_bank_of, lambda row, col, width: col % 32)
    assert "column-major" in failure(
        exercises.check_bank_of, lambda row, col, width: (col * width + row) % 32
    )
    assert "an int" in failure(exercises.check_bank_of, lambda row, col, width: (row * width + col) % 32.0)
    untransposed = failure(exercises.check_matmul_no_conflict, tiled.matmul_tiled32, 32)
    assert "no longer keeps the B tile transposed" in untransposed, untransposed


# --- the benchmark script ---


def test_bench_tiling_runs_in_sim_at_a_tiny_size():
    from cudalearn.chapters.ch03 import bench

    out = io.StringIO()
    with redirect_stdout(out):
        assert bench.main(["--sizes", "32"]) == 0
    text = out.getvalue()
    assert "cuBLAS FP32 (torch)" in text and bench.BT_PADDED in text
    assert "not judged" in text and "summary:" in text
    rows = [{"name": n, "median_ms": ms} for n, ms in [(bench.NAIVE, 10.0), (bench.TILED[16], 2.5)]]
    rows += [{"name": n, "median_ms": ms} for n, ms in [(bench.TILED[32], 1.0), (bench.BT, 3.0)]]
    rows += [{"name": bench.BT_PADDED, "median_ms": 2.0}]
    fake = type("R", (), {"rows": rows, "size": {"N": 1024}})()
    lines = bench.verdict_lines(bench.goals(fake))
    assert "1.50x" in lines[0] and "MISSED" in lines[0]
    assert "T=32 10.00x" in lines[1] and lines[1].endswith("met")
