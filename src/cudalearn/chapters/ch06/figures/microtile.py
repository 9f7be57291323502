"""The register micro-tile of Chapter 6: which outputs of a block tile a thread owns, and what it reads.

Drawn from `regblock_layout.thread_outputs`, so the picture follows the kernels' own rule.
"""

from __future__ import annotations

import numpy as np

from cudalearn.chapters.ch06.kernels import regblock_layout

COLORS = ("tab:orange", "tab:blue", "tab:green", "tab:purple")


def _panel(fig, spec, kernel_name, cfg, threads, title):
    """One kernel's block tile of C with the A column and B row of one step along k (Chapter 6)."""
    from matplotlib.colors import ListedColormap

    bm, bn = cfg["BM"], cfg["BN"]
    grid = spec.subgridspec(2, 2, width_ratios=(1, 12), height_ratios=(1, 12), wspace=0.04, hspace=0.04)
    ax_c, ax_a, ax_b = fig.add_subplot(grid[1, 1]), fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[0, 1])
    c_tile, a_col, b_row = np.zeros((bm, bn)), np.zeros((bm, 1)), np.zeros((1, bn))
    shared = len(threads) + 1  # the colour of an A or B value that several of the threads read
    for n, t in enumerate(threads, start=1):
        rows, cols = regblock_layout.thread_outputs(kernel_name, cfg, t)
        c_tile[np.ix_(rows, cols)] = n
        a_col[rows, 0] = np.where(a_col[rows, 0] > 0, shared, n)
        b_row[0, cols] = np.where(b_row[0, cols] > 0, shared, n)
    cmap = ListedColormap(["#eeeeee", *COLORS[: len(threads)], "black"])
    for ax, image in ((ax_c, c_tile), (ax_a, a_col), (ax_b, b_row)):
        ax.imshow(image, cmap=cmap, vmin=-0.5, vmax=shared + 0.5, aspect="auto", interpolation="nearest")
        ax.set_xticks([])
        ax.set_yticks([])
    ax_a.set_ylabel(f"A tile, column k\n({bm} rows)", fontsize=8)
    ax_b.set_title(f"{title}\nB tile, row k ({bn} columns)", fontsize=9)
    ax_c.set_xlabel(f"the block's {bm} x {bn} tile of C", fontsize=8)
    for n, t in enumerate(threads):
        ax_c.plot([], [], "s", color=COLORS[n], label=f"thread {t}: {cfg['TM']} x {cfg['TN']} outputs")
    ax_c.plot([], [], "s", color="black", label="A or B values both threads read")
    ax_c.legend(fontsize=7, loc="lower right")


def microtile_figure(cfg, threads=(0, 1)):
    """The micro-tiles of `threads` in regblock_2d_simple and in regblock_2d_vec, side by side (Chapter 6).

    Per step k, a thread reads its cells of the A column and of the B row (TM + TN values; black: read
    by more than one of `threads`) and does the TM * TN multiply-adds of its coloured cells of C.
    """
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(12, 6))
    outer = fig.add_gridspec(1, 2, wspace=0.12)
    _panel(fig, outer[0], "regblock_2d_simple", cfg, threads, "regblock_2d_simple: one contiguous block")
    _panel(fig, outer[1], "regblock_2d_vec", cfg, threads, "regblock_2d_vec: groups of four, side by side")
    return fig


def warp_figure(panels):
    """Warp 0's outputs in the block tile of C, and the rows of A and columns of B it reads, for each
    (kernel name, tiles, title) of `panels` side by side (deep dive 6a: step 4's layout against step 5's)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 6))
    for ax, (name, cfg, title) in zip(np.atleast_1d(axes), panels, strict=True):
        tile = np.zeros((cfg["BM"], cfg["BN"]))
        for lane in range(32):
            rows, cols = regblock_layout.thread_outputs(name, cfg, lane)
            tile[np.ix_(rows, cols)] = 1 + lane
        ax.imshow(np.ma.masked_equal(tile, 0), cmap="viridis", vmin=1, vmax=32, interpolation="nearest")
        ax.set_facecolor("#eeeeee")
        covered = np.argwhere(tile > 0)
        n_rows, n_cols = len(set(covered[:, 0])), len(set(covered[:, 1]))
        ax.set_title(f"{title}\nwarp 0 covers {n_rows} rows x {n_cols} columns of C", fontsize=9)
        ax.set_xlabel("column of the block tile (colour: lane)")
        ax.set_ylabel("row of the block tile")
    fig.tight_layout()
    return fig
