"""Lab 8's second check: input_gradient(branch, x, grad_y) = dL/dx of y = branch(x) + x, with its + grad_y."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from cudalearn import checks
from cudalearn.checks.torch_answers import _close, _one_thread, _plain, _tensor_or_raise
from cudalearn.runtime import device


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


def check_input_gradient(input_gradient: Callable[..., Any], cases: Sequence[str] | None = None) -> None:
    """Lab 8: input_gradient(branch, x, grad_y) = dL/dx of y = branch(x) + x, by autograd on the branch."""
    with device.one_torch_thread():
        _check_input_gradient(input_gradient, cases)
