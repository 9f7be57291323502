"""Checks of labs 8-9 (ResNet skip gradients, ViT patching), built on `checks`.

Every check compares the student's code with PyTorch: outputs with the
reference computation, gradients with autograd, FLOP counts with
`torch.utils.flop_counter`. Visible checks use a few sizes; the hidden
tests in the solution notebooks call the same functions with others.
Sizes stay small under the simulator.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cudalearn import checks, device


def _close(a: Any, b: Any, *, rtol: float, atol: float) -> bool:
    return bool(np.allclose(checks._to_numpy(a), checks._to_numpy(b), rtol=rtol, atol=atol))


def _compare(actual: Any, expected: Any, *, name: str, rtol: float, atol: float, hint: str) -> None:
    """checks.check_close on numpy copies, with `hint` (the most likely cause) put first in the message."""
    try:
        checks.check_close(
            checks._to_numpy(actual), checks._to_numpy(expected), name=name, rtol=rtol, atol=atol
        )
    except AssertionError as e:
        details = str(e).split(" Hint: ")[0]  # check_close's generic hint would point elsewhere
        raise AssertionError(f"`{name}` is wrong. Most likely: {hint} Details: {details}") from None


# Chapter 8 -------------------------------------------------------------------
#
# Under `cudalearn grade` the student's class and functions live in another
# process, so each check is split in two: an experiment (a module-level
# `*_experiment` function run there through `checks.student_side`) builds the
# inputs from a seed, runs the student's code and returns plain data (tensors,
# numbers, type names); the check then computes the reference itself, from
# that data and the same seeds, and decides. In a notebook both halves run in
# the student's process, one after the other.


def _one_thread(experiment: Callable[..., Any]) -> Callable[..., Any]:
    """An experiment run with PyTorch on one CPU thread, in whichever process it runs (labs 8-9)."""

    @functools.wraps(experiment)
    def run(*args: Any, **kwargs: Any) -> Any:
        with device.one_torch_thread():
            return experiment(*args, **kwargs)

    return run


def _plain(value: Any) -> Any:
    """A student's return value as data: a detached tensor copy, a number, None, or {'type': its name}."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if value is None or isinstance(value, (bool, int, float, np.floating, np.integer)):
        return value
    return {"type": type(value).__name__}


def _tensor_or_raise(value: Any, name: str, shape: Sequence[int]) -> Any:
    """value (a tensor of `shape` from an experiment), or an AssertionError saying what it is instead."""
    import torch

    if value is None:
        raise AssertionError(f"`{name}` is None: {checks.NOT_DONE} (Did your function `return` its result?)")
    if not isinstance(value, torch.Tensor):
        what = value.get("type") if isinstance(value, dict) else type(value).__name__
        raise AssertionError(f"`{name}` should be a torch.Tensor of shape {tuple(shape)}, got a {what}.")
    if tuple(value.shape) != tuple(shape):
        raise AssertionError(f"`{name}` has shape {tuple(value.shape)}, expected {tuple(shape)}.")
    return value


def _layer_data(layer: Any) -> dict:
    """What a check needs to know of a block's fc1 or fc2: its type and, if a Linear, its parameters."""
    from torch import nn

    if not isinstance(layer, nn.Linear):
        return {"type": type(layer).__name__ if layer is not None else None}
    return {
        "type": "Linear",
        "in": int(layer.in_features),
        "out": int(layer.out_features),
        "weight": layer.weight.detach().clone(),
        "bias": None if layer.bias is None else layer.bias.detach().clone(),
    }


@_one_thread
def block_experiment(cls: Any, width: int, lead: Sequence[int], seed: int) -> dict:
    """Lab 8 (student side): ResidualBlock(width) built, run and differentiated on seeded data; data back.

    Returns fc1/fc2 (type, sizes, weights), x, y = block(x), whether the
    forward changed x, and dL/dx, dL/dW1, dL/dW2 for L = sum(block(x) * w).
    """
    import torch

    torch.manual_seed(seed)
    block = checks.call_student(cls, "ResidualBlock(width)", width)
    out: dict = {name: _layer_data(getattr(block, name, None)) for name in ("fc1", "fc2")}
    out["same_layer"] = getattr(block, "fc1", None) is getattr(block, "fc2", 0)
    if out["fc1"]["type"] != "Linear" or out["fc2"]["type"] != "Linear":
        return out
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


def _check_layers(data: dict, width: int) -> None:
    """Raise unless the experiment found fc1 and fc2, two distinct Linear(width, width)."""
    for name in ("fc1", "fc2"):
        layer = data[name]
        if layer["type"] != "Linear":
            got = "no attribute of that name" if layer["type"] is None else f"a {layer['type']}"
            raise AssertionError(
                f"ResidualBlock({width}) has no `{name}` Linear layer ({got}): create "
                f"`self.{name} = nn.Linear(width, width)` in __init__ (after super().__init__())."
            )
        if (layer["in"], layer["out"]) != (width, width):
            raise AssertionError(
                f"`{name}` is Linear({layer['in']}, {layer['out']}); the block keeps the width: "
                f"use nn.Linear(width, width), here Linear({width}, {width})."
            )
    if data["same_layer"]:
        raise AssertionError(
            "`fc1` and `fc2` are the same layer object: the branch has two layers with their own "
            "weights, so create two nn.Linear(width, width)."
        )


def _check_residual_block(
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
        _check_layers(data, width)
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


class WatchedBranch:
    """Lab 8: a branch F that records the gradient autograd sends into each tensor it is called on."""

    def __init__(self, inner: Callable[[Any], Any]) -> None:
        self.inner = inner
        self.calls = 0
        self.input_grads: list = []

    def __call__(self, t: Any) -> Any:
        import torch

        self.calls += 1
        if isinstance(t, torch.Tensor) and t.requires_grad:
            try:
                t.register_hook(lambda g: self.input_grads.append(g.detach().clone()))
            except RuntimeError:  # a tensor that takes no hooks: nothing recorded
                pass
        return self.inner(t)


BRANCH_SHAPES = {"mlp": (5, 6), "tanh": (4, 7), "zero": (3, 4), "conv": (2, 3, 5, 5)}


def branch_case(case: str, seed: int = 3) -> tuple[Any, Any, Any]:
    """Lab 8: (branch F, x, grad_y) of input_gradient's case 'mlp', 'tanh', 'zero' or 'conv', from `seed`.

    mlp: Linear-ReLU-Linear; tanh: elementwise 0.5 tanh(x)^2; zero: F = 0,
    so dL/dx = dL/dy; conv: a 3x3 convolution block on (2, 3, 5, 5) images.
    """
    import torch
    from torch import nn

    torch.manual_seed(seed)
    branches = {
        "mlp": lambda: nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 6)),
        "tanh": lambda: lambda t: 0.5 * torch.tanh(t) ** 2,
        "zero": lambda: lambda t: 0.0 * t,
        "conv": lambda: nn.Sequential(
            nn.Conv2d(3, 3, 3, padding=1), nn.ReLU(), nn.Conv2d(3, 3, 3, padding=1)
        ),
    }
    branch = branches[case]()
    gen = torch.Generator().manual_seed(seed)
    shape = BRANCH_SHAPES[case]
    return branch, torch.randn(shape, generator=gen), torch.randn(shape, generator=gen)


@_one_thread
def input_gradient_experiment(input_gradient: Callable[..., Any], case: str, seed: int) -> dict:
    """Lab 8 (student side): input_gradient(branch, x, grad_y) on a watched branch; its result and records."""
    import torch

    inner, x, g = branch_case(case, seed)
    branch = WatchedBranch(inner)
    x_before = x.clone()
    got = checks.call_student(input_gradient, "input_gradient", branch, x, g)
    return {
        "got": _plain(got),
        "x_changed": not torch.equal(x, x_before) or bool(x.requires_grad),
        "calls": branch.calls,
        "input_grads": branch.input_grads[:8],
    }


def _check_input_gradient(input_gradient: Callable[..., Any], cases: Sequence[str] | None = None) -> None:
    """Lab 8: input_gradient(branch, x, grad_y) = dL/dx of y = branch(x) + x, from autograd on branch alone.

    cases name the branches tried (see `branch_case`). The branch records
    the gradient autograd sends into its input: if it already holds the
    `+ grad_y`, autograd differentiated branch(x) + x and did the `+ 1`.
    """
    import torch

    seed = 3
    for name in cases or ("mlp", "tanh"):
        data = checks.student_side(input_gradient_experiment, input_gradient, name, seed)
        branch, x, g = branch_case(name, seed)
        got = _tensor_or_raise(data["got"], f"input_gradient ({name})", x.shape)
        if data["x_changed"]:
            raise AssertionError(
                "input_gradient changed its argument x (or switched on its requires_grad): work on "
                "x.detach().clone().requires_grad_(True) instead."
            )
        xr = x.clone().requires_grad_(True)
        (jt_g,) = torch.autograd.grad(branch(xr), xr, grad_outputs=g)
        expected = jt_g + g
        if not _close(got, expected, rtol=1e-4, atol=1e-6):
            hint = "dL/dx = J_F^T dL/dy + dL/dy: one vector-Jacobian product of the branch, plus grad_y."
            if _close(got, jt_g, rtol=1e-4, atol=1e-6):
                hint = "you returned dF/dx^T dL/dy only: add the +1 term of the skip, i.e. + grad_y."
            elif _close(got, g, rtol=1e-4, atol=1e-6):
                hint = "you returned grad_y only: the dF/dx term, autograd.grad of the branch, is missing."
            elif _close(got, jt_g + 1, rtol=1e-4, atol=1e-6):
                hint = (
                    "you added the number 1: the +1 is the identity matrix of the skip's Jacobian, and it "
                    "multiplies dL/dy, so the term to add is grad_y."
                )
            elif data["calls"] == 0:
                hint = "your function never called the branch: differentiate branch(x) with autograd."
            raise AssertionError(
                f"input_gradient is wrong for the '{name}' branch: largest error "
                f"{(got - expected).abs().max().item():.3g}. Hint: {hint}"
            )
        seen = [h for h in data["input_grads"] if tuple(h.shape) == tuple(x.shape)]
        if any(_close(h, expected, rtol=1e-4, atol=1e-6) for h in seen) and not any(
            _close(h, jt_g, rtol=1e-4, atol=1e-6) for h in seen
        ):
            raise AssertionError(
                f"input_gradient gives the right numbers for the '{name}' branch, but autograd added the "
                f"`+ 1`: the gradient that reached the branch's input already held grad_y, so you "
                f"differentiated branch(x) + x. The exercise asks for autograd on the branch alone, "
                f"torch.autograd.grad(branch(xr), xr, grad_outputs=grad_y), and + grad_y added by you."
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


def _reference_branch(block: Any, x: Any) -> Any:
    """F(x) = fc2(relu(fc1(x))) with the block's own layers."""
    import torch

    return block.fc2(torch.relu(block.fc1(x)))


def _make_block(cls: Any, width: int) -> Any:
    """ResidualBlock(width), or an AssertionError if it has no fc1/fc2 Linear(width, width)."""
    block = checks.call_student(cls, "ResidualBlock(width)", width)
    data = {name: _layer_data(getattr(block, name, None)) for name in ("fc1", "fc2")}
    _check_layers(dict(data, same_layer=False), width)
    return block


def _reference_block(width: int) -> Any:
    """Lab 8's ResidualBlock as the solution writes it, x + fc2(relu(fc1(x))): the student's stand-in."""
    from torch import nn

    class ResidualBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(width, width), nn.Linear(width, width)

        def forward(self, x):
            return x + _reference_branch(self, x)

    return ResidualBlock()


def deep_net(cls: Any, blocks: int, width: int, *, skip: bool = True, seed: int = 0) -> Any:
    """Linear stem, `blocks` ResidualBlock(width) (their plain twins if skip=False), Linear head (lab 8).

    cls None: the course's own block (`_reference_block`).
    """
    import torch
    from torch import nn

    torch.manual_seed(seed)
    body = [_make_block(cls, width) if cls is not None else _reference_block(width) for _ in range(blocks)]
    if not skip:
        body = [_plain_twin(b) for b in body]
    return nn.Sequential(nn.Linear(16, width), *body, nn.Linear(width, 10))


def ratio_data(seed: int) -> tuple[Any, Any, Any, Any]:
    """Lab 8: (small net, X, y, stale grads) of first_to_last's first case, the same in every process.

    The small net is Linear-Tanh-Linear-Tanh-Linear on X (64, 16), y (64,);
    `stale` are gradients of an earlier, different loss, left in .grad as a
    training loop leaves them, so that a missing zero_grad shows.
    """
    import torch
    import torch.nn.functional as F
    from torch import nn

    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(64, 16, generator=gen)
    y = torch.randint(0, 10, (64,), generator=gen)
    torch.manual_seed(seed)
    small = nn.Sequential(nn.Linear(16, 12), nn.Tanh(), nn.Linear(12, 12), nn.Tanh(), nn.Linear(12, 10))
    stale = torch.autograd.grad(
        20 * F.cross_entropy(small(X.flip(0)), (y + 1) % 10), list(small.parameters())
    )
    return small, X, y, stale


@_one_thread
def small_ratio_experiment(first_to_last: Callable[..., Any], seed: int) -> Any:
    """Lab 8 (student side): first_to_last on the small net of `ratio_data(seed)`, stale grads left in."""
    small, X, y, stale = ratio_data(seed)
    for p, g in zip(small.parameters(), stale, strict=True):
        p.grad = g.clone()
    return _plain(checks.call_student(first_to_last, "first_to_last", small, X, y))


@_one_thread
def deep_ratio_experiment(
    first_to_last: Callable[..., Any], cls: Any, blocks: int, width: int, seed: int
) -> dict:
    """Lab 8 (student side): first_to_last on deep nets of cls blocks (None: the course's), skip or not."""
    _, X, y, _ = ratio_data(seed)
    out = {}
    for skip in (True, False):
        net = deep_net(cls, blocks, width, skip=skip, seed=seed)
        out["residual" if skip else "plain"] = _plain(first_to_last(net, X, y))
    return out


def _ratio(value: Any, what: str) -> float:
    """A first_to_last result as a float, or an AssertionError if it is not a Python float."""
    if value is None:
        raise AssertionError(f"`first_to_last` returned None for {what}: {checks.NOT_DONE}")
    if isinstance(value, bool) or not isinstance(value, (float, int)):
        kind = value.get("type") if isinstance(value, dict) else type(value).__name__
        raise AssertionError(
            f"`first_to_last` returned a {kind} for {what}: return a Python float (e.g. `(a / b).item()`)."
        )
    return float(value)


def _check_first_to_last(
    first_to_last: Callable[..., Any], cls: Any, *, blocks: int = 50, width: int = 32, seed: int = 0
) -> None:
    """Lab 8: first_to_last(net, X, y) = ||dL/dW_first|| / ||dL/dW_last||, and it does not vanish with skips.

    The ratio is compared with the reference on a shallow net that holds
    stale gradients, then measured on `blocks` of your ResidualBlock (must
    stay above 0.01) and on the same blocks without their skip (must fall
    below 1e-4). A ResidualBlock that fails exercise 1's check is replaced
    by the course's, so that this exercise grades first_to_last alone.
    """
    import torch
    import torch.nn.functional as F

    got = _ratio(checks.student_side(small_ratio_experiment, first_to_last, seed), "the small net")
    small, X, y, stale = ratio_data(seed)
    fresh = torch.autograd.grad(F.cross_entropy(small(X), y), list(small.parameters()))
    norms = {
        "fresh": (fresh[0].norm() / fresh[-2].norm()).item(),
        "stale": ((fresh[0] + stale[0]).norm() / (fresh[-2] + stale[-2]).norm()).item(),
        "bias": (fresh[0].norm() / fresh[-1].norm()).item(),
    }
    expected = norms["fresh"]
    if not math.isclose(got, expected, rel_tol=1e-4):
        hint = "divide the norm of the first Linear layer's weight gradient by the last one's."
        if math.isclose(got, 1 / expected, rel_tol=1e-4):
            hint = "your ratio is upside down: first layer (next to the input) over last layer."
        elif math.isclose(got, norms["stale"], rel_tol=1e-4):
            hint = (
                "the net held gradients of an earlier step and yours were added to them: clear them "
                "first with net.zero_grad() (backward() accumulates into .grad)."
            )
        elif math.isclose(got, norms["bias"], rel_tol=1e-4):
            hint = "the last parameter of the net is the last layer's bias: use the last Linear's .weight."
        raise AssertionError(f"first_to_last(small net) is {got:.6g}, expected {expected:.6g}. Hint: {hint}")
    try:
        _check_residual_block(cls, widths=(width,), batches=((2,),))
    except AssertionError:  # exercise 1's check says what is wrong with it; the course's block stands in
        cls = None
    data = checks.student_side(deep_ratio_experiment, first_to_last, cls, blocks, width, seed)
    for skip, test, words in (
        (True, lambda r: r > 1e-2, "above 0.01"),
        (False, lambda r: r < 1e-4, "below 1e-4"),
    ):
        kind = "residual" if skip else "plain"
        ratio = _ratio(data[kind], f"the {kind} net")
        if not test(ratio):
            kind = "residual" if skip else "plain (your blocks without the skip)"
            raise AssertionError(
                f"in a {kind} net of {blocks} blocks the first layer's gradient is {ratio:.3g} times the "
                f"last layer's; it should be {words}. Check first_to_last"
                + (" and ResidualBlock." if cls is not None else ".")
            )


# Chapter 9 -------------------------------------------------------------------


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


def _patchify_bounds_hint(array: str | None, axis: int | None) -> str:
    """What an out-of-bounds access of patchify means, from the array and the axis it left."""
    guard = (
        "the x threads beyond C*p*p (patchify_launch's blocks may have more) need the guard "
        "`e < out.shape[2]`, with < and not <=, before any read or write"
    )
    rows = (
        "img is read at row i*p + r and column j*p + s, with i = n // (W // p) the patch row and "
        "j = n % (W // p) the patch column: are patch row and column, or H and W, swapped? (the images "
        "here are not square)"
    )
    if array == "out" or (array == "img" and axis == 1):
        return f" In patchify: {guard}."
    if array == "img":
        return f" In patchify: {rows}."
    return f" In patchify, either {guard}, or {rows}."


def _patchify_out_of_bounds(kernel: Any, launch: tuple, args: tuple) -> str:
    """The hint for an out-of-bounds access of patchify, from the array and axis the tracer finds (sim)."""
    array = axis = None
    if device.mode() == "sim":
        from cudalearn.trace import TraceOutOfBounds, trace

        try:
            trace(kernel, *launch, *args)
        except TraceOutOfBounds as t:
            array = t.array
            bad = [d for d, (i, n) in enumerate(zip(t.index, t.shape, strict=False)) if not 0 <= i < n]
            axis = bad[0] if bad else None
        except Exception:  # noqa: BLE001 - an untraceable kernel: the general hint
            pass
    return _patchify_bounds_hint(array, axis)


def check_patchify(
    kernel: Any, cases: Sequence[tuple[int, int, int, int, int]] | None = None, threads: int = 32
) -> None:
    """Lab 9: the patchify kernel turns img (B, C, H, W) into out (B, N, C*p*p), cases (B, C, H, W, p).

    Launched with `cudalearn.kernels.patchify.patchify_launch(shape, p,
    threads)`: x along the patch vector, y over patches, z over images.
    Images are not square, so swapped rows and columns show.
    """
    from cudalearn.kernels.patchify import patchify_launch

    rng = np.random.default_rng(5)
    default = [(2, 3, 8, 12, 4), (1, 2, 6, 4, 2)]
    if device.mode() == "gpu":
        default = [(4, 3, 32, 48, 8), (2, 3, 224, 224, 16)]
    for b, c, h, w, p in cases or default:
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
            hint = _patchify_out_of_bounds(kernel, (griddim, blockdim), (img, out, np.int32(p)))
            raise AssertionError(f"for img {img.shape}, p={p}: {e}{hint}") from None
        name = f"out for img {img.shape}, p={p}"
        if not _is_close(got, expected) and not np.isnan(got).all():
            for why, a in _patchify_mistakes(img, p).items():
                if _is_close(got, a):
                    raise AssertionError(f"`{name}` holds the right pixels in the wrong places: {why}.")
        hint = (
            "a 3-D launch: x along the patch vector, y over the patches, z over the images, so "
            "`e, n, b = cuda.grid(3)`, and every thread with e < C*p*p writes out[b, n, e]."
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

    from cudalearn.nn.vit import patchify_reshape

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
    out.update(
        features=(int(lin.in_features), int(lin.out_features)),
        weight=lin.weight.detach().clone(),
        bias=None if lin.bias is None else lin.bias.detach().clone(),
    )
    c, p = conv.in_channels, conv.kernel_size[0]
    if out["features"] == (c * p * p, conv.out_channels):
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
    cases (image, patch, dim, heads).
    """
    import torch

    from cudalearn.nn.vit import Attention, op_flops

    for image, patch, dim, heads in cases or [(32, 8, 16, 2), (48, 12, 10, 2), (224, 16, 192, 3)]:
        n = (image // patch) ** 2
        attn = Attention(dim, heads).to("meta")
        x = torch.empty(1, n, dim, device="meta")
        expected = op_flops(lambda attn=attn, x=x: attn(x)).get("bmm", 0)
        call = f"attention_flops({image}, {patch}, {dim})"
        got = checks.call_student(attention_flops, "attention_flops", image, patch, dim)
        if got is None:
            raise AssertionError(f"`{call}` is None: {checks.NOT_DONE}")
        if isinstance(got, bool) or not isinstance(got, (int, np.integer)):
            raise AssertionError(
                f"`{call}` is {got!r}, a {type(got).__name__}: return a Python int (use // and integer "
                f"arithmetic, not / or ** with floats; int(...) of an exact count also works)."
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
        checks.check_equal(got, expected, name=call, hint=hint)


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
