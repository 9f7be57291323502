"""Lab 8's third check: first_to_last(net, X, y), the first layer's gradient over the last's, skips or not."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from cudalearn import checks
from cudalearn.chapters.ch08.checks._layers import layer_data, verify_layers
from cudalearn.chapters.ch08.checks.residual_block import verify_residual_block
from cudalearn.checks.torch_answers import _one_thread, _plain
from cudalearn.runtime import device


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
    data = {name: layer_data(getattr(block, name, None)) for name in ("fc1", "fc2")}
    verify_layers(dict(data, same_layer=False), width)
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
        verify_residual_block(cls, widths=(width,), batches=((2,),))
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


def check_first_to_last(first_to_last: Callable[..., Any], cls: Any, **kwargs: Any) -> None:
    """Lab 8: first_to_last(net, X, y) = ||dL/dW_first|| / ||dL/dW_last||; it must not vanish with skips.

    Keyword arguments: blocks, width, seed of the deep networks built from `cls`.
    """
    with device.one_torch_thread():
        _check_first_to_last(first_to_last, cls, **kwargs)
