"""The course's figures: roofline, thread grid, timing bars (Chapters 0-2).

Matplotlib is imported inside each function, so importing the package
stays cheap. Every function returns the Figure.
"""

from __future__ import annotations

from collections.abc import Sequence


def roofline(
    machines: dict[str, tuple[float, float]],
    points: Sequence[tuple[str, float, float]] = (),
    *,
    title="Roofline",
):
    """Rooflines of {name: (peak GFLOP/s, GB/s)} with points (name, FLOP/byte, GFLOP/s) (Chapter 1)."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    x = np.logspace(-2, 4, 400)
    for name, (peak, bw) in machines.items():
        (line,) = ax.loglog(
            x, np.minimum(peak, x * bw), label=f"{name} ({peak / 1e3:.3g} TFLOP/s, {bw:.0f} GB/s)"
        )
        ax.axvline(peak / bw, color=line.get_color(), lw=0.6, ls=":")
    for name, intensity, rate in points:
        ax.loglog([intensity], [rate], "o", ms=7)
        ax.annotate(name, (intensity, rate), textcoords="offset points", xytext=(6, -12), fontsize=8)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("attainable GFLOP/s")
    ax.set_title(title)
    ax.grid(True, which="both", lw=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def thread_grid(grid: tuple[int, int], block: tuple[int, int], shape: tuple[int, int], *, title=None):
    """Which block and thread computes each element of a (rows, cols) output for a 2-D launch (Chapter 2)."""
    import matplotlib.pyplot as plt
    import numpy as np

    rows, cols = shape
    gy, gx = grid[1], grid[0]
    by, bx = block[1], block[0]
    block_id = np.full((gy * by, gx * bx), -1.0)
    for r in range(gy * by):
        for c in range(gx * bx):
            block_id[r, c] = (r // by) * gx + (c // bx)
    fig, ax = plt.subplots(figsize=(6, 6 * gy * by / max(gx * bx, 1) + 0.5))
    ax.imshow(block_id % 8, cmap="Pastel2", interpolation="nearest")
    for r in range(gy * by):
        for c in range(gx * bx):
            inside = r < rows and c < cols
            ax.text(
                c,
                r,
                f"{c % bx},{r % by}",
                ha="center",
                va="center",
                fontsize=6,
                color="black" if inside else "red",
            )
    ax.add_patch(plt.Rectangle((-0.5, -0.5), cols, rows, fill=False, lw=2, ec="black"))
    ax.set_xticks(range(0, gx * bx, bx))
    ax.set_yticks(range(0, gy * by, by))
    ax.set_title(
        title
        or f"grid {grid} x block {block} over a {rows}x{cols} output\n"
        "(labels: threadIdx.x,threadIdx.y; red = outside, must be guarded)",
        fontsize=9,
    )
    fig.tight_layout()
    return fig


#: How `bars` names the columns of a timing.Results on its axis.
UNITS = {"gflops": "GFLOP/s", "gbps": "GB/s", "median_ms": "ms (median)", "min_ms": "ms (min)"}


def _number(x: float) -> str:
    """1,340 or 7.62 or 0.129: thousands separated, three significant digits below 100 (bar labels)."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def bars(results, value: str = "gflops", *, log: bool = True):
    """Bar chart of one column (e.g. 'gflops', 'gbps', 'median_ms') of a timing.Results (Chapters 0-2)."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator

    rows = [r for r in results.rows if r.get(value) is not None]
    fig, ax = plt.subplots(figsize=(7, 0.5 + 0.45 * max(len(rows), 1)))
    ax.barh([r["name"] for r in rows], [r[value] for r in rows], log=log and bool(rows))
    ax.invert_yaxis()
    ax.set_xlabel(UNITS.get(value, value) + (" (log scale)" if log and rows else ""))
    if log and rows:  # ticks at 1, 2 and 5 of each decade, so a narrow range still has several
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: _number(x)))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda x, _: ""))
    ax.set_title(f"{results.key} ({results.source}: {results.label})", fontsize=9)
    for i, r in enumerate(rows):
        ax.text(r[value], i, " " + _number(r[value]), va="center", fontsize=8)
    if rows:  # room for the longest bar's label
        ax.set_xlim(right=max(r[value] for r in rows) * (1.4 if log else 1.15))
    fig.tight_layout()
    return fig
