"""The problem of lab 11's tensor-parallel MLP check: seeded float64 layers, and each rank's slice."""

from __future__ import annotations

import torch

from cudalearn.chapters.ch11 import tensor_parallel

#: the keys of a shard, as shard_mlp returns it and tp_forward receives it
SHARD_KEYS = ("w1", "b1", "w2")


def tp_problem(tokens: int, d_in: int, hidden: int, d_out: int, seed: int) -> tuple:
    """Lab 11: float64 fc1 (d_in -> hidden), fc2 (hidden -> d_out), x (tokens, d_in), g (tokens, d_out).

    g weighs the outputs in the loss (y * g).sum(). All are drawn from a generator of their own, so the
    notebook's global random state is left alone.
    """
    gen = torch.Generator().manual_seed(seed)
    fc1 = torch.nn.Linear(d_in, hidden, dtype=torch.float64)
    fc2 = torch.nn.Linear(hidden, d_out, dtype=torch.float64)
    with torch.no_grad():
        for layer in (fc1, fc2):
            w = torch.randn(layer.weight.shape, generator=gen, dtype=torch.float64)
            layer.weight.copy_(w / layer.in_features**0.5)
            layer.bias.copy_(torch.randn(layer.bias.shape, generator=gen, dtype=torch.float64))
    x = torch.randn(tokens, d_in, generator=gen, dtype=torch.float64)
    g = torch.randn(tokens, d_out, generator=gen, dtype=torch.float64)
    return fc1, fc2, x, g


def hidden_slice(hidden: int, world: int, rank: int) -> slice:
    """Rank's hidden features: rank·h/N up to (rank+1)·h/N (`tensor_parallel.shard_size` is h/N)."""
    size = tensor_parallel.shard_size(hidden, world)
    return slice(rank * size, (rank + 1) * size)


def reference_shard(fc1: torch.nn.Linear, fc2: torch.nn.Linear, rank: int, world: int) -> dict:
    """Rank's w1 (h/N, d_in), b1 (h/N,) and w2 (d_out, h/N), detached copies."""
    rows = hidden_slice(fc1.out_features, world, rank)
    parts = {"w1": fc1.weight[rows], "b1": fc1.bias[rows], "w2": fc2.weight[:, rows]}
    return {k: v.detach().clone() for k, v in parts.items()}
