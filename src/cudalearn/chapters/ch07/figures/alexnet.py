"""AlexNet's two columns drawn: a lane per GPU, arrows where they exchange activations (Chapter 7).

The geometry comes from an `AlexNetConfig`: one box per layer and column,
labelled with that column's half of the layer's output; an arrow between
the lanes wherever a layer reads the other column's half (`cfg.exchange`),
labelled with the bytes per image that cross. No number in the picture
comes from a measurement.
"""

from __future__ import annotations

from cudalearn.nn.alexnet import CONVS, LAYERS, AlexNetConfig

CROSS = "#c0392b"  # the colour of everything that crosses between the GPUs
OWN = "#333333"


def _half(cfg: AlexNetConfig, name: str) -> str:
    """'48x55x55' or '2048': one column's half of layer `name`'s output (per image)."""
    shape = cfg.output_shape(name)
    return "x".join(str(d) for d in (shape[0] // 2, *shape[1:]))


def _box(ax, x: float, y: float, top: str, bottom: str, color: str) -> None:
    """A layer box centred at (x, y): its name above, its output shape below."""
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(
        FancyBboxPatch((x - 0.42, y - 0.3), 0.84, 0.6, boxstyle="round,pad=0.02", fc=color, ec=OWN, lw=1)
    )
    ax.text(x, y + 0.1, top, ha="center", va="center", fontsize=9, weight="bold")
    ax.text(x, y - 0.13, bottom, ha="center", va="center", fontsize=6.5)


def _arrow(ax, start, end, color: str = OWN, lw: float = 1.0) -> None:
    """A straight arrow between two points (data coordinates)."""
    from matplotlib.patches import FancyArrowPatch

    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=9, color=color, lw=lw))


def two_columns(cfg: AlexNetConfig | None = None, bytes_per_element: int = 4):
    """The network as two lanes, GPU 0 above and GPU 1 below, exchanges in red (Chapter 7)."""
    import matplotlib.pyplot as plt

    cfg = cfg or AlexNetConfig.original()
    fig, ax = plt.subplots(figsize=(10.5, 3.3))
    lanes = {0: 1.0, 1: -1.0}
    xs = {name: 1.3 + 1.12 * k for k, name in enumerate(LAYERS)}
    image = "x".join(map(str, cfg.input_shape("conv1")))
    _box(ax, 0.0, 0.0, "image", image, "#eeeeee")
    for c, y in lanes.items():
        ax.text(-0.6, y, f"GPU {c}", ha="right", va="center", fontsize=9)
        _arrow(ax, (0.42, 0.0), (xs["conv1"] - 0.42, y * 0.8))
        for k, name in enumerate(LAYERS):
            crosses = name in cfg.exchange
            _box(ax, xs[name], y, name, _half(cfg, name), "#f6d5d1" if crosses else "#dde8f5")
            if k == 0:
                continue
            prev = xs[LAYERS[k - 1]]
            _arrow(ax, (prev + 0.42, y), (xs[name] - 0.42, y))
            if crosses:  # this column also reads the other column's half of the previous layer
                _arrow(ax, (prev + 0.3, -y * 0.7), (xs[name] - 0.3, y * 0.7), CROSS, 1.4)
    for name in cfg.exchange:
        half = cfg.input_shape(name)
        per_image = bytes_per_element * half[0] // 2 * (half[1] * half[2] if len(half) == 3 else 1)
        ax.text(
            xs[name] - 0.56, 0.0, f"{per_image / 1024:.0f} KiB\neach way", color=CROSS, fontsize=6.5,
            ha="center", va="center", bbox={"fc": "white", "ec": "none", "pad": 0.5},
        )  # fmt: skip
    end = xs["fc8"] + 0.9
    ax.text(end + 0.25, lanes[0], "logits\n(loss on GPU 0)", fontsize=7.5, va="center")
    _arrow(ax, (xs["fc8"] + 0.42, lanes[0]), (end + 0.2, lanes[0]))
    _arrow(ax, (xs["fc8"] + 0.42, lanes[1]), (end + 0.2, lanes[0] - 0.2), CROSS, 1.4)
    grouped = [n for n in CONVS[1:] if n not in cfg.exchange]
    ax.set_title(
        f"{cfg.n_params():,} parameters: each layer halved over two GPUs; red arrows cross between "
        f"them ({', '.join(cfg.exchange)}); {', '.join(grouped) or 'no layer'} read only their own "
        "column",
        fontsize=8.5,
    )
    ax.set_xlim(-1.6, end + 1.6)
    ax.set_ylim(-1.55, 1.55)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.tight_layout()
    return fig
