"""A block's sum as a tree, three ways, and a warp's butterfly of shuffles (Chapter 10).

Both pictures are computed from the addressing rules of the package's kernels
(`cudalearn.chapters.ch10.kernels.reductions`), at a size small enough to read: a tree over
16 values with warps drawn 4 threads wide (a real warp has 32 lanes), and a
shfl_xor butterfly over 8 lanes (a real one takes 5 steps over 32).
"""

from __future__ import annotations

import matplotlib.pyplot as plt

#: The addressing rules of Harris's kernels 1 to 3: (threads that add at step s, their target index).
RULES = {
    "sum_interleaved": "tid % (2*s) == 0 adds [tid + s] into [tid]",
    "sum_strided_index": "index = 2*s*tid adds [index + s] into [index]",
    "sum_sequential": "tid < s adds [tid + s] into [tid]",
}
WARP_COLOURS = ("#4c9be8", "#f2b134", "#6cc070", "#d36b6b")


def tree_steps(kind: str, n: int = 16) -> list[list[tuple[int, int, int]]]:
    """Per step of a block's tree over n values: (thread, target, source) of each addition (Chapter 10)."""
    steps = []
    if kind == "sum_sequential":
        s = n // 2
        while s > 0:
            steps.append([(t, t, t + s) for t in range(s)])
            s //= 2
        return steps
    s = 1
    while s < n:
        if kind == "sum_interleaved":
            steps.append([(t, t, t + s) for t in range(n) if t % (2 * s) == 0])
        elif kind == "sum_strided_index":
            steps.append([(t, 2 * s * t, 2 * s * t + s) for t in range(n) if 2 * s * t < n])
        else:
            raise ValueError(f"no tree rule for {kind!r}; have {list(RULES)}")
        s *= 2
    return steps


def replay(steps: list[list[tuple[int, int, int]]], values):
    """The block's sum after replaying `steps`' additions on float32 `values`, in their order (Chapter 10)."""
    import numpy as np

    a = np.array(values, np.float32)
    for adds in steps:
        for _, target, source in adds:
            a[target] = a[target] + a[source]
    return a[0]


def trees(n: int = 16, warp: int = 4):
    """The three trees side by side: arrows from source to target, coloured by warp (Chapter 10)."""
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, kind in zip(axes, RULES, strict=True):
        steps = tree_steps(kind, n)
        for row, adds in enumerate(steps):
            y = len(steps) - row
            for x in range(n):
                ax.add_patch(plt.Rectangle((x - 0.4, y - 0.3), 0.8, 0.6, fill=False, lw=0.6, color="#999999"))
            for thread, target, source in adds:
                colour = WARP_COLOURS[(thread // warp) % len(WARP_COLOURS)]
                arrow = {"arrowstyle": "->", "color": colour}
                ax.annotate("", (target, y + 0.3), (source, y + 0.3), arrowprops=arrow)
                ax.text(target, y, str(thread), ha="center", va="center", fontsize=7, color=colour)
            warps = len({thread // warp for thread, _, _ in adds})
            ax.text(n - 0.2, y, f"{warps} warp{'s' if warps > 1 else ''}", fontsize=7, va="center")
        ax.set_xlim(-0.7, n + 1.6)
        ax.set_ylim(0.4, len(steps) + 0.9)
        ax.set_yticks(range(1, len(steps) + 1), [f"step {len(steps) - i}" for i in range(len(steps))])
        ax.set_xticks(range(0, n, 2))
        ax.set_xlabel("element of the shared array")
        ax.set_title(f"{kind}\n{RULES[kind]}", fontsize=9)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    title = f"{n} values, warps drawn {warp} threads wide; the number is the thread that adds"
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def butterfly(lanes: int = 8):
    """shfl_xor_sync at offsets lanes/2, ..., 1: every lane ends with the whole sum (Chapter 10)."""
    fig, ax = plt.subplots(figsize=(7, 2.8))
    held = [{lane} for lane in range(lanes)]  # the lanes whose values each lane's sum covers
    offset, row = lanes // 2, 0
    while offset:
        for lane in range(lanes):
            ax.plot([lane, lane], [-row, -row - 1], color="#bbbbbb", lw=0.8)  # its own value
            ax.plot([lane ^ offset, lane], [-row, -row - 1], color="#4c9be8", lw=0.8)  # its partner's
        held = [held[lane] | held[lane ^ offset] for lane in range(lanes)]
        ax.text(lanes - 0.3, -row - 0.5, f"offset {offset}: lane ^ {offset}", fontsize=8, va="center")
        offset //= 2
        row += 1
    for lane in range(lanes):
        ax.text(lane, 0.25, f"x{lane}", ha="center", fontsize=8)
        ax.text(lane, -row - 0.35, f"{len(held[lane])} values", ha="center", fontsize=7)
    ax.set_xlim(-0.6, lanes + 1.6)
    ax.set_ylim(-row - 0.6, 0.6)
    ax.axis("off")
    title = f"a butterfly over {lanes} lanes: after {row} steps every lane holds the whole sum"
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig
