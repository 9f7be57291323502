"""Tests of the tracer's warp semantics: shuffles, votes, masks, WarpError, dispatch (Chapter 10).

Every intrinsic is checked value by value against a NumPy model of the hardware written from the PTX ISA
(shfl.sync, vote.sync) with numba-cuda's operands (numba/cuda/intrinsics.py: shfl_up_sync clamps at 0,
the others at 31; only bits 4:0 of the lane operand count), not from the tracer's code.
"""

import os

if os.environ.get("CUDALEARN_MODE", "sim") == "sim":  # never in gpu mode: Numba rereads it mid-process
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import inspect  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numba import cuda, float32  # noqa: E402

from cudalearn import checks
from cudalearn import trace as tracer  # noqa: E402
from cudalearn.chapters.ch10.kernels import reductions  # noqa: E402
from cudalearn.compile import ptx  # noqa: E402
from cudalearn.runtime import device
from cudalearn.trace import TraceError, WarpError, simulator_lacks, trace  # noqa: E402

FULL = 0xFFFFFFFF
LANES = np.arange(32)


def line_of(kernel, snippet):
    """Line number, in this file, of the first line of kernel that contains snippet."""
    fn = getattr(kernel, "py_func", kernel)
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, text in enumerate(lines) if snippet in text)


# --- the NumPy model of one warp -----------------------------------------------------------------


def shfl_model(mode, values, b):
    """What each lane of a full warp receives: PTX shfl.sync.<mode> with lane operand b (per lane)."""
    bval = np.asarray(b, np.int64) & 31
    src = {"idx": bval, "up": LANES - bval, "down": LANES + bval, "bfly": LANES ^ bval}[mode]
    inside = (src >= 0) & (src <= 31)
    return np.where(inside, values[np.clip(src, 0, 31)], values)


def ballot_model(preds, lanes):
    """vote.sync.ballot over `lanes` as numba returns it: an int32 (bit 31 makes it negative)."""
    bits = sum(1 << int(i) for i in lanes if preds[i])
    return bits - (1 << 32) if bits >> 31 else bits


def butterfly_model(v):
    """warp_sum of each row of 32 float32 lanes, in the hardware's order: v += v[lane ^ o], o = 16..1."""
    v = v.astype(np.float32)
    for o in (16, 8, 4, 2, 1):
        v = v + v[..., LANES ^ o]
    return v


# --- kernels -------------------------------------------------------------------------------------


@cuda.jit
def shuffles(x, b, out):
    i = cuda.grid(1)
    v = x[i]
    out[0, i] = cuda.shfl_sync(FULL, v, b[i])
    out[1, i] = cuda.shfl_up_sync(FULL, v, b[i])
    out[2, i] = cuda.shfl_down_sync(FULL, v, b[i])
    out[3, i] = cuda.shfl_xor_sync(FULL, v, b[i])


@cuda.jit
def halves(x, out):
    i = cuda.grid(1)
    v = x[i]
    if cuda.laneid < 16:
        out[i] = cuda.shfl_up_sync(0x0000FFFF, v, 3)
    else:
        out[i] = cuda.shfl_down_sync(0xFFFF0000, v, 3)


@cuda.jit
def votes(x, out):
    i = cuda.grid(1)
    lane = cuda.laneid
    v = x[i]
    chosen = cuda.ballot_sync(FULL, lane % 3 == 0)
    out[0, i] = chosen
    out[1, i] = cuda.all_sync(FULL, v > 0)
    out[2, i] = cuda.any_sync(FULL, v > 0)
    out[3, i] = cuda.eq_sync(FULL, v > 0)
    if lane % 3 == 0:
        out[4, i] = cuda.ballot_sync(chosen, v > 0)
        out[5, i] = cuda.activemask()
    out[6, i] = cuda.lanemask_lt()
    out[7, i] = lane
    out[8, i] = cuda.ballot_sync(FULL, v > 0)


@cuda.jit(device=True)
def warp_sum(v):
    for off in (16, 8, 4, 2, 1):
        v += cuda.shfl_xor_sync(FULL, v, off)
    return v


@cuda.jit(device=True)
def warp_mean(v):
    return warp_sum(v) / float32(32.0)


@cuda.jit
def device_shuffles(x, out):
    i = cuda.grid(1)
    out[0, i] = warp_sum(x[i])
    out[1, i] = warp_mean(x[i])
    out[2, i] = reductions.warp_sum(x[i])  # through a module attribute


@cuda.jit
def keeps_float32(x, out):
    i = cuda.grid(1)
    w = cuda.shfl_xor_sync(FULL, x[i], 1)
    out[i] = w + float32(1e-8)  # 1.0 in float32 arithmetic, 1.00000001 had w become a float64


@cuda.jit
def block_total(x, out):
    part = cuda.shared.array(8, float32)
    t = cuda.threadIdx.x
    v = warp_sum(x[cuda.grid(1)])
    if t % 32 == 0:
        part[t // 32] = v
    cuda.syncthreads()
    if t == 0:
        s = float32(0.0)
        for w in range(cuda.blockDim.x // 32):
            s += part[w]
        cuda.atomic.add(out, 0, s)


@cuda.jit
def plain_copy(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i]


# --- values --------------------------------------------------------------------------------------


def test_every_shuffle_equals_the_hardware_model_including_the_warp_edges():
    """shfl/up/down/xor, lane operands -3..40: up keeps lanes < delta, down lanes > 31 - delta."""
    rng = np.random.default_rng(1)
    x = (np.arange(64) + 0.5).astype(np.float32)
    b = rng.integers(-3, 41, 64).astype(np.int64)
    b[:6] = (0, 1, 16, 31, 32, 33)
    rep = trace(shuffles, 2, 32, x, b, np.zeros((4, 64), np.float32))
    out = rep.outputs[2]
    for w in range(2):
        lanes = slice(32 * w, 32 * w + 32)
        for row, mode in enumerate(("idx", "up", "down", "bfly")):
            np.testing.assert_array_equal(out[row, lanes], shfl_model(mode, x[lanes], b[lanes]), mode)
    assert rep.warp_ops == dict.fromkeys(("shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync"), 2)


def test_partial_masks_form_separate_groups():
    """Lanes 0-15 shuffle up among themselves, lanes 16-31 down: each half clamps at its own edge."""
    x = (np.arange(32) * 1.5).astype(np.float32)
    out = trace(halves, 1, 32, x, np.zeros(32, np.float32)).outputs[1]
    up, down = shfl_model("up", x, np.full(32, 3)), shfl_model("down", x, np.full(32, 3))
    np.testing.assert_array_equal(out[:16], up[:16])
    np.testing.assert_array_equal(out[16:], down[16:])


def test_votes_ballot_under_divergence_activemask_and_lane_masks():
    x = np.ones(64, np.float32)
    x[32:] = np.where(np.arange(32) % 5 == 0, -1.0, 1.0)  # warp 1: some predicates false
    out = trace(votes, 2, 32, x, np.full((9, 64), -7, np.int64)).outputs[1]
    for w in range(2):
        lanes = slice(32 * w, 32 * w + 32)
        pred = x[lanes] > 0
        chosen = [i for i in range(32) if i % 3 == 0]
        assert (out[0, lanes] == ballot_model(LANES % 3 == 0, LANES)).all()
        assert (out[1, lanes] == pred.all()).all() and (out[2, lanes] == pred.any()).all()
        assert (out[3, lanes] == (pred.all() or not pred.any())).all()
        inside = out[:, lanes][:, chosen]
        assert (inside[4] == ballot_model(pred, chosen)).all()
        assert (inside[5] == sum(1 << i for i in chosen)).all()  # the lanes converged at the call
        assert (np.delete(out[4, lanes], chosen) == -7).all()
        np.testing.assert_array_equal(out[6, lanes], (1 << LANES) - 1)
        np.testing.assert_array_equal(out[7, lanes], LANES)
        assert (out[8, lanes] == ballot_model(pred, LANES)).all()
    assert out[8, 0] == -1 and out[8, 32] < 0  # lane 31's bit: numba's int32 ballot is negative
    assert out[0, 0] == ballot_model(LANES % 3 == 0, LANES) and out[0, 0] != 0
    full = trace(votes, 1, 32, np.ones(32, np.float32), np.zeros((9, 32), np.int64))
    assert full.warp_ops["ballot_sync"] == 3  # one per warp per call


def test_shuffles_in_device_functions_and_nested_ones():
    x = np.random.default_rng(2).random(64).astype(np.float32)
    rep = trace(device_shuffles, 2, 32, x, np.zeros((3, 64), np.float32))
    sums = np.repeat(butterfly_model(x.reshape(2, 32))[:, :1], 32, axis=1).ravel()
    np.testing.assert_array_equal(rep.outputs[1][0], sums)
    np.testing.assert_array_equal(rep.outputs[1][1], (sums / np.float32(32)).astype(np.float32))
    np.testing.assert_array_equal(rep.outputs[1][2], sums)
    assert rep.warp_ops == {"shfl_xor_sync": 3 * 5 * 2}


def test_a_shuffled_value_keeps_its_numpy_dtype():
    out = trace(keeps_float32, 1, 32, np.ones(32, np.float32), np.zeros(32, np.float64)).outputs[1]
    assert (out == 1.0).all()


def test_a_block_sum_with_warp_sum_and_one_atomic_equals_float32_in_the_same_order():
    """16 blocks of 256: the tracer's sum is bit for bit the float32 sum in the kernel's order
    (warp butterflies, the block's 8 partials in order, the blocks' atomics in launch order)."""
    x = np.random.default_rng(3).standard_normal(4096).astype(np.float32)
    start = time.perf_counter()
    rep = trace(block_total, 16, 256, x, np.zeros(1, np.float32))
    seconds = time.perf_counter() - start
    warps = butterfly_model(x.reshape(16, 8, 32))[:, :, 0]
    expected = np.float32(0.0)
    for block in warps:
        s = np.float32(0.0)
        for part in block:
            s = np.float32(s + part)
        expected = np.float32(expected + s)
    assert rep.outputs[1][0] == expected
    assert rep.atomics == 16 and rep.warp_ops == {"shfl_xor_sync": 16 * 8 * 5}
    assert rep.race_count == 0 and not rep.barrier_errors and rep.uninitialized_reads == 0
    assert seconds < 20, f"{seconds:.1f} s to trace 4096 threads"  # ~0.5 s alone on the 2-core CI machine


def test_the_course_reductions_trace_to_the_float32_sum():
    x = np.random.default_rng(4).random(4096).astype(np.float32)
    out = np.zeros(1, np.float32)
    rep = tracer.run(reductions.sum_atomic, 16, 256, x, out)  # block_sum: barriers in a device function
    assert np.isclose(out[0], x.sum(dtype=np.float64), rtol=1e-5) and rep.atomics == 16
    assert rep.race_count == 0 and rep.barrier_error_count == 0


# --- WarpError -----------------------------------------------------------------------------------


@cuda.jit
def returns_early(x, out):
    i = cuda.grid(1)
    if i >= 40:
        return
    out[i] = warp_sum(x[i])


@cuda.jit
def two_lines(x, out):
    i = cuda.grid(1)
    v = x[i]
    if cuda.laneid < 16:
        v = cuda.shfl_xor_sync(FULL, v, 1)
    else:
        v = cuda.shfl_xor_sync(FULL, v, 2)
    out[i] = v


@cuda.jit
def outside_mask(x, out):
    i = cuda.grid(1)
    v = x[i]
    if cuda.laneid < 16:
        v = cuda.shfl_down_sync(0xFFFF, v, 8)
    out[i] = v


@cuda.jit
def not_in_own_mask(x, out):
    i = cuda.grid(1)
    out[i] = cuda.shfl_xor_sync(0xFFFF, x[i], 1)


@cuda.jit
def shuffle_and_barrier(x, out):
    i = cuda.grid(1)
    v = x[i]
    if cuda.laneid < 16:
        v = cuda.shfl_xor_sync(FULL, v, 1)
    cuda.syncthreads()
    out[i] = v


def warp_error(kernel, blocks, threads, n=64):
    x = np.ones(n, np.float32)
    with pytest.raises(WarpError) as e:
        trace(kernel, blocks, threads, x, np.zeros(n, np.float32))
    assert isinstance(e.value, TraceError) and e.value.kernel == kernel.py_func.__name__
    return str(e.value)


def test_a_mask_naming_lanes_that_returned():
    msg = warp_error(returns_early, 1, 64)
    line = line_of(warp_sum, "shfl_xor_sync")
    assert msg.startswith(f"`cuda.shfl_xor_sync` in kernel `returns_early`, line {line}")
    assert "warp 1: lanes 0-7 (first thread (32, 0, 0)) wait here with mask 0xffffffff" in msg
    back = line_of(returns_early, "        return")
    assert f"lanes 8-31 (first thread (40, 0, 0)) returned on line {back} (`return`)" in msg
    assert "undefined behaviour" in msg and "guard the work instead of returning early" in msg


def test_lanes_at_another_call_do_not_hang_the_trace():
    msg = warp_error(two_lines, 1, 32)
    one, two = line_of(two_lines, "v, 1)"), line_of(two_lines, "v, 2)")
    assert f"line {one} (`v = cuda.shfl_xor_sync(FULL, v, 1)`)" in msg
    assert f"lanes 16-31 (first thread (16, 0, 0)) wait at `cuda.shfl_xor_sync` on line {two}" in msg


def test_a_full_mask_in_a_partial_last_warp():
    msg = warp_error(block_total, 1, 48)
    assert "warp 1: the mask 0xffffffff names lanes 16-31, which no thread of the block occupies" in msg
    assert "launch blocks of a multiple of 32 threads" in msg


def test_a_shuffle_reading_a_lane_outside_the_mask():
    msg = warp_error(outside_mask, 1, 32)
    assert f"line {line_of(outside_mask, 'shfl_down_sync')}" in msg
    assert "lane 8 reads lane 16, which is not in the mask 0x0000ffff" in msg


def test_a_lane_not_in_its_own_mask_and_lanes_at_a_barrier():
    assert "the calling lane 16 is not in its own mask 0x0000ffff" in warp_error(not_in_own_mask, 1, 32)
    msg = warp_error(shuffle_and_barrier, 1, 32)
    barrier = line_of(shuffle_and_barrier, "syncthreads")
    assert f"lanes 16-31 (first thread (16, 0, 0)) wait at the barrier on line {barrier}" in msg


# --- syncwarp: memory ordering among the lanes of a warp ------------------------------------------


@cuda.jit
def exchange(x, out, partner, sync):
    sm = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    sm[t] = x[t]
    if sync:
        cuda.syncwarp()
    out[t] = sm[t ^ partner]


def test_syncwarp_orders_a_warps_shared_exchange_and_nothing_more():
    x = np.arange(64, dtype=np.float32)
    synced = trace(exchange, 1, 64, x, np.zeros(64, np.float32), 1, 1)
    assert synced.race_count == 0 and synced.uninitialized_reads == 0
    np.testing.assert_array_equal(synced.outputs[1], x[np.arange(64) ^ 1])
    assert synced.warp_ops == {"syncwarp": 2}
    unsynced = trace(exchange, 1, 64, x, np.zeros(64, np.float32), 1, 0)
    assert unsynced.race_count == 64 and "read-write race on sm[" in str(unsynced.races[0])
    across = trace(exchange, 1, 64, x, np.zeros(64, np.float32), 32, 1)
    assert across.race_count == 64  # syncwarp does not order two warps


# --- running kernels the simulator cannot: trace.run, trace.launch, checks.run_kernel ----------------


def test_simulator_lacks_names_the_first_missing_call_through_device_functions():
    assert simulator_lacks(device_shuffles) == "cuda.shfl_xor_sync"
    assert simulator_lacks(votes) == "cuda.ballot_sync"
    assert simulator_lacks(exchange) == "cuda.syncwarp"
    assert simulator_lacks(plain_copy) is None
    assert simulator_lacks(reductions.sum_sequential) is None


def test_trace_run_writes_back_into_numpy_and_device_arrays():
    x = np.random.default_rng(5).random(64).astype(np.float32)
    out = np.zeros((3, 64), np.float32)
    rep = tracer.run(device_shuffles, 2, 32, x, out)
    np.testing.assert_array_equal(out, rep.outputs[1])
    dx, dout = cuda.to_device(x), cuda.to_device(np.zeros((3, 64), np.float32))
    tracer.run(device_shuffles, 2, 32, dx, dout)
    np.testing.assert_array_equal(dout.copy_to_host(), out)


@pytest.mark.skipif(device.mode() != "sim", reason="the dispatch of simulator mode")
def test_launch_run_traces_what_the_simulator_lacks_and_says_so_once(capsys):
    x = np.random.default_rng(6).random(4096).astype(np.float32)
    out = np.zeros(1, np.float32)
    tracer.simulator._TRACED.discard("block_total")
    tracer.launch(block_total, 16, 256, x, out)
    again = np.zeros(1, np.float32)
    tracer.launch(block_total, 16, 256, x, again)
    assert capsys.readouterr().out == (
        "block_total calls cuda.shfl_xor_sync, which Numba's simulator does not implement:\n"
        "cudalearn.trace ran it on the CPU, the 32 lanes of each warp in lockstep.\n"
    )
    assert out[0] == again[0] and np.isclose(out[0], x.sum(dtype=np.float64), rtol=1e-5)
    copy = np.zeros(40, np.float32)
    tracer.launch(plain_copy, 2, 32, x[:40], copy)  # the simulator's launch, nothing printed
    np.testing.assert_array_equal(copy, x[:40])
    assert capsys.readouterr().out == ""


@pytest.mark.skipif(device.mode() != "sim", reason="the dispatch of simulator mode")
def test_run_kernel_runs_a_shuffle_kernel_and_explains_a_bad_mask():
    x = np.random.default_rng(7).random(64).astype(np.float32)
    out = checks.run_kernel(device_shuffles, 2, 32, x, np.zeros((3, 64), np.float32))[1]
    np.testing.assert_array_equal(
        out[0], np.repeat(butterfly_model(x.reshape(2, 32))[:, :1], 32, axis=1).ravel()
    )
    with pytest.raises(
        AssertionError, match="the tracer, which runs your kernel's warp intrinsics here, found:"
    ):
        checks.run_kernel(returns_early, 1, 64, x, np.zeros(64, np.float32))


@cuda.jit
def shuffle_past_the_end(x, out):
    i = cuda.grid(1)
    out[i + 1] = warp_sum(x[i])


@pytest.mark.skipif(device.mode() != "sim", reason="the dispatch of simulator mode")
def test_run_kernel_names_an_out_of_bounds_access_of_a_traced_kernel():
    with pytest.raises(AssertionError, match=r"found by the tracer\): out-of-bounds write to out\[32\]"):
        checks.run_kernel(shuffle_past_the_end, 1, 32, np.ones(32, np.float32), np.zeros(32, np.float32))


# --- the real compiler accepts what these tests teach -----------------------------------------------


COMPILED = [
    (shuffles, (np.zeros(64, np.float32), np.zeros(64, np.int64), np.zeros((4, 64), np.float32))),
    (halves, (np.zeros(32, np.float32), np.zeros(32, np.float32))),
    (votes, (np.zeros(64, np.float32), np.zeros((9, 64), np.int64))),
    (device_shuffles, (np.zeros(64, np.float32), np.zeros((3, 64), np.float32))),
    (block_total, (np.zeros(64, np.float32), np.zeros(1, np.float32))),
    (exchange, (np.zeros(64, np.float32), np.zeros(64, np.float32), np.int32(1), np.int32(1))),
]


@pytest.mark.parametrize("kernel, args", COMPILED, ids=[k.py_func.__name__ for k, _ in COMPILED])
def test_numba_compiles_the_warp_kernels_for_a_t4(kernel, args):
    try:
        text = ptx.compile_for_gpu(kernel, args, cc=(7, 5))
    except ptx.CompilerUnavailable as e:
        pytest.skip(f"no real compiler here: {e}")
    assert "shfl.sync" in text or "vote.sync" in text or "bar.warp.sync" in text


@pytest.mark.skipif(device.mode() != "gpu", reason="compares the tracer with a device run")
def test_the_tracer_equals_the_gpu_bit_for_bit():
    rng = np.random.default_rng(8)
    x, b = rng.standard_normal(64).astype(np.float32), rng.integers(-3, 41, 64).astype(np.int64)
    for kernel, args in [
        (shuffles, (x, b, np.zeros((4, 64), np.float32))),
        (votes, (x, np.full((9, 64), -7, np.int64))),
        (device_shuffles, (x, np.zeros((3, 64), np.float32))),
    ]:
        dev = [cuda.to_device(a) for a in args]
        kernel[2, 32](*dev)
        np.testing.assert_array_equal(dev[-1].copy_to_host(), trace(kernel, 2, 32, *args).outputs[-1])
