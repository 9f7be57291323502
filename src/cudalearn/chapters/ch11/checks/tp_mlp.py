"""Lab 11's second check: the tensor-parallel MLP, shard_mlp's shards then tp_forward on thread ranks.

tp_forward's N ranks run as threads (`cudalearn.chapters.ch11.ring.ThreadGroup`), with an all-reduce
the check provides and counts; shards, outputs and gradients are compared with the unsplit layers in
float64. The halves: `_tp_shards` (shard_mlp) and `_tp_forward` (tp_forward), on the seeded problem of
`_tp_problem`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from cudalearn import checks
from cudalearn.chapters.ch11.checks._tp_forward import forward_experiment, verify_forward
from cudalearn.chapters.ch11.checks._tp_shards import shard_experiment, verify_shards

#: seconds the ranks of tp_forward have, all together, before a missing or endless rank is reported
TP_TIMEOUT = 20.0


def check_tp_mlp(
    shard_mlp: Callable[[torch.nn.Linear, torch.nn.Linear, int, int], dict],
    tp_forward: Callable[..., torch.Tensor],
    cases: Sequence[tuple[int, int, int, int, int]] | None = None,
    seed: int = 0,
) -> None:
    """Lab 11: shard_mlp's shards and tp_forward's outputs and gradients against the unsplit MLP.

    Each case is (ranks, tokens, d_in, hidden, d_out), hidden a multiple of the ranks. First every
    rank's shard is compared with its slices of fc1 and fc2 (shapes, then values); then tp_forward
    runs on every rank as a thread, with the correct shards and an all_reduce that sums the ranks'
    tensors (forward) and passes the gradient on unchanged (backward, Megatron-LM's g); its output,
    its one all-reduce of (tokens, d_out) per rank, and the gradients of every shard, of b2 and of x
    are compared with the unsplit fc2(gelu(fc1(x))) in float64.
    Default: 2 ranks (3 tokens, 6 -> 16 -> 10) and 4 ranks (5 tokens, 12 -> 32 -> 20).
    """
    for world, tokens, d_in, hidden, d_out in cases or [(2, 3, 6, 16, 10), (4, 5, 12, 32, 20)]:
        shards = checks.student_side(shard_experiment, shard_mlp, world, d_in, hidden, d_out, seed)
        verify_shards(shards, world, d_in, hidden, d_out, seed)
        out = checks.student_side(
            forward_experiment, tp_forward, world, tokens, d_in, hidden, d_out, seed, TP_TIMEOUT
        )
        verify_forward(out, world, tokens, d_in, hidden, d_out, seed)
        seed += 1
