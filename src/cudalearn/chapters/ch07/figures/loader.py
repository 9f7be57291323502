"""A data-loading pass as a timeline: who makes each batch, when the loop waits, the GPU's work (Chapter 7).

It draws what `cudalearn.chapters.ch07.input_pipeline.loader_timeline` records (or what
`ideal_loader_schedule` predicts, in the same format): one lane per loader
worker (or the training process), one for the training loop's waits, one
for the device's copies and steps.
"""

from __future__ import annotations

MADE, WAIT, COPY, STEP = "#4c72b0", "#c0392b", "#e69f00", "#2ca02c"


def _lanes(ax, tl: dict, title: str) -> None:
    """One pass on one axis: worker lanes on top, then the loop's waits, then the device."""
    workers = sorted({r["worker"] for r in tl["batches"]})
    names = ["training process" if w < 0 else f"worker {w}" for w in workers]
    lane = {w: len(workers) + 1 - k for k, w in enumerate(workers)}
    for i, r in enumerate(tl["batches"]):
        y = lane[r["worker"]]
        (a, b) = r["made"]
        ax.broken_barh([(a, b - a)], (y - 0.4, 0.8), color=MADE, alpha=0.45 + 0.4 * (i % 2))
        ax.text((a + b) / 2, y, str(i), ha="center", va="center", fontsize=6, color="white")
        (a, b) = r["wait"]
        if b - a > 0.5:
            ax.broken_barh([(a, b - a)], (0.6, 0.8), color=WAIT)
        for key, color in (("copy", COPY), ("step", STEP)):
            (a, b) = r[key]
            ax.broken_barh([(a, b - a)], (-0.4, 0.8), color=color, edgecolor="white", lw=0.4)
    ax.set_yticks([*lane.values(), 1, 0], [*names, "loop waits", "GPU"], fontsize=7)
    per_batch = tl["pass_ms"] / len(tl["batches"])
    ax.set_title(f"{title}: {tl['pass_ms']:.0f} ms, {per_batch:.1f} ms per batch", fontsize=8.5, loc="left")


def timelines(passes: dict[str, dict]):
    """Several passes, one axis each, on a shared time axis in milliseconds (Chapter 7)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    heights = [len({r["worker"] for r in tl["batches"]}) + 2 for tl in passes.values()]
    fig, axes = plt.subplots(
        len(passes), 1, figsize=(9, 0.22 * sum(heights) + 1.2), sharex=True,
        gridspec_kw={"height_ratios": heights}, squeeze=False,
    )  # fmt: skip
    for ax, (title, tl) in zip(axes[:, 0], passes.items(), strict=True):
        _lanes(ax, tl, title)
    axes[-1, 0].set_xlabel("milliseconds since the pass started")
    legend = [(MADE, "a batch made (its number)"), (WAIT, "loop waits for a batch"), (COPY, "copy to GPU"),
              (STEP, "training step")]  # fmt: skip
    axes[0, 0].legend(
        handles=[Patch(color=c, label=t) for c, t in legend], fontsize=7, ncol=4, loc="lower right",
        bbox_to_anchor=(1.0, 1.12),
    )  # fmt: skip
    fig.tight_layout()
    return fig
