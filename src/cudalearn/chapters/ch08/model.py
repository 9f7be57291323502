"""Plain and residual networks of any depth, and the gradients that reach their layers (Chapter 8).

A *plain* network stacks blocks `y = F(x)`; a *residual* network stacks
`y = F(x) + x`, the identity shortcut of ResNet (He, Zhang, Ren and Sun,
"Deep Residual Learning for Image Recognition", CVPR 2016). Both are
built from the same `Block`, so the only difference between them is the
`+ x`. By the chain rule, the gradient through a residual block is
`dL/dx = dL/dy (dF/dx + 1)`: the `+ 1` carries `dL/dy` back unchanged,
however small `dF/dx` is.

- `Block` is one block of two weight layers in pre-activation order (He et
  al., "Identity Mappings in Deep Residual Networks", ECCV 2016):
  `F(x) = W2 relu(N2(W1 relu(N1(x))))`, with `W` a `Linear` (vectors) or
  a 3x3 `Conv2d` (images) and `N` a BatchNorm or nothing. `Block.branch(x)` is `F(x)` alone.
- `make_net(blocks, skip=...)` puts `blocks` of them between a stem layer
  and a classifier head: `2 * blocks + 2` weight layers in all.
- `grad_norms` gives the norm of each weight layer's gradient, input side
  first, computed in float64; `compare_depths` trains networks of several
  depths with `cudalearn.nn.training.fit_epochs` on the digits of
  `cudalearn.nn.datasets.digits_split` (scikit-learn's 8x8 digits in [-1, 1]).

Shapes: vectors (B, width) float32, images (B, C, H, W) float32, labels (B,)
int64, logits (B, classes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from cudalearn.nn.datasets import Split
from cudalearn.nn.training import fit_epochs


class Block(nn.Module):
    """y = F(x) + x (skip=True) or F(x) (skip=False): F two weight layers, pre-activation (Ch. 8).

    `conv=False`: x (B, width), weight layers Linear(width, width);
    `conv=True`: x (B, width, H, W), weight layers 3x3 Conv2d with padding 1.
    `norm=True` puts a BatchNorm before each ReLU; `norm=False` none.
    """

    def __init__(self, width: int, *, skip: bool = True, conv: bool = False, norm: bool = True):
        super().__init__()
        if conv:
            self.w1 = nn.Conv2d(width, width, 3, padding=1, bias=not norm)
            self.w2 = nn.Conv2d(width, width, 3, padding=1, bias=not norm)
        else:
            self.w1 = nn.Linear(width, width, bias=not norm)
            self.w2 = nn.Linear(width, width, bias=not norm)
        batchnorm = nn.BatchNorm2d if conv else nn.BatchNorm1d
        self.n1 = batchnorm(width) if norm else nn.Identity()
        self.n2 = batchnorm(width) if norm else nn.Identity()
        self.skip = skip

    def branch(self, x: torch.Tensor) -> torch.Tensor:
        """F(x) = W2 relu(N2(W1 relu(N1(x)))): the residual branch alone."""
        return self.w2(torch.relu(self.n2(self.w1(torch.relu(self.n1(x))))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """F(x) + x with the skip, F(x) without."""
        f = self.branch(x)
        return f + x if self.skip else f

    def extra_repr(self) -> str:
        """'skip=True' or 'skip=False' in the module's printout."""
        return f"skip={self.skip}"


def make_net(
    blocks: int,
    *,
    skip: bool,
    conv: bool = False,
    norm: bool = True,
    width: int = 64,
    inputs: int = 64,
    classes: int = 10,
) -> nn.Sequential:
    """Plain (skip=False) or residual (skip=True): `blocks` Blocks, 2 * blocks + 2 layers (Ch. 8).

    `conv=False`: input (B, inputs) -> Linear stem -> blocks -> N, ReLU ->
    Linear head. `conv=True`: input (B, inputs, H, W) with `inputs` channels
    -> 3x3 Conv2d stem -> blocks -> N, ReLU -> global average pool ->
    Linear head. Output (B, classes) logits (Chapter 8).
    """
    if conv:
        stem: nn.Module = nn.Conv2d(inputs, width, 3, padding=1)
        tail: list[nn.Module] = [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        batchnorm: type[nn.Module] = nn.BatchNorm2d
    else:
        stem, tail, batchnorm = nn.Linear(inputs, width), [], nn.BatchNorm1d
    body = [Block(width, skip=skip, conv=conv, norm=norm) for _ in range(blocks)]
    final = [batchnorm(width) if norm else nn.Identity(), nn.ReLU()]
    return nn.Sequential(stem, *body, *final, *tail, nn.Linear(width, classes))


def weight_layers(net: nn.Module) -> list[tuple[str, nn.Module]]:
    """(name, layer) of every Linear and Conv2d of `net`, in the order they were registered (Chapter 8)."""
    return [(name, m) for name, m in net.named_modules() if isinstance(m, nn.Linear | nn.Conv2d)]


def grad_norms(net: nn.Module, X: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """Norms of dL/dW per weight layer (input side first) after one cross-entropy backward (Ch. 8).

    X (B, ...) float32, y (B,) int64 on the network's device. The network
    stays in training mode (BatchNorm uses the batch's statistics, as during
    training); its gradients are left filled in. Returns (layers,) float64.
    The norm is taken in float64: a float32 norm squares the entries, and
    squares of entries below about 1e-23 underflow to zero in float32 even
    when the entries themselves are not zero.
    """
    net.train()
    net.zero_grad(set_to_none=True)
    F.cross_entropy(net(X), y).backward()
    norms = [m.weight.grad.double().norm().item() for _, m in weight_layers(net)]
    return np.array(norms, dtype=np.float64)


def compare_depths(
    nets: Mapping[str, tuple[int, bool]],
    data: Split,
    *,
    seeds: Sequence[int],
    conv: bool = False,
    width: int = 64,
    **fit_args,
) -> dict[str, dict]:
    """Train make_net(blocks, skip=skip) for each {label: (blocks, skip)} and each seed (Chapter 8).

    `fit_args` go to `fit_epochs`. Returns {label: {"blocks", "skip",
    "layers", "runs": [History.as_dict() per seed], "train_loss", "test_acc"
    (means over the seeds)}}.
    """
    inputs = data.X_train.shape[1]
    out = {}
    for label, (blocks, skip) in nets.items():
        runs = []
        for seed in seeds:
            torch.manual_seed(seed)
            net = make_net(blocks, skip=skip, conv=conv, width=width, inputs=inputs)
            net = net.to(data.X_train.device)
            runs.append(fit_epochs(net, data, seed=seed, **fit_args).as_dict())
        out[label] = {
            "blocks": blocks,
            "skip": skip,
            "layers": 2 * blocks + 2,
            "runs": runs,
            "train_loss": float(np.mean([r["train_loss"] for r in runs])),
            "test_acc": float(np.mean([r["test_acc"] for r in runs])),
        }
    return out


def _semilog_figure(xlabel: str, ylabel: str, title: str, draw) -> object:
    """A (7.5, 4) figure, log y axis: `draw(ax)` plots the curves, then labels, grid, legend (Chapter 8)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4))
    draw(ax)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", lw=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_grad_norms(curves: Mapping[str, Sequence[float]], *, title: str = "gradient norm per layer"):
    """Semi-log plot of {label: per-layer gradient norms}, input side on the left (Chapter 8).

    A norm of zero (or inf/nan) cannot sit on a log axis and is left out of its curve.
    """

    def draw(ax):
        for label, norms in curves.items():
            norms = np.asarray(norms, dtype=np.float64)
            shown = np.where(np.isfinite(norms) & (norms > 0), norms, np.nan)
            ax.semilogy(np.arange(1, len(norms) + 1), shown, label=label)

    return _semilog_figure("weight layer (1 = next to the input)", "||dL/dW||", title, draw)


def plot_histories(results: Mapping[str, dict], *, title: str = "training loss"):
    """Mean training loss per epoch of each network of `compare_depths` (first seed), log y (Chapter 8)."""

    def draw(ax):
        for label, res in results.items():
            curve = res["runs"][0]["epoch_loss"]
            ax.semilogy(
                np.arange(1, len(curve) + 1), curve, marker=".", label=f"{label} ({res['layers']} layers)"
            )

    return _semilog_figure("epoch", "mean training loss", title, draw)
