"""Shared-memory bank pictures of Chapter 4: the bank of each tile element, and one warp request's banks.

Colours come from a sequential colormap (viridis, 32 levels), so bank 0 (dark purple) and bank 31
(yellow) never look alike, as they do on a cyclic map such as hsv.
"""

from __future__ import annotations

import numpy as np

NUM_BANKS = 32


def bank_colormap():
    """The 32-level sequential colormap of every bank picture (Chapter 4)."""
    import matplotlib as mpl

    return mpl.colormaps["viridis"].resampled(NUM_BANKS)


def tile_banks(ax, table, title, column=0):
    """Draw `table` (rows, cols) of bank numbers with one colour a bank; outline `column` (Chapter 4)."""
    from matplotlib.patches import Rectangle

    rows, cols = table.shape
    image = ax.imshow(table, cmap=bank_colormap(), vmin=-0.5, vmax=NUM_BANKS - 0.5, interpolation="nearest")
    ax.add_patch(Rectangle((column - 0.5, -0.5), 1, rows, fill=False, lw=2.5, ec="red"))
    ax.add_patch(Rectangle((-0.5, -0.5), cols, 1, fill=False, lw=1.5, ec="white", ls="--"))
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("column")
    ax.set_ylabel("row")
    return image


def request_grid(req):
    """(wavefronts, 32) array: the lowest lane each (wavefront, bank) cell of a request serves, -1 if none."""
    grid = np.full((max(req.wavefronts, 1), NUM_BANKS), -1)
    for bank, words in req.banks().items():
        for row, lanes in enumerate(words.values()):
            grid[row, bank] = lanes[0]
    return grid


def request_banks(ax, req, title):
    """One warp request: banks across, wavefronts down, cells coloured and labelled by lane (Chapter 4).

    `req` is a `cudalearn.trace.SharedRequest` (`TraceReport.shared_request(...)`); a cell that several
    lanes share (a broadcast) is labelled with all of them.
    """
    from matplotlib.colors import ListedColormap

    cmap = ListedColormap(["#f0f0f0", *bank_colormap()(np.arange(NUM_BANKS))])
    grid = request_grid(req)
    ax.imshow(grid + 1, cmap=cmap, vmin=-0.5, vmax=NUM_BANKS + 0.5, aspect="auto", interpolation="nearest")
    for bank, words in req.banks().items():
        for row, lanes in enumerate(words.values()):
            label = str(lanes[0]) if len(lanes) == 1 else f"{lanes[0]}-{lanes[-1]}"
            color = "white" if lanes[0] < 20 else "black"  # readable on viridis' dark and light ends
            ax.text(bank, row, label, ha="center", va="center", fontsize=6, color=color)
    ax.set_facecolor("#f0f0f0")  # below the last wavefront: nothing
    ax.set_xticks(range(0, NUM_BANKS, 4))
    ax.set_xlabel("bank (cell: the lane it serves, coloured by lane)")
    ax.set_ylabel("wavefront")
    conflicts = req.bank_conflicts
    ax.set_title(f"{title}\n{req.wavefronts} wavefront(s), {conflicts} bank conflict(s)", fontsize=9)


def requests_figure(requests):
    """A figure of several requests side by side, {title: SharedRequest} (Chapter 4)."""
    import matplotlib.pyplot as plt

    depth = max(r.wavefronts for r in requests.values())
    fig, axes = plt.subplots(1, len(requests), figsize=(6 * len(requests), 1.6 + 0.17 * depth))
    for ax, (title, req) in zip(np.atleast_1d(axes), requests.items(), strict=True):
        request_banks(ax, req, title)
        ax.set_ylim(depth - 0.5, -0.5)
    fig.tight_layout()
    return fig
