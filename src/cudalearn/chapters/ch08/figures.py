"""The residual block drawn: the branch F, the identity shortcut, and the two backward paths (Chapter 8).

The geometry is computed here (boxes on a line, arrows between them); no
number in the picture comes from a measurement.
"""

from __future__ import annotations

#: The pre-activation branch of `cudalearn.chapters.ch08.model.Block`, input side first.
BRANCH = ("BatchNorm", "ReLU", "W1", "BatchNorm", "ReLU", "W2")


def _box(ax, x: float, y: float, text: str, *, w: float = 0.9, h: float = 0.5, color: str = "#dde8f5"):
    """One labelled box centred at (x, y)."""
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(
        FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.03", fc=color, ec="#333333", lw=1)
    )
    ax.text(x, y, text, ha="center", va="center", fontsize=9)


def _arrow(ax, start, end, *, color: str = "#333333", style: str = "-|>", rad: float = 0.0, lw=1.2):
    """An arrow from `start` to `end` (data coordinates), optionally curved."""
    from matplotlib.patches import FancyArrowPatch

    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle=style,
            mutation_scale=12,
            color=color,
            lw=lw,
            connectionstyle=f"arc3,rad={rad}",
        )
    )


def _under_branch(ax, xs: list[float], y: float, text: str, *, color: str | None = None) -> None:
    """A caption centred under the branch's boxes (at x positions `xs`), at height y (color None: default)."""
    ax.text((xs[0] + xs[-1]) / 2, y, text, ha="center", fontsize=9, color=color)


def residual_block(*, skip: bool = True, branch: tuple[str, ...] = BRANCH):
    """The pre-activation block y = F(x) + x (or y = F(x)): forward above, gradients below (Chapter 8).

    The forward pass runs left to right through the boxes of `branch`; with
    the skip, a second arrow carries x around them to the addition. Under
    the axis line, the backward pass: dL/dy reaches x through the branch
    (multiplied by dF/dx) and, with the skip, also unchanged (the + 1).
    """
    import matplotlib.pyplot as plt

    n = len(branch)
    fig, ax = plt.subplots(figsize=(9.5, 3.6))
    xs = [1.4 + 1.15 * k for k in range(n)]
    add_x = xs[-1] + 1.25
    y = 0.0
    ax.text(0.1, y, "x", ha="center", va="center", fontsize=13, style="italic")
    _arrow(ax, (0.25, y), (xs[0] - 0.47, y))
    for k, (x, name) in enumerate(zip(xs, branch, strict=True)):
        _box(ax, x, y, name, color="#f5e3c8" if name.startswith("W") else "#dde8f5")
        if k + 1 < n:
            _arrow(ax, (x + 0.47, y), (xs[k + 1] - 0.47, y))
    _under_branch(ax, xs, y - 0.5, "F(x): the residual branch (the BatchNorm boxes only with norm=True)")
    if skip:
        ax.add_patch(plt.Circle((add_x, y), 0.2, fc="white", ec="#333333", lw=1.2))
        ax.text(add_x, y, "+", ha="center", va="center", fontsize=13)
        _arrow(ax, (xs[-1] + 0.47, y), (add_x - 0.21, y))
        _arrow(ax, (0.35, y + 0.12), (add_x - 0.05, y + 0.2), color="#1f77b4", rad=-0.25, lw=1.6)
        ax.text((0.35 + add_x) / 2, 1.45, "identity shortcut: x", ha="center", fontsize=9, color="#1f77b4")
        out_x, title = add_x + 0.25, "residual block: y = F(x) + x"
    else:
        out_x, title = xs[-1] + 0.47, "plain block: y = F(x)"
    ax.text(out_x + 0.75, y, "y", ha="center", va="center", fontsize=13, style="italic")
    _arrow(ax, (out_x, y), (out_x + 0.6, y))
    # The backward pass, drawn under the forward one, from y back to x.
    yb = -1.0
    ax.text(out_x + 0.75, yb, "dL/dy", ha="center", va="center", fontsize=10)
    ax.text(0.1, yb, "dL/dx", ha="center", va="center", fontsize=10)
    _arrow(ax, (out_x + 0.35, yb), (0.5, yb), color="#d62728", lw=1.4)
    _under_branch(ax, xs, yb + 0.15, "through F: times dF/dx", color="#d62728")
    if skip:
        _arrow(ax, (out_x + 0.35, yb - 0.15), (0.5, yb - 0.15), color="#d62728", rad=-0.12, lw=1.4)
        _under_branch(ax, xs, yb - 0.95, "along the shortcut: times 1", color="#d62728")
    grad = "dL/dx = dL/dy (dF/dx + 1)" if skip else "dL/dx = dL/dy dF/dx"
    ax.text(add_x + 0.5, yb - 0.95, grad, ha="right", fontsize=10)
    ax.set_xlim(-0.2, add_x + 1.3)
    ax.set_ylim(-2.2, 1.8)
    ax.set_axis_off()
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig
