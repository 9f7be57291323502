"""Chapter 0's picture: a host/GPU timeline of asynchronous launches and what each clock reads.

A schematic (not to scale, not a measurement): the host queues three kernels and returns at once,
the GPU runs them in order; a stopwatch without synchronisation stops after the first launch
returns; CUDA events are stamped by the GPU in the stream. The second panel is the case where the
host submits late: the GPU reaches the start event, sits idle until the kernel arrives, and the
events count that idle time too.
"""

from __future__ import annotations

HOST, GPU, EVENT, IDLE = "#3182bd", "#e6550d", "#31a354", "#dddddd"


def _lane(ax, y, spans, color, labels):
    """Boxes (start, length) on lane `y`, each with its label."""
    ax.broken_barh(spans, (y - 0.3, 0.6), facecolors=color, edgecolor="black", linewidth=0.6)
    for (x, w), text in zip(spans, labels, strict=True):
        ax.text(x + w / 2, y, text, ha="center", va="center", fontsize=7, color="white" if text else "black")


def _event(ax, x, text):
    ax.plot([x, x], [-0.75, 0.4], color=EVENT, linewidth=2)
    ax.text(x + 0.15, -0.75, text, ha="left", va="bottom", fontsize=7, color=EVENT)


def async_timeline():
    """Two panels: three asynchronous launches and their clocks; then a late submission (Chapter 0)."""
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8.5, 4.4), sharex=True)
    for ax in (top, bottom):
        ax.set_yticks([1, 0], ["host (CPU)", "GPU"])
        ax.set_ylim(-1.0, 2.1)
        ax.set_xlim(0, 20)
        ax.spines[["top", "right", "left"]].set_visible(False)
    _lane(top, 1, [(0.5, 1), (1.7, 1), (2.9, 1)], HOST, ["A", "B", "C"])
    _lane(top, 1, [(4.1, 11.4)], IDLE, [""])
    top.text(9.8, 1, "cuda.synchronize(): the host waits", ha="center", va="center", fontsize=7)
    _lane(top, 0, [(1.6, 4.5), (6.1, 4.5), (10.6, 4.5)], GPU, ["kernel A", "kernel B", "kernel C"])
    _event(top, 1.6, "start event")
    _event(top, 15.1, "end event")
    for x, text, y in (
        (1.5, "stopwatch, no sync:\nstops here", 1.6),
        (15.5, "stopwatch + sync:\nstops here", 1.6),
    ):
        top.annotate(
            text,
            (x, 1.3),
            (x, y + 0.05),
            ha="center",
            fontsize=7,
            va="bottom",
            arrowprops={"arrowstyle": "->"},
        )
    top.set_title("launches return at once; the GPU runs the queue in order", fontsize=9)
    _lane(bottom, 1, [(0.5, 0.6), (8.0, 1)], HOST, ["", "A"])
    bottom.text(0.8, 1.45, "record start", ha="center", fontsize=7)
    bottom.text(4.5, 1, "busy elsewhere (Python, data)", ha="center", va="center", fontsize=7)
    _lane(bottom, 0, [(1.1, 8.0), (9.1, 4.5)], [IDLE, GPU], ["", "kernel A"])
    bottom.text(5.1, 0, "GPU idle: counted by the events", ha="center", va="center", fontsize=7)
    _event(bottom, 1.1, "start event")
    _event(bottom, 13.6, "end event")
    bottom.set_title("the host submits late: the events time the wait as well as the kernel", fontsize=9)
    bottom.set_xlabel("time (schematic, not to scale)")
    bottom.set_xticks([])
    fig.tight_layout()
    return fig
