"""The tiles of A and B that one block loads at each step of the tiled product, sliding along k (Chapter 3).

Computed from the shapes alone: block (bx, by) owns the TILE x TILE square
of C at rows by * TILE.., columns bx * TILE..; at step t it loads the tile
of A at those rows and columns t * TILE.., and the tile of B at rows
t * TILE.. and its columns. A tile that sticks out of a matrix (k not a
multiple of TILE) is drawn hatched where the kernel stores zeros.
"""

from __future__ import annotations


def tile_steps(m: int, k: int, n: int, tile: int, block: tuple[int, int] = (0, 0)) -> list[dict]:
    """For each step t: the (row, col, height, width) rectangles of the A, B and C tiles of `block`."""
    bx, by = block
    if not (0 <= by * tile < m and 0 <= bx * tile < n):
        raise ValueError(f"block {block} of {tile}x{tile} lies outside C ({m}, {n})")
    steps = -(-k // tile)
    r0, c0 = by * tile, bx * tile
    return [
        {
            "t": t,
            "A": (r0, t * tile, tile, tile),
            "B": (t * tile, c0, tile, tile),
            "C": (r0, c0, tile, tile),
        }
        for t in range(steps)
    ]


def tiles_along_k(
    m: int, k: int, n: int, tile: int, block: tuple[int, int] = (0, 0), *, max_steps: int = 4, title=None
):
    """One panel per step t: A left, B above, C below B, with this step's tiles drawn solid (Chapter 3)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    steps = tile_steps(m, k, n, tile, block)[:max_steps]
    gap = max(m, n, k) * 0.12
    fig, axes = plt.subplots(1, len(steps), figsize=(3.1 * len(steps), 3.4), squeeze=False)
    # where each matrix sits in a panel: (x of its column 0, y of its row 0); y grows downwards
    origin = {"A": (0.0, k + gap), "B": (k + gap, 0.0), "C": (k + gap, k + gap)}
    shape = {"A": (m, k), "B": (k, n), "C": (m, n)}
    colour = {"A": "#4c9be8", "B": "#e8744c", "C": "#59b36b"}
    for ax, step in zip(axes[0], steps, strict=True):
        for name, (x0, y0) in origin.items():
            rows, cols = shape[name]
            ax.add_patch(Rectangle((x0, y0), cols, rows, fill=False, lw=1.0))
            ax.text(x0 + cols / 2, y0 + rows / 2, name, ha="center", va="center", fontsize=12, alpha=0.35)
        for name in ("A", "B"):  # the tiles of earlier steps, faded: already used and overwritten
            for earlier in steps[: step["t"]]:
                _tile(ax, origin[name], shape[name], earlier[name], colour[name], alpha=0.18)
        for name in ("A", "B", "C"):
            _tile(ax, origin[name], shape[name], step[name], colour[name], alpha=0.9)
        ax.set_title(f"step t = {step['t']}: k = {step['A'][1]}..{step['A'][1] + tile - 1}", fontsize=9)
        ax.set_xlim(-1, k + gap + n + 1)
        ax.set_ylim(k + gap + max(m, 0) + 1, -1)
        ax.set_aspect("equal")
        ax.axis("off")
    fig.suptitle(
        title
        or f"block {block} of a {tile}x{tile}-tiled C = A @ B, A ({m}, {k}), B ({k}, {n}): "
        "its tiles slide along k, C's tile stays",
        fontsize=9,
    )
    fig.tight_layout()
    return fig


def _tile(ax, origin, shape, rect, colour, alpha):
    """Draw one tile; the part outside its matrix (where the kernel stores zeros) hatched."""
    from matplotlib.patches import Rectangle

    x0, y0 = origin
    rows, cols = shape
    r, c, h, w = rect
    inside_h, inside_w = max(0, min(h, rows - r)), max(0, min(w, cols - c))
    ax.add_patch(Rectangle((x0 + c, y0 + r), inside_w, inside_h, color=colour, alpha=alpha, lw=0))
    if (inside_h, inside_w) != (h, w):
        ax.add_patch(
            Rectangle((x0 + c, y0 + r), w, h, fill=False, hatch="///", ec=colour, alpha=alpha, lw=0.8)
        )
