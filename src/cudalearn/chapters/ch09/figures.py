"""Attention's cost against the number of tokens on log-log axes: counted FLOPs, measured time (Chapter 9).

On log-log axes a cost that grows like N is a line of slope 1 and one that
grows like N^2 a line of slope 2, so the two terms of a transformer block
can be read off the slopes. The data come from `cudalearn.chapters.ch09.model.block_flops`
and from a `timing.measure` run; nothing here is typed in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def cost_against_tokens(
    flops: Mapping[int, Mapping[str, float]],
    times_ms: Mapping[int, float] | None = None,
    *,
    dim: int,
    timed_label: str = "",
):
    """Left: a block's FLOPs per term against N; right: measured ms against N, slope guides (Chapter 9).

    flops: {N: {'projections', 'mlp', 'attention': forward FLOPs of one block for one image}}.
    times_ms: {N: median ms of the timed block} or None (the right panel then says so).
    """
    import matplotlib.pyplot as plt
    import numpy as np

    n = np.array(sorted(flops), dtype=np.float64)
    linear = np.array([flops[k]["projections"] + flops[k]["mlp"] for k in sorted(flops)], np.float64)
    attention = np.array([flops[k]["attention"] for k in sorted(flops)], np.float64)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.loglog(n, linear, "o-", label="projections + MLP (grow like N)")
    left.loglog(n, attention, "s-", label="attention: Q K^T and weights x V (grow like N^2)")
    left.loglog(n, linear + attention, "k:", lw=1, label="block total")
    left.set_xlabel("tokens N")
    left.set_ylabel("forward FLOPs, one block, one image")
    left.set_title(f"counted FLOPs (D = {dim})", fontsize=10)
    left.legend(fontsize=8)
    if times_ms:
        tn = np.array(sorted(times_ms), dtype=np.float64)
        t = np.array([times_ms[k] for k in sorted(times_ms)], dtype=np.float64)
        right.loglog(tn, t, "o-", color="#d62728", label="measured")
        for slope, style in ((1, "--"), (2, "-.")):
            right.loglog(
                tn, t[-1] * (tn / tn[-1]) ** slope, style, color="grey", lw=1, label=f"slope {slope}"
            )
        right.set_title(f"time of one block, forward\n{timed_label}", fontsize=9)
        right.legend(fontsize=8)
    else:
        right.text(0.5, 0.5, "no GPU timing stored", ha="center", va="center", transform=right.transAxes)
        right.set_xscale("log")
    right.set_xlabel("tokens N")
    right.set_ylabel("median ms per batch")
    for ax in (left, right):
        ax.grid(True, which="both", lw=0.3)
    fig.tight_layout()
    return fig


def tokens_of(names: Sequence[str]) -> list[int]:
    """N from candidate names such as 'p=16, N=196' (the names Chapter 9 times the block under)."""
    return [int(name.split("N=")[1]) for name in names]
