"""Tests of cudalearn.trace: bank conflicts, sectors, races, bounds, lines (Chapters 2-5)."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import inspect  # noqa: E402
import math  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numba import cuda, float32  # noqa: E402

from cudalearn.chapters.ch02.kernels import matmul as kernel_matmul  # noqa: E402
from cudalearn.chapters.ch03 import kernels as tiled  # noqa: E402
from cudalearn.chapters.ch04 import patterns
from cudalearn.compile import toolchain  # noqa: E402
from cudalearn.runtime import launch
from cudalearn.trace import (
    TraceError,
    TraceOutOfBounds,
    TraceUnsupported,
    trace,  # noqa: E402
)

TILE = 16


def line_of(kernel, snippet):
    """Line number, in the test file, of the first line of kernel that contains snippet."""
    fn = getattr(kernel, "py_func", kernel)
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, text in enumerate(lines) if snippet in text)


PATTERNS = {p.name: p for p in patterns.access_patterns()}  # the catalogue ncu_compare also measures


def traced(name):
    """The report of one catalogue pattern traced at its launch, its output checked."""
    p = PATTERNS[name]
    rep = trace(p.kernel, p.griddim, p.blockdim, *p.args)
    assert patterns.close(rep.outputs[p.out], p.expected), name
    return rep


# the course's own Chapter 2-3 kernels, traced as the book traces them
matmul_naive, matmul_tiled = kernel_matmul.matmul_naive, tiled.matmul_tiled16
matmul_tiled_one_sync = tiled.matmul_tiled16_one_barrier  # WRONG on purpose: no second barrier


@cuda.jit
def all_write_first(out):
    out[0] = cuda.threadIdx.x


@cuda.jit
def first_thread_of_each_block_writes(out):
    if cuda.threadIdx.x == 0:
        out[0] = cuda.blockIdx.x


@cuda.jit
def atomic_count(out):
    cuda.atomic.add(out, 0, 1)


@cuda.jit
def scale_unguarded(inp, out):
    i = cuda.grid(1)
    out[i] = 2 * inp[i]


@cuda.jit
def fill_unguarded(out):
    i = cuda.grid(1)
    out[i] = i


@cuda.jit
def shift_left(inp, out):
    t = cuda.threadIdx.x
    out[t] = inp[t - 1]


@cuda.jit(device=True)
def twice(a, i):
    return a[i] + a[i] + cuda.threadIdx.x * 0


@cuda.jit
def uses_device_function(inp, out):
    i = cuda.grid(1)
    out[i] = twice(inp, i)


def plain_scale(inp, out, factor):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = factor * inp[i]


@cuda.jit
def early_exit_then_sync(out):
    t = cuda.threadIdx.x
    if t >= 16:
        return
    cuda.syncthreads()
    out[t] = 1


@cuda.jit
def count_positive(inp, out):
    t = cuda.threadIdx.x
    n = cuda.syncthreads_count(inp[t] > 0)
    out[t] = n


@cuda.jit
def local_scratch(out):
    t = cuda.threadIdx.x
    tmp = cuda.local.array(4, float32)
    for j in range(4):
        tmp[j] = t + j
    out[t] = tmp[0] + tmp[3]


def make_offset_kernel(offset):
    """A kernel closing over a Python int, as the pattern catalogue's factories do."""

    @cuda.jit
    def add_offset(out):
        t = cuda.threadIdx.x
        out[t] = t + offset

    return add_offset


def per_request(stats, kind="shared_load"):
    """Wavefronts (or sectors) per request of one line's counters."""
    unit = "_wavefronts" if kind.startswith("shared") else "_sectors"
    return getattr(stats, kind + unit) / getattr(stats, kind + "_requests")


# --- shared memory banks (Chapter 4): the access-pattern catalogue ---


@pytest.mark.parametrize(
    "stride, threads", [(s, patterns.THREADS) for s in patterns.SHARED_STRIDES] + [(33, 64)]
)
def test_shared_stride_gives_expected_conflict_ways(stride, threads):
    """Stride s over 4-byte words gives gcd(s, 32)-way conflicts; odd strides are free."""
    kernel, ways, warps = patterns.make_shared_stride(stride, threads), math.gcd(stride, 32), threads // 32
    inp = np.arange(patterns.SHARED, dtype=np.float32)
    rep = trace(kernel, 1, threads, inp, np.zeros(threads, np.float32))
    read = rep.by_line[line_of(kernel, "out[t] = s[")]
    assert read.shared_load_requests == warps  # one read a warp
    assert read.shared_load_wavefronts == warps * ways
    assert read.shared_load_bank_conflicts == warps * (ways - 1)
    store = rep.by_line[line_of(kernel, "s[t + j")]
    assert store.shared_store_requests == warps * (patterns.SHARED // threads) and store.bank_conflicts == 0
    assert rep.bank_conflicts == warps * (ways - 1)
    assert rep.bank_conflicts == rep.shared_wavefronts - rep.shared_requests
    np.testing.assert_array_equal(rep.outputs[1], inp[np.arange(threads) * stride])
    if threads == patterns.THREADS:  # the catalogue's own pattern, as ncu_compare launches it
        assert traced(f"shared_stride_{stride:02d}").counters() == rep.counters()


def test_broadcast_costs_one_wavefront():
    """All 32 lanes reading one word is a broadcast: one wavefront, no conflict."""
    rep = traced("shared_broadcast")
    read = rep.by_line[line_of(patterns.shared_broadcast, "out[t] = s[7]")]
    assert (read.shared_load_requests, read.shared_load_wavefronts) == (4, 4)
    assert rep.bank_conflicts == 0


def test_float64_unit_stride_needs_two_wavefronts_without_conflict():
    """32 float64 are 64 words: two per bank, 2 wavefronts, and 2 is the ideal (as ncu counts it)."""
    rep = traced("shared_f64_stride_01")
    assert rep.shared_load_requests == 4
    assert rep.shared_load_wavefronts == 8
    assert rep.shared_store_wavefronts == 8
    assert rep.bank_conflicts == 0
    req = rep.shared_request(line_of(patterns.shared_f64_stride_01, "out[t] = s[t]"), warp=1)
    assert (req.wavefronts, req.bank_conflicts, req.itemsize) == (2, 0, 8)
    assert req.banks()[0] == {64: [0], 96: [16]}  # lane 0's low word, lane 16's low word


def test_transposed_tile_conflicts_and_padding_fixes_them():
    """A column of a 32x32 float32 tile sits in one bank (32-way); a 33-wide row spreads it."""
    plain, padded = traced("tile_col_read_32x32"), traced("tile_col_read_32x33")
    kernels = (patterns.tile_col_read_32x32, patterns.tile_col_read_32x33)
    for kernel, rep, ways in ((kernels[0], plain, 32), (kernels[1], padded, 1)):
        read = rep.by_line[line_of(kernel, "tile[x, y]")]
        assert read.shared_load_requests == 32
        assert per_request(read) == ways
        assert rep.by_line[line_of(kernel, "tile[y, x] =")].shared_store_bank_conflicts == 0
    assert plain.bank_conflicts == 32 * 31 and padded.bank_conflicts == 0


# --- global memory sectors (Chapter 2) ---


@pytest.mark.parametrize(
    "name, sectors",
    [("global_stride_01", 4), ("global_stride_02", 8), ("global_stride_04", 16), ("global_stride_08", 32)]
    + [("global_stride_32", 32), ("global_f64_stride_01", 8)],
)
def test_global_stride_sectors(name, sectors):
    """32 float32 in a row fill 4 sectors (float64: 8); at stride >= 8 each lane has its own sector."""
    rep = traced(name)
    line = rep.by_line[line_of(PATTERNS[name].kernel, "inp[t * stride]")]
    assert line.global_load_requests == 4  # four warps
    assert per_request(line, "global_load") == sectors
    assert per_request(line, "global_store") == (8 if "f64" in name else 4)


def test_the_catalogue_names_every_pattern_apart():
    """ncu rows are matched by kernel name: no pattern's name holds another's; every output is right."""
    names = list(PATTERNS)
    assert len(names) == len(set(names)) == 16
    assert not [(a, b) for a in names for b in names if a != b and a in b]


# --- tiling (Chapter 3) ---


@pytest.fixture(scope="module")
def matrices():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((64, 64)).astype(np.float32)
    B = rng.standard_normal((64, 64)).astype(np.float32)
    return A, B


@pytest.fixture(scope="module")
def tiled_report(matrices):
    A, B = matrices
    return trace(matmul_tiled, (4, 4), (16, 16), A, B, np.zeros((64, 64), np.float32))


def test_tiled_matmul_reads_far_fewer_sectors_than_naive(matrices, tiled_report):
    """Each A and B element is loaded 4x (once a tile) instead of 64x, and the product is right."""
    A, B = matrices
    naive = trace(matmul_naive, (4, 4), (16, 16), A, B, np.zeros((64, 64), np.float32))
    # naive: 128 warps x 64 steps x (A: 2 rows -> 2 sectors, B: 16 floats -> 2 sectors)
    assert naive.global_load_requests == 128 * 64 * 2
    assert naive.global_load_sectors == 128 * 64 * 4
    # tiled: 128 warps x 4 tiles x 2 loads, each 2 rows of 16 floats -> 4 sectors
    assert tiled_report.global_load_requests == 128 * 4 * 2
    assert tiled_report.global_load_sectors == 128 * 4 * 2 * 4
    assert tiled_report.global_store_sectors == naive.global_store_sectors == 128 * 4
    assert tiled_report.bank_conflicts == 0
    for rep in (naive, tiled_report):
        np.testing.assert_allclose(rep.outputs[2], A @ B, rtol=1e-4, atol=1e-4)
        assert rep.race_count == 0 and rep.races == []
    np.testing.assert_array_equal(tiled_report.outputs[0], A)  # inputs are copied, not changed


def test_missing_second_syncthreads_is_a_race_on_the_tiles(matrices):
    """Without the second barrier a fast thread overwrites a tile others are still reading."""
    A, B = matrices
    rep = trace(matmul_tiled_one_sync, (4, 4), (16, 16), A, B, np.zeros((64, 64), np.float32))
    assert rep.race_count > 0
    assert {r.array for r in rep.races} <= {"sA", "sB"}
    race = rep.races[0]
    # thread 0 already stores tile 1 while thread 1 still reads tile 0
    assert race.kind == "read-write"
    assert race.first_line == line_of(matmul_tiled_one_sync, "sA[ty, tx] =")
    assert race.second_line == line_of(matmul_tiled_one_sync, "acc += sA")
    assert race.first[1] != race.second[1]
    assert len(race.index) == 2 and all(0 <= i < TILE for i in race.index)
    assert rep.by_line[race.second_line].races > 0
    assert "race" in str(rep)
    # each thread reads the tile (line of `acc +=`) and then stores the next one: the barrier between
    # them, at the end of the loop body, is the one missing
    assert race.gap[0::2] == (race.second_line, race.first_line)
    where = race.missing_barrier()
    assert f"after line {race.second_line} and before line {race.first_line} runs again" in where
    msg = rep.race_message()  # the one wording of a race the checks raise
    assert msg.startswith(
        f"the tracer found {rep.race_count} race(s) in your kernel: two threads accessed one element,"
        f" at least one writing it, with nothing ordering them. The first: {race}. {where} Hint: "
    )
    assert msg.endswith("(a second cuda.syncthreads() at the end of the loop body).")
    assert rep.race_message("guard it.").endswith("Hint: guard it.")
    assert trace(matmul_tiled, (4, 4), (16, 16), A, B, np.zeros((64, 64), np.float32)).race_message() == ""


# --- races (Chapter 3) ---


def test_all_threads_writing_one_element_is_a_write_write_race():
    """Every later writer races with an earlier one: 63 races in a block of 64."""
    rep = trace(all_write_first, 1, 64, np.zeros(4, np.float32))
    assert rep.race_count == 63
    assert len(rep.races) == 20
    race = rep.races[0]
    assert (race.array, race.index, race.kind) == ("out", (0,), "write-write")
    assert race.first == ((0, 0, 0), (0, 0, 0)) and race.second == ((0, 0, 0), (1, 0, 0))
    assert race.missing_barrier() == ""  # each thread writes once: no barrier orders them, the index is wrong


def test_writes_from_different_blocks_race():
    """No barrier orders two blocks, so their writes to one element race."""
    rep = trace(first_thread_of_each_block_writes, 3, 32, np.zeros(1, np.float32))
    assert rep.race_count == 2
    assert [r.second[0] for r in rep.races] == [(1, 0, 0), (2, 0, 0)]


def test_atomic_add_is_not_a_race():
    """Atomics are counted as a load and a store but never race with each other."""
    rep = trace(atomic_count, 2, 64, np.zeros(1, np.int32))
    assert rep.race_count == 0
    assert rep.outputs[0][0] == 128
    assert rep.global_load_requests == rep.global_store_requests == 4
    assert rep.global_load_sectors == 4


# --- bounds (Chapter 2) ---


def test_unguarded_last_block_raises_out_of_bounds():
    """128 threads for 100 elements: thread 4 of block 3 reads inp[100]."""
    inp = np.ones(100, np.float32)
    with pytest.raises(TraceOutOfBounds) as info:
        trace(scale_unguarded, 4, 32, inp, np.zeros(100, np.float32))
    err = info.value
    assert isinstance(err, IndexError)
    assert (err.array, err.index, err.shape) == ("inp", (100,), (100,))
    assert (err.thread, err.block) == ((4, 0, 0), (3, 0, 0))
    assert err.line == line_of(scale_unguarded, "out[i] = 2 * inp[i]")
    msg = str(err)
    for part in ("inp[100]", "(100,)", "thread (4, 0, 0)", "block (3, 0, 0)", "out[i] = 2 * inp[i]", "guard"):
        assert part in msg
    with pytest.raises(
        TraceOutOfBounds, match=r"write to out\[100\].*thread \(4, 0, 0\) of block \(3, 0, 0\)"
    ):
        trace(fill_unguarded, 4, 32, np.zeros(100, np.int32))


def test_negative_index_is_out_of_bounds_not_wrapped():
    """Thread 0 reading inp[-1] is a bug on a GPU; numpy would silently wrap it."""
    with pytest.raises(TraceOutOfBounds, match=r"inp\[-1\].*thread \(0, 0, 0\)") as info:
        trace(shift_left, 1, 32, np.ones(32, np.float32), np.zeros(32, np.float32))
    assert "wrap" in str(info.value)


def test_too_many_threads_is_refused():
    """The tracer runs each thread in Python, so it caps the launch size."""
    with pytest.raises(TraceError, match="smaller"):
        trace(scale_unguarded, 1024, 256, np.ones(1, np.float32), np.ones(1, np.float32))
    with pytest.raises(TraceError, match="1024"):
        trace(scale_unguarded, 1, (32, 64), np.ones(1, np.float32), np.ones(1, np.float32))


# --- kernels, device functions, lines (Chapter 2) ---


def test_device_function_accesses_are_traced_on_its_own_line():
    """Two reads on the device function's line are two requests, attributed to that line."""
    inp = np.arange(64, dtype=np.float32)
    rep = trace(uses_device_function, 2, 32, inp, np.zeros(64, np.float32))
    inner = rep.by_line[line_of(twice, "a[i] + a[i]")]
    outer = rep.by_line[line_of(uses_device_function, "out[i] =")]
    assert inner.global_load_requests == 4 and inner.global_load_sectors == 16
    assert outer.global_store_requests == 2 and outer.global_load_requests == 0
    assert "a[i] + a[i]" in inner.source
    np.testing.assert_array_equal(rep.outputs[1], 2 * inp)


def test_plain_function_and_fake_kernel_both_work():
    """trace accepts what the student launches (here a FakeCUDAKernel) and a plain function."""
    assert type(scale_unguarded).__name__ in ("FakeCUDAKernel", "CUDADispatcher")
    inp = np.arange(40, dtype=np.float32)
    rep = trace(plain_scale, 2, 32, inp, np.zeros(40, np.float32), 3.0)
    np.testing.assert_array_equal(rep.outputs[1], 3 * inp)
    assert rep.outputs[2] == 3.0  # scalars pass through
    assert rep.global_load_requests == 2  # the guard leaves 8 active lanes in warp 1
    assert rep.global_load_sectors == 4 + 1
    rep = trace(scale_unguarded, 2, 32, np.ones(64, np.float32), np.zeros(64, np.float32))
    assert rep.kernel == "scale_unguarded" and np.all(rep.outputs[1] == 2)


def test_closure_kernel_and_local_arrays():
    """Free variables of a kernel factory and cuda.local.array work; local arrays are not counted."""
    rep = trace(make_offset_kernel(7), 1, 32, np.zeros(32, np.int64))
    np.testing.assert_array_equal(rep.outputs[0], np.arange(32) + 7)
    rep = trace(local_scratch, 1, 32, np.zeros(32, np.float32))
    np.testing.assert_array_equal(rep.outputs[0], 2 * np.arange(32) + 3)
    assert rep.global_requests == 1 and rep.shared_requests == 0


def test_barrier_collectives_and_divergence_warning():
    """syncthreads_count returns the count over the block; exiting before a barrier is a barrier error."""
    inp = np.array([1, -1] * 16, np.float32)
    rep = trace(count_positive, 1, 32, inp, np.zeros(32, np.int32))
    assert np.all(rep.outputs[1] == 16) and rep.warnings == [] and rep.barrier_errors == []
    rep = trace(early_exit_then_sync, 1, 32, np.zeros(32, np.float32))
    assert len(rep.warnings) == 1 and "returned" in rep.warnings[0]
    assert rep.warnings == [str(rep.barrier_errors[0])]
    assert rep.outputs[0][:16].tolist() == [1] * 16


def test_table_lists_lines_with_source_and_totals(tiled_report):
    """The table shows each accessing line's source and a total row."""
    text = tiled_report.table()
    assert "acc += sA[ty, k] * sB[k, tx]" in text
    assert text.splitlines()[-1].split()[0] == "total"
    assert str(tiled_report) == text
    assert tiled_report.counters()["global_sectors"] == tiled_report.global_sectors


# --- bank diagram (Chapter 4) ---


def test_bank_request_and_diagram():
    """The kept request shows all 32 lanes of warp 0 in bank 0; the figure says 32 wavefronts."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    rep = traced("shared_stride_32")
    line = line_of(PATTERNS["shared_stride_32"].kernel, "out[t] = s[")
    req = rep.shared_request(line, warp=0)
    assert req.wavefronts == 32 and not req.store
    banks = req.banks()
    assert list(banks) == [0] and len(banks[0]) == 32
    fig = rep.bank_diagram(line, warp=1)
    assert isinstance(fig, Figure)
    assert "32 wavefronts" in fig.axes[0].get_title()
    with pytest.raises(KeyError):
        rep.shared_request(line + 100)


# --- the sanitizer: synccheck, initcheck, memcheck (Chapter 3) ---


@cuda.jit
def tiled_early_return(A, B, C):
    """WRONG: threads outside C return before the barriers of the tile loop."""
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    if row >= C.shape[0] or col >= C.shape[1]:
        return
    K = A.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        sA[ty, tx] = A[row, k0 + tx] if k0 + tx < K else float32(0.0)
        sB[ty, tx] = B[k0 + ty, col] if k0 + ty < K else float32(0.0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    C[row, col] = acc


@cuda.jit
def tiled_return_after_last_barrier(A, B, C):
    """Right: the early return comes after the last barrier, so every thread reaches them all."""
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    K = A.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        sA[ty, tx] = A[row, k0 + tx] if row < A.shape[0] and k0 + tx < K else float32(0.0)
        sB[ty, tx] = B[k0 + ty, col] if k0 + ty < K and col < B.shape[1] else float32(0.0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row >= C.shape[0] or col >= C.shape[1]:
        return
    C[row, col] = acc


@cuda.jit
def tiled_no_zero_fill(A, B, C):
    """WRONG: tile elements outside A are never written, and then read."""
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    K = A.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        if row < A.shape[0] and k0 + tx < K:
            sA[ty, tx] = A[row, k0 + tx]
        if k0 + ty < K and col < B.shape[1]:
            sB[ty, tx] = B[k0 + ty, col]
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def tiled_reads_before_barrier(A, B, C):
    """WRONG: the tiles are read before the barrier that would complete them."""
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = float32(0.0)
    for k0 in range(0, A.shape[1], TILE):
        sA[ty, tx] = A[row, k0 + tx]
        sB[ty, tx] = B[k0 + ty, col]
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    C[row, col] = acc


@cuda.jit
def barrier_inside_if(inp, out):
    """WRONG: only threads 0-47 reach the barrier."""
    s = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    if t < 48:
        s[t] = inp[t]
        cuda.syncthreads()
    out[t] = t


@cuda.jit
def barriers_on_two_lines(out):
    """WRONG: two groups of threads wait at two different barriers."""
    t = cuda.threadIdx.x
    if t < 16:
        cuda.syncthreads()
    else:
        cuda.syncthreads()
    out[t] = t


@cuda.jit
def own_element_round_trip(out):
    """Right without a barrier: each thread reads back only what it wrote."""
    s = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    s[t] = 2 * t
    out[t] = s[t]


@cuda.jit
def copy_swapped(src, dst):
    """WRONG: src read as src[x, y] instead of src[y, x]."""
    x, y = cuda.grid(2)
    if y < dst.shape[0] and x < dst.shape[1]:
        dst[y, x] = src[x, y]


@cuda.jit
def copy_guarded_with_le(src, dst):
    """WRONG: the guard compares with <=, so index shape[1] gets through."""
    x, y = cuda.grid(2)
    if y < dst.shape[0] and x <= dst.shape[1]:
        dst[y, x] = src[y, x]


@cuda.jit
def local_index_swapped(out):
    """WRONG: acc is (3, 2) and read as acc[j, i]."""
    acc = cuda.local.array((3, 2), float32)
    for i in range(3):
        for j in range(2):
            acc[i, j] = float32(i + j)
    for i in range(3):
        for j in range(2):
            out[cuda.threadIdx.x] += acc[j, i]


@cuda.jit
def read_next_element(inp, out):
    """WRONG: an off-by-one, inp[i + 1], on a launch with no partial block."""
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = inp[i + 1]


def tiled_problem(m, k, n, seed=0):
    """(A, B, C) float32 for a (TILE, TILE) tiled launch, and the launch."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((m, k)).astype(np.float32)
    B = rng.standard_normal((k, n)).astype(np.float32)
    return (*launch.square(m, n, TILE), (A, B, np.zeros((m, n), np.float32)))


def test_synccheck_flags_a_return_before_the_barriers():
    """Rows 20-31 of block (0, 1) return on the guard line while rows 16-19 wait at the first barrier."""
    grid, block, args = tiled_problem(20, 20, 16)
    rep = trace(tiled_early_return, grid, block, *args)
    assert rep.barrier_error_count == 1 and len(rep.barrier_errors) == 1
    err = rep.barrier_errors[0]
    ret, sync = line_of(tiled_early_return, "return\n"), line_of(tiled_early_return, "cuda.syncthreads()")
    assert (err.kind, err.block, err.threads[0], err.count, err.waiting) == (
        "returned",
        (0, 1, 0),
        (0, 4, 0),
        192,
        64,
    )
    assert (err.line, err.source, err.left_line, err.left_source) == (
        sync,
        "cuda.syncthreads()",
        ret,
        "return",
    )
    text = str(err)
    assert text.startswith("Barrier error detected. Divergent thread(s) in block (0, 1, 0): 192 thread(s)")
    assert f"returned on line {ret}" in text and f"barrier on line {sync}" in text
    assert rep.warnings == [text] and "Barrier error detected" in rep.table()
    assert rep.uninitialized_reads > 0  # the rows of sB the returned threads never loaded


def test_synccheck_passes_a_return_after_the_last_barrier_and_a_guarded_body():
    """A return after the last barrier, or a guard around the store, is valid: nothing is flagged."""
    from cudalearn.chapters.ch03.kernels import matmul_tiled16

    grid, block, args = tiled_problem(20, 37, 19)
    for kernel in (tiled_return_after_last_barrier, matmul_tiled16):
        rep = trace(kernel, grid, block, *args)
        assert rep.barrier_errors == [] and rep.barrier_error_count == 0 and rep.warnings == []
        assert rep.uninitialized_reads == 0 and rep.race_count == 0
        np.testing.assert_allclose(rep.outputs[2], args[0] @ args[1], rtol=1e-4, atol=1e-4)
        assert rep.sanitizer_message() == ""


def test_synccheck_flags_a_barrier_inside_an_if_and_barriers_on_two_lines():
    """Threads that skip a barrier, or wait at another one, are named with both lines."""
    rep = trace(barrier_inside_if, 1, 64, np.ones(64, np.float32), np.zeros(64, np.float32))
    (err,) = rep.barrier_errors
    assert (err.kind, err.threads[0], err.count, err.waiting) == ("skipped", (48, 0, 0), 16, 48)
    assert err.line == line_of(barrier_inside_if, "cuda.syncthreads()") and err.left_line == 0
    assert "ran to the end of the kernel without reaching the barrier" in str(err)
    rep = trace(barriers_on_two_lines, 1, 48, np.zeros(48, np.float32))
    (err,) = rep.barrier_errors
    first = line_of(barriers_on_two_lines, "cuda.syncthreads()")
    assert (err.kind, err.threads[0], err.count, err.waiting) == ("divergent", (0, 0, 0), 16, 32)
    assert (err.left_line, err.line) == (first, first + 2)


def test_initcheck_flags_a_partial_tile_that_is_not_zero_filled():
    """Rows 20-31 of block (0, 1) read rows 4-15 of sA, which no thread wrote: 12 * 16 threads x 16 reads."""
    grid, block, args = tiled_problem(20, 16, 16)
    rep = trace(tiled_no_zero_fill, grid, block, *args)
    acc = line_of(tiled_no_zero_fill, "acc += sA")
    assert rep.uninitialized_reads == 12 * 16 * 16 == rep.by_line[acc].uninitialized_reads
    u = rep.uninitialized[0]
    assert (u.array, u.index, u.thread, u.block, u.line) == ("sA", (4, 0), (0, 4, 0), (0, 1, 0), acc)
    assert u.source == "acc += sA[ty, k] * sB[k, tx]" and not u.same_phase
    assert str(u).startswith(
        "uninitialized shared-memory read of sA[4, 0] by thread (0, 4, 0) of block (0, 1, 0)"
    )
    assert rep.barrier_errors == [] and rep.race_count == 0
    assert "3072 uninitialized shared reads (first 20):" in rep.table()
    from cudalearn.chapters.ch03.kernels import matmul_tiled16  # the zero-filled tile

    assert trace(matmul_tiled16, grid, block, *args).uninitialized_reads == 0


def test_initcheck_a_read_before_the_barrier_is_unwritten_and_a_race_but_own_writes_are_fine():
    """Thread (0, 0) reads sA[0, 1] before thread (1, 0) wrote it; reading back one's own element is fine."""
    grid, block, args = tiled_problem(16, 16, 16)
    rep = trace(tiled_reads_before_barrier, grid, block, *args)
    u = rep.uninitialized[0]
    assert (u.array, u.index, u.thread, u.block, u.same_phase) == ("sA", (0, 1), (0, 0, 0), (0, 0, 0), True)
    assert "no cuda.syncthreads() between the write and this read" in str(u)
    assert rep.race_count > 0
    assert rep.sanitizer_message() == ""  # a race: left to the race check, whose hint names the barrier
    store, load = (line_of(tiled_reads_before_barrier, s) for s in ("sA[ty, tx] =", "acc += sA"))
    where = rep.races[0].missing_barrier()
    assert where.endswith(f"goes after line {store} and before line {load}."), where
    assert where in rep.race_message()
    rep = trace(own_element_round_trip, 1, 64, np.zeros(64, np.float32))
    assert rep.uninitialized_reads == 0 and rep.race_count == 0
    np.testing.assert_array_equal(rep.outputs[0], 2 * np.arange(64))


def test_memcheck_hint_points_to_the_guard_only_for_a_partial_last_block():
    """Partial last block: the guard. Block 0, or no partial block: the index arithmetic, with the values."""
    with pytest.raises(TraceOutOfBounds) as info:
        trace(scale_unguarded, 4, 32, np.ones(100, np.float32), np.zeros(100, np.float32))
    msg = str(info.value)
    assert "the index `i` is 100 on axis 0 of inp, whose extent is 100" in msg
    assert (
        "last, partial block along x: 4 block(s) of 32 threads make 128 threads along x for 100 elements, so "
        "the last 28 (global x index 100 to 127; this one is 100) have no element" in msg
    ), msg
    assert "Did you guard the last partial block (if i < inp.shape[0]: ...)?" in msg
    src, dst = np.ones((4, 40), np.float32), np.zeros((4, 40), np.float32)
    with pytest.raises(TraceOutOfBounds) as info:
        trace(copy_swapped, (5, 1), (8, 4), src, dst)
    err = info.value
    assert (err.array, err.index, err.thread, err.block) == ("src", (4, 0), (4, 0, 0), (0, 0, 0))
    msg = str(err)
    assert "the index `x` is 4 on axis 0 of src, whose extent is 4 (valid: 0 to 3)" in msg
    assert "check the index arithmetic" in msg and "are the row and column swapped?" in msg
    assert "partial block (if" not in msg
    with pytest.raises(TraceOutOfBounds) as info:
        trace(read_next_element, 2, 32, np.ones(64, np.float32), np.zeros(64, np.float32))
    msg = str(info.value)
    assert (info.value.thread, info.value.block) == ((31, 0, 0), (1, 0, 0))
    assert "the index `i + 1` is 64 on axis 0 of inp" in msg and "off-by-one" in msg
    assert "partial block (if" not in msg


def test_memcheck_names_a_local_array_indexed_outside_its_shape():
    """A local array is plain NumPy in the tracer: its IndexError becomes memcheck's, with name and line."""
    with pytest.raises(TraceOutOfBounds) as info:
        trace(local_index_swapped, 1, 4, np.zeros(4, np.float32))
    err = info.value
    assert (err.array, err.shape, err.thread, err.line) == (
        "acc",
        (3, 2),
        (0, 0, 0),
        line_of(local_index_swapped, "+= acc"),
    )
    assert "out-of-bounds access of acc[j, i] (shape (3, 2))" in str(err) and "is a local array" in str(err)


def test_memcheck_names_the_le_guard_that_lets_the_extent_through():
    """An index equal to the extent, guarded by `<=`: the guard's line, not a swap or a missing guard."""
    src = np.ones((40, 40), np.float32)
    with pytest.raises(TraceOutOfBounds) as info:
        trace(copy_guarded_with_le, (6, 5), (8, 8), src, np.zeros_like(src))
    msg = str(info.value)
    guard = line_of(copy_guarded_with_le, "if y <")
    assert info.value.index == (0, 40)
    assert f"Line {guard} (`if y < dst.shape[0] and x <= dst.shape[1]:`) lets `x` reach 40 with `<=`" in msg
    assert "so that comparison needs `<`" in msg
    assert "swapped" not in msg and "partial block" not in msg


@cuda.jit
def tile_smaller_than_block(inp, out):
    """WRONG: an (8, 8) shared tile indexed by 16 x 16 threads."""
    tile = cuda.shared.array((8, 8), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    tile[ty, tx] = inp[ty, tx]
    cuda.syncthreads()
    out[ty, tx] = tile[ty, tx]


def test_memcheck_hint_for_a_shared_tile_smaller_than_the_block_is_its_size_not_a_guard():
    """A shared tile is one per block: the hint compares it with the block, never suggests the guard (D8)."""
    with pytest.raises(TraceOutOfBounds) as info:
        trace(
            tile_smaller_than_block,
            1,
            (16, 16),
            np.ones((16, 16), np.float32),
            np.zeros((16, 16), np.float32),
        )
    msg = str(info.value)
    assert "the index `tx` is 8 on axis 1 of tile, whose extent is 8" in msg, msg
    assert "tile is a shared array, one per block, and this block has 16 x 16 threads" in msg, msg
    assert "declare it (TILE, TILE)" in msg and "if tx <" not in msg, msg


def test_trace_kernel_raises_the_sanitizer_findings_with_their_fix():
    """checks.trace_kernel turns barrier errors and unwritten shared reads into AssertionErrors."""
    from cudalearn import checks

    grid, block, args = tiled_problem(20, 20, 16)
    with pytest.raises(AssertionError) as info:
        checks.trace_kernel(tiled_early_return, grid, block, *args)
    msg = str(info.value)
    ret, sync = line_of(tiled_early_return, "return\n"), line_of(tiled_early_return, "cuda.syncthreads()")
    assert "barrier error" in msg and f"returned on line {ret}" in msg and f"line {sync}" in msg
    assert "move the return after the last cuda.syncthreads(), or guard the work instead of returning" in msg
    with pytest.raises(AssertionError, match="inside an if must be reached by every thread of the block"):
        checks.trace_kernel(barrier_inside_if, 1, 64, np.ones(64, np.float32), np.zeros(64, np.float32))
    grid, block, args = tiled_problem(20, 16, 16)
    with pytest.raises(AssertionError) as info:
        checks.trace_kernel(tiled_no_zero_fill, grid, block, *args)
    msg = str(info.value)
    acc = line_of(tiled_no_zero_fill, "acc += sA")
    assert "sA[4, 0] by thread (0, 4, 0) of block (0, 1, 0), line " + str(acc) in msg
    assert "zero-fill the tile elements outside the matrix" in msg
    rep = checks.trace_kernel(tiled_no_zero_fill, grid, block, *args, sanitize=False)
    assert rep.uninitialized_reads == 3072


def test_run_kernel_replays_a_simulator_index_error_under_the_tracer():
    """In sim mode the simulator's IndexError becomes the tracer's report: array, thread, block, line."""
    from cudalearn import checks
    from cudalearn.runtime import device

    if device.mode() != "sim":
        pytest.skip("the simulator's IndexError is a sim-mode path")
    with pytest.raises(AssertionError) as info:
        checks.run_kernel(scale_unguarded, 4, 32, np.ones(100, np.float32), np.zeros(100, np.float32))
    msg = str(info.value)
    line = line_of(scale_unguarded, "out[i] = 2 * inp[i]")
    assert (
        "found by the tracer" in msg
        and "inp[100] (shape (100,)) by thread (4, 0, 0) of block (3, 0, 0)" in msg
    )
    assert f"line {line}" in msg and "guard the last partial block" in msg
    # too large a launch for the tracer: the simulator's message, with the guard hint
    big = checks._out_of_bounds(IndexError("index 9 is out of bounds"), scale_unguarded, 1024, 256, ())
    assert "index 9 is out of bounds" in str(big) and "Guard the threads" in str(big)


def reference_launches():
    """(name, kernel, griddim, blockdim, args) of the package's shared-memory kernels, small ragged sizes."""
    from cudalearn.chapters.ch03 import kernels as tiled
    from cudalearn.chapters.ch04 import kernels as transpose
    from cudalearn.chapters.ch05.kernels import blocked, linear, tiles, tuned
    from cudalearn.chapters.ch06.kernels import regblock, regblock_launch, regblock_tiles

    rng = np.random.default_rng(3)

    def mat(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    for name, tile in tiled.TILES.items():
        m, k, n = tile + 3, tile + 5, tile - 3
        yield name, getattr(tiled, name), *tiled.launch_config(m, n, tile), (mat(m, k), mat(k, n), mat(m, n))
    for name in transpose.SIGNATURES:
        tile = 16 if name in ("transpose_naive", "transpose_tiled16") else 32
        m, n = (23, 11) if tile == 16 else (29, 27)
        yield name, getattr(transpose, name), *transpose.launch_config(m, n, tile), (mat(m, n), mat(n, m))
    for kernel in linear.tiled(8):
        yield (
            kernel.__name__,
            kernel,
            *linear.tiled_launch(13, 9, 8),
            (
                (mat(13, 20), mat(20, 9), mat(13, 9))
                if "plain" in kernel.__name__
                else (mat(13, 20), mat(20, 9), mat(9), mat(13, 9))
            ),
        )
    vec = [(tuned.blocked_vec(cfg), cfg) for cfg in (tiles.VEC_SIM_TILES, tiles.VEC_TILES)]
    for kernels, cfg in [(blocked.blocked(cfg, 1), cfg) for cfg in (tiles.SIM_TILES, tiles.GPU_TILES)] + vec:
        m, k, n = cfg.bm + 5, cfg.bk + 3, cfg.bn - 3
        yield (
            "linear_forward",
            kernels["linear_forward"],
            *cfg.launch(m, n),
            (mat(m, k), mat(k, n), mat(n), mat(m, n), 1),
        )
        yield (
            "linear_backward_input",
            kernels["linear_backward_input"],
            *cfg.launch(m, k),
            (mat(m, n), mat(n, k), mat(m, k), mat(m, k)),
        )
        yield (
            "linear_backward_weight",
            kernels["linear_backward_weight"],
            *cfg.launch(k, n),
            (mat(m, k), mat(m, n), mat(k, n), mat(n)),
        )
        yield (
            "sgd_transpose",
            kernels["sgd_transpose"],
            *cfg.sgd_launch(k, n),
            (mat(k, n), mat(k, n), mat(n, k), mat(n), mat(n), np.float32(0.1)),
        )
    for target in ("sim", "sm75"):
        for name, (kernel, cfg) in regblock.build(target).items():
            m, k, n = cfg["BM"] + 3, 2 * cfg["BK"] + 1, cfg["BN"] + 5
            first = mat(m, k)
            # the cp.async step: A transposed, rows of whole 16-byte pieces (the block inside copies)
            if name == regblock_tiles.ASYNC:
                m, n = cfg["BM"] + 4, cfg["BN"] + 4
                first = mat(k, m)
            yield name, kernel, *regblock_launch.launch_config(name, cfg, m, n), (first, mat(k, n), mat(m, n))


@pytest.mark.parametrize("launch", list(reference_launches()), ids=lambda launch: launch[0])
def test_reference_kernels_pass_the_sanitizer(launch):
    """No false positive: the package's kernels have no barrier error, unwritten shared read or race."""
    name, kernel, griddim, blockdim, args = launch
    rep = trace(kernel, griddim, blockdim, *args)
    assert rep.barrier_errors == [] and rep.warnings == [], rep.warnings
    assert rep.uninitialized_reads == 0, rep.uninitialized[:3]
    assert rep.race_count == 0 or name == "matmul_tiled16_one_barrier", rep.races[:3]
    assert rep.sanitizer_message() == ""


# --- Nsight Compute's CSV, parsed by cudalearn.compile.toolchain ---


# the kernel name as ncu 2025.3 printed it for shared_stride_02 on an H200, and a mangled name
SHOWN = (
    "shared_stride_02[v2,cw51cXTLSUwv1sDUaKthqaNgoKmjgOR3W3Cw6igA9duC0hkwnNGiHEkYkrqQBFBTDEwCyQe21eqwcF"
    "W3UoDGjzpQEsgzrtUEAA_3d_3d](Array<float, 1, C, mutable, aligned>, Array<float, 1, C, mutable, aligned>)"
)
MANGLED = "_ZN6cudapy8__main__15matmul_tiled_16B2v1B94cw51cXTLSUwv1sDUaKthqqNgQsgJSQA_3d_E5ArrayIfLi2E1C7E"
HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
    '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)


def ncu_row(launch, kernel, metric, unit, value):
    """One row of `ncu --csv --page details` output, quoted as ncu writes it."""
    cells = [launch, "4242", "python3.12", "127.0.0.1", kernel, "1", "7", "(128, 1, 1)", "(1, 1, 1)", "0"]
    cells += ["9.0", "Command line profiler metrics", metric, unit, value]
    return ",".join(f'"{c}"' for c in cells)


NCU_CSV = "\n".join(
    [
        "==PROF== Connected to process 4242 (/usr/bin/python3.12)",
        '==PROF== Profiling "shared_stride_02": 0%....50%....100% - 1 pass',
        HEADER,
        ncu_row("1", SHOWN, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "", "4"),
        ncu_row("1", SHOWN, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "", "8"),
        ncu_row("2", MANGLED, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "sector", "4,096"),
        ncu_row("3", "some_other_kernel", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "sector", "1"),
        ncu_row("4", SHOWN, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "", "999"),
        "==PROF== Disconnected from process 4242",
    ]
)


def test_ncu_csv_parser_maps_mangled_names_to_patterns():
    """Rows match patterns by name inside shown or mangled kernel names; a kernel's first launch counts."""
    parsed = toolchain.parse_ncu_csv(NCU_CSV, ["shared_stride_02", "matmul_tiled_16", "shared_stride_01"])
    assert parsed == {
        "shared_stride_02": {
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": 4,
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": 8,
        },
        "matmul_tiled_16": {"l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 4096},
    }
    assert math.isnan(toolchain.to_number("n/a"))


def test_ncu_csv_parser_takes_the_longest_of_nested_names_and_can_keep_the_last_launch():
    """`bias_relu_dropout_pairs` rows are not `bias_relu_dropout`'s; launch="last" keeps a warm launch."""
    metric = "smsp__inst_executed.sum"
    text = "\n".join(
        [
            HEADER,
            ncu_row("1", "bias_relu_dropout[v2,abc](Array<float, 2, C>)", metric, "inst", "10"),
            ncu_row("2", "bias_relu_dropout_pairs[v1,abc](Array<double, 2, C>)", metric, "inst", "20"),
            ncu_row("3", "bias_relu_dropout[v2,abc](Array<float, 2, C>)", metric, "inst", "11"),
            ncu_row("4", "bias_relu_dropout_pairs[v1,abc](Array<double, 2, C>)", metric, "inst", "21"),
        ]
    )
    names = ["bias_relu_dropout", "bias_relu_dropout_pairs"]
    first = toolchain.parse_ncu_csv(text, names)
    assert first == {"bias_relu_dropout": {metric: 10}, "bias_relu_dropout_pairs": {metric: 20}}
    last = toolchain.parse_ncu_csv(text, names, launch="last")
    assert last == {"bias_relu_dropout": {metric: 11}, "bias_relu_dropout_pairs": {metric: 21}}


def test_ncu_command_profiles_the_child_into_a_csv_log():
    """One builder for every ncu run: details page, base units, the child's command last."""
    cmd = toolchain.ncu_command("ncu", ["python", "child.py"], "/tmp/log.csv", metrics=["a.sum", "b.sum"])
    assert cmd[:3] == ["ncu", "--clock-control", "none"] and cmd[-2:] == ["python", "child.py"]
    assert "--target-processes" in cmd and cmd[cmd.index("--metrics") + 1] == "a.sum,b.sum"
    assert cmd[cmd.index("--log-file") + 1] == "/tmp/log.csv" and cmd[cmd.index("--page") + 1] == "details"
    solo = toolchain.ncu_command("ncu", ["child"], "log", sections=["SpeedOfLight"], kernels="regex:gemm")
    assert "--target-processes" in solo and "--metrics" not in solo
    assert solo[solo.index("--section") + 1] == "SpeedOfLight" and solo[solo.index("-k") + 1] == "regex:gemm"
    assert "--target-processes" not in toolchain.ncu_command("ncu", ["child"], "log", all_processes=False)


# --- what the tracer does not model: a clear error, not numba's AttributeError ---


@cuda.jit
def warp_match(inp, out):
    t = cuda.threadIdx.x
    v = inp[t]
    v += cuda.match_any_sync(0xFFFFFFFF, v)
    out[t] = v


@cuda.jit(device=True)
def match_all(flag):
    return cuda.match_all_sync(0xFFFFFFFF, flag)


@cuda.jit
def uses_match_all(inp, out):
    t = cuda.threadIdx.x
    out[t] = match_all(inp[t] > 0)[0]


@cuda.jit
def atomic_nanmax(inp, out):
    cuda.atomic.nanmax(out, 0, inp[cuda.threadIdx.x])


@cuda.jit
def atomic_mul(inp, out):
    cuda.atomic.mul(out, 0, inp[cuda.threadIdx.x])  # no such atomic in numba: the tracer names it


def test_an_unmodelled_cuda_call_names_the_call_the_kernel_and_the_line():
    """A warp match, a match in a device function, an atomic the tracer lacks: TraceUnsupported."""
    x = np.ones(32, np.float32)
    with pytest.raises(TraceUnsupported) as match:
        trace(warp_match, 1, 32, x, np.zeros(32, np.float32))
    e, line = match.value, line_of(warp_match, "match_any_sync")
    assert isinstance(e, TraceError) and (e.name, e.kernel, e.line) == (
        "cuda.match_any_sync",
        "warp_match",
        line,
    )
    msg = str(e)
    assert "does not model `cuda.match_any_sync` (a warp-level intrinsic" in msg
    assert f"kernel `warp_match` uses it on line {line} (`v += cuda.match_any_sync(0xFFFFFFFF, v)`)" in msg
    with pytest.raises(
        TraceUnsupported, match=r"kernel `uses_match_all` \(in its device function `match_all`\)"
    ):
        trace(uses_match_all, 1, 32, x, np.zeros(32, np.float32))
    with pytest.raises(TraceUnsupported, match=r"`cuda\.atomic\.mul` \(an atomic; modelled: add, sub"):
        trace(atomic_mul, 1, 32, x, np.zeros(1, np.float32))
    ramp = np.arange(32, dtype=np.float32)
    ramp[5] = np.nan  # nanmax ignores a NaN value, and replaces the NaN it starts from
    assert trace(atomic_nanmax, 1, 32, ramp, np.full(1, np.nan, np.float32)).outputs[1][0] == 31
    from cudalearn import checks

    with pytest.raises(AssertionError, match="could not run your kernel: cudalearn.trace does not model"):
        checks.trace_kernel(warp_match, 1, 32, x, np.zeros(32, np.float32))


@cuda.jit
def uses_cuda_float32(out):
    out[cuda.threadIdx.x] = cuda.float32(0.5)


def test_numba_types_through_the_cuda_module_still_work():
    """`cuda.float32(...)` is a type, not a call the tracer models: it passes through."""
    rep = trace(uses_cuda_float32, 1, 4, np.zeros(4, np.float32))
    np.testing.assert_array_equal(rep.outputs[0], np.full(4, 0.5, np.float32))


@cuda.jit
def endless_sum(inp, out):
    i = cuda.threadIdx.x
    acc = float32(0.0)
    t = 0
    while t < inp.shape[0]:  # WRONG on purpose: t never advances
        for k in range(2):
            acc += inp[t] * k
        cuda.syncthreads()
    out[i] = acc


def test_an_endless_loop_stops_at_the_access_budget_and_names_its_loop(monkeypatch):
    """A kernel that never finishes raises TraceEndless at MAX_BLOCK_ACCESSES: thread, line and loop named."""
    from cudalearn.trace import model

    monkeypatch.setattr(model, "MAX_BLOCK_ACCESSES", 2000)
    with pytest.raises(model.TraceEndless) as match:
        trace(endless_sum, 2, 8, np.ones(4, np.float32), np.zeros(8, np.float32))
    e, line, loop = match.value, line_of(endless_sum, "acc += inp[t]"), line_of(endless_sum, "while t <")
    assert isinstance(e, TraceError) and (e.kernel, e.block, e.line, e.loop) == (
        "endless_sum",
        (0, 0, 0),
        line,
        loop,
    )
    assert e.steps > 2000 // 8 - 8  # the budget is shared by the block's 8 threads
    msg = str(e)
    assert msg.startswith("`endless_sum` did not finish: block (0, 0, 0) made more than 2,000 array accesses")
    assert f"line {line} (`acc += inp[t] * k`)" in msg and f"in the loop at line {loop} (`while t <" in msg
    assert "endless loop?" in msg and "t += 1" in msg
