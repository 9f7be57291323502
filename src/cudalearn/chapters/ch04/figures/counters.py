"""Tracer counts against Nsight Compute's hardware counters on y = x (Chapter 4)."""

from __future__ import annotations


def tracer_vs_ncu(ax, points, label_of=None):
    """Scatter (tracer, ncu) counts on symlog axes with the line y = x; label the points off it (Chapter 4).

    `points` is a list of (pattern, counter, tracer count, ncu count); `label_of(pattern, counter)` gives
    the text of a point that differs (default "pattern: counter"), listed by letter (one a place).
    """
    same = [(t, n) for _, _, t, n in points if t == n]
    labels = {}
    for p, c, t, n in points:
        if t != n:
            labels.setdefault((t, n), []).append(label_of(p, c) if label_of else f"{p}: {c}")
    top = max(max(t, n) for _, _, t, n in points) * 3
    ax.plot([0, top], [0, top], color="grey", lw=1, ls="--", label="y = x (the counts agree)")
    ax.scatter(*zip(*same, strict=True), s=18, color="tab:blue", label=f"equal ({len(same)})", zorder=3)
    if labels:
        xs, ys = zip(*labels, strict=True)
        off = sum(len(v) for v in labels.values())
        ax.scatter(xs, ys, s=30, color="tab:red", marker="D", label=f"different ({off})", zorder=4)
        key = []
        for i, ((t, n), texts) in enumerate(sorted(labels.items())):
            letter = "abcdefghijklmnopqrstuvwxyz"[i]
            shift = (7, -4) if i % 2 == 0 else (-14, -4)  # neighbours' letters on opposite sides
            ax.annotate(letter, (t, n), xytext=shift, textcoords="offset points", fontsize=9, color="tab:red")
            key.append(f"{letter}: " + "; ".join(texts))
        ax.text(
            0.98,
            0.02,
            "\n".join(key),
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize=7,
            bbox={"facecolor": "white", "edgecolor": "tab:red", "alpha": 0.9},
        )
    ax.set_xscale("symlog", linthresh=1)
    ax.set_yscale("symlog", linthresh=1)
    ax.set_xlim(-0.5, top)
    ax.set_ylim(-0.5, top)
    ax.set_xlabel("tracer's count (CPU, from the Python source)")
    ax.set_ylabel("Nsight Compute's count (GPU hardware counter)")
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
