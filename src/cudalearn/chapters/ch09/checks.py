"""Checks of lab 9 (ViT patching): the patchify kernel, patch embedding as a Linear, attention FLOPs.

The kernel is compared with its NumPy specification (a wrong one explained
by the usual index mistakes or the tracer's out-of-bounds finding), the
embedding with PyTorch's Conv2d, the FLOP count with the formula.
Visible checks use a few sizes; the hidden tests in the solution notebook
call the same functions with others. Sizes stay small under the simulator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cudalearn import checks
from cudalearn.checks.answer_types import INT_FIX, INT_RULE, int_problem
from cudalearn.checks.torch_answers import _close, _compare, _one_thread, _plain, _tensor_or_raise
from cudalearn.runtime import device


def _patchify_spec(x: np.ndarray, p: int) -> np.ndarray:
    """The NumPy specification of patchify: (B, C, H, W) -> (B, N, C*p*p)."""
    b, c, h, w = x.shape
    grid = x.reshape(b, c, h // p, p, w // p, p).transpose(0, 2, 4, 1, 3, 5)
    return np.ascontiguousarray(grid.reshape(b, (h // p) * (w // p), c * p * p))


def _patchify_mistakes(img: np.ndarray, p: int) -> dict[str, np.ndarray]:
    """What the usual wrong index arithmetics of patchify give, by what the student did."""
    b, c, h, w = img.shape
    n = (h // p) * (w // p)
    grid = img.reshape(b, c, h // p, p, w // p, p)  # (b, c, i, r, j, s)
    return {
        "(row, column, channel) order inside the patch: the course uses (channel, row, column), "
        "the order of a Conv2d weight, e = c*p*p + r*p + s": grid.transpose(0, 2, 4, 3, 5, 1).reshape(
            b, n, -1
        ),
        "patches numbered column by column (or patch row and column swapped): patch n = i * (W // p) + j "
        "is at patch row i = n // (W // p), patch column j = n % (W // p)": grid.transpose(
            0, 4, 2, 1, 3, 5
        ).reshape(b, n, -1),
        "row and column inside the patch swapped: number e = c*p*p + r*p + s is img[b, c, i*p + r, j*p + s] "
        "with r the row": grid.transpose(0, 2, 4, 1, 5, 3).reshape(b, n, -1),
    }


def _patchify_bounds_hint(array: str | None, axis: int | None, negative: bool = False) -> str:
    """What an out-of-bounds access of patchify means, from the array, the axis it left and the sign."""
    guard = (
        "the x threads beyond C*p*p (patchify_launch's blocks may have more) need the guard "
        "`e < out.shape[2]`, with < and not <=, before any read or write"
    )
    rows = (
        "img is read at row i*p + r and column j*p + s, with i = n // (W // p) the patch row and "
        "j = n % (W // p) the patch column: are patch row and column, or H and W, swapped? (the images "
        "here are not square)"
    )
    split = (
        "the index is negative, so one of the numbers split out of e is: c = e // (p * p) is the "
        "channel, and r = (e - c * p * p) // p and s = e % p, the row and column inside the patch, are "
        "each between 0 and p - 1"
    )
    if negative:
        return f" In patchify: {split}."
    if array == "out" and axis in (0, 1):
        return (
            " In patchify: out is (B, N, C*p*p), indexed out[b, n, e]: image, patch, number in the patch"
            f" (yours left axis {axis}: are the indices in another order?)."
        )
    if array == "out" or (array == "img" and axis == 1):
        return f" In patchify: {guard}."
    if array == "img":
        return f" In patchify: {rows}."
    return f" In patchify, either {guard}, or {rows}."


#: (B, C, H, W, p) of the small non-square image the tracer replays a kernel on, in either mode
_PROBE = (1, 3, 8, 12, 4)


def _patchify_out_of_bounds(kernel: Any, threads: int, launch: tuple | None = None, args: tuple = ()) -> str:
    """The hint for an out-of-bounds access of patchify, from the array and axis the tracer finds.

    The tracer replays `launch` (the check's own, under the simulator) or, by default, a launch on the
    small `_PROBE` image: on a GPU an out-of-bounds read returns garbage instead of failing, and the
    check's GPU images are too large to trace.
    """
    from cudalearn.chapters.ch09.kernels import patchify_launch
    from cudalearn.trace import TraceOutOfBounds, trace

    if launch is None:
        b, c, h, w, p = _PROBE
        img = np.random.default_rng(0).standard_normal((b, c, h, w)).astype(np.float32)
        out = checks.empty_output((b, (h // p) * (w // p), c * p * p), np.float32)
        launch, args = patchify_launch(img.shape, p, threads), (img, out, np.int32(p))
    try:
        trace(kernel, *launch, *args)
    except TraceOutOfBounds as t:
        bad = [d for d, (i, n) in enumerate(zip(t.index, t.shape, strict=False)) if not 0 <= i < n]
        negative = bool(bad) and t.index[bad[0]] < 0
        return _patchify_bounds_hint(t.array, bad[0] if bad else None, negative)
    except Exception:  # noqa: BLE001 - an untraceable kernel: no finding
        pass
    return ""


def check_patchify(
    kernel: Any, cases: Sequence[tuple[int, int, int, int, int]] | None = None, threads: int = 32
) -> None:
    """Lab 9: the patchify kernel turns img (B, C, H, W) into out (B, N, C*p*p), cases (B, C, H, W, p).

    Launched with `cudalearn.chapters.ch09.kernels.patchify_launch(shape, p,
    threads)`: x along the patch vector, y over patches, z over images.
    Images are not square, so swapped rows and columns show.
    """
    from cudalearn.chapters.ch09.kernels import patchify_launch

    rng = np.random.default_rng(5)
    default = [(2, 3, 8, 12, 4), (1, 2, 6, 4, 2)]
    if device.mode() == "gpu":
        default = [(4, 3, 32, 48, 8), (2, 3, 224, 224, 16)]
    runs = [(case, threads) for case in cases or default]
    if cases is None:  # and blocks twice as wide, on patches of more numbers than that: 32 typed in shows
        runs.append(((1, 3, 16, 16, 8), 2 * threads))
    for (b, c, h, w, p), threads in runs:
        img = rng.standard_normal((b, c, h, w)).astype(np.float32)
        n = (h // p) * (w // p)
        out = checks.empty_output((b, n, c * p * p), np.float32)
        griddim, blockdim = patchify_launch(img.shape, p, threads)
        expected = _patchify_spec(img, p)  # before the launch (which gets a copy of img all the same)
        try:
            got = checks.run_kernel(kernel, griddim, blockdim, img, out, np.int32(p))[1]
        except AssertionError as e:
            if "outside" not in str(e) and "past the end" not in str(e):
                raise
            launch = ((griddim, blockdim), (img, out, np.int32(p))) if device.mode() == "sim" else ()
            hint = _patchify_out_of_bounds(kernel, threads, *launch) or _patchify_bounds_hint(None, None)
            raise AssertionError(f"for img {img.shape}, p={p}: {e}{hint}") from None
        name = f"out for img {img.shape}, p={p}, blocks of {blockdim[0]} threads along x"
        if not _is_close(got, expected) and not np.isnan(got).all():
            for why, a in _patchify_mistakes(img, p).items():
                if _is_close(got, a):
                    raise AssertionError(f"`{name}` holds the right pixels in the wrong places: {why}.")
        if not _is_close(got, expected) and device.mode() == "gpu":  # a GPU reads out of bounds silently
            found = _patchify_out_of_bounds(kernel, threads)
            if found:
                raise AssertionError(
                    f"`{name}` is wrong, and the tracer, replaying your kernel on the CPU on an image of "
                    f"shape {_PROBE[:4]} with p={_PROBE[4]}, finds it indexing outside an array.{found}"
                )
        hint = (
            "a 3-D launch: x along the patch vector, y over the patches, z over the images, so "
            "`e, n, b = cuda.grid(3)` (no block size typed in: it is the launch's), and every thread with "
            "e < C*p*p writes out[b, n, e]."
        )
        if not np.isnan(got).any():
            hint = "compare the pixel each thread reads with the NumPy specification, for one small patch."
        _compare(got, expected, name=name, rtol=0, atol=0, hint=hint)


def _is_close(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.array_equal(a, b))


def embedding_case(c: int, d: int, h: int, w: int, p: int, bias: bool, seed: int) -> tuple[Any, Any]:
    """Lab 9: (Conv2d(c, d, p, stride=p, bias=bias), x (2, c, h, w)) of linear_from_conv's case, from seed."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    conv = nn.Conv2d(c, d, kernel_size=p, stride=p, bias=bias)
    return conv, torch.randn(2, c, h, w, generator=torch.Generator().manual_seed(seed))


@_one_thread
def embedding_experiment(linear_from_conv: Callable[[Any], Any], case: tuple, seed: int) -> dict:
    """Lab 9 (student side): linear_from_conv on a seeded Conv2d; what it returned, as data."""
    import torch
    from torch import nn

    from cudalearn.chapters.ch09.model import patchify_reshape

    conv, x = embedding_case(*case, seed)
    before = [t.detach().clone() for t in conv.parameters()]
    try:
        lin = checks.call_student(linear_from_conv, "linear_from_conv", conv)
    except RuntimeError as e:
        if "leaf Variable" not in str(e):
            raise
        raise AssertionError(
            f"linear_from_conv raised RuntimeError: {e}. Copy the weights inside `with torch.no_grad():` "
            f"(autograd forbids in-place changes of a parameter otherwise)."
        ) from None
    out: dict = {
        "type": type(lin).__name__,
        "conv_changed": any(not torch.equal(a, t) for a, t in zip(before, conv.parameters(), strict=True)),
    }
    if not isinstance(lin, nn.Linear):
        return out
    params = [t for t in (lin.weight, lin.bias) if t is not None]
    out.update(
        features=(int(lin.in_features), int(lin.out_features)),
        weight=lin.weight.detach().clone(),
        bias=None if lin.bias is None else lin.bias.detach().clone(),
        dtype=str(lin.weight.dtype).removeprefix("torch."),
        frozen=[name for name, t in zip(("weight", "bias"), params, strict=False) if not t.requires_grad],
        shared=[
            name
            for name, t in zip(("weight", "bias"), params, strict=False)
            if any(
                t.untyped_storage().data_ptr() == q.untyped_storage().data_ptr() for q in conv.parameters()
            )
        ],
    )
    c, p = conv.in_channels, conv.kernel_size[0]
    if out["features"] == (c * p * p, conv.out_channels) and lin.weight.dtype == conv.weight.dtype:
        with torch.no_grad():
            out["tokens"] = _plain(lin(patchify_reshape(x, p)))
    return out


def check_patch_embedding(
    linear_from_conv: Callable[[Any], Any],
    cases: Sequence[tuple[int, int, int, int, int, bool]] | None = None,
) -> None:
    """Lab 9: linear_from_conv(conv) is the nn.Linear equal to Conv2d(C, D, p, stride=p) on flattened patches.

    cases (C, D, H, W, p, bias). The check compares your Linear's weight
    and bias with the conv's, and conv(x) as tokens (B, N, D) with your
    Linear applied to patchify_reshape(x, p). The Linear has a bias exactly
    when the conv has one: the same parameters, so it trains the same.
    """
    import torch

    for k, case in enumerate(cases or [(3, 8, 8, 8, 4, True), (2, 5, 6, 9, 3, False)]):
        c, d, h, w, p, bias = case
        data = checks.student_side(embedding_experiment, linear_from_conv, tuple(case), 20 + k)
        conv, x = embedding_case(*case, 20 + k)
        if data["conv_changed"]:
            raise AssertionError(
                "linear_from_conv changed the Conv2d's weights or bias: copy them into the new Linear, "
                "leave the conv as it was."
            )
        if "weight" not in data:
            raise AssertionError(f"linear_from_conv should return an nn.Linear, got a {data['type']}.")
        if tuple(data["features"]) != (c * p * p, d):
            fin, fout = data["features"]
            raise AssertionError(
                f"linear_from_conv(Conv2d({c}, {d}, {p}, stride={p})) is Linear({fin}, {fout}); a patch "
                f"has C*p*p = {c * p * p} numbers and there are D = {d} filters: nn.Linear({c * p * p}, {d})."
            )
        conv_name = f"Conv2d({c}, {d}, {p}, stride={p}, bias={bias})"
        if data["dtype"] != "float32":
            raise AssertionError(
                f"your Linear's weight is {data['dtype']}, the conv's float32: create nn.Linear without a "
                f"dtype (float32 is its default), as the conv was, so the two take the same inputs."
            )
        if data["frozen"]:
            raise AssertionError(
                f"your Linear's {' and '.join(data['frozen'])} "
                f"{'do' if len(data['frozen']) > 1 else 'does'} not require gradients "
                f"(requires_grad=False): the layer would not train as the conv does. Create the Linear with "
                f"nn.Linear(...) and copy the conv's numbers into its own parameters inside torch.no_grad()."
            )
        if data["shared"]:
            raise AssertionError(
                f"your Linear's {' and '.join(data['shared'])} "
                f"{'share' if len(data['shared']) > 1 else 'shares'} memory with the conv's parameters (a "
                f"view of conv.weight, or conv.bias itself): training either layer would change the other. "
                f"Copy the numbers into the new Linear's own parameters (linear.weight.copy_(...)) inside "
                f"torch.no_grad()."
            )
        if data["bias"] is not None and not bias:
            zero = not bool(data["bias"].abs().max() > 0)
            raise AssertionError(
                f"the conv {conv_name} has no bias, but your Linear has one"
                + (
                    " (all zeros: the tokens are right today, but it adds D parameters that training "
                    "would move away from zero, so the layer is no longer the conv)"
                    if zero
                    else " (nn.Linear's random initial bias, added to every token)"
                )
                + ": create it with nn.Linear(..., bias=conv.bias is not None)."
            )
        if data["bias"] is None and bias:
            raise AssertionError(
                f"the conv {conv_name} has a bias and your Linear has none: create it with "
                f"nn.Linear(..., bias=conv.bias is not None) and copy conv.bias into it."
            )
        weight = conv.weight.detach().reshape(d, c * p * p)
        if not _close(data["weight"], weight, rtol=0, atol=0):
            hint = (
                "the weight is conv.weight.reshape(D, C*p*p): each filter flattened in (channel, row, "
                "column) order, the order of the patch vectors."
            )
            if _close(
                data["weight"], conv.weight.detach().permute(0, 2, 3, 1).reshape(d, -1), rtol=0, atol=0
            ):
                hint = (
                    "your filters are flattened in (row, column, channel) order; the patch vectors are "
                    "(channel, row, column): conv.weight.reshape(D, C*p*p), no permute."
                )
            elif tuple(data["weight"].shape) == (d, c * p * p) and torch.equal(
                data["weight"].flatten().sort().values, weight.flatten().sort().values
            ):
                hint += " Yours holds the conv's numbers, in other places."
            _compare(
                data["weight"], weight, name=f"the Linear's weight ({conv_name})", rtol=0, atol=0, hint=hint
            )
        if bias and not _close(data["bias"], conv.bias.detach(), rtol=0, atol=0):
            _compare(
                data["bias"],
                conv.bias.detach(),
                name=f"the Linear's bias ({conv_name})",
                rtol=0,
                atol=0,
                hint="copy the conv's bias into the Linear's bias (linear.bias.copy_(conv.bias)).",
            )
        with torch.no_grad():
            expected = conv(x).flatten(2).transpose(1, 2)
        got = _tensor_or_raise(data["tokens"], f"your Linear on the patches ({conv_name})", expected.shape)
        _compare(
            got,
            expected,
            name=f"tokens ({conv_name})",
            rtol=1e-5,
            atol=1e-5,
            hint="your Linear has the right weight and bias but its forward differs from nn.Linear's.",
        )


def check_attention_flops(
    attention_flops: Callable[[int, int, int], int], cases: Sequence[tuple] | None = None
) -> None:
    """Lab 9: attention_flops(image, patch, dim) = FLOPs of Q K^T and of the weighted sum of V, one image.

    Compared with torch.utils.flop_counter on the course's Attention module
    (its batched matmuls only; the projections are not part of it), run on
    PyTorch's 'meta' device, where shapes flow and nothing is computed.
    cases (image, patch, dim, heads); by default one image that `patch` does not divide, whose partial
    edge patches the patch embedding drops (N = (image // patch)**2).
    """
    import torch

    from cudalearn.chapters.ch09.model import Attention
    from cudalearn.nn.op_costs import op_flops

    for image, patch, dim, heads in cases or [
        (32, 8, 16, 2),
        (48, 12, 10, 2),
        (224, 16, 192, 3),
        (44, 16, 8, 2),
    ]:
        n = (image // patch) ** 2
        attn = Attention(dim, heads).to("meta")
        x = torch.empty(1, n, dim, device="meta")
        expected = op_flops(lambda attn=attn, x=x: attn(x)).get("bmm", 0)
        call = f"attention_flops({image}, {patch}, {dim})"
        got = checks.call_student(attention_flops, "attention_flops", image, patch, dim)
        if got is None:
            raise AssertionError(f"`{call}` is None: {checks.NOT_DONE}")
        why = int_problem(got)
        if why is not None:
            raise AssertionError(
                f"`{call}` {why}: the exercise asks for an int ({INT_RULE}). Hint: {INT_FIX}"
            )
        if got == expected:
            continue
        nn_d = n * n * dim
        hint = (
            f"N = (image // patch)**2 = {n} tokens; Q K^T is an (N, D) @ (D, N) product and the weighted "
            f"sum an (N, N) @ (N, D) one, each 2 * N * N * D FLOPs (heads split D, they do not add work)."
        )
        if 2 * got == expected:
            hint = (
                "yours is half the count: either you counted one of the two products (both Q K^T and "
                "softmax(...) @ V cost 2 * N * N * D), or a multiply-add as 1 FLOP (it is 2)."
            )
        elif got == 2 * expected:
            hint = "yours is twice the count: a multiply-add is 2 FLOPs, counted once per product."
        elif got > expected and (got - expected) % (n * n) == 0 and (got - expected) < nn_d:
            hint = (
                "you counted the softmax (or the scaling) too: the exercise counts only the two matrix "
                "products, 2 * N * N * D FLOPs each."
            )
        elif got > expected and (got - expected) % (2 * n * dim * dim) == 0:
            hint = (
                "you counted the projections (Q, K, V, output) too: they are not part of it, only "
                "Q K^T and the weighted sum of V."
            )
        elif got == 4 * (image // patch) ** 2 * dim:
            hint = f"N is the number of tokens, (image // patch)**2 = {n}, not image // patch."
        elif image % patch and got in {
            f(4 * m * m * dim)
            for m in (image**2 // patch**2, (-(-image // patch)) ** 2, (image / patch) ** 2)
            for f in (int, round)
        }:
            hint = (
                f"{patch} does not divide {image}: the patch embedding, a convolution of stride {patch}, "
                f"keeps only the whole patches, image // patch = {image // patch} per side, so N = "
                f"(image // patch)**2 = {n}. A true division (image / patch), pixels over patch pixels "
                f"(image**2 // patch**2) or a rounded-up count also count the partial patches at the edges."
            )
        checks.check_equal(got, expected, name=call, hint=hint)
