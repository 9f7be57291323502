"""A training step's memory drawn: bytes against the batch, what each out-of-memory remedy needs (Chapter 7).

`step_bytes` draws the count of `cudalearn.chapters.ch07.step_memory` (weights, gradients,
optimiser state, activations) against the batch size beside a card's
memory; `oom_remedies` draws the figures a memory experiment stored (per
variant and GPU: what stays between steps, the allocator's peak, the cap)
as bars. Both draw only what they are given.
"""

from __future__ import annotations

from cudalearn.chapters.ch07.step_memory import GiB, StepMemory

HELD, PEAK, CAP = "#4c72b0", "#9ecae1", "#c0392b"


def step_bytes(mem: StepMemory, batch: int, card_bytes: int, card: str, *, max_batch: int = 1024):
    """Bytes of one training step against the batch, from `mem` counted at `batch` (Chapter 7)."""
    import matplotlib.pyplot as plt
    import numpy as np

    per_image = mem.activations / batch
    batches = np.arange(1, max_batch + 1)
    fig, ax = plt.subplots(figsize=(7, 3.4))
    ax.plot(batches, (mem.static + batches * per_image) / GiB, label="+ activations saved for backward")
    ax.axhline(mem.static / GiB, color="grey", lw=0.8, ls="--", label="weights + gradients + momentum")
    ax.axhline(card_bytes / GiB, color=CAP, lw=1, label=card)
    ax.axvline(batch, color="black", lw=0.6, ls=":")
    ax.set_xlabel("batch size")
    ax.set_ylabel("GiB")
    ax.set_title("one float32 training step: the bytes that cannot be avoided (a lower bound)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def oom_remedies(oom: dict):
    """Per remedy and GPU: bytes held between steps, the allocator's peak, the cap, time per step (Chapter 7).

    `oom` is what the chapter's memory experiment stores: `free[name]` with
    `held`, `peak` (per device) and `ms`, `capped[name]["fits"]`, and
    `cap_bytes`.
    """
    import matplotlib.pyplot as plt

    rows = []  # (label, held, peak, ms, fits under the cap)
    names = sorted(oom["free"], key=lambda n: n != "float32, unsplit")  # the baseline first
    for name in names:
        free = oom["free"][name]
        fits = oom["capped"][name]["fits"]
        for dev in free["peak"]:
            label = (f"{name}, {dev}" if len(free["peak"]) > 1 else name).replace(" (", "\n(")
            rows.append((label, free["held"][dev], free["peak"][dev], free["ms"], fits))
    fig, ax = plt.subplots(figsize=(9.5, 0.45 * len(rows) + 1.4), layout="constrained")
    ys = list(range(len(rows)))[::-1]
    for y, (_, held, peak, ms, fits) in zip(ys, rows, strict=True):
        ax.barh(y, peak / GiB, color=PEAK, edgecolor="black", lw=0.5)
        ax.barh(y, held / GiB, color=HELD)
        verdict = "fits" if fits else "OUT OF MEMORY"
        ax.text(peak / GiB + 0.08, y, f"{ms:.0f} ms/step; under the cap: {verdict}", va="center", fontsize=8)
    ax.axvline(oom["cap_bytes"] / GiB, color=CAP, lw=1.2)
    ax.text(oom["cap_bytes"] / GiB, ys[-1] - 0.75, " the cap", color=CAP, fontsize=8, va="center")
    ax.set_yticks(ys, [r[0] for r in rows], fontsize=8)
    ax.set_ylim(ys[-1] - 1, ys[0] + 0.6)
    ax.set_xlim(0, max(r[2] for r in rows) / GiB * 2.2)
    ax.set_xlabel("GiB on one GPU (no cap): dark, held between steps; light, the allocator's peak")
    ax.set_title(f"AlexNet 2012, batch {oom['batch']}: what each remedy needs", fontsize=9)
    return fig
