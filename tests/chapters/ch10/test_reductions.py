"""Chapter 10's kernels value by value: sums, softmax, LayerNorm, attention (simulator and tracer).

Kernels that shuffle run on `cudalearn.trace` (through `cudalearn.trace.launch`); the others on Numba's
simulator. Sizes are awkward on purpose: n not a multiple of the block, rows shorter than a warp and
longer than a block. The real compiler is checked too: no float64 in the PTX of the row kernels.
"""

import math

import numpy as np
import pytest
import torch
from numba import cuda

from cudalearn import trace
from cudalearn.chapters.ch10 import bench
from cudalearn.chapters.ch10.kernels import attention, layernorm, reductions, softmax
from cudalearn.compile import ptx, toolchain
from cudalearn.measure import timing
from cudalearn.runtime import launch

RNG = np.random.default_rng(10)
TREES = ["sum_interleaved", "sum_strided_index", "sum_sequential", "sum_shuffle"]
NEIGHBOURS = {
    "sum_interleaved": True,
    "sum_strided_index": True,
    "sum_sequential": False,
    "sum_shuffle": False,
}
ROWS = ["softmax_block", "softmax_warp", "softmax_online", "softmax_registers"]
SHAPES = [(16, 48), (5, 7), (3, 300)]  # cols not a multiple of 32; shorter than a warp; longer than a block


def _x(n, scale=1.0):
    return (scale * RNG.standard_normal(n)).astype(np.float32)


# Sums -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TREES)
def test_tree_partials_equal_numpy_in_the_kernels_order_bit_for_bit(name):
    x, threads = _x(300), 64  # 5 blocks, the last one partial
    grid = launch.blocks(x.size, threads)
    partial = np.full(grid, np.nan, np.float32)
    trace.launch(getattr(reductions, name), grid, threads, x, partial)
    np.testing.assert_array_equal(partial, reductions.tree_sum_reference(x, threads, NEIGHBOURS[name]))
    total = reductions.launch_sum(getattr(reductions, name), x, threads=threads)  # two passes
    second = reductions.tree_sum_reference(partial, threads, NEIGHBOURS[name])
    assert total == second[0] and abs(total - np.sum(x, dtype=np.float64)) < 1e-4


def test_the_two_orders_round_differently_and_both_are_close():
    x = RNG.random(256 * 64, dtype=np.float32) * np.float32(1000)
    neighbours = reductions.tree_sum_reference(x, 256, True)
    halves = reductions.tree_sum_reference(x, 256, False)
    exact = x.astype(np.float64).reshape(-1, 256).sum(axis=1)
    assert (neighbours != halves).any(), "the order of float32 additions changes the last bits"
    assert (
        np.abs(neighbours - exact).max() < 1e-5 * exact.max()
        and np.abs(halves - exact).max() < 1e-5 * exact.max()
    )


def test_sum_shuffle_at_the_full_block_and_a_device_array():
    x = _x(3 * reductions.BLOCK + 5)
    got = reductions.launch_sum(reductions.sum_shuffle, cuda.to_device(x))
    expected = reductions.tree_sum_reference(reductions.tree_sum_reference(x), reductions.BLOCK)[0]
    assert got == expected


@pytest.mark.parametrize(
    ("n", "blocks", "threads"), [(1000, None, 64), (4097, 3, 128), (31, 1, 32), (5000, 2, 256)]
)
def test_sum_atomic_grid_stride_and_one_atomic_per_block(n, blocks, threads):
    x = _x(n)
    run, result = reductions.sum_launcher(reductions.sum_atomic, cuda.to_device(x), blocks, threads)
    result.copy_to_device(np.full(1, 1e6, np.float32))  # run() must clear it first
    run()
    got = float(result.copy_to_host()[0])
    assert abs(got - np.sum(x, dtype=np.float64)) <= 2e-6 * np.abs(x).sum(), (
        got,
        np.sum(x, dtype=np.float64),
    )
    grid = blocks or reductions.atomic_blocks(n, threads)
    out = np.zeros(1, np.float32)
    report = trace.run(reductions.sum_atomic, grid, threads, x, out)
    assert report.atomics == grid, "one atomic add per block"
    assert out[0] == np.float32(got)  # the tracer runs the blocks in one order: the same bits


def test_atomic_blocks_cover_n_with_unroll_elements_a_thread_under_the_simulator():
    assert reductions.atomic_blocks(4096) == 4096 // (reductions.BLOCK * reductions.UNROLL)
    assert reductions.atomic_blocks(1) == 1


def test_sum_launcher_refuses_bad_blocks_and_empty_arrays():
    x = cuda.to_device(_x(10))
    for threads in (16, 96, 512):
        with pytest.raises(ValueError, match="power of two"):
            reductions.sum_launcher(reductions.sum_sequential, x, threads=threads)
    with pytest.raises(ValueError, match="empty"):
        reductions.sum_launcher(reductions.sum_atomic, cuda.to_device(np.zeros(0, np.float32)))


@cuda.jit
def _lanes(x, total, top):
    """total[i] = warp_sum(x[i]), top[i] = warp_max(x[i]): what every lane gets (tests only)."""
    i = cuda.grid(1)
    total[i] = reductions.warp_sum(x[i])
    top[i] = reductions.warp_max(x[i])


def test_warp_sum_and_max_give_every_lane_the_same_bits():
    x = _x(64, 100.0)
    total, top = np.zeros(64, np.float32), np.zeros(64, np.float32)
    trace.launch(_lanes, 1, 64, x, total, top)
    for w in range(2):
        lanes = slice(32 * w, 32 * w + 32)
        assert (total[lanes] == reductions.tree_sum_reference(x[lanes], 32)[0]).all()
        assert (top[lanes] == x[lanes].max()).all()


# Softmax and LayerNorm ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", ROWS)
def test_softmax_kernels_against_numpy_and_torch(name, shape):
    x = _x(shape, 3.0).reshape(shape)
    if name == "softmax_registers" and shape[1] > 32 * softmax.SOFTMAX_VALS:
        with pytest.raises(ValueError, match="use softmax_warp or softmax_online for longer rows"):
            softmax.launch_rows(softmax.softmax_registers, x, np.empty_like(x))
        shape = (shape[0], 32 * softmax.SOFTMAX_VALS)  # the widest row it holds: every register used
        x = _x(shape, 3.0).reshape(shape)
    y = np.full(shape, np.nan, np.float32)
    softmax.launch_rows(getattr(softmax, name), x, y)
    np.testing.assert_allclose(y, softmax.softmax_reference(x), rtol=2e-6, atol=1e-8)
    np.testing.assert_allclose(y, torch.softmax(torch.from_numpy(x), dim=1).numpy(), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(y.sum(axis=1), 1, rtol=1e-5)


@pytest.mark.parametrize("name", ROWS)
def test_softmax_is_stable_for_values_whose_exp_overflows(name):
    x = _x((4, 40), 2.0).reshape(4, 40)
    big = x + np.float32(1e4)  # exp(1e4) overflows float32 (and float64)
    y = softmax.launch_rows(getattr(softmax, name), big, np.zeros_like(x))
    assert np.isfinite(y).all()
    np.testing.assert_allclose(y, softmax.softmax_reference(x), rtol=1e-3, atol=1e-7)  # shift-invariant
    small = softmax.launch_rows(getattr(softmax, name), -big, np.zeros_like(x))
    np.testing.assert_allclose(small, softmax.softmax_reference(-x), rtol=1e-3, atol=1e-7)


def test_softmax_in_place():
    x = _x((6, 70)).reshape(6, 70)
    y = x.copy()
    softmax.launch_rows(softmax.softmax_warp, y, y)
    np.testing.assert_allclose(y, softmax.softmax_reference(x), rtol=2e-6, atol=1e-8)


def _merge(a, b):
    """softmax.online_merge's Python body on float32 parts (the simulator runs device code as Python)."""
    return softmax.online_merge.py_func(
        np.float32(a[0]), np.float32(a[1]), np.float32(b[0]), np.float32(b[1])
    )


def test_online_rule_equals_the_two_pass_max_and_sum():
    x = _x((8, 100), 5.0).reshape(8, 100).astype(np.float64)
    m, d = softmax.online_reference(x)
    np.testing.assert_array_equal(m, x.max(axis=1))
    np.testing.assert_allclose(d, np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1), rtol=1e-12)
    for row, cut in zip(x, (1, 17, 50, 99), strict=False):  # two parts merged = the whole row
        (ma, da), (mb, db) = (softmax.online_reference(part[None]) for part in (row[:cut], row[cut:]))
        mm, dd = _merge((ma[0], da[0]), (mb[0], db[0]))
        assert mm == np.float32(row.max())
        assert abs(dd - np.exp(row - row.max()).sum()) < 1e-5 * dd
    assert _merge((-np.inf, 0), (-np.inf, 0)) == (-np.inf, 0), "two empty parts: no NaN"
    assert _merge((-np.inf, 0), (2.0, 3.0)) == (2.0, 3.0)


def test_online_update_is_the_merge_with_one_element():
    m, d = np.float32(-np.inf), np.float32(0)
    for v in _x(50, 4.0):
        m1, d1 = softmax.online_update.py_func(m, d, v)
        m2, d2 = _merge((m, d), (v, 1.0))
        assert m1 == m2 and math.isclose(d1, d2, rel_tol=1e-6)
        m, d = m1, d1


def test_welford_update_and_chan_merge_against_numpy():
    x = (1000 + _x(77)).astype(np.float32)  # a large mean: where E[x^2] - E[x]^2 cancels
    parts = [(0.0, 0.0, 0.0)]
    for chunk in np.array_split(x, 5):
        n, mean, m2 = (np.float32(0),) * 3
        for v in chunk:
            n, mean, m2 = layernorm.welford_update.py_func(n, mean, m2, v)
        parts.append((n, mean, m2))
    total = parts[0]
    for p in parts[1:]:
        total = layernorm.welford_merge.py_func(*(np.float32(t) for t in total), *p)
    x64 = x.astype(np.float64)
    assert total[0] == x.size and abs(total[1] - x64.mean()) < 1e-4
    assert abs(total[2] / x.size - x64.var()) < 1e-3 * x64.var()


@cuda.jit
def _lane_welford(x, out):
    """out[lane] = the (count, mean, M2) lane `lane` holds after `warp_welford` of x[lane] (tests only)."""
    lane = cuda.threadIdx.x
    c, m, m2 = layernorm.warp_welford(np.float32(1.0), x[lane], np.float32(0.0))
    out[lane, 0] = c
    out[lane, 1] = m
    out[lane, 2] = m2


def test_warp_welford_gives_every_lane_the_same_bits():
    x = (100 + _x(32, 3.0)).astype(np.float32)
    out = np.zeros((32, 3), np.float32)
    trace.launch(_lane_welford, 1, 32, x, out)
    assert (out == out[0]).all(), "every lane must normalise its columns with the same mean and variance"
    assert out[0, 0] == 32 and abs(out[0, 1] - x.astype(np.float64).mean()) < 1e-4
    assert abs(out[0, 2] / 32 - x.astype(np.float64).var()) < 1e-4 * x.var()


# (16, 768): the widest row in registers (32 * LN_VALS); (3, 800): only layernorm_long, which reads x twice
@pytest.mark.parametrize(
    "name, shape",
    [
        *(("layernorm", s) for s in (*SHAPES, (16, 768))),
        *(("layernorm_block", s) for s in ((5, 7), (3, 300), (2, 1024))),
        *(("layernorm_long", s) for s in ((5, 48), (3, 800))),
        *(("layernorm_pairs", s) for s in ((5, 10), (3, 130), (16, 768))),  # whole pairs only
    ],
)
def test_layernorm_against_numpy_and_torch(name, shape):
    x = (50 + 2 * _x(shape).reshape(shape)).astype(np.float32)  # an offset that naive variance would lose
    gamma, beta = 1 + _x(shape[1], 0.1), _x(shape[1], 0.1)
    y = np.full(shape, np.nan, np.float32)
    softmax.launch_rows(getattr(layernorm, name), x, y, gamma, beta, 1e-5)
    np.testing.assert_allclose(y, layernorm.layernorm_reference(x, gamma, beta, 1e-5), rtol=1e-4, atol=2e-5)
    tx = torch.nn.functional.layer_norm(
        torch.from_numpy(x), (shape[1],), torch.from_numpy(gamma), torch.from_numpy(beta), 1e-5
    )
    np.testing.assert_allclose(y, tx.numpy(), rtol=1e-4, atol=5e-5)


def test_rows_launch():
    assert softmax.rows_launch(softmax.softmax_block, 10) == (10, softmax.SOFTMAX_BLOCK)
    assert softmax.rows_launch(layernorm.layernorm, 10) == (3, (32, softmax.ROWS_PER_BLOCK))


def test_layernorm_refuses_a_row_longer_than_its_registers_and_names_the_kernel_that_takes_it():
    x = np.zeros((2, 32 * layernorm.LN_VALS + 1), np.float32)
    gamma, beta = np.ones(x.shape[1], np.float32), np.zeros(x.shape[1], np.float32)
    with pytest.raises(ValueError, match="layernorm holds at most 768 columns.*use layernorm_long"):
        softmax.launch_rows(layernorm.layernorm, x, np.empty_like(x), gamma, beta, 1e-5)
    x = np.zeros((2, layernorm.LN_BLOCK * layernorm.LN_BLOCK_VALS + 1), np.float32)
    gamma, beta = np.ones(x.shape[1], np.float32), np.zeros(x.shape[1], np.float32)
    with pytest.raises(ValueError, match="layernorm_block holds at most 1024 columns.*use layernorm_long"):
        softmax.launch_rows(layernorm.layernorm_block, x, np.empty_like(x), gamma, beta, 1e-5)
    x = np.zeros((2, 9), np.float32)
    gamma, beta = np.ones(9, np.float32), np.zeros(9, np.float32)
    with pytest.raises(ValueError, match="layernorm_pairs needs an even number of columns.*got 9"):
        softmax.launch_rows(layernorm.layernorm_pairs, x, np.empty_like(x), gamma, beta, 1e-5)


def test_cuda_view_gives_a_cpu_tensor_as_its_numpy_view_and_leaves_arrays_alone():
    t = torch.arange(6, dtype=torch.float32)
    view = launch.cuda_view(t)
    assert isinstance(view, np.ndarray) and np.shares_memory(view, t.numpy())
    a = np.zeros(3, np.float32)
    assert launch.cuda_view(a) is a and launch.cuda_view(1.5) == 1.5


def test_prepare_rows_runs_the_same_launch_as_launch_rows():
    x = _x((6, 40), 3.0).reshape(6, 40).astype(np.float32)
    y = np.full_like(x, np.nan)
    softmax.prepare_rows(softmax.softmax_registers, x, y)()
    np.testing.assert_allclose(y, softmax.softmax_reference(x), rtol=1e-5, atol=1e-7)


# Attention ----------------------------------------------------------------------------------------


def _qkv(n, d, scale=1.0):
    return tuple((scale * RNG.standard_normal((n, d))).astype(np.float32) for _ in range(3))


def _sdpa(q, k, v):
    t = [torch.from_numpy(a)[None, None] for a in (q, k, v)]
    return torch.nn.functional.scaled_dot_product_attention(*t)[0, 0].numpy()


# (70, 24): two key tiles of the fused kernel, the last partial, and d < D_MAX
@pytest.mark.parametrize(("n", "d"), [(20, 64), (17, 40), (70, 24)])
def test_fused_attention_against_numpy_and_torch_sdpa(n, d):
    q, k, v = _qkv(n, d, 2.0)
    o = attention.launch_attention_fused(q, k, v, np.full((n, d), np.nan, np.float32))
    np.testing.assert_allclose(o, attention.attention_reference(q, k, v), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(o, _sdpa(q, k, v), rtol=1e-4, atol=1e-5)


def test_three_kernel_attention_against_numpy_and_torch_sdpa():
    q, k, v = _qkv(32, 16, 2.0)
    o = attention.attention_three(q, k, v)
    np.testing.assert_allclose(o, attention.attention_reference(q, k, v), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(o, _sdpa(q, k, v), rtol=1e-4, atol=1e-5)


def test_the_fused_kernel_is_right_and_writes_only_the_output():
    n, d = attention.BK + 6, 8  # two key tiles, the last partial; rows of 32 bytes: one sector each
    q, k, v = _qkv(n, d, 2.0)
    o = np.full((n, d), np.nan, np.float32)
    report = trace.run(
        attention.attention_fused, *attention.fused_launch(n), q, k, v, o, attention.scale_of(d)
    )
    np.testing.assert_allclose(o, attention.attention_reference(q, k, v), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(o, _sdpa(q, k, v), rtol=1e-4, atol=1e-5)
    stored = sum(line.global_store_sectors for line in report.by_line.values())
    assert stored * 32 == n * d * 4, "no (n, n) matrix: the fused kernel stores o and nothing else"
    assert report.race_count == 0 and report.barrier_error_count == 0 and report.uninitialized_reads == 0
    assert attention.bytes_moved(n, d)["fused"] < attention.bytes_moved(n, d)["three kernels"]


def test_attention_refuses_shapes_it_cannot_run():
    q = np.zeros((8, attention.D_MAX + 1), np.float32)
    with pytest.raises(ValueError, match="D_MAX"):
        attention.launch_attention_fused(q, q, q)
    with pytest.raises(ValueError, match="alike"):
        attention.attention_three(q[:4], q, q)


# The real compiler and the benchmark's verdicts -----------------------------------------------------


def test_no_float64_in_the_ptx_and_shuffles_where_promised():
    """The row, attention and shuffle-sum kernels compiled for sm_75 (the T4 the labs compile for;
    compile/test_kernels.py compiles every kernel for sm_90 too): float32 only, `math.exp` and `math.sqrt`
    lowered to the float32 functions, no stray float64 constant; shuffles exactly where promised."""
    shuffles = {"sum_shuffle", "sum_atomic", *ROWS, "layernorm", "layernorm_block", "layernorm_long"}
    shuffles.add("layernorm_pairs")
    shuffles.add("attention_fused")
    for module, names in (
        (softmax, softmax.SIGNATURES),
        (layernorm, layernorm.SIGNATURES),
        (attention, attention.SIGNATURES),
        (reductions, ("sum_sequential", "sum_shuffle", "sum_atomic")),
    ):
        for name in names:
            sig = module.SIGNATURES[name]
            try:
                text = ptx.compile_for_gpu(getattr(module, name), cc=ptx.T4, signature=sig)
            except ptx.CompilerUnavailable as e:
                pytest.skip(f"no real CUDA compiler here: {e}")
            f64 = ptx.float64_ops(text)
            if name == "layernorm_pairs":  # it moves float64 words (two float32 each), and computes on none
                f64 = {
                    op: n for op, n in f64.items() if not op.startswith(("ld.global.", "st.global.", "mov."))
                }
            assert not f64, f"{name} computes in float64: {dict(f64)}"
            assert ("shfl.sync" in text) == (name in shuffles), name


@pytest.mark.parametrize("cc", [ptx.T4, (9, 0)])
def test_the_rows_held_in_registers_use_no_local_memory(cc):
    """The per-thread `vals` arrays of the register kernels: loops of constant trip count, unrolled,
    so the array lives in registers: no .local in the PTX, and ptxas (which allocates the registers,
    after the PTX) spills none and needs no stack frame (book 10c reads this)."""
    assert 48 <= 32 * softmax.SOFTMAX_VALS < 300 and 768 <= 32 * layernorm.LN_VALS < 800
    for module, name in (
        (softmax, "softmax_registers"),
        (layernorm, "layernorm"),
        (layernorm, "layernorm_block"),
        (layernorm, "layernorm_pairs"),
    ):
        try:
            text = ptx.compile_for_gpu(getattr(module, name), cc=cc, signature=module.SIGNATURES[name])
        except ptx.CompilerUnavailable as e:
            pytest.skip(f"no real CUDA compiler here: {e}")
        assert ".local" not in text, f"{name}: vals in local memory on sm_{cc[0]}{cc[1]}"
        try:
            figures = toolchain.compile_report(text, cc)["ptxas"]
        except RuntimeError as e:
            pytest.skip(f"no ptxas here: {e}")
        local = {k: figures[k] for k in ("spill_store_bytes", "spill_load_bytes", "stack_bytes")}
        assert not any(local.values()), f"{name}: ptxas uses local memory on sm_{cc[0]}{cc[1]}: {local}"


def _results(key, ms, size):
    rows = [{"name": name, "median_ms": t} for name, t in ms.items()]
    return timing.Results(key, rows, None, "measured", "test", size)


def test_goal_lines_judge_each_goal_from_the_times():
    n = 2**20
    copy = _results("ch10.bench_copy", {bench.COPY: 1.0}, {"n": n})
    sums = _results("ch10.bench_sum", {"sum_shuffle": 0.7, "sum_atomic": 0.55, "torch.sum": 0.5}, {"n": n})
    soft = _results("ch10.bench_softmax", {bench.COPY: 1.0, "torch.softmax": 1.1, "softmax_warp": 1.2}, {})
    norm = _results("ch10.bench_layernorm", {bench.COPY: 1.0, "F.layer_norm": 1.5, "layernorm": 1.2}, {})
    attn = _results("ch10.bench_attention", {bench.THREE: 2.0, bench.FUSED: 1.0}, {})
    lines = bench.goal_lines(copy, sums, soft, norm, attn, attention.bytes_moved(64, 8))
    text = "\n".join(lines)
    assert "sum_atomic reads at 90.9% of the copy bandwidth (goal >= 85%): met" in text
    assert (
        "best kernel softmax_warp at 83.3%" in text
        and "0.92x the speed of torch.softmax (goal >= 1): NOT MET" in text
    )
    assert "1.25x the speed of F.layer_norm (goal >= 1): met" in text
    assert "fused 2.00x the speed of the three kernels (goal > 1): met" in text
    empty = _results("ch10.bench_sum", {}, {})
    assert "not judged" in bench.goal_lines(empty, empty, soft, norm, attn, attention.bytes_moved(64, 8))[0]


def test_bench_candidates_run_and_check_themselves_under_the_simulator():
    copies, sums = bench.sum_candidates(300)
    for fn in (*copies.values(), *sums.values()):
        fn()  # the first call of each sum checks it against the float64 sum
    for kind in ("softmax", "layernorm"):
        for fn in bench.rows_candidates(kind, 5, 40).values():
            fn()
    # attention_candidates runs what the attention tests above run (and the three kernels are slow here)


def test_bench_check_fails_a_candidate_that_writes_nothing():
    out = cuda.to_device(np.ones((2, 3), np.float32))
    idle = bench._checked(
        lambda: None, out.copy_to_host, np.ones((2, 3), np.float32), "idle", 1e-4, 0, out=out
    )
    with pytest.raises(AssertionError, match="idle"):
        idle()


def test_the_profiled_child_launches_every_row_kernel_and_reads_its_sweeps():
    """scripts/ncu_rows.py's child runs each row kernel on the chapter's shapes (here the simulator's),
    and `dram_sweeps` reads a stored profile in reads of the whole array."""
    from cudalearn.chapters.ch10 import profile_rows

    sizes = profile_rows.launch_twice()
    assert set(sizes) == {"softmax", "layernorm"} and all(s["rows"] > 0 for s in sizes.values())
    one = 4 * sizes["softmax"]["rows"] * sizes["softmax"]["cols"]
    profile = {"size": sizes, "metrics": {"softmax_warp": {"dram__bytes_read.sum": 1.5 * one}}}
    assert profile_rows.dram_sweeps(profile, "softmax_warp") == 1.5
