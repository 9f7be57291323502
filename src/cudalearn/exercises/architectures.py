"""Checks of labs 8-9 (ResNet skip gradients, ViT patching), built on `checks`.

Every check compares the student's code with PyTorch: outputs with the
reference computation, gradients with autograd, FLOP counts with
`torch.utils.flop_counter`. Visible checks use a few sizes; the hidden
tests in the solution notebooks call the same functions with others.
Sizes stay small under the simulator.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cudalearn import checks, device


def _call(fn: Callable[..., Any], name: str, *args: Any) -> Any:
    """fn(*args), with NotImplementedError turned into the 'not done yet' message."""
    return checks.call_student(fn, name, *args)


def _as_tensor(value: Any, name: str, like: Any) -> Any:
    """`value` as a torch tensor with the shape of `like`, or an AssertionError that says why not."""
    import torch

    if value is None:
        raise AssertionError(f"`{name}` is None: {checks.NOT_DONE} (Did your function `return` its result?)")
    if not isinstance(value, torch.Tensor):
        raise AssertionError(
            f"`{name}` should be a torch.Tensor of shape {tuple(like.shape)}, got {type(value)}."
        )
    if value.shape != like.shape:
        raise AssertionError(f"`{name}` has shape {tuple(value.shape)}, expected {tuple(like.shape)}.")
    return value


def _close(a: Any, b: Any, *, rtol: float, atol: float) -> bool:
    return bool(np.allclose(checks._to_numpy(a), checks._to_numpy(b), rtol=rtol, atol=atol))


def _compare(actual: Any, expected: Any, *, name: str, rtol: float, atol: float, hint: str) -> None:
    """checks.check_close on numpy copies, with `hint` (the most likely cause) put first in the message."""
    try:
        checks.check_close(
            checks._to_numpy(actual), checks._to_numpy(expected), name=name, rtol=rtol, atol=atol
        )
    except AssertionError as e:
        raise AssertionError(f"`{name}` is wrong. Most likely: {hint} Details: {e}") from None


# Chapter 8 -------------------------------------------------------------------


def _reference_branch(block: Any, x: Any) -> Any:
    """F(x) = fc2(relu(fc1(x))) with the block's own layers."""
    import torch

    return block.fc2(torch.relu(block.fc1(x)))


def _make_block(cls: Any, width: int) -> Any:
    from torch import nn

    block = _call(cls, "ResidualBlock(width)", width)
    for name in ("fc1", "fc2"):
        layer = getattr(block, name, None)
        if not isinstance(layer, nn.Linear):
            raise AssertionError(
                f"ResidualBlock({width}) has no `{name}` Linear layer: create "
                f"`self.{name} = nn.Linear(width, width)` in __init__ (after super().__init__())."
            )
        if (layer.in_features, layer.out_features) != (width, width):
            raise AssertionError(
                f"`{name}` is Linear({layer.in_features}, {layer.out_features}); the block keeps the width: "
                f"use nn.Linear(width, width), here Linear({width}, {width})."
            )
    return block


def _check_residual_block(
    cls: Any, *, widths: Sequence[int] = (8, 5), batches: Sequence[tuple[int, ...]] = ((4,), (3,))
) -> None:
    """Lab 8: ResidualBlock(width)(x) = x + fc2(relu(fc1(x))), and its gradients equal autograd's formula.

    For each width and leading batch shape, the block's output is compared
    with the reference computed from its own fc1 and fc2, then dL/dx and
    the weight gradients with dL/dy (dF/dx + 1) from autograd on F alone.
    """
    import torch

    for k, (width, lead) in enumerate(zip(widths, batches, strict=True)):
        torch.manual_seed(10 + k)
        block = _make_block(cls, width)
        x = torch.randn(*lead, width)
        with torch.no_grad():
            f = _reference_branch(block, x)
        y = _as_tensor(_call(block, "ResidualBlock.forward", x), "block(x)", x)
        if not _close(y, x + f, rtol=1e-5, atol=1e-6):
            hint = "compare your forward with x + self.fc2(torch.relu(self.fc1(x)))."
            if _close(y, f, rtol=1e-5, atol=1e-6):
                hint = "your block returns F(x) alone: the skip connection `+ x` is missing."
            elif _close(y, torch.relu(x + f), rtol=1e-5, atol=1e-6):
                hint = "this block has no ReLU after the addition: return x + F(x) as it is."
            elif _close(y, x + block.fc2(block.fc1(x)).detach(), rtol=1e-5, atol=1e-6):
                hint = "the ReLU between fc1 and fc2 is missing."
            _compare(y.detach(), x + f, name="block(x)", rtol=1e-5, atol=1e-6, hint=hint)
        # Gradients: the student's graph against dL/dy (dF/dx + 1) computed from F alone.
        xg = x.clone().requires_grad_(True)
        w = torch.randn(*lead, width)
        block.zero_grad(set_to_none=True)
        try:
            loss = (block(xg) * w).sum()
            (dx,) = torch.autograd.grad(loss, xg, allow_unused=True)
        except RuntimeError as e:
            raise AssertionError(
                f"autograd could not differentiate your block: {e}. Avoid in-place operations on x "
                f"(x += ..., relu_) and do not detach anything."
            ) from None
        if dx is None:
            raise AssertionError("dL/dx is None: your block's output does not depend on x through autograd.")
        xr = x.clone().requires_grad_(True)
        (jt_g,) = torch.autograd.grad(_reference_branch(block, xr), xr, grad_outputs=w)
        if not _close(dx, w + jt_g, rtol=1e-4, atol=1e-5):
            hint = "the gradient misses its +1 term: is the skip added with x itself (no .detach())?"
            if _close(dx, w, rtol=1e-4, atol=1e-5):
                hint = "the gradient has no dF/dx term: is F(x) computed from a detached x?"
            raise AssertionError(
                f"dL/dx through your block differs from dL/dy (dF/dx + 1) by up to "
                f"{(dx - w - jt_g).abs().max().item():.3g}. Hint: {hint}"
            )


def _check_input_gradient(input_gradient: Callable[..., Any], cases: Sequence[str] | None = None) -> None:
    """Lab 8: input_gradient(branch, x, grad_y) = dL/dx of y = branch(x) + x, from autograd on branch alone.

    cases name the branches tried: 'mlp' (Linear-ReLU-Linear), 'tanh'
    (elementwise), 'zero' (F = 0, so dL/dx = dL/dy), 'conv' (a 3x3
    convolution block on images).
    """
    import torch
    from torch import nn

    torch.manual_seed(3)
    branches = {
        "mlp": (nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 6)), (5, 6)),
        "tanh": (lambda t: 0.5 * torch.tanh(t) ** 2, (4, 7)),
        "zero": (lambda t: 0.0 * t, (3, 4)),
        "conv": (
            nn.Sequential(nn.Conv2d(3, 3, 3, padding=1), nn.ReLU(), nn.Conv2d(3, 3, 3, padding=1)),
            (2, 3, 5, 5),
        ),
    }
    for name in cases or ("mlp", "tanh"):
        branch, shape = branches[name]
        x = torch.randn(shape)
        g = torch.randn(shape)
        x_before = x.clone()
        got = _as_tensor(_call(input_gradient, "input_gradient", branch, x, g), f"input_gradient ({name})", x)
        xr = x_before.clone().requires_grad_(True)
        (expected,) = torch.autograd.grad(branch(xr) + xr, xr, grad_outputs=g)
        if not torch.equal(x, x_before) or x.requires_grad:
            raise AssertionError(
                "input_gradient changed its argument x (or switched on its requires_grad): work on "
                "x.detach().clone().requires_grad_(True) instead."
            )
        if not _close(got, expected, rtol=1e-4, atol=1e-6):
            (jt_g,) = torch.autograd.grad(branch(xr), xr, grad_outputs=g)
            hint = "dL/dx = J_F^T dL/dy + dL/dy: one vector-Jacobian product of the branch, plus grad_y."
            if _close(got, jt_g, rtol=1e-4, atol=1e-6):
                hint = "you returned dF/dx^T dL/dy only: add the +1 term of the skip, i.e. + grad_y."
            elif _close(got, g, rtol=1e-4, atol=1e-6):
                hint = "you returned grad_y only: the dF/dx term, autograd.grad of the branch, is missing."
            raise AssertionError(
                f"input_gradient is wrong for the '{name}' branch: largest error "
                f"{(got.detach() - expected).abs().max().item():.3g}. Hint: {hint}"
            )


def _plain_twin(block: Any) -> Any:
    """A module computing F(x) alone with `block`'s layers: the block without its skip."""
    from torch import nn

    class Plain(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = block

        def forward(self, x):
            return _reference_branch(self.inner, x)

    return Plain()


def deep_net(cls: Any, blocks: int, width: int, *, skip: bool = True, seed: int = 0) -> Any:
    """Linear stem, `blocks` ResidualBlock(width) (their plain twins if skip=False), Linear head (lab 8)."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    body = [_make_block(cls, width) for _ in range(blocks)]
    if not skip:
        body = [_plain_twin(b) for b in body]
    return nn.Sequential(nn.Linear(16, width), *body, nn.Linear(width, 10))


def _check_first_to_last(
    first_to_last: Callable[..., Any], cls: Any, *, blocks: int = 50, width: int = 32, seed: int = 0
) -> None:
    """Lab 8: first_to_last(net, X, y) = ||dL/dW_first|| / ||dL/dW_last||, and it does not vanish with skips.

    The ratio is compared with the reference on a shallow net, then
    measured on `blocks` of your ResidualBlock (must stay above 0.01) and
    on the same blocks without their skip (must fall below 1e-4).
    """
    import torch
    import torch.nn.functional as F
    from torch import nn

    def reference(net, X, y):
        layers = [m for m in net.modules() if isinstance(m, nn.Linear)]
        net.zero_grad(set_to_none=True)
        F.cross_entropy(net(X), y).backward()
        return (layers[0].weight.grad.norm() / layers[-1].weight.grad.norm()).item()

    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(64, 16, generator=gen)
    y = torch.randint(0, 10, (64,), generator=gen)
    torch.manual_seed(seed)
    small = nn.Sequential(nn.Linear(16, 12), nn.Tanh(), nn.Linear(12, 12), nn.Tanh(), nn.Linear(12, 10))
    got = _call(first_to_last, "first_to_last", small, X, y)
    expected = reference(small, X, y)
    if got is None:
        raise AssertionError(f"`first_to_last` returned None: {checks.NOT_DONE}")
    got = float(got)
    if not math.isclose(got, expected, rel_tol=1e-4):
        hint = "divide the norm of the first Linear layer's weight gradient by the last one's."
        if math.isclose(got, 1 / expected, rel_tol=1e-4):
            hint = "your ratio is upside down: first layer (next to the input) over last layer."
        raise AssertionError(f"first_to_last(small net) is {got:.6g}, expected {expected:.6g}. Hint: {hint}")
    for skip, test, words in (
        (True, lambda r: r > 1e-2, "above 0.01"),
        (False, lambda r: r < 1e-4, "below 1e-4"),
    ):
        net = deep_net(cls, blocks, width, skip=skip, seed=seed)
        ratio = float(first_to_last(net, X, y))
        if not test(ratio):
            kind = "residual" if skip else "plain (your blocks without the skip)"
            raise AssertionError(
                f"in a {kind} net of {blocks} blocks the first layer's gradient is {ratio:.3g} times the "
                f"last layer's; it should be {words}. Check ResidualBlock and first_to_last."
            )


# Chapter 9 -------------------------------------------------------------------


def _patchify_spec(x: np.ndarray, p: int) -> np.ndarray:
    """The NumPy specification of patchify: (B, C, H, W) -> (B, N, C*p*p)."""
    b, c, h, w = x.shape
    grid = x.reshape(b, c, h // p, p, w // p, p).transpose(0, 2, 4, 1, 3, 5)
    return np.ascontiguousarray(grid.reshape(b, (h // p) * (w // p), c * p * p))


def check_patchify(
    kernel: Any, cases: Sequence[tuple[int, int, int, int, int]] | None = None, threads: int = 32
) -> None:
    """Lab 9: the patchify kernel turns img (B, C, H, W) into out (B, N, C*p*p), cases (B, C, H, W, p).

    Launched with `cudalearn.kernels.patchify.patchify_launch(shape, p,
    threads)`: x along the patch vector, y over patches, z over images.
    """
    from cudalearn.kernels.patchify import patchify_launch

    rng = np.random.default_rng(5)
    default = [(2, 3, 8, 12, 4), (1, 1, 4, 4, 2)]
    if device.mode() == "gpu":
        default = [(4, 3, 32, 48, 8), (2, 3, 224, 224, 16)]
    for b, c, h, w, p in cases or default:
        img = rng.standard_normal((b, c, h, w)).astype(np.float32)
        n = (h // p) * (w // p)
        out = checks.empty_output((b, n, c * p * p), np.float32)
        griddim, blockdim = patchify_launch(img.shape, p, threads)
        got = checks.run_kernel(kernel, griddim, blockdim, img, out, np.int32(p))[1]
        expected = _patchify_spec(img, p)
        name = f"out for img {img.shape}, p={p}"
        if not _is_close(got, expected) and not np.isnan(got).all():
            alt = {
                "(row, column, channel) order inside the patch: the course uses (channel, row, column), "
                "the order of a Conv2d weight": img.reshape(b, c, h // p, p, w // p, p)
                .transpose(0, 2, 4, 3, 5, 1)
                .reshape(b, n, -1),
                "patches numbered column by column: patch n = i * (W // p) + j is at patch row i, "
                "patch column j": img.reshape(b, c, h // p, p, w // p, p)
                .transpose(0, 4, 2, 1, 3, 5)
                .reshape(b, n, -1),
            }
            for why, a in alt.items():
                if _is_close(got, a):
                    raise AssertionError(f"`{name}` holds the right pixels in the wrong places: {why}.")
        checks.check_close(got, expected, name=name, rtol=0, atol=0)


def _is_close(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.array_equal(a, b))


def check_patch_embedding(
    linear_from_conv: Callable[[Any], Any],
    cases: Sequence[tuple[int, int, int, int, int, bool]] | None = None,
) -> None:
    """Lab 9: linear_from_conv(conv) is the nn.Linear equal to Conv2d(C, D, p, stride=p) on flattened patches.

    cases (C, D, H, W, p, bias). The check compares conv(x) as tokens
    (B, N, D) with your Linear applied to patchify_reshape(x, p).
    """
    import torch
    from torch import nn

    from cudalearn.nn.vit import patchify_reshape

    for k, (c, d, h, w, p, bias) in enumerate(cases or [(3, 8, 8, 8, 4, True), (2, 5, 6, 9, 3, True)]):
        torch.manual_seed(20 + k)
        conv = nn.Conv2d(c, d, kernel_size=p, stride=p, bias=bias)
        x = torch.randn(2, c, h, w)
        lin = _call(linear_from_conv, "linear_from_conv", conv)
        if not isinstance(lin, nn.Linear):
            raise AssertionError(f"linear_from_conv should return an nn.Linear, got {type(lin).__name__}.")
        if (lin.in_features, lin.out_features) != (c * p * p, d):
            raise AssertionError(
                f"linear_from_conv(Conv2d({c}, {d}, {p}, stride={p})) is Linear({lin.in_features}, "
                f"{lin.out_features}); a patch has C*p*p = {c * p * p} numbers and there are D = {d} filters."
            )
        if (lin.bias is None) != (conv.bias is None):
            raise AssertionError(
                "the Linear must have a bias exactly when the Conv2d has one (nn.Linear(..., bias=...))."
            )
        with torch.no_grad():
            expected = conv(x).flatten(2).transpose(1, 2)
            got = lin(patchify_reshape(x, p))
        if not _close(got, expected, rtol=1e-5, atol=1e-5):
            hint = (
                "the weight is conv.weight.reshape(D, C*p*p): each filter flattened in (channel, row, "
                "column) order, the order of the patch vectors."
            )
            with torch.no_grad():
                if conv.bias is not None and _close(got, expected - conv.bias, rtol=1e-5, atol=1e-5):
                    hint = "copy the conv's bias into the Linear's bias."
            _compare(got, expected, name=f"tokens (C={c}, D={d}, p={p})", rtol=1e-5, atol=1e-5, hint=hint)


def check_attention_flops(
    attention_flops: Callable[[int, int, int], int], cases: Sequence[tuple] | None = None
) -> None:
    """Lab 9: attention_flops(image, patch, dim) = FLOPs of Q K^T and of the weighted sum of V, one image.

    Compared with torch.utils.flop_counter on the course's Attention module
    (its batched matmuls only; the projections are not part of it), run on
    PyTorch's 'meta' device, where shapes flow and nothing is computed.
    cases (image, patch, dim, heads).
    """
    import torch

    from cudalearn.nn.vit import Attention, op_flops

    for image, patch, dim, heads in cases or [(32, 8, 16, 2), (224, 16, 192, 3)]:
        n = (image // patch) ** 2
        attn = Attention(dim, heads).to("meta")
        x = torch.empty(1, n, dim, device="meta")
        expected = op_flops(lambda attn=attn, x=x: attn(x)).get("bmm", 0)
        got = _call(attention_flops, "attention_flops", image, patch, dim)
        hint = (
            f"N = (image // patch)**2 = {n} tokens; Q K^T is an (N, D) @ (D, N) product and the weighted "
            f"sum an (N, N) @ (N, D) one, each 2 * N * N * D FLOPs (heads split D, they do not add work)."
        )
        if got is not None and expected and int(got) * 2 == expected:
            hint = "you counted one of the two products: both Q K^T and (softmax) @ V cost 2 * N * N * D."
        checks.check_equal(got, expected, name=f"attention_flops({image}, {patch}, {dim})", hint=hint)


def check_residual_block(cls: Any, **kwargs: Any) -> None:
    """Lab 8: ResidualBlock(width)(x) = x + fc2(relu(fc1(x))), and its gradients equal autograd's formula.

    Keyword arguments: widths, batches (leading shapes of x), one per case.
    """
    with device.one_torch_thread():
        _check_residual_block(cls, **kwargs)


def check_input_gradient(input_gradient: Callable[..., Any], cases: Sequence[str] | None = None) -> None:
    """Lab 8: input_gradient(branch, x, grad_y) = dL/dx of y = branch(x) + x, by autograd on the branch."""
    with device.one_torch_thread():
        _check_input_gradient(input_gradient, cases)


def check_first_to_last(first_to_last: Callable[..., Any], cls: Any, **kwargs: Any) -> None:
    """Lab 8: first_to_last(net, X, y) = ||dL/dW_first|| / ||dL/dW_last||; it must not vanish with skips.

    Keyword arguments: blocks, width, seed of the deep networks built from `cls`.
    """
    with device.one_torch_thread():
        _check_first_to_last(first_to_last, cls, **kwargs)
