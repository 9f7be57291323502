"""Tests of cudalearn.trace: bank conflicts, sectors, races, bounds, lines (Chapters 2-5)."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import importlib.util  # noqa: E402
import inspect  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numba import cuda, float32, float64  # noqa: E402

from cudalearn.trace import TraceError, TraceOutOfBounds, trace  # noqa: E402

TILE = 16


def line_of(kernel, snippet):
    """Line number, in the test file, of the first line of kernel that contains snippet."""
    fn = getattr(kernel, "py_func", kernel)
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, text in enumerate(lines) if snippet in text)


@cuda.jit
def shared_strided_read(out, stride):
    s = cuda.shared.array(1024, float32)
    t = cuda.threadIdx.x
    for j in range(1024 // cuda.blockDim.x):
        s[t + j * cuda.blockDim.x] = t
    cuda.syncthreads()
    out[t] = s[(t * stride) % 1024]


@cuda.jit
def shared_broadcast(out):
    s = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    if t < 32:
        s[t] = t
    cuda.syncthreads()
    out[t] = s[5]


@cuda.jit
def shared_f64_read(out):
    s = cuda.shared.array(64, float64)
    t = cuda.threadIdx.x
    s[t] = t
    cuda.syncthreads()
    out[t] = s[t]


@cuda.jit
def transpose_tile(inp, out):
    tile = cuda.shared.array((32, 32), float32)
    x = cuda.threadIdx.x
    y = cuda.threadIdx.y
    tile[y, x] = inp[y, x]
    cuda.syncthreads()
    out[y, x] = tile[x, y]


@cuda.jit
def transpose_tile_padded(inp, out):
    tile = cuda.shared.array((32, 33), float32)
    x = cuda.threadIdx.x
    y = cuda.threadIdx.y
    tile[y, x] = inp[y, x]
    cuda.syncthreads()
    out[y, x] = tile[x, y]


@cuda.jit
def global_strided_read(inp, out, stride):
    t = cuda.grid(1)
    out[t] = inp[t * stride]


@cuda.jit
def matmul_naive(A, B, C):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = float32(0.0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def matmul_tiled(A, B, C):
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = float32(0.0)
    for t in range(A.shape[1] // TILE):
        sA[ty, tx] = A[row, t * TILE + tx]
        sB[ty, tx] = B[t * TILE + ty, col]
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    C[row, col] = acc


@cuda.jit
def matmul_tiled_one_sync(A, B, C):
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = float32(0.0)
    for t in range(A.shape[1] // TILE):
        sA[ty, tx] = A[row, t * TILE + tx]
        sB[ty, tx] = B[t * TILE + ty, col]
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
    C[row, col] = acc


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
    """A kernel closing over a Python int, as the ncu_compare patterns do."""

    @cuda.jit
    def add_offset(out):
        t = cuda.threadIdx.x
        out[t] = t + offset

    return add_offset


def per_request(stats, kind="shared_load"):
    """Wavefronts (or sectors) per request of one line's counters."""
    unit = "_wavefronts" if kind.startswith("shared") else "_sectors"
    return getattr(stats, kind + unit) / getattr(stats, kind + "_requests")


# --- shared memory banks (Chapter 4) ---


@pytest.mark.parametrize("stride, ways", [(1, 1), (2, 2), (4, 4), (8, 8), (16, 16), (32, 32), (33, 1)])
def test_shared_stride_gives_expected_conflict_ways(stride, ways):
    """Stride s over 4-byte words gives gcd(s, 32)-way conflicts; odd strides are free."""
    out = np.zeros(64, np.float32)
    rep = trace(shared_strided_read, 1, 64, out, stride)
    read = rep.by_line[line_of(shared_strided_read, "out[t] = s[")]
    assert read.shared_load_requests == 2  # two warps, one read each
    assert read.shared_load_wavefronts == 2 * ways
    assert read.shared_load_bank_conflicts == 2 * (ways - 1)
    store = rep.by_line[line_of(shared_strided_read, "s[t + j")]
    assert store.shared_store_requests == 2 * 16 and store.bank_conflicts == 0
    assert rep.bank_conflicts == 2 * (ways - 1)
    assert rep.bank_conflicts == rep.shared_wavefronts - rep.shared_requests
    np.testing.assert_array_equal(rep.outputs[0], (np.arange(64) * stride % 1024) % 64)


def test_broadcast_costs_one_wavefront():
    """All 32 lanes reading one word is a broadcast: one wavefront, no conflict."""
    rep = trace(shared_broadcast, 1, 64, np.zeros(64, np.float32))
    read = rep.by_line[line_of(shared_broadcast, "s[5]")]
    assert (read.shared_load_requests, read.shared_load_wavefronts) == (2, 2)
    assert np.all(rep.outputs[0] == 5)


def test_float64_unit_stride_needs_two_wavefronts_without_conflict():
    """32 float64 are 64 words: two per bank, 2 wavefronts, and 2 is the ideal (as ncu counts it)."""
    rep = trace(shared_f64_read, 1, 64, np.zeros(64, np.float64))
    assert rep.shared_load_requests == 2
    assert rep.shared_load_wavefronts == 4
    assert rep.shared_store_wavefronts == 4
    assert rep.bank_conflicts == 0
    req = rep.shared_request(line_of(shared_f64_read, "out[t] = s[t]"), warp=1)
    assert (req.wavefronts, req.bank_conflicts, req.itemsize) == (2, 0, 8)
    assert req.banks()[0] == {64: [0], 96: [16]}  # lane 0's low word, lane 16's low word
    np.testing.assert_array_equal(rep.outputs[0], np.arange(64))


def test_transposed_tile_conflicts_and_padding_fixes_them():
    """A column of a 32x32 float32 tile sits in one bank (32-way); a 33-wide row spreads it."""
    inp = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    plain = trace(transpose_tile, 1, (32, 32), inp, np.zeros_like(inp))
    padded = trace(transpose_tile_padded, 1, (32, 32), inp, np.zeros_like(inp))
    for kernel, rep, ways in ((transpose_tile, plain, 32), (transpose_tile_padded, padded, 1)):
        read = rep.by_line[line_of(kernel, "tile[x, y]")]
        assert read.shared_load_requests == 32
        assert per_request(read) == ways
        assert rep.by_line[line_of(kernel, "tile[y, x] =")].shared_store_bank_conflicts == 0
        np.testing.assert_array_equal(rep.outputs[1], inp.T)
    assert plain.bank_conflicts == 32 * 31 and padded.bank_conflicts == 0


# --- global memory sectors (Chapter 2) ---


@pytest.mark.parametrize("stride, sectors", [(1, 4), (2, 8), (4, 16), (8, 32), (32, 32)])
def test_global_stride_sectors(stride, sectors):
    """32 float32 in a row fill 4 sectors; at stride >= 8 each lane has its own sector."""
    inp = np.arange(32 * 64, dtype=np.float32)
    rep = trace(global_strided_read, 2, 32, inp, np.zeros(64, np.float32), stride)
    line = rep.by_line[line_of(global_strided_read, "inp[t * stride]")]
    assert line.global_load_requests == 2
    assert per_request(line, "global_load") == sectors
    assert per_request(line, "global_store") == 4
    np.testing.assert_array_equal(rep.outputs[1], inp[: 64 * stride : stride])


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


# --- races (Chapter 3) ---


def test_all_threads_writing_one_element_is_a_write_write_race():
    """Every later writer races with an earlier one: 63 races in a block of 64."""
    rep = trace(all_write_first, 1, 64, np.zeros(4, np.float32))
    assert rep.race_count == 63
    assert len(rep.races) == 20
    race = rep.races[0]
    assert (race.array, race.index, race.kind) == ("out", (0,), "write-write")
    assert race.first == ((0, 0, 0), (0, 0, 0)) and race.second == ((0, 0, 0), (1, 0, 0))


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
    """syncthreads_count returns the count over the block; exiting before a barrier warns."""
    inp = np.array([1, -1] * 16, np.float32)
    rep = trace(count_positive, 1, 32, inp, np.zeros(32, np.int32))
    assert np.all(rep.outputs[1] == 16) and rep.warnings == []
    rep = trace(early_exit_then_sync, 1, 32, np.zeros(32, np.float32))
    assert len(rep.warnings) == 1 and "returned" in rep.warnings[0]
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

    rep = trace(shared_strided_read, 1, 64, np.zeros(64, np.float32), 32)
    line = line_of(shared_strided_read, "out[t] = s[")
    req = rep.shared_request(line, warp=0)
    assert req.wavefronts == 32 and not req.store
    banks = req.banks()
    assert list(banks) == [0] and len(banks[0]) == 32
    fig = rep.bank_diagram(line, warp=1)
    assert isinstance(fig, Figure)
    assert "32 wavefronts" in fig.axes[0].get_title()
    with pytest.raises(KeyError):
        rep.shared_request(line + 100)


# --- the ncu comparison script's parser ---


def load_ncu_compare():
    path = Path(__file__).resolve().parents[1] / "scripts" / "ncu_compare.py"
    spec = importlib.util.spec_from_file_location("ncu_compare", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


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
    ncu = load_ncu_compare()
    parsed = ncu.parse_ncu_csv(NCU_CSV, ["shared_stride_02", "matmul_tiled_16", "shared_stride_01"])
    assert parsed == {
        "shared_stride_02": {
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": 4,
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": 8,
        },
        "matmul_tiled_16": {"l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 4096},
    }
    assert math.isnan(ncu.to_number("n/a"))


def test_ncu_csv_parser_takes_the_longest_of_nested_names_and_can_keep_the_last_launch():
    """`bias_relu_dropout_pairs` rows are not `bias_relu_dropout`'s; launch="last" keeps a warm launch."""
    ncu = load_ncu_compare()
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
    first = ncu.parse_ncu_csv(text, names)
    assert first == {"bias_relu_dropout": {metric: 10}, "bias_relu_dropout_pairs": {metric: 20}}
    last = ncu.parse_ncu_csv(text, names, launch="last")
    assert last == {"bias_relu_dropout": {metric: 11}, "bias_relu_dropout_pairs": {metric: 21}}
