"""Checks of lab 8 (ResNet skip gradients): the residual block, dL/dx with its +1, first-to-last ratios.

Every check compares the student's code with PyTorch: outputs with the
reference computation, gradients with autograd. The student's code runs in
experiments that return plain data (`torch_answers`). Visible checks use a
few sizes; the hidden tests in the solution notebook call the same
functions with others.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from cudalearn import checks
from cudalearn.checks.torch_answers import _close, _compare, _one_thread, _plain, _tensor_or_raise
from cudalearn.runtime import device


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
    layers = (out["fc1"], out["fc2"])
    if any(f["type"] != "Linear" or (f["in"], f["out"]) != (width, width) for f in layers):
        return out  # `_check_layers` says what is wrong before a forward that cannot run
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
        if layer["bias"] is None:
            raise AssertionError(
                f"`{name}` has no bias (bias=False): the exercise's layers are nn.Linear(width, width), "
                f"which keep their bias. Without biases a deep stack of ReLU blocks can lose every "
                f"activation, and exercise 3's gradients come out exactly 0."
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
        other_losses = {  # the losses students take instead of the cross-entropy: computed for a hint only
            "the MSE against one-hot labels": lambda out: F.mse_loss(out, F.one_hot(y, out.shape[1]).float()),
            "the mean of the logits": lambda out: out.mean(),
            "the sum of the logits": lambda out: out.sum(),
            "F.nll_loss on the logits (no log_softmax)": lambda out: F.nll_loss(out, y),
        }
        for name, loss in other_losses.items():
            g = torch.autograd.grad(loss(small(X)), [small[0].weight, small[-1].weight])
            norms[name] = (g[0].norm() / g[1].norm()).item()
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
        elif loss_name := next((k for k in other_losses if math.isclose(got, norms[k], rel_tol=1e-4)), None):
            hint = f"your loss is {loss_name}: L is the cross-entropy, F.cross_entropy(net(X), y)."
        raise AssertionError(f"first_to_last(small net) is {got:.6g}, expected {expected:.6g}. Hint: {hint}")
    try:
        _check_residual_block(cls, widths=(width,), batches=((2,),))
    except Exception:  # noqa: BLE001 - exercise 1's check says what is wrong; the course's block stands in
        # A block that fails its check, or whose own code raises: in a notebook the student's exception,
        # under `cudalearn grade` the same rebuilt as a builtin type or `grading.errors.SubmissionError`.
        # Timeouts and a dead student process are BaseExceptions (`GradingInterrupt`), never caught here.
        cls = None
    data = checks.student_side(deep_ratio_experiment, first_to_last, cls, blocks, width, seed)
    for skip, test, words in (
        (True, lambda r: r > 1e-2, "above 0.01"),
        (False, lambda r: r < 1e-4, "below 1e-4"),
    ):
        kind = "residual" if skip else "plain"
        ratio = _ratio(data[kind], f"the {kind} net")
        if math.isnan(ratio):
            raise AssertionError(
                f"in the {kind} net of {blocks} blocks first_to_last returned nan: 0/0, the gradients of "
                f"both the first and the last layer's weights are exactly 0 (no ReLU of the blocks let "
                f"anything through). Check first_to_last"
                + (" and ResidualBlock (both layers keep their bias)." if cls is not None else ".")
            )
        if not test(ratio):
            kind = "residual" if skip else "plain (your blocks without the skip)"
            raise AssertionError(
                f"in a {kind} net of {blocks} blocks the first layer's gradient is {ratio:.3g} times the "
                f"last layer's; it should be {words}. Check first_to_last"
                + (" and ResidualBlock." if cls is not None else ".")
            )


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
