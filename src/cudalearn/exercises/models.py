"""Checks of lab 7 (AlexNet's two-GPU split), built on `checks` and the package's own models.

Visible checks use the 2012 exchange pattern and float32; the hidden tests
in the solution notebook call the same functions with other exchange
patterns, activations, batch sizes and element sizes, so an answer that
hard-codes the 2012 case or float32 is caught. Everything runs on the CPU
in a few seconds (the two columns share the CPU when there is no GPU).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from cudalearn import checks
from cudalearn.nn import alexnet, memory
from cudalearn.nn.alexnet import AlexNet, AlexNetConfig, TwoColumnAlexNet


def _call(fn: Callable, name: str, *args: Any, hint: str = "") -> Any:
    """fn(*args), with NotImplementedError turned into the "not done yet" message, errors into hints."""
    try:
        return checks.call_student(fn, name, *args)
    except (RuntimeError, TypeError, KeyError, IndexError) as e:
        if not hint:
            raise
        raise AssertionError(f"`{name}` raised {type(e).__name__}: {e}\nHint: {hint}") from None


def check_exchange_bytes(
    exchange_bytes: Callable[[AlexNetConfig, int, int], int],
    cases: Sequence[tuple[AlexNetConfig, int, int]] | None = None,
) -> None:
    """Lab 7: exchange_bytes(cfg, batch, bytes_per_element) = bytes crossing between the columns per step."""
    cases = cases or [
        (AlexNetConfig.original(), 128, 4),
        (AlexNetConfig.small(), 4, 4),
    ]
    for cfg, batch, size in cases:
        per_layer = alexnet.exchange_bytes(cfg, batch, size)
        expected = sum(f + b for f, b in per_layer.values())
        got = _call(exchange_bytes, "exchange_bytes", cfg, batch, size)
        call = f"exchange_bytes(cfg with exchange={cfg.exchange}, batch={batch}, bytes_per_element={size})"
        hint = ""
        if got is not None and got == expected // 2:
            hint = (
                "that is half: the gradients cross back in the backward pass, as many bytes as went forward."
            )
        elif got is not None and got == expected - sum(per_layer[alexnet.OUTPUT]):
            hint = (
                "you left out the logits: column 1's half of the output is gathered on column 0's device "
                "for the loss, and its gradient goes back."
            )
        elif got is not None and got == expected // 2 - per_layer[alexnet.OUTPUT][0]:
            hint = "count both directions and the logits gathered for the loss."
        else:
            hint = (
                "at each layer of cfg.exchange the whole input of the layer crosses once forward "
                "(each column sends its half) and its gradient once backward; add the logits."
            )
        checks.check_equal(got, expected, name=call, hint=hint)


def _split_problem(cfg: AlexNetConfig, batch: int, seed: int):
    torch.manual_seed(seed)
    net = AlexNet(cfg).eval()  # evaluation mode: no dropout, so both models compute the same function
    two = TwoColumnAlexNet.from_unsplit(net)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, cfg.in_channels, cfg.image, cfg.image, generator=gen)
    y = torch.randint(0, cfg.classes, (batch,), generator=gen)
    return net, two, x, y


def _forbid_forward(two: TwoColumnAlexNet) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError(
            "split_forward called net(x) (the package's own forward pass): write the loop over "
            "the layers yourself, with net.stage and net.send."
        )

    two.forward = refuse


def check_split_forward(
    split_forward: Callable[[TwoColumnAlexNet, torch.Tensor], torch.Tensor],
    cfg: AlexNetConfig | None = None,
    batch: int = 4,
    seed: int = 0,
) -> None:
    """Lab 7: split_forward(net, x) gives the unsplit network's logits and gradients, bytes as predicted."""
    cfg = cfg or AlexNetConfig.small()
    net, two, x, y = _split_problem(cfg, batch, seed)
    _forbid_forward(two)
    got = _call(
        split_forward,
        "split_forward",
        two,
        x,
        hint=(
            f"this network exchanges at {cfg.exchange}: there each column's input is "
            "torch.cat([column 0's tensor, column 1's tensor], dim=1) on its own device; at every "
            "other layer a column keeps its own tensor. Read the exchange layers from net.cfg.exchange."
        ),
    )
    if got is None:
        raise AssertionError(
            f"`split_forward` returned None: {checks.NOT_DONE} (Did you `return` the logits?)"
        )
    expected = net(x)
    name = f"split_forward(net, x) with exchange={cfg.exchange}"
    if isinstance(got, torch.Tensor) and got.device != two.devices[0]:
        raise AssertionError(f"{name} returned logits on {got.device}: gather them on column 0's device.")
    checks.check_close(got, expected.detach().numpy(), name=name, rtol=1e-4, atol=1e-5)
    if not got.requires_grad:
        raise AssertionError(
            f"{name} returned logits without a gradient: did you detach them or use no_grad?"
        )
    F.cross_entropy(got, y).backward()
    F.cross_entropy(expected, y).backward()
    ref, mine = net.column_tensors(grad=True), two.column_tensors(grad=True)
    for key, g in ref.items():
        if mine[key] is None:
            raise AssertionError(f"the gradient of {key} is None: that layer was not used in split_forward.")
        scale = float(g.abs().max()) or 1.0
        checks.check_close(mine[key], g.numpy(), name=f"gradient of {key}", rtol=1e-4, atol=1e-5 * scale)
    counted, predicted = two.traffic.by_layer(), alexnet.exchange_bytes(cfg, batch)
    if counted != predicted:
        extra = sorted(set(counted) - set(predicted))
        hint = (
            f"bytes were sent at layers that do not exchange: {extra}. "
            if extra
            else "send each half once per exchange layer, and only the half the other column lacks. "
        )
        raise AssertionError(
            f"{name}: the bytes that crossed between the columns, {counted}, differ from the "
            f"prediction {predicted}. Hint: {hint}Use net.send(t, src, dst, layer) only when src != dst."
        )


def check_step_memory(
    step_memory: Callable[[int, str, int], dict[str, int]],
    cases: Sequence[tuple[str, torch.dtype]] | None = None,
    cfg: AlexNetConfig | None = None,
) -> None:
    """Lab 7: step_memory(n_params, optimizer, bytes_per_element) matches what real optimisers hold.

    For each (optimizer, dtype) case, a network is built in that dtype and
    trained one step with the real optimiser; its parameters, gradients and
    optimiser state are counted and compared with the student's answer.
    """
    cfg = cfg or AlexNetConfig.small()
    cases = cases or [("sgd", torch.float32), ("momentum", torch.float32), ("adam", torch.float32)]
    makers = {
        "sgd": lambda p: torch.optim.SGD(p, lr=0.01),
        "momentum": lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9),
        "adam": lambda p: torch.optim.Adam(p, lr=1e-3),
    }
    for optimizer, dtype in cases:
        torch.manual_seed(0)
        net = AlexNet(cfg.replace(dropout=0.0)).to(dtype)
        opt = makers[optimizer](net.parameters())
        x = torch.randn(2, cfg.in_channels, cfg.image, cfg.image, dtype=dtype)
        F.cross_entropy(net(x).float(), torch.tensor([0, 1])).backward()
        opt.step()
        real = {
            "weights": memory.parameter_bytes(net),
            "gradients": sum(p.grad.numel() * p.grad.element_size() for p in net.parameters()),
            "optimizer": memory.optimizer_state_bytes(opt),
        }
        n = sum(p.numel() for p in net.parameters())
        size = torch.empty((), dtype=dtype).element_size()
        got = _call(step_memory, "step_memory", n, optimizer, size)
        if got is None:
            raise AssertionError(f"`step_memory` returned None: {checks.NOT_DONE}")
        if not isinstance(got, dict) or set(got) != set(real):
            raise AssertionError(
                f"step_memory should return a dict with the keys {sorted(real)}, got {got!r}."
            )
        for kind, expected in real.items():
            checks.check_equal(
                got[kind],
                expected,
                name=f"step_memory({n}, {optimizer!r}, {size})[{kind!r}]",
                hint=(
                    "plain SGD keeps no state, SGD with momentum one buffer per parameter, Adam two "
                    "(its running means of the gradient and of its square); each element takes "
                    "bytes_per_element bytes."
                    if kind == "optimizer"
                    else "one element of bytes_per_element bytes per parameter."
                ),
            )
