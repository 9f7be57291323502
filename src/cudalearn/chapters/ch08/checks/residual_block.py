"""Lab 8's first check: ResidualBlock(width)(x) = x + fc2(relu(fc1(x))), and its gradients."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cudalearn import checks
from cudalearn.chapters.ch08.checks._layers import layer_data, verify_layers
from cudalearn.checks.torch_answers import _close, _compare, _one_thread, _plain, _tensor_or_raise
from cudalearn.runtime import device


@_one_thread
def block_experiment(cls: Any, width: int, lead: Sequence[int], seed: int) -> dict:
    """Lab 8 (student side): ResidualBlock(width) built, run and differentiated on seeded data; data back.

    Returns fc1/fc2 (type, sizes, weights), x, y = block(x), whether the
    forward changed x, and dL/dx, dL/dW1, dL/dW2 for L = sum(block(x) * w).
    """
    import torch

    torch.manual_seed(seed)
    block = checks.call_student(cls, "ResidualBlock(width)", width)
    out: dict = {name: layer_data(getattr(block, name, None)) for name in ("fc1", "fc2")}
    out["same_layer"] = getattr(block, "fc1", None) is getattr(block, "fc2", 0)
    layers = (out["fc1"], out["fc2"])
    if any(f["type"] != "Linear" or (f["in"], f["out"]) != (width, width) for f in layers):
        return out  # `verify_layers` says what is wrong before a forward that cannot run
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*lead, width, generator=gen)
    w = torch.randn(*lead, width, generator=gen)
    out["x"], out["w"] = x.clone(), w
    arg = x.clone()
    out["y"] = _plain(checks.call_student(block, "ResidualBlock.forward", arg))
    out["x_changed"] = not torch.equal(arg, x)
    if not isinstance(out["y"], torch.Tensor) or out["y"].shape != x.shape:
        return out  # the check says what the forward returned
    xg = x.clone().requires_grad_(True)
    weights = [block.fc1.weight, block.fc2.weight]
    block.zero_grad(set_to_none=True)
    try:
        y = block(xg)
        loss = (y * w).sum()
        grads = torch.autograd.grad(loss, [xg, *weights], allow_unused=True)
    except RuntimeError as e:
        out["grad_error"] = str(e)[:500]
        return out
    out["dx"], out["dW1"], out["dW2"] = (None if g is None else g.detach().clone() for g in grads)
    return out


def _branch_of(data: dict, x: Any) -> Any:
    """F(x) = fc2(relu(fc1(x))) from the fc1/fc2 data of an experiment."""
    import torch
    import torch.nn.functional as F

    f1, f2 = data["fc1"], data["fc2"]
    return F.linear(torch.relu(F.linear(x, f1["weight"], f1["bias"])), f2["weight"], f2["bias"])


def verify_residual_block(
    cls: Any, *, widths: Sequence[int] = (8, 5), batches: Sequence[tuple[int, ...]] = ((4,), (3, 2))
) -> None:
    """Lab 8: ResidualBlock(width)(x) = x + fc2(relu(fc1(x))), and its gradients equal autograd's formula.

    For each width and leading batch shape, the block's output is compared
    with the reference computed from its own fc1 and fc2, then dL/dx and
    the weight gradients with dL/dy (dF/dx + 1) from autograd on F alone.
    """
    import torch

    for k, (width, lead) in enumerate(zip(widths, batches, strict=True)):
        data = checks.student_side(block_experiment, cls, width, tuple(lead), 10 + k)
        verify_layers(data, width)
        x, w = data["x"], data["w"]
        with torch.no_grad():
            f = _branch_of(data, x)
        y = _tensor_or_raise(data["y"], "block(x)", x.shape)
        if data["x_changed"]:
            raise AssertionError(
                "your forward changed its input x in place (x += ... or an in-place ReLU on x): the caller's "
                "tensor must not change; return x + F(x) as a new tensor."
            )
        if not _close(y, x + f, rtol=1e-5, atol=1e-6):
            hint = "compare your forward with x + self.fc2(torch.relu(self.fc1(x)))."
            if _close(y, f, rtol=1e-5, atol=1e-6):
                hint = "your block returns F(x) alone: the skip connection `+ x` is missing."
            elif _close(y, torch.relu(x + f), rtol=1e-5, atol=1e-6):
                hint = "this block has no ReLU after the addition: return x + F(x) as it is."
            else:
                f1, f2 = data["fc1"], data["fc2"]
                linear = torch.nn.functional.linear
                no_relu = linear(linear(x, f1["weight"], f1["bias"]), f2["weight"], f2["bias"])
                if _close(y, x + no_relu, rtol=1e-5, atol=1e-6):
                    hint = "the ReLU between fc1 and fc2 is missing."
            _compare(y, x + f, name="block(x)", rtol=1e-5, atol=1e-6, hint=hint)
        if "grad_error" in data:
            raise AssertionError(
                f"autograd could not differentiate your block: {data['grad_error']}. Avoid in-place "
                f"operations on x (x += ..., relu_) and do not detach anything."
            )
        dx = data["dx"]
        if dx is None:
            raise AssertionError(
                "dL/dx is None: your block's output does not depend on x through autograd (is x detached "
                "in both the skip and the branch, or computed under torch.no_grad()?)."
            )
        # The reference: dL/dy (dF/dx + 1) and the weight gradients, by autograd on F alone, here.
        ref = {name: dict(data[name]) for name in ("fc1", "fc2")}
        ws = [ref[name]["weight"].clone().requires_grad_(True) for name in ("fc1", "fc2")]
        ref["fc1"]["weight"], ref["fc2"]["weight"] = ws
        xr = x.clone().requires_grad_(True)
        jt_g, dw1, dw2 = torch.autograd.grad(_branch_of(ref, xr), [xr, *ws], grad_outputs=w)
        if not _close(dx, w + jt_g, rtol=1e-4, atol=1e-5):
            hint = "the gradient misses its +1 term: is the skip added with x itself (no .detach())?"
            if _close(dx, w, rtol=1e-4, atol=1e-5):
                hint = (
                    "the gradient has no dF/dx term: is F(x) computed from a detached x, or under "
                    "torch.no_grad()?"
                )
            elif not _close(dx, jt_g, rtol=1e-4, atol=1e-5):
                hint = "the gradient is neither dF/dx + 1 nor one of its terms: does the forward match?"
            raise AssertionError(
                f"dL/dx through your block differs from dL/dy (dF/dx + 1) by up to "
                f"{(dx - w - jt_g).abs().max().item():.3g}. Hint: {hint}"
            )
        for name, got, expected in (("fc1", data["dW1"], dw1), ("fc2", data["dW2"], dw2)):
            if got is None or not _close(got, expected, rtol=1e-4, atol=1e-5):
                raise AssertionError(
                    f"the gradient of {name}.weight is {'None' if got is None else 'wrong'}: the loss must "
                    f"reach both layers through autograd (no torch.no_grad(), .detach() or .data in the "
                    f"branch)."
                )


def check_residual_block(cls: Any, **kwargs: Any) -> None:
    """Lab 8: ResidualBlock(width)(x) = x + fc2(relu(fc1(x))), and its gradients equal autograd's formula.

    Keyword arguments: widths, batches (leading shapes of x), one per case.
    """
    with device.one_torch_thread():
        verify_residual_block(cls, **kwargs)
