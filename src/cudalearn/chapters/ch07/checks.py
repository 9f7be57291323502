"""Checks of lab 7 (AlexNet's two-GPU split), built on `checks` and the package's own models.

Visible checks already use more than the 2012 case (another exchange
pattern, 2-byte elements, a float16 network); the hidden tests in the
solution notebook call the same functions with still other patterns,
activations, batch sizes and element sizes, so an answer that hard-codes
the 2012 network or float32 is caught. The student's functions run through
`checks.student_side` experiments (module-level functions here), so under
`cudalearn grade` the two-column network is built, run and differentiated
in the student's process and only plain data (logits, gradients, byte
counts) comes back; the unsplit reference is built here from the same
configuration and seed. Everything runs on the CPU in a few seconds.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from cudalearn import checks
from cudalearn.chapters.ch07.step_memory import optimizer_state_bytes, parameter_bytes
from cudalearn.nn import alexnet
from cudalearn.nn.alexnet import AlexNet, AlexNetConfig, TwoColumnAlexNet
from cudalearn.runtime import device


def _call(fn: Callable, name: str, *args: Any, hint: str = "") -> Any:
    """fn(*args), with NotImplementedError turned into the "not done yet" message, errors into hints."""
    try:
        return checks.call_student(fn, name, *args)
    except (RuntimeError, TypeError, KeyError, IndexError, ValueError) as e:
        if not hint:
            raise
        raise AssertionError(f"`{name}` raised {type(e).__name__}: {e}\nHint: {hint}") from None


@contextlib.contextmanager
def _watch(*functions: Callable) -> Iterator[list[str]]:
    """Names of the given Python functions called in this thread inside the block, however they were bound."""
    codes = {f.__code__: f.__qualname__ for f in functions}
    seen: list[str] = []

    def hook(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            seen.append(codes[frame.f_code])

    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        yield seen
    finally:
        sys.setprofile(previous)


def _is_int(v: Any) -> bool:
    """True for a Python int (not a bool, a float such as 3.0, or a NumPy integer)."""
    return isinstance(v, int) and not isinstance(v, bool)


def _type_name(v: Any) -> str:
    t = type(v)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__.split('.')[0]}.{t.__name__}"


def _require_int(got: Any, name: str, hint: str) -> None:
    """Raise unless `got` is a Python int, naming the type the student returned."""
    if got is not None and not _is_int(got):
        raise AssertionError(
            f"`{name}` returned {got!r}, a {_type_name(got)}: the text asks for an int. Hint: {hint}"
        )


# Exercise 1: bytes across the bus ------------------------------------------------------------------


def exchange_experiment(exchange_bytes: Callable, cfg: AlexNetConfig, batch: int, size: int | None) -> dict:
    """Lab 7, in the student's process: exchange_bytes(cfg, batch, size), and the package calls it made.

    size None calls exchange_bytes(cfg, batch), leaving bytes_per_element to its default.
    """
    args = (cfg, batch) if size is None else (cfg, batch, size)
    with _watch(alexnet.exchange_bytes) as called:
        got = _call(exchange_bytes, "exchange_bytes", *args)
    return {"value": got, "called": sorted(set(called))}


def _exchange_hint(got: Any, cfg: AlexNetConfig, batch: int, size: int) -> str:
    """What the usual wrong answers to exchange_bytes look like, recognised from their value."""
    per_layer = alexnet.exchange_bytes(cfg, batch, size)
    total = sum(f + b for f, b in per_layer.values())
    logits = sum(per_layer[alexnet.OUTPUT])
    values = total // (2 * size)  # values that cross forward
    if got == total // 2:
        return "that is half: the gradients cross back in the backward pass, as many bytes as went forward."
    if got == total - logits:
        return (
            "you left out the logits: column 1's half of the output is gathered on column 0's device "
            "for the loss, and its gradient goes back."
        )
    if got == total // 2 - per_layer[alexnet.OUTPUT][0]:
        return "count both directions and the logits gathered for the loss."
    if batch > 1 and got * batch == total:
        return (
            f"that is the count for one image: every image of the batch crosses, multiply by batch ({batch})."
        )
    if got == total + 2 * batch * (cfg.classes - cfg.classes // 2) * size:
        return (
            "you counted all the logits: only column 1's half, cfg.classes // 2 per image, crosses to "
            "column 0 (column 0's half is already there), and its gradient back."
        )
    if size != 4 and got == 2 * values * 4:
        return f"that is the answer for 4-byte elements: multiply by bytes_per_element (here {size})."
    if cfg.exchange != alexnet.EXCHANGE_2012:
        other = cfg.replace(exchange=alexnet.EXCHANGE_2012)
        if got == sum(f + b for f, b in alexnet.exchange_bytes(other, batch, size).values()):
            return (
                f"that is the answer for the 2012 exchange layers {alexnet.EXCHANGE_2012}; this network "
                f"exchanges at cfg.exchange = {cfg.exchange}: loop over cfg.exchange."
            )
    return (
        "at each layer of cfg.exchange the whole input of the layer crosses once forward "
        "(each column sends its half) and its gradient once backward; add the logits."
    )


def check_exchange_bytes(
    exchange_bytes: Callable[[AlexNetConfig, int, int], int],
    cases: Sequence[tuple[AlexNetConfig, int, int]] | None = None,
) -> None:
    """Lab 7: exchange_bytes(cfg, batch, bytes_per_element) = bytes crossing between the columns per step.

    Default cases: the 2012 network (batch 128, float32), the small one, the small one exchanging at
    conv2 and fc7 with 2-byte elements. The answer must be an int and must not call
    `alexnet.exchange_bytes` (the reference it is compared with).
    """
    cases = cases or [
        (AlexNetConfig.original(), 128, 4),
        (AlexNetConfig.small(), 4, 4),
        (AlexNetConfig.small(exchange=("conv2", "fc7")), 3, 2),
    ]
    for cfg, batch, size in cases:
        call = f"exchange_bytes(cfg with exchange={cfg.exchange}, batch={batch}, bytes_per_element={size})"
        out = checks.student_side(exchange_experiment, exchange_bytes, cfg, batch, size)
        if out["called"]:
            raise AssertionError(
                f"{call} called alexnet.exchange_bytes, the package's own answer, which the exercise "
                f"asks you not to use. Hint: add up batch * prod(cfg.input_shape(name)) for each name in "
                f"cfg.exchange, and the logits, yourself."
            )
        got = out["value"]
        _require_int(got, call, "count with integers: int(np.prod(...)) and cfg.classes // 2.")
        expected = sum(f + b for f, b in alexnet.exchange_bytes(cfg, batch, size).values())
        hint = _exchange_hint(got, cfg, batch, size) if got is not None and got != expected else ""
        checks.check_equal(got, expected, name=call, hint=hint)
    cfg, batch = cases[0][:2]  # and once with bytes_per_element left out: float32's 4 bytes
    try:
        got = checks.student_side(exchange_experiment, exchange_bytes, cfg, batch, None)["value"]
    except TypeError as e:
        raise AssertionError(
            f"exchange_bytes(cfg, {batch}) without bytes_per_element raised TypeError: {e}. Hint: the "
            f"default is float32's 4 bytes: keep `bytes_per_element=4` in the signature."
        ) from None
    expected = sum(f + b for f, b in alexnet.exchange_bytes(cfg, batch, 4).values())
    checks.check_equal(
        got,
        expected,
        name=f"exchange_bytes(cfg, {batch}) without bytes_per_element",
        hint="the default is float32's 4 bytes: keep `bytes_per_element=4` in the signature.",
    )


# Exercise 2: the split forward pass ----------------------------------------------------------------


def _split_problem(cfg: AlexNetConfig, batch: int, seed: int) -> tuple[AlexNet, torch.Tensor, torch.Tensor]:
    """The unsplit network (seeded, evaluation mode: no dropout), images and labels of one problem."""
    torch.manual_seed(seed)
    net = AlexNet(cfg).eval()  # evaluation mode: both models compute the same function
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, cfg.in_channels, cfg.image, cfg.image, generator=gen)
    y = torch.randint(0, cfg.classes, (batch,), generator=gen)
    return net, x, y


def _split_hint(cfg: AlexNetConfig) -> str:
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
    with device.one_torch_thread(), _watch(TwoColumnAlexNet.forward, AlexNet.forward) as called:
        got = _call(split_forward, "split_forward", two, x.as_subclass(_Images), hint=_split_hint(cfg))
    if isinstance(got, _Images):
        got = got.as_subclass(torch.Tensor)
    out: dict[str, Any] = {
        "forward_called": bool(called),
        "type": _type_name(got),
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


# Exercise 3: the memory a training step holds ------------------------------------------------------

_OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.01),
    "momentum": lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9),
    "adam": lambda p: torch.optim.Adam(p, lr=1e-3),
}


def _real_step_memory(
    cfg: AlexNetConfig, optimizer: str, dtype: torch.dtype
) -> tuple[int, int, dict[str, int]]:
    """(parameters, element size, {weights, gradients, optimizer} bytes) after one real step in `dtype`."""
    torch.manual_seed(0)
    net = AlexNet(cfg.replace(dropout=0.0)).to(dtype)
    opt = _OPTIMIZERS[optimizer](net.parameters())
    x = torch.randn(2, cfg.in_channels, cfg.image, cfg.image, dtype=dtype)
    F.cross_entropy(net(x).float(), torch.tensor([0, 1])).backward()
    opt.step()
    real = {
        "weights": parameter_bytes(net),
        "gradients": sum(p.grad.numel() * p.grad.element_size() for p in net.parameters()),
        "optimizer": optimizer_state_bytes(opt),
    }
    n = sum(p.numel() for p in net.parameters())
    return n, torch.empty((), dtype=dtype).element_size(), real


def check_step_memory(
    step_memory: Callable[[int, str, int], dict[str, int]],
    cases: Sequence[tuple[str, torch.dtype]] | None = None,
    cfg: AlexNetConfig | None = None,
) -> None:
    """Lab 7: step_memory(n_params, optimizer, bytes_per_element) matches what real optimisers hold.

    For each (optimizer, dtype) case, a network is built in that dtype and
    trained one step with the real optimiser; its parameters, gradients and
    optimiser state are counted and compared with the student's answer
    (ints). Default: SGD, momentum and Adam in float32, Adam in float16.
    """
    cfg = cfg or AlexNetConfig.small()
    cases = cases or [
        ("sgd", torch.float32),
        ("momentum", torch.float32),
        ("adam", torch.float32),
        ("adam", torch.float16),
    ]
    for optimizer, dtype in cases:
        with device.one_torch_thread():
            n, size, real = _real_step_memory(cfg, optimizer, dtype)
        call = f"step_memory({n}, {optimizer!r}, {size})"
        got = _call(step_memory, "step_memory", n, optimizer, size)
        if got is None:
            raise AssertionError(f"`step_memory` returned None: {checks.NOT_DONE}")
        if not isinstance(got, dict) or set(got) != set(real):
            missing = sorted(set(real) - set(got)) if isinstance(got, dict) else []
            raise AssertionError(
                f"{call} should return a dict with the keys {sorted(real)}, got {got!r}."
                + (f" Missing: {missing} (the gradients are as large as the weights)." if missing else "")
            )
        for kind, expected in real.items():
            name = f"{call}[{kind!r}]"
            _require_int(got[kind], name, "bytes are whole numbers: multiply ints, do not divide.")
            checks.check_equal(
                got[kind],
                expected,
                name=name,
                hint=(
                    "plain SGD keeps no state, SGD with momentum one buffer per parameter, Adam two "
                    "(its running means of the gradient and of its square); each element takes "
                    "bytes_per_element bytes."
                    if kind == "optimizer"
                    else f"one element of bytes_per_element (here {size}) bytes per parameter."
                ),
            )
    try:  # bytes_per_element left out: float32's 4
        got = _call(step_memory, "step_memory", 1000, "adam")
    except TypeError as e:
        raise AssertionError(
            f"step_memory(1000, 'adam') without bytes_per_element raised TypeError: {e}. Hint: the "
            f"default is float32's 4 bytes: keep `bytes_per_element=4` in the signature."
        ) from None
    checks.check_equal(
        got,
        {"weights": 4000, "gradients": 4000, "optimizer": 8000},
        name="step_memory(1000, 'adam') without bytes_per_element",
        hint="the default is float32's 4 bytes: keep `bytes_per_element=4` in the signature.",
    )
