"""Tensor parallelism over N processes: AlexNet's columns generalised, the Megatron-LM way (Chapter 11).

Shoeybi et al., "Megatron-LM: Training Multi-Billion Parameter Language
Models Using Model Parallelism" (2019), section 3: a linear layer y = x Wᵀ + b
is split over N processes either along its output features
(`ColumnParallelLinear`: each process holds out/N rows of W and computes
out/N columns of y, no communication) or along its input features
(`RowParallelLinear`: each process holds in/N columns of W, multiplies its
share of x, and the N partial outputs are summed by an all-reduce). A
column-parallel layer, an elementwise activation, then a row-parallel layer
(`tp_mlp`) needs one all-reduce in the forward pass and one in the backward
pass, whatever the hidden width.

The communication is written as autograd functions, in conjugate pairs:
`copy_to_parallel` ("f": identity forward, all-reduce backward) and
`reduce_from_parallel` ("g": all-reduce forward, identity backward);
`gather_from_parallel` (all-gather forward, split backward) and
`split_to_parallel` (split forward, all-gather backward). Every function
works on any `torch.distributed` backend (NCCL between GPUs, gloo between
CPU processes) and, given a `Traffic` (`cudalearn.nn.alexnet.Traffic`),
counts the bytes this process sends, by the ring formulas of
`cudalearn.dist.multigpu`; `bytes_per_step` predicts the same counts on paper.

`bus_bandwidth` turns a collective's size and time into NVIDIA nccl-tests'
algorithm and bus bandwidths (nccl-tests, doc/PERFORMANCE.md).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from cudalearn.dist import multigpu

FORWARD, BACKWARD = 0, 1  # Traffic's directions


def _world_rank(group) -> tuple[int, int]:
    """(world size, rank) of this process in `group` (None: the default group)."""
    return dist.get_world_size(group), dist.get_rank(group)


def _count(traffic, name: str, direction: int, nbytes: int) -> None:
    """Add `nbytes` to `traffic` (if any) under `name` and `direction`."""
    if traffic is not None:
        traffic.add(name, direction, nbytes)


def _all_reduce(t: torch.Tensor, group, traffic, name: str, direction: int) -> torch.Tensor:
    """Sum of `t` over the processes of `group`, in a new tensor; counts the ring's bytes."""
    world, _ = _world_rank(group)
    if world == 1:
        return t
    out = t.contiguous().clone()
    dist.all_reduce(out, group=group)
    sent = multigpu.allreduce_bytes(out.numel(), world, out.element_size())
    _count(traffic, name, direction, sent)
    return out


def _all_gather_last(t: torch.Tensor, group, traffic, name: str, direction: int) -> torch.Tensor:
    """Every process's `t` concatenated along the last dimension, in rank order; counts the ring's bytes."""
    world, _ = _world_rank(group)
    if world == 1:
        return t
    t = t.contiguous()
    parts = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(parts, t, group=group)
    out = torch.cat(parts, dim=-1)
    _count(traffic, name, direction, multigpu.allgather_bytes(out.numel(), world, out.element_size()))
    return out


def _split_last(t: torch.Tensor, group) -> torch.Tensor:
    """This process's 1/N of `t` along the last dimension (no communication)."""
    world, rank = _world_rank(group)
    if world == 1:
        return t
    size = shard_size(t.shape[-1], world)
    return t[..., rank * size : (rank + 1) * size].contiguous()


class _CopyToParallel(torch.autograd.Function):
    """Megatron's f: identity forward, all-reduce of the gradient backward."""

    @staticmethod
    def forward(ctx, x, group, traffic, name):
        ctx.group, ctx.traffic, ctx.name = group, traffic, name
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return _all_reduce(grad, ctx.group, ctx.traffic, ctx.name, BACKWARD), None, None, None


class _ReduceFromParallel(torch.autograd.Function):
    """Megatron's g: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, x, group, traffic, name):
        return _all_reduce(x, group, traffic, name, FORWARD)

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None, None


class _GatherFromParallel(torch.autograd.Function):
    """All-gather along the last dimension forward; this process's slice of the gradient backward."""

    @staticmethod
    def forward(ctx, x, group, traffic, name):
        ctx.group = group
        return _all_gather_last(x, group, traffic, name, FORWARD)

    @staticmethod
    def backward(ctx, grad):
        return _split_last(grad, ctx.group), None, None, None


class _SplitToParallel(torch.autograd.Function):
    """This process's slice along the last dimension forward; all-gather of the gradient backward."""

    @staticmethod
    def forward(ctx, x, group, traffic, name):
        ctx.group, ctx.traffic, ctx.name = group, traffic, name
        return _split_last(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _all_gather_last(grad, ctx.group, ctx.traffic, ctx.name, BACKWARD), None, None, None


def copy_to_parallel(x: torch.Tensor, group=None, traffic=None, name: str = "f") -> torch.Tensor:
    """Chapter 11's f: `x` (..., d) unchanged forward; backward, the gradient summed over `group`."""
    return _CopyToParallel.apply(x, group, traffic, name)


def reduce_from_parallel(x: torch.Tensor, group=None, traffic=None, name: str = "g") -> torch.Tensor:
    """Chapter 11's g: `x` (..., d) all-reduced (summed) over `group` forward; gradient unchanged backward."""
    return _ReduceFromParallel.apply(x, group, traffic, name)


def gather_from_parallel(x: torch.Tensor, group=None, traffic=None, name: str = "gather") -> torch.Tensor:
    """Chapter 11: every rank's `x` (..., d/N) joined in rank order, (..., d); backward, this rank's slice."""
    return _GatherFromParallel.apply(x, group, traffic, name)


def split_to_parallel(x: torch.Tensor, group=None, traffic=None, name: str = "split") -> torch.Tensor:
    """Chapter 11: this rank's slice (..., d/N) of `x` (..., d); backward, the gradient all-gathered."""
    return _SplitToParallel.apply(x, group, traffic, name)


def shard_size(features: int, world: int) -> int:
    """Chapter 11: each of `world` processes' share of `features`; raises if they do not split evenly."""
    if features % world:
        raise ValueError(f"{features} features do not split evenly over {world} processes")
    return features // world


def _uniform_like_linear(t: torch.Tensor, fan_in: int) -> None:
    """Fill `t` as nn.Linear fills its weight and bias: uniform in ±1/sqrt(fan_in) of the unsplit layer."""
    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    with torch.no_grad():
        t.uniform_(-bound, bound)


def _parameters(layer: nn.Module, weight_shape, bias_len: int, fan_in: int, device, dtype) -> None:
    """layer.weight (weight_shape) and layer.bias ((bias_len,), None when 0), drawn as nn.Linear's are."""
    layer.weight = nn.Parameter(torch.empty(weight_shape, device=device, dtype=dtype))
    layer.bias = nn.Parameter(torch.empty(bias_len, device=device, dtype=dtype)) if bias_len else None
    for p in (layer.weight, layer.bias):
        if p is not None:
            _uniform_like_linear(p, fan_in)


class ColumnParallelLinear(nn.Module):
    """Chapter 11: y = x Wᵀ + b, W (out, in) split by output: x (..., in) -> (..., out/N) or (..., out).

    This rank holds `weight` (out/N, in) and `bias` (out/N,), rows
    rank·out/N .. (rank+1)·out/N of the unsplit layer's, in its dtype. The
    forward pass sends nothing (`copy_to_parallel`: its backward all-reduces
    the input's gradient); `gather_output=True` all-gathers the N slices of y.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        gather_output: bool = False,
        group=None,
        traffic=None,
        name: str = "column",
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        world, _ = _world_rank(group)
        self.in_features, self.out_features = in_features, out_features
        self.gather_output, self.group, self.traffic, self.name = gather_output, group, traffic, name
        local = shard_size(out_features, world)
        _parameters(self, (local, in_features), local if bias else 0, in_features, device, dtype)

    @classmethod
    def from_linear(cls, linear: nn.Linear, **kw) -> ColumnParallelLinear:
        """Chapter 11: this rank's out/N rows of `linear`'s weight (out, in) and bias (out,), copied."""
        w = linear.weight
        layer = cls(w.shape[1], w.shape[0], linear.bias is not None, device=w.device, dtype=w.dtype, **kw)
        _, rank = _world_rank(layer.group)
        rows = slice(rank * layer.weight.shape[0], (rank + 1) * layer.weight.shape[0])
        with torch.no_grad():
            layer.weight.copy_(w[rows])
            if layer.bias is not None:
                layer.bias.copy_(linear.bias[rows])
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = copy_to_parallel(x, self.group, self.traffic, self.name)
        y = F.linear(x, self.weight, self.bias)
        if self.gather_output:
            return gather_from_parallel(y, self.group, self.traffic, self.name)
        return y

    def extra_repr(self) -> str:
        here = self.weight.shape[0]
        return f"in={self.in_features}, out={self.out_features} ({here} here), gather={self.gather_output}"


# teaching copy: the book sets the column- and row-parallel layers side by side, each whole
class RowParallelLinear(nn.Module):
    """Chapter 11: y = x Wᵀ + b, W (out, in) split by input: x (..., in/N), or (..., in) split, -> (..., out).

    This rank holds `weight` (out, in/N), columns rank·in/N .. (rank+1)·in/N
    of the unsplit layer's, and the whole `bias` (out,), added once after the
    all-reduce that sums the N partial products (`reduce_from_parallel`).
    With `input_is_parallel=False` it takes the whole x and keeps its own
    slice (`split_to_parallel`: its backward all-gathers the input's gradient).
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        input_is_parallel: bool = True,
        group=None,
        traffic=None,
        name: str = "row",
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        world, _ = _world_rank(group)
        self.in_features, self.out_features = in_features, out_features
        self.input_is_parallel, self.group, self.traffic, self.name = input_is_parallel, group, traffic, name
        local = shard_size(in_features, world)
        _parameters(self, (out_features, local), out_features if bias else 0, in_features, device, dtype)

    @classmethod
    def from_linear(cls, linear: nn.Linear, **kw) -> RowParallelLinear:
        """Chapter 11: this rank's in/N columns of `linear`'s weight (out, in), and its whole bias (out,)."""
        w = linear.weight
        layer = cls(w.shape[1], w.shape[0], linear.bias is not None, device=w.device, dtype=w.dtype, **kw)
        _, rank = _world_rank(layer.group)
        cols = slice(rank * layer.weight.shape[1], (rank + 1) * layer.weight.shape[1])
        with torch.no_grad():
            layer.weight.copy_(w[:, cols])
            if layer.bias is not None:
                layer.bias.copy_(linear.bias)
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.input_is_parallel:
            x = split_to_parallel(x, self.group, self.traffic, self.name)
        y = reduce_from_parallel(F.linear(x, self.weight), self.group, self.traffic, self.name)
        return y + self.bias if self.bias is not None else y

    def extra_repr(self) -> str:
        here, parallel = self.weight.shape[1], self.input_is_parallel
        return f"in={self.in_features} ({here} here), out={self.out_features}, input_is_parallel={parallel}"


def tp_mlp(
    fc1: nn.Linear, fc2: nn.Linear, activation: nn.Module | None = None, *, group=None, traffic=None
) -> nn.Sequential:
    """Chapter 11: this rank's share of fc2(act(fc1(x))), x (..., d_in) -> (..., d_out).

    fc1 (hidden, d_in) is split by columns of the output, fc2 (d_out, hidden)
    by rows of the input, so the elementwise activation (GELU unless given)
    runs on each rank's hidden slice alone: one all-reduce of (..., d_out)
    forward, one of (..., d_in) backward. Bytes are counted under 'fc1' and 'fc2'.
    """
    return nn.Sequential(
        ColumnParallelLinear.from_linear(fc1, group=group, traffic=traffic, name="fc1"),
        activation if activation is not None else nn.GELU(),
        RowParallelLinear.from_linear(fc2, group=group, traffic=traffic, name="fc2"),
    )


def bytes_per_step(
    layer: str,
    tokens: int,
    in_features: int,
    out_features: int,
    world: int,
    *,
    bytes_per_element: int = 4,
    gather_output: bool = False,
    input_is_parallel: bool = True,
) -> dict[str, int]:
    """Chapter 11: bytes each of `world` ranks sends per forward and backward of `layer` on x (tokens, in).

    `layer` is 'column' (`ColumnParallelLinear`), 'row' (`RowParallelLinear`)
    or 'mlp' (`tp_mlp`: in_features = d_in, out_features = d_out; the hidden
    width does not matter). Ring formulas (`multigpu.allreduce_bytes`,
    `multigpu.allgather_bytes`); the backward counts assume the input needs
    its gradient (every layer but a network's first). {'forward', 'backward', 'total'}.
    """
    ar, ag = multigpu.allreduce_bytes, multigpu.allgather_bytes
    b = bytes_per_element
    if layer == "column":
        fwd = ag(tokens * out_features, world, b) if gather_output else 0
        bwd = ar(tokens * in_features, world, b)
    elif layer == "row":
        fwd = ar(tokens * out_features, world, b)
        bwd = 0 if input_is_parallel else ag(tokens * in_features, world, b)
    elif layer == "mlp":
        col = bytes_per_step("column", tokens, in_features, out_features, world, bytes_per_element=b)
        row = bytes_per_step("row", tokens, out_features, out_features, world, bytes_per_element=b)
        fwd, bwd = col["forward"] + row["forward"], col["backward"] + row["backward"]
    else:
        raise ValueError(f"layer is 'column', 'row' or 'mlp', not {layer!r}")
    return {"forward": fwd, "backward": bwd, "total": fwd + bwd}


#: nccl-tests' bus-bandwidth factor per collective, for n ranks (doc/PERFORMANCE.md, "Summary").
BUSBW_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}


class Bandwidth(NamedTuple):
    """nccl-tests' two bandwidths of one collective, in GB/s (1e9 bytes per second) (Chapter 11)."""

    algbw: float
    busbw: float


def bus_bandwidth(op: str, nbytes: int, seconds: float, world: int) -> Bandwidth:
    """Chapter 11: nccl-tests' algbw = nbytes / seconds and busbw = algbw · factor(op, world), in GB/s.

    `nbytes` is the size S of nccl-tests: the whole array (for all_gather
    and reduce_scatter, the N ranks' parts together); the factor is
    2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter and
    alltoall, 1 for broadcast and reduce (NVIDIA nccl-tests, doc/PERFORMANCE.md):
    busbw is comparable with a link's peak, whatever the number of ranks.
    """
    if op not in BUSBW_FACTOR:
        raise ValueError(f"op is one of {sorted(BUSBW_FACTOR)}, not {op!r}")
    if seconds <= 0 or world < 1:
        raise ValueError(f"need seconds > 0 and world >= 1, got seconds={seconds}, world={world}")
    algbw = nbytes / seconds / 1e9
    return Bandwidth(algbw, algbw * BUSBW_FACTOR[op](world))
