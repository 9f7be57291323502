"""Lab 11's tensor-parallel MLP check, second half: tp_forward on thread ranks, outputs and gradients."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from cudalearn import checks
from cudalearn.chapters.ch11.checks._errors import error_text
from cudalearn.chapters.ch11.checks._tp_problem import SHARD_KEYS, hidden_slice, reference_shard, tp_problem
from cudalearn.chapters.ch11.ring import CollectiveError, ThreadGroup
from cudalearn.checks.torch_answers import _compare, _one_thread


def _grad(t: torch.Tensor) -> torch.Tensor | None:
    """A copy of t's gradient, or None when none reached it."""
    return None if t.grad is None else t.grad.detach().clone()


@_one_thread
def forward_experiment(
    tp_forward: Callable,
    world: int,
    tokens: int,
    d_in: int,
    hidden: int,
    d_out: int,
    seed: int,
    timeout: float,
) -> dict:
    """Lab 11, in the student's process: tp_forward on `world` thread ranks, then one backward pass.

    Each rank gets its own leaf copies of x, of its (correct) shard and of b2, and the all_reduce of a
    `ThreadGroup`. Returns each rank's output (or error, or type), the shapes each rank all-reduced,
    and, when every output is a tensor of the right shape with a gradient, every rank's gradients of
    L = sum over ranks of (y_r * g).sum().
    """
    fc1, fc2, x, g = tp_problem(tokens, d_in, hidden, d_out, seed)
    shards = [
        {k: v.requires_grad_() for k, v in reference_shard(fc1, fc2, r, world).items()} for r in range(world)
    ]
    xs = [x.clone().requires_grad_() for _ in range(world)]
    b2s = [fc2.bias.detach().clone().requires_grad_() for _ in range(world)]
    group = ThreadGroup(world, timeout)
    outcomes = group.run(
        lambda r, all_reduce: checks.call_student(
            tp_forward, "tp_forward", xs[r], shards[r], b2s[r], all_reduce
        )
    )
    for o in outcomes:
        if isinstance(o.error, AssertionError):  # not done yet
            raise o.error
    ranks: list[dict] = []
    for o in outcomes:
        if not o.finished:
            ranks.append({"stuck": True})
        elif o.error is not None:
            ranks.append({"error": error_text(o.error), "collective": isinstance(o.error, CollectiveError)})
        elif isinstance(o.value, torch.Tensor):
            ranks.append({"y": o.value.detach().clone(), "requires_grad": bool(o.value.requires_grad)})
        else:
            ranks.append({"type": checks.type_name(o.value)})
    out: dict[str, Any] = {
        "ranks": ranks,
        "calls": [[list(s) for s in c] for c in group.calls],
        "grads": None,
        "backward_error": None,
        "timeout": timeout,
    }
    ys = [o.value for o in outcomes]
    usable = all(
        isinstance(y, torch.Tensor) and y.requires_grad and tuple(y.shape) == (tokens, d_out) for y in ys
    )
    if usable:
        try:
            sum((y * g).sum() for y in ys).backward()
        except Exception as e:  # noqa: BLE001 - the student's graph failed: described to the check
            out["backward_error"] = error_text(e)
        else:
            out["grads"] = [
                {**{k: _grad(shards[r][k]) for k in SHARD_KEYS}, "b2": _grad(b2s[r]), "x": _grad(xs[r])}
                for r in range(world)
            ]
    return out


def _forward_error_hint(error: str) -> str:
    """What to do about an exception tp_forward raised, from its text."""
    if "shapes cannot be multiplied" in error or "size of tensor" in error:
        return (
            "x is (tokens, d_in) and w1 (h/N, d_in), so x @ w1.T + b1 is (tokens, h/N); with w2 "
            "(d_out, h/N), that times w2.T is (tokens, d_out). nn.Linear's weights are (out, in): "
            "multiply by their transpose, or use F.linear(x, w, b)."
        )
    return (
        "x is (tokens, d_in); shard['w1'] is (h/N, d_in), shard['b1'] (h/N,), shard['w2'] (d_out, h/N); "
        "b2 is (d_out,); all_reduce(t) returns the sum of every rank's t (a torch tensor of the same shape)."
    )


def _forward_value_hint(y: torch.Tensor, fc1, fc2, x, world: int) -> str:
    """The usual mistake whose output y is, recognised by computing each on the unsplit layers."""
    h = fc1(x)
    w2, b2 = fc2.weight, fc2.bias
    expected = fc2(F.gelu(h))
    gelu_after = (
        "GELU was applied after the all-reduce: GELU is not linear (gelu(a + b) is not gelu(a) + gelu(b)), "
        "so it must act on each rank's own hidden slice, before fc2; that is why fc1 is split by its outputs."
    )
    known = [
        (
            expected + (world - 1) * b2,
            f"the output is off by (N-1)·b2: add fc2's bias once, after the all-reduce (added before it, the "
            f"{world} ranks' copies of b2 are summed with the partial outputs).",
        ),
        (expected - b2, "fc2's bias b2 is missing: add it once, after the all-reduce."),
        (fc2(F.gelu(x @ fc1.weight.T)), "fc1's bias is missing: the hidden layer is gelu(x @ w1.T + b1)."),
        (F.gelu(h @ w2.T) + b2, gelu_after),
        (F.gelu(h @ w2.T + b2), gelu_after),
        (
            fc2(F.gelu(h, approximate="tanh")),
            "that is GELU's tanh approximation: use F.gelu(h), the exact (erf) form and nn.GELU()'s default, "
            "which the unsplit MLP uses.",
        ),
        (fc2(h), "there is no activation: apply F.gelu to x @ w1.T + b1, before fc2."),
        (fc2(F.relu(h)), "that is ReLU: the MLP's activation is GELU, F.gelu."),
    ]
    for candidate, hint in known:
        if torch.allclose(y.to(torch.float64), candidate, rtol=1e-9, atol=1e-12):
            return hint
    return (
        "each rank computes gelu(x @ w1.T + b1) @ w2.T, a partial output (tokens, d_out); all_reduce sums "
        "the N of them; then b2 is added once."
    )


def verify_forward(out: dict, world: int, tokens: int, d_in: int, hidden: int, d_out: int, seed: int) -> None:
    """One problem of check_tp_mlp's second half: calls, outputs and gradients against the unsplit MLP."""
    call = (
        f"tp_forward on {world} ranks (x ({tokens}, {d_in}), fc1 {d_in} -> {hidden}, fc2 {hidden} -> {d_out})"
    )
    ranks = out["ranks"]
    errors = [(r, d) for r, d in enumerate(ranks) if "error" in d]
    own = [(r, d) for r, d in errors if not d["collective"]]
    if own:
        r, d = own[0]
        raise AssertionError(f"{call}: rank {r} raised {d['error']}\nHint: {_forward_error_hint(d['error'])}")
    if errors:
        r, d = errors[0]
        raise AssertionError(f"{call}: rank {r}'s all_reduce failed: {d['error']}")
    stuck = [r for r, d in enumerate(ranks) if d.get("stuck")]
    if stuck:
        raise AssertionError(
            f"{call}: rank(s) {stuck} had not returned after {out['timeout']:g} s (such a thread keeps "
            "running: restart the kernel to stop it). Hint: is there an endless loop, or a wait for "
            "something the other ranks never do?"
        )
    for r, d in enumerate(ranks):
        if "type" in d:
            if d["type"] == "NoneType":
                raise AssertionError(
                    f"`tp_forward` returned None on rank {r}: {checks.NOT_DONE} (Did you `return` it?)"
                )
            raise AssertionError(
                f"{call}: rank {r} returned a {d['type']}: return a torch tensor (tokens, d_out)."
            )
    want = [tokens, d_out]
    for r, shapes in enumerate(out["calls"]):
        if not shapes:
            raise AssertionError(
                f"{call}: rank {r} never called all_reduce. Hint: each rank's gelu(x @ w1.T + b1) @ w2.T is "
                "only a partial sum, over its h/N hidden features; all_reduce sums the N partial outputs, "
                "then b2 is added."
            )
        if len(shapes) > 1:
            raise AssertionError(
                f"{call}: rank {r} called all_reduce {len(shapes)} times, on {[tuple(s) for s in shapes]}. "
                f"Hint: Megatron-LM's MLP needs one all-reduce in the forward pass, of fc2's partial output "
                f"(tokens, d_out) = {tuple(want)}; fc1's output needs none, since each rank applies GELU to "
                "its own hidden slice."
            )
        if list(shapes[0]) != want:
            raise AssertionError(
                f"{call}: rank {r} all-reduced a tensor of shape {tuple(shapes[0])}. Hint: the one "
                f"all-reduce sums fc2's partial outputs, (tokens, d_out) = {tuple(want)}: GELU and fc2's "
                "product come before it, b2 after."
            )
    fc1, fc2, x, g = tp_problem(tokens, d_in, hidden, d_out, seed)
    x_ref = x.clone().requires_grad_()
    expected = fc2(F.gelu(fc1(x_ref)))
    for r, d in enumerate(ranks):
        y = d["y"]
        name = f"rank {r}'s output ({world} ranks, x ({tokens}, {d_in}), {d_in} -> {hidden} -> {d_out})"
        if tuple(y.shape) != tuple(want):
            raise AssertionError(
                f"{name} has shape {tuple(y.shape)}, expected (tokens, d_out) = {tuple(want)}."
            )
        if y.dtype != torch.float64:
            raise AssertionError(f"{name} is {y.dtype}: keep the input's dtype, float64 here (no .float()).")
        with torch.no_grad():
            _compare(
                y,
                expected.detach(),
                name=name,
                rtol=1e-9,
                atol=1e-12,
                hint=_forward_value_hint(y, fc1, fc2, x, world),
            )
        if not d["requires_grad"]:
            raise AssertionError(
                f"{name} has no gradient: compute it with autograd on (no .detach(), .data, no_grad())."
            )
    if out["backward_error"]:
        raise AssertionError(f"{call}: the backward pass through your output raised {out['backward_error']}")
    (expected * g).sum().backward()
    grads = out["grads"]
    for r in range(world):
        rows = hidden_slice(hidden, world, r)
        ref = {
            "w1": fc1.weight.grad[rows],
            "b1": fc1.bias.grad[rows],
            "w2": fc2.weight.grad[:, rows],
            "b2": fc2.bias.grad,
        }
        for key, want_grad in ref.items():
            got = grads[r][key]
            what = f"the gradient of rank {r}'s {key}"
            if got is None:
                raise AssertionError(
                    f"{call}: no gradient reached rank {r}'s {key}: compute the output from the shard's "
                    "tensors with autograd on (no .detach(), .data, .numpy() or torch.no_grad())."
                )
            _compare(
                got,
                want_grad,
                name=what,
                rtol=1e-9,
                atol=1e-12 * (float(want_grad.abs().max()) or 1.0),
                hint="the output is right but this gradient is not: build the output from the shard's "
                "tensors with differentiable torch operations, and let the all_reduce you are given sum.",
            )
    if any(grads[r]["x"] is None for r in range(world)):
        raise AssertionError(
            f"{call}: no gradient reached x: compute the output from x itself, not a detached copy."
        )
    summed = sum(grads[r]["x"] for r in range(world))
    _compare(
        summed,
        x_ref.grad,
        name="the input's gradient, summed over the ranks",
        rtol=1e-9,
        atol=1e-12 * (float(x_ref.grad.abs().max()) or 1.0),
        hint="use x as it is: each rank's share of its gradient flows back through w1; the shares add up.",
    )
