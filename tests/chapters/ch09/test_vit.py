"""Chapter 9: patchify three ways, the patch embedding as a GEMM, FLOP counts, models, lab 9 checks."""

import re

import numpy as np
import pytest
import torch
from numba import cuda
from torch import nn

from cudalearn import checks, exercises
from cudalearn.chapters.ch09 import kernels as patchify_kernels
from cudalearn.chapters.ch09 import model as vit
from cudalearn.chapters.ch09.checks import _patchify_spec
from cudalearn.chapters.ch09.kernels import patchify, patchify_launch
from cudalearn.compile import ptx
from cudalearn.nn import datasets, op_costs
from cudalearn.runtime.launch import blocks
from cudalearn.trace import trace

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # small models: faster on one CPU thread


@pytest.mark.parametrize("shape, p", [((2, 3, 8, 12), 4), ((1, 1, 6, 6), 3), ((1, 2, 4, 4), 1)])
def test_three_ways_to_patchify_agree(shape, p):
    x = torch.randn(shape)
    a = vit.patchify_reshape(x, p)
    b, c, h, w = shape
    assert a.shape == (b, (h // p) * (w // p), c * p * p)
    torch.testing.assert_close(vit.patchify_unfold(x, p), a, rtol=0, atol=0)
    torch.testing.assert_close(vit.patchify_numba(x, p), a, rtol=0, atol=0)
    torch.testing.assert_close(vit.unpatchify(a, p, h, w), x, rtol=0, atol=0)
    torch.testing.assert_close(a[0, 1], x[0, :, 0:p, p : 2 * p].reshape(-1))  # token 1: patch row 0, column 1


def test_sizes_must_be_multiples_of_the_patch():
    with pytest.raises(ValueError, match="multiple"):
        vit.num_patches(10, 8, 4)
    with pytest.raises(ValueError, match="multiple"):
        patchify_launch((1, 3, 10, 8), 4)
    (gx, gy, gz), (bx, _, _) = patchify_launch((2, 3, 16, 8), 4)
    assert gx * bx >= 48 and gy == 8 and gz == 2 and bx % 32 == 0


def test_patchify_kernel_memory_access():
    img = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    sectors = {}
    for p in (2, 4, 8):
        out = np.zeros((1, (32 // p) ** 2, 3 * p * p), np.float32)
        grid, block = patchify_launch(img.shape, p)
        rep = trace(patchify, grid, block, img, out, np.int32(p))
        np.testing.assert_array_equal(rep.outputs[1], vit.patchify_reshape(torch.from_numpy(img), p).numpy())
        sectors[p] = (rep.global_load_sectors, rep.global_store_sectors)
    ideal = img.nbytes // 32
    assert sectors == {2: (4 * ideal, ideal * 4 // 3), 4: (2 * ideal, ideal), 8: (ideal, ideal)}


@pytest.mark.parametrize(
    "shape, p",
    [((2, 3, 8, 12), 2), ((2, 3, 8, 12), 4), ((3, 3, 16, 8), 8), ((1, 1, 6, 10), 2), ((2, 2, 12, 12), 4)],
)
def test_patchify_fast_equals_reshape_permute(shape, p):
    """The compile-time kernel on images, one or several, of 1 to 3 channels; patch rows of 1 to 6 patches."""
    img = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    b, c, h, w = shape
    out = checks.empty_output((b, (h // p) * (w // p), c * p * p), np.float32)
    griddim, blockdim = patchify_kernels.patchify_fast_launch(shape, p)
    got = checks.run_kernel(patchify_kernels.patchify_fast(c, p), griddim, blockdim, img, out)[1]
    np.testing.assert_array_equal(got, _patchify_spec(img, p))
    np.testing.assert_array_equal(got, vit.patchify_reshape(torch.from_numpy(img), p).numpy())
    assert patchify_kernels.patchify_fast(c, p) is patchify_kernels.patchify_fast(c, p), (
        "one compile per (C, p)"
    )


def test_patchify_fast_launch():
    per = patchify_kernels.PATCHES_PER_THREAD
    chapter = patchify_kernels.patchify_fast_launch((64, 3, 224, 224), 16)
    assert chapter == ((blocks(14, per), 14, 64), (16, 16, 1))
    (gx, gy, gz), block = patchify_kernels.patchify_fast_launch((2, 3, 8, 224), 2)
    assert block == (2, 2, 64) and gx * per * 64 >= 112 and (gy, gz) == (4, 2)  # blockDim.z is at most 64
    assert patchify_kernels.patchify_fast_launch((1, 3, 32, 32), 32)[1] == (32, 32, 1)
    with pytest.raises(ValueError, match="multiple"):
        patchify_kernels.patchify_fast_launch((1, 3, 10, 8), 4)
    with pytest.raises(ValueError, match="1024"):
        patchify_kernels.patchify_fast_launch((1, 3, 64, 64), 64)


@pytest.mark.parametrize("channels, p", [(3, 16), (3, 2), (1, 14), (4, 8)])
def test_patchify_fast_compiles_without_division_or_local_memory(channels, p):
    """Real PTX for a T4 and an H200: no division left, registers only, every load before the first store."""
    kernel = patchify_kernels.patchify_fast(channels, p)
    for cc in ((7, 5), (9, 0)):
        text = ptx.compile_for_gpu(kernel, cc=cc, signature="void(float32[:, :, :, ::1], float32[:, :, ::1])")
        assert f".target sm_{cc[0]}{cc[1]}" in text
        code = text[text.index(".entry") :]
        assert not re.search(r"[.]local\b", code), (
            f"C={channels}, p={p}: the held values spilled to local memory"
        )
        assert not re.search(r"\b(div|rem)[.]", code), f"C={channels}, p={p}: a division is left"
        loads = [m.start() for m in re.finditer(r"ld[.]global[.]f32", code)]
        stores = [m.start() for m in re.finditer(r"st[.]global[.]f32", code)]
        n = channels * patchify_kernels.PATCHES_PER_THREAD
        assert len(loads) == len(stores) == n and max(loads) < min(stores), (len(loads), len(stores))


@pytest.mark.parametrize("bias", [True, False])
def test_patch_embedding_is_a_linear_layer(bias):
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 7, kernel_size=4, stride=4, bias=bias)
    x = torch.randn(2, 3, 8, 12)
    lin = vit.linear_from_conv(conv)
    assert (lin.in_features, lin.out_features, lin.bias is None) == (48, 7, not bias)
    with torch.no_grad():
        torch.testing.assert_close(lin(vit.patchify_reshape(x, 4)), conv(x).flatten(2).transpose(1, 2))
    with pytest.raises(ValueError, match="kernel = stride"):
        vit.linear_from_conv(nn.Conv2d(3, 7, kernel_size=3, stride=1))


def test_gemm_embedding_equals_the_conv_one():
    torch.manual_seed(0)
    conv_embed = vit.PatchEmbedding(3, 8, 4)
    gemm_embed = vit.PatchEmbedding(3, 8, 4, gemm=True)
    gemm_embed.proj = vit.linear_from_conv(conv_embed.proj)
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(gemm_embed(x), conv_embed(x))


def test_models_shapes():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 16, 16)
    for gemm in (False, True):
        model = vit.ViT(image=16, patch=4, channels=3, dim=16, depth=2, heads=2, gemm_embed=gemm)
        assert model(x).shape == (2, 10) and model.tokens(x).shape == (2, 16, 16)
    assert vit.SmallCNN(channels=3, widths=(4, 8)).eval()(x).shape == (2, 10)
    assert vit.parameters(nn.Linear(3, 2)) == 8
    with pytest.raises(ValueError, match="heads"):
        vit.Attention(10, 3)


@pytest.mark.parametrize("n, d, heads, ratio", [(16, 32, 2, 2), (49, 24, 3, 4)])
def test_block_flops_match_the_flop_counter(n, d, heads, ratio):
    block = vit.TransformerBlock(d, heads, ratio).to("meta")
    counted = op_costs.op_flops(lambda: block(torch.empty(1, n, d, device="meta")))
    f = vit.block_flops(n, d, ratio)
    assert counted == {"addmm": f["projections"] + f["mlp"], "bmm": f["attention"]}
    assert vit.attention_share(n, d, ratio) == pytest.approx(f["attention"] / sum(f.values()))


def test_patch_halving_at_vit_base_costs_mostly_n_and_attention_crosses_at_2_plus_r_times_d():
    f = vit.patch_halving(224, 16, 768, 4)
    assert f["tokens"] == (196, 784) and f["crossover"] == 4608
    assert f["share"][0] == pytest.approx(4 * 196 / (24 * 768 + 4 * 196)) and f["share"][1] < 0.15
    assert 4 < f["growth"] < 4.5
    n = f["crossover"]
    assert vit.attention_share(n, 768, 4) == pytest.approx(0.5)  # attention = the rest at the crossover


def test_working_ops_of_a_block_leave_out_views_and_allocations():
    """9b divides a block's time by these operators: each computes or copies, none is a free view."""
    block = vit.TransformerBlock(24, 3).to("meta")
    with torch.no_grad():
        ops = op_costs.working_ops(lambda: block(torch.empty(2, 16, 24, device="meta")))
    assert ops.count("addmm") == 4 and ops.count("bmm") == 2 and ops.count("native_layer_norm") == 2
    assert {"_softmax", "gelu", "mul", "add"} <= set(ops)
    assert not {"view", "_unsafe_view", "transpose", "permute", "expand", "select", "t", "empty"} & set(ops)


def test_op_categories_and_time_shares():
    assert [op_costs.op_category(k) for k in ("aten::addmm", "aten::convolution_backward", "aten::gelu")] == [
        "matmul",
        "convolution",
        "other",
    ]
    model = vit.ViT(image=8, patch=4, dim=8, depth=1, heads=2)
    x, y = torch.randn(2, 1, 8, 8), torch.tensor([1, 2])

    def step():
        nn.functional.cross_entropy(model(x), y).backward()

    shares = op_costs.time_shares(step, cuda=False, repeat=1)
    assert shares["matmul"] > 0 and shares["total_ms"] > 0
    assert shares["matmul"] + shares["convolution"] + shares["other"] == pytest.approx(1)


def test_time_shares_print_no_profiler_chatter(capfd):
    model = vit.ViT(image=8, patch=4, dim=8, depth=1, heads=2)
    x, y = torch.randn(2, 1, 8, 8), torch.tensor([1, 2])
    op_costs.time_shares(lambda: nn.functional.cross_entropy(model(x), y).backward(), cuda=False, repeat=1)
    out, err = capfd.readouterr()
    assert "USDT" not in out + err and "profiler_start" not in out + err


def test_attention_cost_figure_from_formulas_and_times():
    from cudalearn.chapters.ch09 import figures as attention

    tokens = attention.tokens_of(["p=16, N=196", "p=8, N=784"])
    assert tokens == [196, 784]
    flops = {n: vit.block_flops(n, 192) for n in tokens}
    fig = attention.cost_against_tokens(flops, {196: 0.4, 784: 1.4}, dim=192, timed_label="test")
    left, right = fig.axes
    assert left.get_xscale() == left.get_yscale() == right.get_yscale() == "log"
    measured = right.get_lines()[0]
    assert list(measured.get_xdata()) == tokens and list(measured.get_ydata()) == [0.4, 1.4]
    attn = left.get_lines()[1].get_ydata()
    assert attn[1] / attn[0] == pytest.approx(16)  # 4x the tokens, 16x the attention FLOPs
    empty = attention.cost_against_tokens(flops, None, dim=192)
    assert "no GPU timing stored" in {t.get_text() for t in empty.axes[1].texts}


def test_receptive_fields():
    torch.manual_seed(0)
    cnn = vit.SmallCNN(widths=(4, 4)).eval()
    x = torch.randn(1, 1, 12, 12)
    assert vit.receptive_field(cnn.features[0], x, (0, 0, 6, 6)).sum() == 9
    model = vit.ViT(image=12, patch=4, dim=8, depth=1, heads=2).eval()
    assert vit.receptive_field(lambda t: model.blocks[0](model.tokens(t)), x, (0, 0, 0)).all()
    assert vit.receptive_field(model.tokens, x, (0, 0, 0)).sum() == 16  # before attention: its own patch


def test_shifted_digits():
    d = datasets.shifted_digits(canvas=12, train=50, test=30, seed=1)
    assert d.X_train.shape == (50, 1, 12, 12) and d.X_test.shape == (30, 1, 12, 12)
    assert float(d.X_train.min()) == -1.0 and float(d.X_train.max()) <= 1.0
    ink = (d.X_train[:, 0] > -1).any(dim=0)  # the digits land in different places
    assert ink.sum() > 64
    centred = datasets.shifted_digits(canvas=8, train=5, test=5)
    assert centred.X_train.shape[-1] == 8
    with pytest.raises(ValueError, match="canvas"):
        datasets.shifted_digits(canvas=6)
    with pytest.raises(ValueError, match="more than"):
        datasets.shifted_digits(train=1500, test=500)


def test_little_data_experiment_runs():
    assert vit.little_data_sizes(100, 900) == [100, 300, 900] and vit.little_data_sizes(100, 299) == [100]
    out = vit.cnn_vs_vit({"centred": (8, 2)}, [40], seeds=[0], test=50, epochs=1, batch=16, dim=8)
    acc = out["accuracy"]["centred"]
    assert set(acc) == {"CNN", "ViT"} and 0 <= acc["CNN"]["40"] <= 1
    assert out["params"]["CNN"] > 0
    assert vit.plot_learning_curves(out["accuracy"]).axes
    assert vit.plot_maps({"a": np.eye(3, dtype=bool)}).axes


def test_show_patches_draws_the_grid_and_tokens():
    img = (np.arange(32 * 48 * 3) % 255).reshape(32, 48, 3).astype(np.uint8)
    fig = vit.show_patches(img, 16, tokens=4)
    assert len(fig.axes) == 5


def test_lab9_checks_pass_on_solutions_and_catch_stubs():
    exercises.check_patchify(patchify)

    def linear_from_conv(conv):
        return vit.linear_from_conv(conv)

    exercises.check_patch_embedding(linear_from_conv, cases=[(1, 4, 4, 8, 2, False), (3, 8, 8, 8, 4, True)])
    exercises.check_attention_flops(lambda i, p, d: 4 * (i // p) ** 4 * d)

    @cuda.jit
    def stub(img, out, p):
        pass

    with pytest.raises(AssertionError, match=checks.NOT_DONE[:20]):
        exercises.check_patchify(stub)

    def not_done(*args):
        raise NotImplementedError()

    for check in (exercises.check_patch_embedding, exercises.check_attention_flops):
        with pytest.raises(AssertionError, match=checks.NOT_DONE[:20]):
            check(not_done)
    with pytest.raises(AssertionError, match="one of the two products"):
        exercises.check_attention_flops(lambda i, p, d: 2 * (i // p) ** 4 * d)


def test_lab9_checks_catch_bias_and_types():
    """A bias the conv lacks (random or zero), a float FLOP count, a kernel reading swapped patches."""

    def zero_bias(conv):
        lin = vit.linear_from_conv(conv)
        if lin.bias is None:
            lin = nn.Linear(lin.in_features, lin.out_features)
            with torch.no_grad():
                lin.weight.copy_(conv.weight.flatten(1))
                lin.bias.zero_()
        return lin

    with pytest.raises(AssertionError, match="all zeros"):
        exercises.check_patch_embedding(zero_bias, cases=[(1, 4, 4, 8, 2, False)])
    with pytest.raises(AssertionError, match="a float, where an int is asked for"):
        exercises.check_attention_flops(lambda i, p, d: 4.0 * (i // p) ** 4 * d)
    exercises.check_attention_flops(lambda i, p, d: np.int64(4 * (i // p) ** 4 * d))  # the one int rule

    @cuda.jit
    def column_major(img, out, p):
        e, n, b = cuda.grid(3)
        if b < out.shape[0] and n < out.shape[1] and e < out.shape[2]:
            rows = img.shape[2] // p
            i, j = n % rows, n // rows
            c, r, s = e // (p * p), (e // p) % p, e % p
            out[b, n, e] = img[b, c, i * p + r, j * p + s]

    with pytest.raises(AssertionError, match="column by column"):
        exercises.check_patchify(column_major)


def test_patchify_out_of_bounds_is_found_on_the_small_probe_image():
    """On a GPU an out-of-bounds read is silent: the check replays the kernel on a small image instead."""
    from cudalearn.chapters.ch09 import checks as vit_checks

    @cuda.jit
    def swapped(img, out, p):
        e, n, b = cuda.grid(3)
        if b < out.shape[0] and n < out.shape[1] and e < out.shape[2]:
            per_row = img.shape[3] // p
            i, j = n // per_row, n % per_row
            c, rs = e // (p * p), e % (p * p)
            out[b, n, e] = img[b, c, j * p + rs // p, i * p + rs % p]

    assert "H and W, swapped" in vit_checks._patchify_out_of_bounds(swapped, 32)
    assert vit_checks._patchify_out_of_bounds(patchify, 32) == ""
