"""Lab 7's second check: split_forward, AlexNet's forward pass over two columns, against the unsplit one.

Logits and gradients are compared with the unsplit network's; the bytes each exchange layer sends with
`alexnet.exchange_bytes`; the routes of the sends and the autograd graph show a column that used what
lives on the other column's device, which the CPU run here would not otherwise notice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from cudalearn import checks
from cudalearn.chapters.ch07.checks._calls import call_with_hint, watch
from cudalearn.nn import alexnet
from cudalearn.nn.alexnet import AlexNet, AlexNetConfig, TwoColumnAlexNet
from cudalearn.runtime import device


def _split_problem(cfg: AlexNetConfig, batch: int, seed: int) -> tuple[AlexNet, torch.Tensor, torch.Tensor]:
    """The unsplit network (seeded, evaluation mode: no dropout), images and labels of one problem."""
    torch.manual_seed(seed)
    net = AlexNet(cfg).eval()  # evaluation mode: both models compute the same function
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, cfg.in_channels, cfg.image, cfg.image, generator=gen)
    y = torch.randint(0, cfg.classes, (batch,), generator=gen)
    return net, x, y


def _split_hint(cfg: AlexNetConfig) -> str:
    """The hint for an error split_forward raises: where this network exchanges, and how."""
    return (
        f"this network exchanges at {cfg.exchange}: there each column's input is "
        "torch.cat([column 0's tensor, column 1's tensor], dim=1) on its own device; at every "
        "other layer a column keeps its own tensor. Read the exchange layers from net.cfg.exchange."
    )


class _Images(torch.Tensor):
    """Images whose `.to(...)` gives a plain tensor: one still of this type at a column was never moved."""

    def to(self, *args: Any, **kwargs: Any) -> torch.Tensor:  # type: ignore[override]
        return self.as_subclass(torch.Tensor).to(*args, **kwargs)


class _WatchedColumns(TwoColumnAlexNet):
    """The two-column network of the check: it notes each column whose stage got the images not moved."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.unmoved: set[int] = set()

    def stage(self, name: str, c: int, h: torch.Tensor) -> torch.Tensor:
        if isinstance(h, _Images):
            self.unmoved.add(c)
            h = h.as_subclass(torch.Tensor)
        return super().stage(name, c, h)


def _column_mixups(logits: torch.Tensor, net: TwoColumnAlexNet) -> list[str]:
    """Where a column used what lives on the other column's device, read from the autograd graph.

    The checks run both columns on the CPU, where such a mix-up computes the right numbers (on two GPUs
    it fails). Walking back from the logits (column 0's), everything belongs to one column until a
    net.send: the send must deliver to that column, and behind it lies the sender's column. A weight
    reached from the other column's tensors is a mix-up too.
    """
    owner = {id(p): (c, key) for key, p in net.column_tensors().items() for c in (int(key.split(".")[1]),)}
    problems: list[str] = []
    seen: set[tuple[int, int]] = set()
    stack = [(logits.grad_fn, 0)]
    while stack and len(problems) < 3:
        node, c = stack.pop()
        if node is None or (id(node), c) in seen:
            continue
        seen.add((id(node), c))
        route = getattr(node, "route", None) if type(node).__name__ == "_SendBackward" else None
        if route is not None:
            src, dst = route
            if dst != c:
                problems.append(
                    f"net.send(t, {src}, {dst}, {node.layer!r}) delivers t to column {dst}, but column {c} "
                    f"used the result"
                )
            c = src
        elif type(node).__name__ == "AccumulateGrad":
            col, key = owner.get(id(node.variable), (c, ""))
            if col != c:
                problems.append(f"column {c} computed with {key}, a tensor of column {col}")
        stack.extend((nxt, c) for nxt, _ in node.next_functions)
    return problems


def split_experiment(split_forward: Callable, cfg: AlexNetConfig, batch: int, seed: int) -> dict:
    """Lab 7, where the student's code runs: split_forward on a two-column copy of the seeded network.

    Returns plain data: the logits (detached), their device and requires_grad, the gradients of every
    column tensor after a cross-entropy backward pass, the bytes counted per layer and per (src, dst)
    route, the columns that used the images without moving them, the places where one column used the
    other's tensors, and whether the package's own forward pass was called.
    """
    net, x, y = _split_problem(cfg, batch, seed)
    two = _WatchedColumns.from_unsplit(net)
    with device.one_torch_thread(), watch(TwoColumnAlexNet.forward, AlexNet.forward) as called:
        got = call_with_hint(
            split_forward, "split_forward", two, x.as_subclass(_Images), hint=_split_hint(cfg)
        )
    if isinstance(got, _Images):
        got = got.as_subclass(torch.Tensor)
    out: dict[str, Any] = {
        "forward_called": bool(called),
        "type": checks.type_name(got),
        "logits": None,
        "training": bool(two.training),  # the network is in evaluation mode before the call
    }
    if not isinstance(got, torch.Tensor):
        return out
    out.update(
        logits=got.detach().clone(),
        device=str(got.device),
        column0=str(two.devices[0]),
        requires_grad=bool(got.requires_grad),
    )
    out["mixups"] = _column_mixups(got, two) if got.grad_fn is not None else []
    if got.requires_grad and tuple(got.shape) == (batch, cfg.classes):
        with device.one_torch_thread():
            F.cross_entropy(got, y).backward()
    out["grads"] = {
        k: None if g is None else g.detach().clone() for k, g in two.column_tensors(grad=True).items()
    }
    out["traffic"] = {k: [int(f), int(b)] for k, (f, b) in two.traffic.by_layer().items()}
    out["routes"] = {
        k: {f"{s}->{d}": int(n) for (s, d), n in v.items()} for k, v in two.traffic.by_route().items()
    }
    out["unmoved"] = sorted(two.unmoved)
    return out


def _logits_hint(
    got: torch.Tensor, expected: torch.Tensor, cfg: AlexNetConfig, training: bool = False
) -> str:
    """Why split_forward's logits differ from the unsplit network's: a half, swapped, softmax, mode..."""
    half = cfg.classes // 2
    if got.ndim == 2 and got.shape == (expected.shape[0], half):
        which = (
            "column 0's" if torch.allclose(got, expected[:, :half], rtol=1e-4, atol=1e-5) else "one column's"
        )
        return (
            f"you returned {which} half of the logits only: cat column 1's half after it, sent to column 0 "
            f"with net.send(h[1], 1, 0, alexnet.OUTPUT)."
        )
    if got.shape == expected.shape and torch.allclose(got.roll(half, dims=1), expected, rtol=1e-4, atol=1e-5):
        return (
            "your logits are the right ones with the two halves swapped: column 0's output comes first, "
            "then column 1's (sent to column 0 under alexnet.OUTPUT)."
        )
    if got.shape == expected.shape and torch.allclose(got.sum(1), torch.ones(()), atol=1e-4):
        return (
            "your rows sum to 1: those are probabilities (softmax); return the logits, the raw output of "
            "fc8, and leave the softmax to the loss (F.cross_entropy)."
        )
    if training:
        return (
            "split_forward switched the network to training mode (net.train()), so dropout drops "
            "activations at random: leave the network's mode as it is."
        )
    return (
        f"this network exchanges at {cfg.exchange}: at those layers each column's input is "
        "torch.cat([column 0's tensor, column 1's tensor], dim=1) (in that order), elsewhere each column "
        "keeps its own tensor; every layer runs net.stage(name, c, h[c]) for both columns."
    )


def _check_split_once(split_forward: Callable, cfg: AlexNetConfig, batch: int, seed: int) -> None:
    """One problem of check_split_forward: logits, gradients and bytes against the unsplit network."""
    got = checks.student_side(split_experiment, split_forward, cfg, batch, seed)
    name = f"split_forward(net, x) with exchange={cfg.exchange}"
    if got["forward_called"]:
        raise AssertionError(
            f"{name} called net(x) (the package's own forward pass): write the loop over "
            "the layers yourself, with net.stage and net.send."
        )
    if got["logits"] is None:
        if got["type"] == "NoneType":
            raise AssertionError(
                f"`split_forward` returned None: {checks.NOT_DONE} (Did you `return` the logits?)"
            )
        raise AssertionError(
            f"{name} returned a {got['type']}: return the logits, one torch tensor (N, classes)."
        )
    net, x, y = _split_problem(cfg, batch, seed)
    expected = net(x)
    if got["device"] != got["column0"]:
        raise AssertionError(f"{name} returned logits on {got['device']}: gather them on column 0's device.")
    try:
        checks.check_close(got["logits"], expected.detach().numpy(), name=name, rtol=1e-4, atol=1e-5)
    except AssertionError as e:  # the generic hint speaks of indexing: say what differs in this network
        hint = _logits_hint(
            torch.as_tensor(np.asarray(got["logits"])), expected.detach(), cfg, got.get("training", False)
        )
        raise AssertionError(str(e).split(" Hint: ")[0] + " Hint: " + hint) from None
    if not got["requires_grad"]:
        raise AssertionError(
            f"{name} returned logits without a gradient: did you detach them or use no_grad?"
        )
    F.cross_entropy(expected, y).backward()
    for key, g in net.column_tensors(grad=True).items():
        mine = got["grads"].get(key)
        if mine is None:
            raise AssertionError(
                f"the gradient of {key} is None: no gradient reached that layer. Either it was not used in "
                f"split_forward, or a tensor on its way to the logits was cut from the graph (.detach(), "
                f".data, torch.no_grad()); net.send keeps the graph."
            )
        scale = float(g.abs().max()) or 1.0
        checks.check_close(mine, g.numpy(), name=f"gradient of {key}", rtol=1e-4, atol=1e-5 * scale)
    counted = {k: tuple(v) for k, v in got["traffic"].items()}
    predicted = alexnet.exchange_bytes(cfg, batch)
    if counted != predicted:
        extra = sorted(set(counted) - set(predicted))
        missing = sorted(set(predicted) - set(counted))
        if extra:
            hint = f"bytes were sent at layers that do not exchange: {extra}. "
        elif missing:
            hint = f"nothing was sent at {missing}: every tensor that changes column goes through net.send. "
        else:
            hint = "send each half once per exchange layer, and only the half the other column lacks. "
        raise AssertionError(
            f"{name}: the bytes that crossed between the columns, {counted}, differ from the "
            f"prediction {predicted}. Hint: {hint}Use net.send(t, src, dst, layer) only when src != dst."
        )
    _check_columns(name, got, cfg)


def _check_columns(name: str, got: dict, cfg: AlexNetConfig) -> None:
    """Each send goes where its tensor is used, the logits end on column 0, each column moves its images.

    The check runs both columns on the CPU, where the right numbers come out of these mistakes too; on
    two GPUs they fail, so they are read from the routes of the sends and the autograd graph.
    """
    two_gpus = "on two GPUs this fails: the tensors would be on different devices"
    routes = got["routes"]
    output = routes.get(alexnet.OUTPUT, {})
    if set(output) != {"1->0"}:
        raise AssertionError(
            f"{name}: the logits were gathered with sends {sorted(output)} under alexnet.OUTPUT; column 1's "
            f"half goes to column 0, net.send(h[1], 1, 0, alexnet.OUTPUT), and the logits are "
            f"torch.cat([h[0], that], dim=1) on column 0's device (the CPU run here cannot tell; {two_gpus})."
        )
    for layer in cfg.exchange:
        sent = routes.get(layer, {})
        if set(sent) != {"0->1", "1->0"}:
            raise AssertionError(
                f"{name}: at {layer} the sends went {sorted(sent)}; each column sends its own tensor to the "
                f"other, net.send(h[0], 0, 1, {layer!r}) and net.send(h[1], 1, 0, {layer!r}) ({two_gpus})."
            )
    if got["mixups"]:
        raise AssertionError(
            f"{name}: a column used what lives on the other column's device: {'; '.join(got['mixups'])}. "
            f"Hint: column c's tensors are h[c]; a tensor reaches column c only as "
            f"net.send(t, src, c, layer) ({two_gpus})."
        )
    if got["unmoved"]:
        cols = " and ".join(str(c) for c in got["unmoved"])
        raise AssertionError(
            f"{name}: column {cols} computed on the images x as they came, never moved to its device. "
            f"Hint: each column starts from its own copy, h = [x.to(dev) for dev in net.devices] (the CPU "
            f"run here cannot tell; on two GPUs a column cannot read x on another device)."
        )


def check_split_forward(
    split_forward: Callable[[TwoColumnAlexNet, torch.Tensor], torch.Tensor],
    cfg: AlexNetConfig | None = None,
    batch: int = 4,
    seed: int = 0,
) -> None:
    """Lab 7: split_forward(net, x) gives the unsplit network's logits and gradients, bytes as predicted.

    Without `cfg`: the small network with the 2012 exchange layers (batch 4), then exchanging at conv2
    and fc7 (batch 3), so the exchange layers must be read from net.cfg.exchange.
    """
    problems = (
        [(cfg, batch, seed)]
        if cfg is not None
        else [
            (AlexNetConfig.small(), batch, seed),
            (AlexNetConfig.small(exchange=("conv2", "fc7")), 3, seed + 1),
        ]
    )
    for c, b, s in problems:
        with device.one_torch_thread():  # small models: one thread is faster, on a shared CPU much faster
            _check_split_once(split_forward, c, b, s)
