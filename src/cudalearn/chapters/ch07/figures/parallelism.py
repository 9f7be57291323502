"""What crosses between two GPUs in one training step: model parallelism against data parallelism (Chapter 7).

Two panels from an `AlexNetConfig` and a batch: on the left the two columns, each GPU holding half of
every layer, with an arrow wherever activations cross forward (and their gradients backward), labelled
with the bytes each GPU sends; on the right two whole copies of the network, each on half the batch,
joined by one all-reduce of the gradients after the backward pass. Every label is counted from the
configuration (`alexnet.exchange_bytes`, `multigpu.allreduce_bytes`); nothing is measured.
"""

from __future__ import annotations

from cudalearn.chapters.ch07.figures.alexnet import CROSS, OWN
from cudalearn.chapters.ch07.step_memory import fmt_bytes
from cudalearn.dist import multigpu
from cudalearn.nn import alexnet
from cudalearn.nn.alexnet import LAYERS, AlexNetConfig


def _layer_boxes(ax, x0: float, y: float, width: float, labels, face: str) -> list[float]:
    """A row of small layer boxes from x0, returns their centres."""
    from matplotlib.patches import Rectangle

    step = width / len(labels)
    centres = []
    for i, label in enumerate(labels):
        cx = x0 + (i + 0.5) * step
        ax.add_patch(Rectangle((cx - 0.4 * step, y - 0.22), 0.8 * step, 0.44, fc=face, ec=OWN, lw=0.8))
        ax.text(cx, y, label, ha="center", va="center", fontsize=6.5)
        centres.append(cx)
    return centres


def what_crosses(cfg: AlexNetConfig, batch: int):
    """The figure: model parallelism (left, at `batch`) and data parallelism (right) of `cfg` on two GPUs."""
    import matplotlib.pyplot as plt

    short = [n.replace("conv", "c").replace("logits", "out") for n in LAYERS]
    sent = {n: (f + b) / 2 for n, (f, b) in alexnet.exchange_bytes(cfg, batch).items()}  # each GPU's share
    grads = multigpu.allreduce_bytes(cfg.n_params(), 2)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6))
    for ax in (left, right):
        ax.set_xlim(0, 10)
        ax.set_ylim(0, 4)
        ax.axis("off")

    # model parallelism: half of every layer on each GPU, activations cross at cfg.exchange
    for y, gpu in ((3.0, "GPU 0"), (1.0, "GPU 1")):
        ax_centres = _layer_boxes(left, 1.4, y, 8.6, short, "#dbe9f6")
        left.text(0.05, y, f"{gpu}\nhalf of\neach layer", ha="left", va="center", fontsize=7)
    for name, cx in zip(LAYERS, ax_centres, strict=True):
        if name in sent:
            left.annotate(
                "", (cx, 1.25), (cx, 2.75), arrowprops={"arrowstyle": "<->", "color": CROSS, "lw": 1.4}
            )
    total = sum(sent.values())
    text = f"activations forward, their gradients backward:\n{fmt_bytes(total)} sent by each GPU"
    left.text(5.7, 2.0, text,
              ha="center", va="center", fontsize=7.5, color=CROSS, backgroundcolor="white")  # fmt: skip
    left.set_title(f"model parallelism (two columns): batch {batch} on both GPUs", fontsize=9)

    # data parallelism: a whole copy on each GPU, half the batch each, one all-reduce of the gradients
    for y, gpu in ((3.0, "GPU 0"), (1.0, "GPU 1")):
        dp_centres = _layer_boxes(right, 1.4, y, 8.6, short, "#e8f3e0")
        right.text(0.05, y, f"{gpu}\nwhole net,\nown images", ha="left", va="center", fontsize=7)
    for cx in dp_centres:  # every layer's gradients, in buckets as the backward pass reaches them
        right.annotate("", (cx, 1.25), (cx, 2.75), arrowprops={"arrowstyle": "<->", "color": CROSS})
    text = "during backward, bucket by bucket:\nall-reduce of every gradient, "
    text += f"{fmt_bytes(grads)} from each GPU"
    right.text(5.7, 2.0, text,
               ha="center", va="center", fontsize=7.5, color=CROSS, backgroundcolor="white")  # fmt: skip
    right.set_title("data parallelism (DDP): each GPU its own share of the images", fontsize=9)
    fig.tight_layout()
    return fig
