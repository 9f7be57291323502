"""Chapter 5's kernels (naive, tiled, register-tiled, elementwise), their PTX, and lab 5's checks."""

import json
import math
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import cuda, float32

from cudalearn import checks, exercises
from cudalearn.chapters.ch05.bench import dropout_chain
from cudalearn.chapters.ch05.checks import coalesced_backward
from cudalearn.chapters.ch05.kernels import blocked, chain_pairs, linear, tiles
from cudalearn.chapters.ch05.kernels import elementwise as ew
from cudalearn.trace import trace

RNG = np.random.default_rng(0)
TOL = dict(rtol=1e-4, atol=1e-4)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# Elementwise kernels ---------------------------------------------------------------------------


def test_elementwise_network_kernels():
    m, n = 5, 11
    Z, b, A = rand(m, n), rand(n), np.maximum(rand(m, n), 0)
    g, bl = ew.launch_2d((m, n), (8, 4))
    checks.check_close(checks.run_kernel(ew.add_bias, g, bl, Z, b, checks.empty_output((m, n)))[2], Z + b)
    checks.check_close(checks.run_kernel(ew.relu, g, bl, Z, checks.empty_output((m, n)))[1], np.maximum(Z, 0))
    dZ = checks.run_kernel(ew.relu_backward, g, bl, Z, A, checks.empty_output((m, n)))[2]
    checks.check_close(dZ, Z * (A > 0))
    db = checks.run_kernel(ew.bias_grad, *ew.launch_1d(n), Z, checks.empty_output(n))[1]
    checks.check_close(db, Z.sum(0), **TOL)
    P = checks.run_kernel(ew.sgd_update_2d, g, bl, Z.copy(), A, np.float32(0.5))[0]
    checks.check_close(P, Z - np.float32(0.5) * A)
    p = checks.run_kernel(ew.sgd_update, *ew.launch_1d(n), b.copy(), b, np.float32(0.25))[0]
    checks.check_close(p, 0.75 * b)
    idx = np.array([3, 0, 4, 4, 1], dtype=np.int32)
    rows = checks.run_kernel(ew.gather_rows, g, bl, Z, idx, checks.empty_output((m, n)))[2]
    np.testing.assert_array_equal(rows, Z[idx])
    labels = np.arange(10, 15, dtype=np.int32)
    got = checks.run_kernel(ew.gather, *ew.launch_1d(m), labels, idx, checks.empty_output(m, np.int32))[2]
    np.testing.assert_array_equal(got, labels[idx])
    assert ew.launch_1d(16) == (1, 32) and ew.launch_1d(10_000) == (40, 256)


def test_softmax_xent_gives_the_mean_loss_and_its_gradient():
    m, c = 7, 10
    logits, labels = 3 * rand(m, c), RNG.integers(0, c, m).astype(np.int32)
    losses = np.zeros(3, np.float32)
    out = checks.run_kernel(
        ew.softmax_xent,
        *ew.launch_1d(m),
        logits,
        labels,
        checks.empty_output((m, c)),
        losses,
        1,
        np.float32(1 / m),
    )
    z = logits.astype(np.float64)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    loss = -np.log(p[np.arange(m), labels]).mean()
    onehot = np.eye(c)[labels]
    checks.check_close(out[2], ((p - onehot) / m).astype(np.float32), **TOL)
    checks.check_close(out[3], np.array([0, loss, 0], np.float32), **TOL)


def test_chain_unfused_equals_fused_equals_numpy():
    Z, b, mask, s = ew.chain_inputs(6, 40, seed=3)
    g, bl = ew.launch_chain(Z.shape, (8, 4))
    assert g == (2, 2), "4 columns a thread: 2 blocks of 8 threads cover 40 columns"
    Y = checks.run_kernel(ew.bias_relu_dropout, g, bl, Z, b, mask, s, checks.empty_output(Z.shape))[4]
    expected = ew.chain_reference(Z, b, mask, s)
    checks.check_close(Y, expected)
    U = checks.run_kernel(ew.chain_bias, g, bl, Z, b, checks.empty_output(Z.shape))[2]
    U = checks.run_kernel(ew.chain_relu, g, bl, U)[0]
    U = checks.run_kernel(ew.chain_mask, g, bl, U, mask)[0]
    U = checks.run_kernel(ew.chain_scale, g, bl, U, s)[0]
    checks.check_close(U, expected)
    np.testing.assert_array_equal(checks.run_kernel(ew.copy_2d, g, bl, Z, checks.empty_output(Z.shape))[1], Z)
    g1, bl1 = ew.launch_chain((3, 7), (8, 4))  # fewer columns than one thread's EPT span
    np.testing.assert_array_equal(
        checks.run_kernel(ew.copy_2d, g1, bl1, Z[:3, :7].copy(), checks.empty_output((3, 7)))[1], Z[:3, :7]
    )
    checks.run_kernel(ew.empty_kernel, 1, 32, np.zeros(1, np.float32))


def test_chain_bytes_match_the_tracer_exactly():
    rows, cols = 8, 64
    Z, b, mask, s = ew.chain_inputs(rows, cols)
    g, bl = ew.launch_chain((rows, cols))
    counts = ew.chain_bytes(rows, cols)
    reps = {
        "chain_bias": trace(ew.chain_bias, g, bl, Z, b, Z),
        "chain_relu": trace(ew.chain_relu, g, bl, Z),
        "chain_mask": trace(ew.chain_mask, g, bl, Z, mask),
        "chain_scale": trace(ew.chain_scale, g, bl, Z, s),
        "fused": trace(ew.bias_relu_dropout, g, bl, Z, b, mask, s, Z),
    }
    for name, rep in reps.items():
        assert 32 * rep.global_sectors == counts[name], name
    assert counts["unfused"] - counts["fused"] == counts["saved"] == 24 * rows * cols
    assert counts["dram_min"] == 9 * rows * cols + 4 * cols


def test_paired_chain_equals_the_scalar_fused_kernel_bit_for_bit():
    for rows, cols in ((6, 40), (3, 2), (5, 22)):  # 22: a tail pair past the last whole block
        Z, b, mask, s = ew.chain_inputs(rows, cols, seed=5)
        g, bl = ew.launch_chain(Z.shape, (8, 4))
        want = checks.run_kernel(ew.bias_relu_dropout, g, bl, Z, b, mask, s, checks.empty_output(Z.shape))[4]
        Y = np.full_like(Z, np.nan)
        chain_pairs.fused_chain_pairs(Z, b, mask, s, Y, block=(8, 4))
        np.testing.assert_array_equal(Y, want)
    # 11 pairs, 2 a thread, 8 threads a row
    assert chain_pairs.launch_pairs((5, 22), (8, 4)) == ((1, 2), (8, 4))


@pytest.mark.parametrize("pairs", [1, 2, 4])
def test_unsigned_paired_chain_equals_the_scalar_fused_kernel_bit_for_bit(pairs):
    """Shapes off the grid: rows off the block, one pair a row, a tail pair, a single row of 9 pairs."""
    kernel = chain_pairs.bias_relu_dropout_pairs_u32(pairs)
    assert chain_pairs.bias_relu_dropout_pairs_u32(pairs) is kernel, "one compile per number of pairs"
    for rows, cols in ((6, 40), (3, 2), (5, 22), (1, 18)):
        Z, b, mask, s = ew.chain_inputs(rows, cols, seed=7)
        g, bl = ew.launch_chain(Z.shape, (8, 4))
        want = checks.run_kernel(ew.bias_relu_dropout, g, bl, Z, b, mask, s, checks.empty_output(Z.shape))[4]
        Y = np.full_like(Z, np.nan)
        grid, block = chain_pairs.launch_pairs(Z.shape, (8, 4), pairs)
        Z2, b2, mask2, Y2 = chain_pairs.pair_views(Z, b, mask, Y)  # Y2 views Y: the kernel writes into Y
        kernel[grid, block](Z2, b2, mask2, s, Y2)
        np.testing.assert_array_equal(Y, want, err_msg=f"pairs={pairs}, shape={(rows, cols)}")
    # 11 pairs, 4 a thread: 3 threads a row
    assert chain_pairs.launch_pairs((5, 22), (8, 4), 4) == ((1, 2), (8, 4))
    with pytest.raises(ValueError, match="pairs must be a positive int"):
        chain_pairs.bias_relu_dropout_pairs_u32(0)


@pytest.mark.parametrize("cc", [(7, 5), (9, 0)])
def test_unsigned_paired_chain_compiles_without_wrap_around_code(cc):
    """Real PTX for a T4 and an H200: 8-byte loads and stores only, registers, float32 arithmetic, every load
    before the first store, and none of the wrap-around code of a signed index that the paired kernel has."""
    from cudalearn.compile import ptx

    sig = chain_pairs.SIGNATURES["bias_relu_dropout_pairs"]

    def ops_of(kernel):
        text = ptx.compile_for_gpu(kernel, cc=cc, signature=sig)
        body = text[text.index("{", text.index(".entry")) :]
        assert not re.search(r"[.]local\b", body), "the held pairs spilled to local memory"
        assert not re.search(r"\b(add|sub|mul|fma|max|min|setp)([.][a-z0-9]+)*[.]f64", body), "float64 math"
        return [ln.split()[0] for ln in body.splitlines() if ln.strip().endswith(";")]

    for pairs in (1, *dropout_chain.PAIRS_U32):
        ops = ops_of(chain_pairs.bias_relu_dropout_pairs_u32(pairs))
        loads = [i for i, op in enumerate(ops) if op.startswith("ld.global")]
        stores = [i for i, op in enumerate(ops) if op.startswith("st.global")]
        assert ops.count("ld.global.f64") == 2 * pairs and ops.count("ld.global.u16") == pairs, (pairs, ops)
        assert stores and all(ops[i] == "st.global.f64" for i in stores) and len(stores) == pairs
        assert max(loads) < min(stores), f"pairs={pairs}: a store before the last load"
        wrap = [op for op in ops if op in ("shr.s64", "and.b64") or op.startswith("selp")]
        assert not wrap, f"pairs={pairs}: wrap-around code of a signed index: {wrap}"
    signed = ops_of(chain_pairs.bias_relu_dropout_pairs)
    assert signed.count("shr.s64") > 0 and signed.count("and.b64") > 0, "the signed kernel wraps its indices"


def _load_then_math(kernel, signature):
    """(index of the last global load, index of the first float instruction) in sm_90 SASS, or a skip."""
    from cudalearn.compile import ptx, toolchain

    if toolchain.find_tool("ptxas") is None or toolchain.find_tool("cuobjdump") is None:
        pytest.skip("ptxas and cuobjdump are needed to read the machine code")
    ops = toolchain.sass_opcodes(ptx.compile_for_gpu(kernel, cc=(9, 0), signature=signature), (9, 0))
    loads = [i for i, op in enumerate(ops) if op.startswith("LDG")]
    math = [i for i, op in enumerate(ops) if op.split(".")[0] in ("FADD", "FMUL", "FMNMX", "FFMA", "I2F")]
    return max(loads), min(math)


def test_unsigned_paired_chain_issues_every_load_before_its_arithmetic():
    """Chapter 5, section 17: in the machine code, the paired kernel's second pair's loads wait for the
    first pair's add; the unsigned-index kernel issues all its loads first, for every number of pairs."""
    sig = chain_pairs.SIGNATURES["bias_relu_dropout_pairs"]
    for pairs in dropout_chain.PAIRS_U32:
        last_load, first_math = _load_then_math(chain_pairs.bias_relu_dropout_pairs_u32(pairs), sig)
        assert last_load < first_math, f"pairs={pairs}: arithmetic before the last load"
    last_load, first_math = _load_then_math(chain_pairs.bias_relu_dropout_pairs, sig)
    assert first_math < last_load, "the text says the paired kernel adds before its last pair's loads"


def test_best_fused_picks_the_fastest_timed_fused_kernel():
    rows = [
        {"name": "unfused: 4 kernels", "gbps": 900.0},
        {"name": "fused: 1 kernel", "gbps": 2500.0},
        {"name": dropout_chain.PAIRED, "gbps": 3500.0},
        {"name": dropout_chain.u32_name(4), "gbps": 3700.0},
        {"name": "copy (torch)", "gbps": 4200.0},  # not a fused kernel
    ]
    assert dropout_chain.best_fused(rows) == (dropout_chain.u32_name(4), 3700.0)
    assert dropout_chain.best_fused(rows[:3]) == (dropout_chain.PAIRED, 3500.0)  # a run older than u32
    assert dropout_chain.best_fused([{"name": "fused: 1 kernel"}]) == (None, None)  # no GPU times


def test_paired_chain_refuses_what_it_cannot_view_in_pairs():
    Z, b, mask, s = ew.chain_inputs(4, 7)
    with pytest.raises(ValueError, match="even number of columns"):
        chain_pairs.fused_chain_pairs(Z, b, mask, s, np.empty_like(Z))
    Z, b, mask, s = ew.chain_inputs(4, 8)
    with pytest.raises(TypeError, match="mask: expected a 2-D uint8 array, got 2-D float32"):
        chain_pairs.fused_chain_pairs(Z, b, mask.astype(np.float32), s, np.empty_like(Z))
    with pytest.raises(ValueError, match="shapes"):
        chain_pairs.fused_chain_pairs(Z, b[:4], mask, s, np.empty_like(Z))
    shifted = np.zeros(Z.size + 1, np.float32)[1:].reshape(Z.shape)  # contiguous, 4 bytes off the 8
    shifted[...] = Z
    with pytest.raises(ValueError, match="Z starts at an address that is not a multiple of 8 bytes"):
        chain_pairs.fused_chain_pairs(shifted, b, mask, s, np.empty_like(Z))
    Y = np.empty_like(Z)
    chain_pairs.fused_chain_pairs(shifted.copy(), b, mask, s, Y)  # a copy is allocated whole: accepted
    wide = np.zeros((Z.shape[0], Z.shape[1] + 3), np.float32)
    with pytest.raises(ValueError, match="Z is not C-contiguous"):  # rows 44 bytes apart: odd rows misaligned
        chain_pairs.fused_chain_pairs(wide[:, : Z.shape[1]], b, mask, s, Y)


def test_chain_candidates_run_and_agree():
    copies, chain, check = dropout_chain.chain_candidates(5, 22, seed=4)
    outs, expected = check()
    assert set(outs) == set(copies) | set(chain)
    for name, got in outs.items():
        checks.check_close(got, expected["copy" if name.startswith("copy") else "chain"], name=name)


# Matrix products -------------------------------------------------------------------------------


@pytest.mark.parametrize("m, k, n", [(13, 7, 11), (1, 1, 1)])
def test_naive_backward_products(m, k, n):
    A, B = rand(m, k), rand(n, k)
    C = checks.run_kernel(
        linear.matmul_bt_naive, ((n + 7) // 8, (m + 7) // 8), (8, 8), A, B, checks.empty_output((m, n))
    )
    checks.check_close(C[2], A @ B.T, **TOL)
    A2, B2 = rand(k, m), rand(k, n)
    C = checks.run_kernel(
        linear.matmul_at_naive, ((n + 7) // 8, (m + 7) // 8), (8, 8), A2, B2, checks.empty_output((m, n))
    )
    checks.check_close(C[2], A2.T @ B2, **TOL)


def test_tiled_kernels_off_the_tile_grid():
    plain, fused_relu = linear.tiled(8)
    X, W, b = rand(13, 19), rand(19, 9), rand(9)
    grid, block = linear.tiled_launch(13, 9, 8)
    checks.check_close(
        checks.run_kernel(plain, grid, block, X, W, checks.empty_output((13, 9)))[2], X @ W, **TOL
    )
    Y = checks.run_kernel(fused_relu, grid, block, X, W, b, checks.empty_output((13, 9)))[3]
    checks.check_close(Y, np.maximum(X @ W + b, 0), **TOL)


def _blocked_results(run, cfg, m, k, n):
    """Outputs of the four register-tiled kernels of `cfg` for batch m, k inputs, n outputs, and their specs.

    run(kernel, griddim, blockdim, *args) returns the arrays after the launch.
    """
    kb = blocked.blocked(cfg)
    X, W, b, dZ = rand(m, k), rand(k, n), rand(n), rand(m, n)
    A = np.maximum(rand(m, k), 0)
    got, want = {}, {}
    got["forward"] = run(kb["linear_forward"], *cfg.launch(m, n), X, W, b, np.zeros((m, n), np.float32), 1)[3]
    want["forward"] = np.maximum(X @ W + b, 0)
    got["logits"] = run(kb["linear_forward"], *cfg.launch(m, n), X, W, b, np.zeros((m, n), np.float32), 0)[3]
    want["logits"] = X @ W + b
    WT = np.ascontiguousarray(W.T)
    got["input"] = run(
        kb["linear_backward_input"], *cfg.launch(m, k), dZ, WT, A, np.zeros((m, k), np.float32)
    )[3]
    want["input"] = (dZ @ W.T) * (A > 0)
    out = run(
        kb["linear_backward_weight"],
        *cfg.launch(k, n),
        X,
        dZ,
        np.zeros((k, n), np.float32),
        np.zeros(n, np.float32),
    )
    got["dW"], got["db"] = out[2], out[3]
    want["dW"], want["db"] = X.T @ dZ, dZ.sum(0)
    lr = np.float32(0.5)
    out = run(
        kb["sgd_transpose"],
        *cfg.sgd_launch(k, n),
        W.copy(),
        out[2],
        np.zeros((n, k), np.float32),
        b.copy(),
        out[3],
        lr,
    )
    got["W"], got["WT"], got["b"] = out[0], out[2], out[3]
    want["W"] = W - lr * want["dW"]
    want["WT"], want["b"] = want["W"].T, b - lr * want["db"]
    return got, want


def test_register_tiled_kernels_under_the_simulator():
    got, want = _blocked_results(checks.run_kernel, tiles.SIM_TILES, 11, 13, 10)
    for name in want:
        checks.check_close(got[name], want[name].astype(np.float32), name=name, rtol=1e-4, atol=1e-3)


def test_register_tiled_gpu_configuration_through_the_tracer():
    """The GPU's 64 x 64 tiles, which the simulator never runs, checked by the tracer off the tile grid."""
    reports = []

    def run(kernel, griddim, blockdim, *args):
        rep = trace(kernel, griddim, blockdim, *args)
        assert rep.race_count == 0, rep.races[:1]
        reports.append(rep)
        return rep.outputs

    got, want = _blocked_results(run, tiles.GPU_TILES, 65, 17, 10)  # two row tiles, partial tiles
    for name in want:
        checks.check_close(got[name], want[name].astype(np.float32), name=name, rtol=1e-4, atol=1e-3)
    by_kernel = {r.kernel: r for r in reports}
    assert by_kernel["linear_backward_weight"].bank_conflicts == 0
    assert by_kernel["sgd_transpose"].bank_conflicts == 0


def test_the_padding_column_removes_the_transposed_store_conflicts():
    X, dZ = rand(16, 64), rand(16, 64)
    args = (X, dZ, np.zeros((64, 64), np.float32), np.zeros(64, np.float32))
    launch = tiles.GPU_TILES.launch(64, 64)
    padded = trace(blocked.linear_backward_weight, *launch, *args)
    unpadded = trace(blocked.linear_backward_weight_unpadded, *launch, *args)
    assert padded.bank_conflicts == 0
    # one tile of 16 rows: 1024 stores in 32 warp requests of 16 wavefronts each instead of 1
    assert unpadded.bank_conflicts == 32 * 15
    checks.check_close(unpadded.outputs[2], padded.outputs[2])


def test_pre_transposed_weights_are_read_coalesced():
    dZ, W = rand(8, 32), rand(64, 32)
    grid, block = (2, 1), (32, 8)
    stored = trace(linear.matmul_bt_naive, grid, block, dZ, W, np.zeros((8, 64), np.float32))
    from cudalearn.chapters.ch02.kernels.matmul import matmul_naive

    transposed = trace(
        matmul_naive, grid, block, dZ, np.ascontiguousarray(W.T), np.zeros((8, 64), np.float32)
    )
    warps, steps = 8 * 64 // 32, 32
    assert stored.global_sectors == warps * (steps * 33 + 4)
    assert transposed.global_sectors == warps * (steps * 5 + 4)


def test_tiles_configurations():
    assert tiles.GPU_TILES.threads == (16, 16) and tiles.SIM_TILES.threads == (4, 4)
    assert tiles.GPU_TILES.launch(1024, 10) == ((1, 16), (16, 16))
    assert tiles.tiles_for_mode("sim") is tiles.SIM_TILES
    assert tiles.tiles_for_mode("gpu") is tiles.GPU_TILES
    with pytest.raises(ValueError, match="divide evenly"):
        blocked.make_blocked(tiles.Tiles(bm=8, bn=8, bk=3, tm=2, tn=2))


def test_the_constants_table_is_what_the_kernels_use():
    c = tiles.constants(tiles.GPU_TILES)
    values = {name: value for name, (value, _) in c.items()}
    assert values == {
        "BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4, "TX": 16, "TY": 16, "NT": 256,
        "A_LOADS": 4, "B_LOADS": 4, "BKP": 17, "TT": 32, "TR": 8, "TTP": 33,
    }  # fmt: skip
    assert tiles.constants(tiles.GPU_TILES, pad=0)["BKP"][0] == 16
    assert (values["TX"], values["TY"]) == tiles.GPU_TILES.threads
    assert all(meaning for _, meaning in c.values()), "every constant says what it means"
    assert set(ew.CONSTANTS) == {"BLOCK_2D", "EPT", "PAIRS"} and ew.CONSTANTS["EPT"][0] == ew.EPT


def test_chapter_5_figures_draw_from_their_inputs():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cudalearn.chapters.ch05 import figures as figs

    fig = figs.register_patch(tiles.GPU_TILES)
    owner = fig.axes[0].images[0].get_array()
    assert owner.shape == (64, 64) and (owner == 1).sum() == 16, "thread (0, 0) owns a 4x4 patch"
    assert owner[16, 0] == 1 and owner[0, 16] == 1 and owner[1, 0] == 3, "rows and columns 16 apart"
    rows, cols = tiles.GPU_TILES.thread_outputs(1, 0)
    assert rows == [0, 16, 32, 48] and cols == [1, 17, 33, 49]
    fig = figs.bytes_on_diagonal({"a": {"k": (8.0, 7.5)}, "b": {"x": (1.0, 1.0), "y": (2.0, 2.0)}})
    assert len(fig.axes) == 2 and len(fig.axes[1].collections[0].get_offsets()) == 2
    sweep = {"batches": [64, 128], "fused_ms_per_step": [1.0, 1.1], "torch_ms_per_step": [1.2, 1.3]}
    assert len(figs.batch_sweep(sweep, 0.3, 12, "test").axes) == 2
    plt.close("all")


def test_chapter_5_kernels_compile_to_ptx_in_registers_and_float32():
    """The register-tiled kernels keep their patches in registers (no local memory), all in float32."""
    code = """
    import json, re, cudalearn
    cudalearn.setup("compile", quiet=True)
    from numba import cuda
    from cudalearn.chapters.ch05.kernels import blocked, chain_pairs, elementwise, linear
    out = {}
    for m in (linear, blocked, elementwise, chain_pairs):
        for name, sig in m.SIGNATURES.items():
            ptx, _ = cuda.compile_ptx(getattr(m, name).py_func, sig, cc=(9, 0))
            local = len(re.findall(r"(ld|st)[.]local", ptx))
            f64_math = bool(re.search(r"\b(add|sub|mul|fma|div|max|min)([.][a-z]+)*[.]f64", ptx))
            ops = ("ld.global.f32", "ld.global.f64", "st.global.f32", "st.global.f64")
            mem = {op: len(re.findall(op.replace(".", "[.]"), ptx)) for op in ops}
            out[name] = [local, f64_math, len(re.findall("fma[.]rn[.]f32", ptx)), mem]
    print(json.dumps(out))
    """
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "CUDALEARN_MODE")}
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    ptx = json.loads(r.stdout.strip().splitlines()[-1])
    for name, (local, f64, _, _) in ptx.items():
        assert local == 0, f"{name} uses local memory: its register patch spilled"
        assert not f64, f"{name} computes in float64"
    assert ptx["linear_forward"][2] >= 16, "the 4 x 4 patch should unroll into at least 16 FMAs"
    # the paired chain kernel moves its float32 data 8 bytes at a time, never 4
    mem = ptx["bias_relu_dropout_pairs"][3]
    assert mem["ld.global.f32"] == mem["st.global.f32"] == 0, mem
    assert mem["ld.global.f64"] == 2 * ew.PAIRS and mem["st.global.f64"] == ew.PAIRS, mem
    assert ptx["bias_relu_dropout"][3]["ld.global.f32"] == 2 * ew.EPT, (
        "the scalar kernel: Z and b, 4 bytes each"
    )


# Lab 5's checks --------------------------------------------------------------------------------

TILE = 8


@cuda.jit
def no_relu(X, W, b, Y):
    col, row = cuda.grid(2)
    if row < Y.shape[0] and col < Y.shape[1]:
        acc = float32(0.0)
        for k in range(X.shape[1]):
            acc += X[row, k] * W[k, col]
        Y[row, col] = acc + b[col]


@cuda.jit
def one_barrier(X, W, b, Y):
    sX = cuda.shared.array((TILE, TILE), float32)
    sW = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row, col = cuda.blockIdx.y * TILE + ty, cuda.blockIdx.x * TILE + tx
    K = X.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        sX[ty, tx] = X[row, k0 + tx] if row < X.shape[0] and k0 + tx < K else float32(0.0)
        sW[ty, tx] = W[k0 + ty, col] if k0 + ty < K and col < W.shape[1] else float32(0.0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += sX[ty, k] * sW[k, tx]
    if row < Y.shape[0] and col < Y.shape[1]:
        Y[row, col] = max(acc + b[col], float32(0.0))


@cuda.jit
def stores_twice(X, W, b, Y):
    col, row = cuda.grid(2)
    if row < Y.shape[0] and col < Y.shape[1]:
        acc = float32(0.0)
        for k in range(X.shape[1]):
            acc += X[row, k] * W[k, col]
        Y[row, col] = acc
        Y[row, col] = max(Y[row, col] + b[col], float32(0.0))


@cuda.jit
def accumulates_into_y(X, W, b, Y):
    col, row = cuda.grid(2)
    if row < Y.shape[0] and col < Y.shape[1]:
        for k in range(X.shape[1]):
            Y[row, col] += X[row, k] * W[k, col]
        Y[row, col] = max(Y[row, col] + b[col], float32(0.0))


@cuda.jit
def backward_reads_a_in_loop(dZ, WT, A, dA):
    col, row = cuda.grid(2)
    if row < dA.shape[0] and col < dA.shape[1]:
        acc = float32(0.0)
        for j in range(dZ.shape[1]):
            acc += dZ[row, j] * WT[j, col] * (A[row, col] > float32(0.0))
        dA[row, col] = acc


@cuda.jit
def backward_swapped(dZ, WT, A, dA):
    row, col = cuda.grid(2)  # x along the rows: uncoalesced
    if row < dA.shape[0] and col < dA.shape[1]:
        acc = float32(0.0)
        for j in range(dZ.shape[1]):
            acc += dZ[row, j] * WT[j, col]
        dA[row, col] = acc if A[row, col] > float32(0.0) else float32(0.0)


@cuda.jit
def backward_good(dZ, WT, A, dA):
    col, row = cuda.grid(2)
    if row < dA.shape[0] and col < dA.shape[1]:
        acc = float32(0.0)
        for j in range(dZ.shape[1]):
            acc += dZ[row, j] * WT[j, col]
        dA[row, col] = acc if A[row, col] > float32(0.0) else float32(0.0)


def test_lab_checks_pass_the_reference_kernels():
    kernel = linear.tiled(TILE)[1]
    exercises.check_linear_relu(kernel, TILE)
    exercises.check_linear_relu_stores_once(kernel, TILE)

    def layer_forward(X, W, b):
        Y = cuda.device_array((X.shape[0], W.shape[1]), np.float32)
        kernel[linear.tiled_launch(X.shape[0], W.shape[1], TILE)](X, W, b, Y)
        return Y

    exercises.check_layer_forward(layer_forward, kernel)
    exercises.check_backward_input(backward_good)
    exercises.check_epilogue_bytes(lambda m, n, f: (8 if f else 24) * m * n)


def test_lab_checks_catch_wrong_fused_kernels():
    with pytest.raises(AssertionError, match="without the ReLU"):
        exercises.check_linear_relu(no_relu, TILE, sizes=[(9, 5, 7)])
    with pytest.raises(AssertionError, match="race"):
        exercises.check_linear_relu(one_barrier, TILE, sizes=[(8, 8, 8)])
    # right result, but the tracer counts two stores and a read of each output
    with pytest.raises(AssertionError, match=r"stored Y\[0, 0\] 2 times .* and read 1 times"):
        exercises.check_linear_relu(stores_twice, TILE, sizes=[(9, 5, 7)])
    with pytest.raises(AssertionError, match="stores each output once"):
        exercises.check_linear_relu_stores_once(stores_twice, TILE)
    with pytest.raises(AssertionError, match=r"reads `Y` before writing it .* not zeroed"):
        exercises.check_linear_relu(accumulates_into_y, TILE, sizes=[(9, 5, 7)])


def test_lab_checks_catch_wrong_layer_forwards():
    kernel = linear.tiled(TILE)[1]

    def unfused(X, W, b):
        Z = cuda.device_array((X.shape[0], W.shape[1]), np.float32)
        grid = linear.tiled_launch(X.shape[0], W.shape[1], TILE)
        linear.tiled(TILE)[0][grid](X, W, Z)
        ew.add_bias[grid](Z, b, Z)
        ew.relu[grid](Z, Z)
        return Z

    def on_the_host(X, W, b):
        return cuda.to_device(np.maximum(X.copy_to_host() @ W.copy_to_host() + b.copy_to_host(), 0))

    def returns_host(X, W, b):
        Y = cuda.device_array((X.shape[0], W.shape[1]), np.float32)
        kernel[linear.tiled_launch(X.shape[0], W.shape[1], TILE)](X, W, b, Y)
        return Y.copy_to_host

    def not_done(X, W, b):
        raise NotImplementedError()

    with pytest.raises(AssertionError, match="3 launches: matmul_tiled_plain, add_bias, relu"):
        exercises.check_layer_forward(unfused, kernel, sizes=[(3, 4, 5)])
    with pytest.raises(AssertionError, match="copied 3 array"):
        exercises.check_layer_forward(on_the_host, kernel, sizes=[(3, 4, 5)])
    with pytest.raises(AssertionError, match="returned a method"):
        exercises.check_layer_forward(returns_host, kernel, sizes=[(3, 4, 5)])
    with pytest.raises(AssertionError, match="not done yet"):
        exercises.check_layer_forward(not_done, kernel, sizes=[(3, 4, 5)])

    def with_no_relu(X, W, b):  # a right launch of a kernel that is wrong itself
        Y = cuda.device_array((X.shape[0], W.shape[1]), np.float32)
        no_relu[linear.tiled_launch(X.shape[0], W.shape[1], TILE)](X, W, b, Y)
        return Y

    # never skipped on exercise 1's account: the values are compared, and the message names the kernel
    with pytest.raises(AssertionError, match=r"(?s)is wrong at .*your kernel from exercise 1 gives wrong"):
        exercises.check_layer_forward(with_no_relu, no_relu, sizes=[(9, 5, 7)], tile=TILE)


def test_lab_checks_catch_uncoalesced_backward_and_wrong_bytes():
    with pytest.raises(AssertionError, match="sectors of 32 bytes on average"):
        exercises.check_backward_input(backward_swapped, sizes=[(5, 3, 7)])  # right result, uncoalesced
    with pytest.raises(AssertionError, match="A` is read 8.0 times as often as needed"):
        exercises.check_backward_coalesced(backward_reads_a_in_loop)
    assert coalesced_backward._backward_ideal_sectors(64, 8, 64) == 128 * (8 * 5 + 4)
    with pytest.raises(AssertionError, match="epilogue_bytes"):
        exercises.check_epilogue_bytes(lambda m, n, f: (4 if f else 12) * m * n)
    with pytest.raises(AssertionError, match="a float, where an int is asked for"):
        exercises.check_epilogue_bytes(lambda m, n, f: (8.0 if f else 24.0) * m * n)
    assert math.isclose(coalesced_backward.MAX_SECTORS_PER_LOAD, 4.0)
