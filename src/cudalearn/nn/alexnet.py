"""AlexNet in two columns: the 2012 network and a small one, split over two devices (Chapter 7).

The 2012 network ran as two *columns*, one per GTX 580: each GPU held half
of the filters of every layer, and the columns exchanged activations only
at chosen layers (the third convolution and the fully connected layers).
Elsewhere a column reads only its own half of the previous layer, which is
a grouped convolution (`groups=2`).

- `AlexNetConfig` describes the network: `original()` has the 2012 sizes
  (227x227x3 input, 96/256/384/384/256 filters, 4096-4096-1000), `small()`
  a 32x32 one-channel version that trains in seconds on a CPU. `exchange`
  names the layers whose input crosses between the columns.
- `AlexNet` is the unsplit network on one device (grouped layers where the
  columns do not exchange), `TwoColumnAlexNet` the same function with
  column c on `devices[c]`. Every tensor that crosses from one column to
  the other goes through `send`, which counts its bytes, forward and
  backward, in `traffic`.
- `exchange_bytes` predicts those bytes from the configuration alone.
- `TrainStep` is one training step of either, ready to time. The data, the
  training loop and the input pipeline of the chapter live in
  `cudalearn.nn.datasets`, `cudalearn.nn.training` and
  `cudalearn.chapters.ch07.input_pipeline`.

Shapes: images (N, C, H, W) float32, labels (N,) int64, logits (N, classes).
Parameter names in `column_tensors()` are `"<layer>.<column>.weight|bias"`
in both models, so the two can be compared tensor by tensor.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from cudalearn.nn.training import sgd_2012

LAYERS = ("conv1", "conv2", "conv3", "conv4", "conv5", "fc6", "fc7", "fc8")
CONVS = LAYERS[:5]
FCS = LAYERS[5:]
EXCHANGE_2012 = ("conv3", "fc6", "fc7", "fc8")  # where the 2012 columns talk to each other
EXCHANGE_EVERY = LAYERS[1:]  # conv1 reads the image, which both columns already have
OUTPUT = "output"  # the traffic of gathering column 1's half of the logits on column 0's device
ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh}


@dataclass(frozen=True)
class ConvSpec:
    """One convolution of both columns together: filters, kernel, stride, padding, max-pool after it."""

    channels: int
    kernel: int
    stride: int = 1
    padding: int = 0
    pool: bool = False


@dataclass(frozen=True)
class AlexNetConfig:
    """Sizes of an AlexNet-style network (both columns) and where its columns exchange (Chapter 7)."""

    image: int
    in_channels: int
    convs: tuple[ConvSpec, ...]
    fcs: tuple[int, int]
    classes: int
    pool_kernel: int = 3  # overlapping max-pooling, 3x3 windows every 2 pixels, as in 2012
    pool_stride: int = 2
    activation: str = "relu"
    dropout: float = 0.5  # on the outputs of fc6 and fc7
    exchange: tuple[str, ...] = EXCHANGE_2012

    def __post_init__(self) -> None:
        if len(self.convs) != len(CONVS) or len(self.fcs) != 2:
            raise ValueError("an AlexNet has 5 convolutions and 2 hidden fully connected layers")
        widths = [s.channels for s in self.convs] + [*self.fcs, self.classes]
        if any(w <= 0 or w % 2 for w in widths):
            raise ValueError(f"every layer width must be even, to split in two columns: {widths}")
        unknown = set(self.exchange) - set(EXCHANGE_EVERY)
        if unknown:
            raise ValueError(f"exchange names {sorted(unknown)}; choose among {EXCHANGE_EVERY}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation {self.activation!r}: choose among {sorted(ACTIVATIONS)}")
        object.__setattr__(self, "exchange", tuple(n for n in LAYERS if n in self.exchange))
        if min(self.spatial()) < 1:
            raise ValueError(f"a {self.image}x{self.image} image is too small for these layers")

    @classmethod
    def original(cls, **changes) -> AlexNetConfig:
        """The 2012 network: 227x227x3, 96/256/384/384/256 filters, 4096-4096-1000 (about 61M parameters)."""
        base = cls(
            image=227,
            in_channels=3,
            convs=(
                ConvSpec(96, 11, 4, 0, pool=True),
                ConvSpec(256, 5, 1, 2, pool=True),
                ConvSpec(384, 3, 1, 1),
                ConvSpec(384, 3, 1, 1),
                ConvSpec(256, 3, 1, 1, pool=True),
            ),
            fcs=(4096, 4096),
            classes=1000,
        )
        return dataclasses.replace(base, **changes)

    # teaching copy: the digits' network written out as the 2012 one is, layer for layer, to compare
    @classmethod
    def small(cls, **changes) -> AlexNetConfig:
        """A 32x32 one-channel AlexNet (16/32/48/48/32 filters, 128-128-10) for the digits data set."""
        base = cls(
            image=32,
            in_channels=1,
            convs=(
                ConvSpec(16, 5, 1, 2, pool=True),
                ConvSpec(32, 5, 1, 2, pool=True),
                ConvSpec(48, 3, 1, 1),
                ConvSpec(48, 3, 1, 1),
                ConvSpec(32, 3, 1, 1, pool=True),
            ),
            fcs=(128, 128),
            classes=10,
        )
        return dataclasses.replace(base, **changes)

    def replace(self, **changes) -> AlexNetConfig:
        """A copy with some fields changed, e.g. `cfg.replace(activation="tanh")`."""
        return dataclasses.replace(self, **changes)

    def spatial(self, pooled: bool = True) -> list[int]:
        """Height (= width) of the output of each convolution, after its pooling (or before, pooled=False)."""
        size, out = self.image, []
        for spec in self.convs:
            size = (size + 2 * spec.padding - spec.kernel) // spec.stride + 1
            before = size
            if spec.pool:
                size = (size - self.pool_kernel) // self.pool_stride + 1
            out.append(size if pooled else before)
        return out

    def output_shape(self, name: str) -> tuple[int, ...]:
        """Shape of one sample after layer `name` (both columns): (C, H, W) or (features,)."""
        if name in CONVS:
            i = CONVS.index(name)
            h = self.spatial()[i]
            return (self.convs[i].channels, h, h)
        return ((*self.fcs, self.classes)[FCS.index(name)],)

    def input_shape(self, name: str) -> tuple[int, ...]:
        """Shape of one sample entering layer `name` (both columns; fc6's input is the flattened conv5)."""
        if name == "conv1":
            return (self.in_channels, self.image, self.image)
        previous = LAYERS[LAYERS.index(name) - 1]
        shape = self.output_shape(previous)
        return (int(np.prod(shape)),) if name == "fc6" else shape

    def groups(self, name: str) -> int:
        """1 if each column of `name` reads the whole previous layer (exchange, or conv1), else 2."""
        return 1 if name == "conv1" or name in self.exchange else 2

    def param_count(self, name: str) -> int:
        """Weights and biases of layer `name`, both columns."""
        c_in, c_out = self.input_shape(name)[0], self.output_shape(name)[0]
        per_output = c_in // self.groups(name)
        if name in CONVS:
            per_output *= self.convs[CONVS.index(name)].kernel ** 2
        return c_out * per_output + c_out

    def n_params(self) -> int:
        """All parameters of the network."""
        return sum(self.param_count(n) for n in LAYERS)

    def flops(self, name: str) -> int:
        """Floating-point operations of layer `name` for one image, forward pass (a multiply-add is 2)."""
        weights = self.param_count(name) - self.output_shape(name)[0]  # without the biases
        if name in CONVS:
            h = self.spatial(pooled=False)[CONVS.index(name)]
            return 2 * weights * h * h  # every weight is used once per output position
        return 2 * weights


def exchange_bytes(cfg: AlexNetConfig, batch: int, bytes_per_element: int = 4) -> dict[str, tuple[int, int]]:
    """Bytes that cross between the columns in one training step, per layer: {layer: (forward, backward)}.

    At an exchange layer each column sends its half of the layer's input to
    the other, so the whole input crosses once forward, and its gradient
    crosses back once in the backward pass. `OUTPUT` is column 1's half of
    the logits, gathered on column 0's device for the loss (Chapter 7).
    """
    out = {}
    for name in cfg.exchange:
        n = batch * int(np.prod(cfg.input_shape(name))) * bytes_per_element
        out[name] = (n, n)
    n = batch * (cfg.classes // 2) * bytes_per_element
    out[OUTPUT] = (n, n)
    return out


class GroupedLinear(nn.Module):
    """A fully connected layer whose `groups` output blocks each read one block of the input (Chapter 7).

    `weight` is (out, in / groups) and `bias` (out,), laid out like a grouped
    convolution's: rows [g * out/groups, (g+1) * out/groups) belong to group g.
    """

    def __init__(self, in_features: int, out_features: int, groups: int = 2) -> None:
        super().__init__()
        self.groups = groups
        self.weight = nn.Parameter(torch.empty(out_features, in_features // groups))
        self.bias = nn.Parameter(torch.empty(out_features))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """nn.Linear's default initialisation, per group (as every PyTorch layer has one)."""
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        bound = 1 / math.sqrt(self.weight.shape[1])
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, g = x.shape[0], self.groups
        w = self.weight.view(g, -1, self.weight.shape[1])  # (g, out/g, in/g)
        y = torch.einsum("ngi,goi->ngo", x.view(n, g, -1), w)
        return y.reshape(n, -1) + self.bias


def _prepare(name: str, h: torch.Tensor) -> torch.Tensor:
    """The input of layer `name`: the conv5 maps are flattened before fc6."""
    return h.flatten(1) if name == "fc6" else h


def _finish(cfg: AlexNetConfig, name: str, h: torch.Tensor, training: bool) -> torch.Tensor:
    """What follows layer `name`'s weights: activation, then max-pooling or dropout (none after fc8)."""
    if name == "fc8":
        return h
    h = ACTIVATIONS[cfg.activation](h)
    if name in CONVS and cfg.convs[CONVS.index(name)].pool:
        h = F.max_pool2d(h, cfg.pool_kernel, cfg.pool_stride)
    if name in FCS and cfg.dropout > 0:
        h = F.dropout(h, cfg.dropout, training)
    return h


def _make_layer(cfg: AlexNetConfig, name: str, columns: int) -> nn.Module:
    """Layer `name` for `columns` columns together (2: the unsplit layer, 1: one column's half)."""
    c_in, c_out = cfg.input_shape(name)[0], cfg.output_shape(name)[0]
    groups = cfg.groups(name)
    if columns == 1:
        c_in, c_out, groups = c_in // groups, c_out // 2, 1
    if name in CONVS:
        s = cfg.convs[CONVS.index(name)]
        layer = nn.Conv2d(c_in, c_out, s.kernel, s.stride, s.padding, groups=groups)
    else:
        layer = nn.Linear(c_in, c_out) if groups == 1 else GroupedLinear(c_in, c_out, groups)
    init_weights(layer, cfg.activation)
    return layer


def init_weights(layer: nn.Module, activation: str) -> None:
    """He (Kaiming) normal weights for ReLU, Glorot (Xavier) normal for tanh, zero biases (Chapter 7).

    Glorot's weights are scaled by PyTorch's gain for tanh, 5/3
    (`nn.init.calculate_gain`), not Glorot and Bengio's gain of 1. Each
    keeps the spread of the signal about constant from layer to layer for
    its activation; PyTorch's default is smaller, and an 8-layer ReLU
    network starts far slower with it (`reset_parameters` on each layer
    puts it back).
    """
    if activation == "relu":
        nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
    else:
        nn.init.xavier_normal_(layer.weight, gain=nn.init.calculate_gain(activation))
    nn.init.zeros_(layer.bias)


class AlexNet(nn.Module):
    """The unsplit network on one device: the two columns as grouped layers (Chapter 7).

    `checkpoint = True` recomputes each layer's activations in the backward
    pass instead of keeping them (activation checkpointing).
    """

    def __init__(self, cfg: AlexNetConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.layers = nn.ModuleDict({name: _make_layer(cfg, name, 2) for name in LAYERS})
        self.checkpoint = False

    def stage(self, name: str, h: torch.Tensor) -> torch.Tensor:
        """Layer `name` with its activation, pooling or dropout."""
        return _finish(self.cfg, name, self.layers[name](_prepare(name, h)), self.training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (N, classes) of images x (N, C, H, W)."""
        h = x
        for name in LAYERS:
            if self.checkpoint and self.training and torch.is_grad_enabled():
                h = torch.utils.checkpoint.checkpoint(self.stage, name, h, use_reentrant=False)
            else:
                h = self.stage(name, h)
        return h

    def column_tensors(self, grad: bool = False) -> dict[str, torch.Tensor]:
        """Each column's share of every weight and bias (or of their gradients), keyed 'conv3.1.weight'."""
        out = {}
        for name, layer in self.layers.items():
            for kind in ("weight", "bias"):
                p = getattr(layer, kind)
                t = p.grad if grad else p
                half = p.shape[0] // 2
                for c in (0, 1):
                    out[f"{name}.{c}.{kind}"] = None if t is None else t[c * half : (c + 1) * half]
        return out


class Traffic:
    """Bytes that crossed between the columns, per layer and direction (thread-safe) (Chapter 7)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Forget everything counted so far."""
        self.bytes: dict[str, list[int]] = {}
        self.routes: dict[str, dict[tuple[int, int], int]] = {}  # forward bytes per (src, dst) column

    def add(self, layer: str, direction: int, nbytes: int, route: tuple[int, int] | None = None) -> None:
        """Count `nbytes` for `layer`; direction 0 is forward, 1 backward; `route`: a send's (src, dst)."""
        with self._lock:
            self.bytes.setdefault(layer, [0, 0])[direction] += nbytes
            if route is not None and direction == 0:
                routes = self.routes.setdefault(layer, {})
                routes[route] = routes.get(route, 0) + nbytes

    def by_route(self) -> dict[str, dict[tuple[int, int], int]]:
        """{layer: {(src column, dst column): forward bytes}} of the sends that said where they went."""
        with self._lock:
            return {k: dict(v) for k, v in self.routes.items()}

    def by_layer(self) -> dict[str, tuple[int, int]]:
        """{layer: (forward bytes, backward bytes)}: AlexNet's layers in network order, other names after.

        Other names (Chapter 11's 'fc1', 'fc2') keep the order they were first counted in.
        """
        order = [*LAYERS, OUTPUT]
        known = sorted((k for k in self.bytes if k in order), key=order.index)
        return {k: tuple(self.bytes[k]) for k in known + [k for k in self.bytes if k not in order]}

    def total(self) -> int:
        """All bytes counted, both directions."""
        return sum(f + b for f, b in self.bytes.values())


class _Send(torch.autograd.Function):
    """Move a tensor to the other column's device, bytes counted; its gradient comes back too."""

    @staticmethod
    def forward(ctx, t, device, traffic, layer, route=None):
        # ctx is the output's grad_fn too: `route` (src, dst) lets a check walk the graph by column.
        ctx.source, ctx.traffic, ctx.layer, ctx.route = t.device, traffic, layer, route
        traffic.add(layer, 0, t.numel() * t.element_size(), route)
        return t.to(device)

    @staticmethod
    def backward(ctx, grad):
        ctx.traffic.add(ctx.layer, 1, grad.numel() * grad.element_size())
        return grad.to(ctx.source), None, None, None, None


class TwoColumnAlexNet(nn.Module):
    """The network of `AlexNet` with column c on `devices[c]`; transfers counted in `traffic` (Chapter 7).

    `columns[c][layer]` is column c's half of a layer. `send` is the only
    way a tensor moves from one column to the other. The logits end on
    `devices[0]`. With both devices equal, nothing physically moves, but
    the bytes that *would* cross are counted all the same.
    """

    def __init__(self, cfg: AlexNetConfig, devices: Sequence[str | torch.device] = ("cpu", "cpu")) -> None:
        super().__init__()
        if len(devices) != 2:
            raise ValueError(f"two devices, one per column, not {devices!r}")
        self.cfg = cfg
        self.devices = tuple(torch.device(d) for d in devices)
        self.columns = nn.ModuleList(
            nn.ModuleDict({name: _make_layer(cfg, name, 1) for name in LAYERS}).to(dev)
            for dev in self.devices
        )
        self.traffic = Traffic()

    @classmethod
    def from_unsplit(cls, net: AlexNet, devices: Sequence[str | torch.device] = ("cpu", "cpu")):
        """A two-column copy of `net`, with the same weights, column c on devices[c]."""
        split = cls(net.cfg, devices)
        split.load_columns(net.column_tensors())
        split.train(net.training)
        return split

    def load_columns(self, tensors: dict[str, torch.Tensor]) -> None:
        """Copy weights keyed like `column_tensors()` into the columns."""
        with torch.no_grad():
            for key, p in self.column_tensors().items():
                p.copy_(tensors[key])

    def column_tensors(self, grad: bool = False) -> dict[str, torch.Tensor]:
        """Every column's weights and biases (or their gradients), keyed 'conv3.1.weight'."""
        out = {}
        for name in LAYERS:
            for kind in ("weight", "bias"):
                for c in (0, 1):
                    p = getattr(self.columns[c][name], kind)
                    out[f"{name}.{c}.{kind}"] = p.grad if grad else p
        return out

    def stage(self, name: str, c: int, h: torch.Tensor) -> torch.Tensor:
        """Column c's half of layer `name`, with its activation, pooling or dropout."""
        return _finish(self.cfg, name, self.columns[c][name](_prepare(name, h)), self.training)

    def send(self, t: torch.Tensor, src: int, dst: int, layer: str) -> torch.Tensor:
        """Column `src`'s tensor t on column `dst`'s device, its bytes counted for `layer`."""
        if src == dst:
            return t
        return _Send.apply(t, self.devices[dst], self.traffic, layer, (src, dst))

    def forward(self, x: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor:
        """Logits (N, classes) on devices[0] of images x (N, C, H, W), or of a copy of x per column.

        Each column needs the images; bringing them to its device is input
        traffic (from the host, in 2012), not an exchange, and is not counted.
        """
        copies = x if isinstance(x, (list, tuple)) else (x, x)
        h = [xc.to(dev) for xc, dev in zip(copies, self.devices, strict=True)]
        for name in LAYERS:
            if name in self.cfg.exchange:  # each column reads both halves of the previous layer
                sent = [[self.send(h[s], s, c, name) for s in (0, 1)] for c in (0, 1)]
                h = [torch.cat(sent[c], 1) for c in (0, 1)]
            h = [self.stage(name, c, h[c]) for c in (0, 1)]
        return torch.cat([h[0], self.send(h[1], 1, 0, OUTPUT)], dim=1)


class TrainStep:
    """One training step (SGD, momentum 0.9) of an AlexNet on a fixed random batch, ready to time (Chapter 7).

    `split=True` runs `TwoColumnAlexNet` with column c on `devices[c]` (a
    copy of the batch on each), else `AlexNet` on `devices[0]`, optionally
    with activation checkpointing. `amp` is a lower-precision dtype for
    autocast (torch.bfloat16 or torch.float16), or None for float32.
    Gradients stay allocated between steps, so the memory held between
    steps is exactly weights + gradients + momentum + the batch.
    """

    def __init__(
        self,
        cfg: AlexNetConfig,
        batch: int,
        devices: Sequence[str] = ("cpu",),
        *,
        split: bool = False,
        amp: torch.dtype | None = None,
        checkpoint: bool = False,
        seed: int = 0,
    ) -> None:
        torch.manual_seed(seed)
        net = AlexNet(cfg)
        self.devices = tuple(dict.fromkeys(str(torch.device(d)) for d in devices))
        gen = torch.Generator(device=devices[0]).manual_seed(seed + 1)  # the same batch in every variant
        x = torch.randn(batch, cfg.in_channels, cfg.image, cfg.image, generator=gen, device=devices[0])
        self.y = torch.randint(0, cfg.classes, (batch,), generator=gen, device=devices[0])
        if split:
            two = (devices[0], devices[-1])
            self.net = TwoColumnAlexNet.from_unsplit(net, two)
            self.x = (x, x.to(two[1]))
        else:
            self.net = net.to(devices[0])
            self.net.checkpoint = checkpoint
            self.x = x
        self.amp = amp
        self.opt = sgd_2012(self.net.parameters(), lr=0.01)

    def __call__(self, x=None, y=None) -> torch.Tensor:
        """One step on (x, y), or on the fixed batch; returns the loss (not synchronised)."""
        x = self.x if x is None else x
        y = self.y if y is None else y
        kind = torch.device(self.devices[0]).type
        with torch.autocast(kind, dtype=self.amp, enabled=self.amp is not None):
            loss = F.cross_entropy(self.net(x), y)
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()
        return loss


def max_abs_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """Largest |a - b| over tensors with the same keys (compared on the CPU, in float64)."""
    return max(float((a[k].detach().double().cpu() - b[k].detach().double().cpu()).abs().max()) for k in a)
