"""Vision Transformer pieces: patches as tokens, patch embedding as a GEMM, a small ViT and CNN (Chapter 9).

A ViT (Dosovitskiy et al., "An Image is Worth 16x16 Words: Transformers
for Image Recognition at Scale", ICLR 2021) cuts an image `(C, H, W)` into
`N = (H // p) * (W // p)` patches of `p x p` pixels and flattens each into a
token of `C * p * p` numbers, ordered (channel, row, column) as in
`torch.nn.functional.unfold` and a `Conv2d` weight `(D, C, p, p)`. Patch
`n = i * (W // p) + j` is the one at patch row i, patch column j.

- `patchify_reshape`, `patchify_unfold` and `patchify_numba` do that cut
  three ways (a view and a copy, PyTorch's unfold, the course's Numba
  kernel `cudalearn.chapters.ch09.kernels.patchify`); they give equal tensors.
  `patchify_numba_launch` prepares one kernel launch on a tensor, to time.
- `PatchEmbedding` is the ViT's first layer, a `Conv2d` with kernel = stride
  = p; `linear_from_conv` turns it into the equal `Linear` on flattened
  patches: one GEMM `(B*N, C*p*p) @ (C*p*p, D)`.
- `ViT` (pre-norm blocks of explicit multi-head attention and an MLP) and
  `SmallCNN` are the two small models the chapter compares; `block_flops`
  is the FLOP count of one transformer block (`cudalearn.nn.op_costs`
  measures where the FLOPs and the time of a model go);
  `receptive_field` finds the input pixels one output depends on.
- `cnn_vs_vit` trains both models on `cudalearn.nn.datasets.shifted_digits`
  (the 8x8 digits placed at random positions on a larger canvas).

Shapes: images (B, C, H, W) float32, tokens (B, N, D) float32, labels (B,)
int64, logits (B, classes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from cudalearn.nn import datasets as digit_sets
from cudalearn.nn.training import fit_epochs


def num_patches(h: int, w: int, p: int) -> int:
    """N = (h // p) * (w // p), the tokens of an h x w image cut into p x p patches (Chapter 9)."""
    if h % p or w % p:
        raise ValueError(f"image size {h}x{w} is not a multiple of the patch size {p}")
    return (h // p) * (w // p)


def patchify_reshape(x: torch.Tensor, p: int) -> torch.Tensor:
    """(B, C, H, W) -> (B, N, C*p*p) by reshape and permute: a view, then one copy (Chapter 9)."""
    b, c, h, w = x.shape
    n = num_patches(h, w, p)
    grid = x.reshape(b, c, h // p, p, w // p, p)  # (b, c, i, r, j, s): only a view
    return grid.permute(0, 2, 4, 1, 3, 5).reshape(b, n, c * p * p)  # (b, i, j, c, r, s), copied


def patchify_unfold(x: torch.Tensor, p: int) -> torch.Tensor:
    """(B, C, H, W) -> (B, N, C*p*p) with F.unfold, im2col with stride p (Chapter 9)."""
    num_patches(x.shape[2], x.shape[3], p)
    return F.unfold(x, kernel_size=p, stride=p).transpose(1, 2)


def patchify_numba_launch(
    x: torch.Tensor, p: int, threads: int = 128
) -> tuple[Callable[[], None], torch.Tensor]:
    """(launch, out): `launch()` runs the patchify kernel on x (B, C, H, W) into out (B, N, C*p*p).

    x must be a contiguous float32 tensor. A CUDA tensor is handed to Numba
    without a copy through the CUDA array interface; under the simulator
    the kernel writes into the CPU tensor's memory through NumPy. Each
    call of `launch` is one kernel launch, ready to be timed (Chapter 9).
    """
    from cudalearn.chapters.ch09.kernels import patchify, patchify_launch
    from cudalearn.runtime.numba_backend import cuda

    if x.dtype != torch.float32 or not x.is_contiguous():
        raise ValueError("patchify_numba_launch needs a contiguous float32 tensor")
    b, c, h, w = x.shape
    out = torch.empty((b, num_patches(h, w, p), c * p * p), device=x.device, dtype=torch.float32)
    griddim, blockdim = patchify_launch(x.shape, p, threads)
    if x.is_cuda:
        args = (cuda.as_cuda_array(x.detach()), cuda.as_cuda_array(out), np.int32(p))
    else:
        args = (x.detach().numpy(), out.numpy(), np.int32(p))

    def launch() -> None:
        patchify[griddim, blockdim](*args)

    return launch, out


def patchify_numba(x: torch.Tensor, p: int, threads: int = 128) -> torch.Tensor:
    """(B, C, H, W) -> (B, N, C*p*p) with the course's Numba kernel, on x's device (Chapter 9)."""
    launch, out = patchify_numba_launch(x.detach().contiguous().float(), p, threads)
    launch()
    return out


def unpatchify(tokens: torch.Tensor, p: int, h: int, w: int) -> torch.Tensor:
    """(B, N, C*p*p) -> (B, C, h, w): the inverse of the patchify functions (Chapter 9)."""
    b, n, e = tokens.shape
    c = e // (p * p)
    grid = tokens.reshape(b, h // p, w // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return grid.reshape(b, c, h, w)


class PatchEmbedding(nn.Module):
    """A ViT's first layer, Conv2d(C, D, p, stride=p): images -> tokens (B, N, D) (Chapter 9).

    With `gemm=True` the same map is computed in its GEMM form, a
    Linear(C*p*p, D) on `patchify_reshape(x, p)`.
    """

    def __init__(self, channels: int, dim: int, patch: int, *, gemm: bool = False):
        super().__init__()
        self.patch = patch
        self.gemm = gemm
        if gemm:
            self.proj: nn.Module = nn.Linear(channels * patch * patch, dim)
        else:
            self.proj = nn.Conv2d(channels, dim, kernel_size=patch, stride=patch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Tokens (B, N, D), patches in row-major order."""
        if self.gemm:
            return self.proj(patchify_reshape(x, self.patch))
        return self.proj(x).flatten(2).transpose(1, 2)


def linear_from_conv(conv: nn.Conv2d) -> nn.Linear:
    """The Linear(C*p*p, D) on flat patches equal to conv = Conv2d(C, D, p, stride=p) (Chapter 9).

    The conv weight (D, C, p, p) becomes the matrix (D, C*p*p) whose row d
    is filter d flattened in (channel, row, column) order, the order of the
    patch vectors: the same weights, reshaped; the bias is shared.
    """
    d, c, kh, kw = conv.weight.shape
    if (kh, kw) != tuple(conv.stride) or kh != kw or conv.padding not in ((0, 0), 0, "valid"):
        raise ValueError("a patch embedding is a square Conv2d with kernel = stride, no padding")
    lin = nn.Linear(c * kh * kw, d, bias=conv.bias is not None)
    lin = lin.to(device=conv.weight.device, dtype=conv.weight.dtype)
    with torch.no_grad():
        lin.weight.copy_(conv.weight.reshape(d, c * kh * kw))
        if conv.bias is not None:
            lin.bias.copy_(conv.bias)
    return lin


class Attention(nn.Module):
    """Multi-head self-attention written out: two batched matmuls around a softmax (Chapter 9).

    x (B, N, D) -> (B, N, D). The scores Q K^T are (B, heads, N, N): their
    cost grows with the square of the number of tokens.
    """

    def __init__(self, dim: int, heads: int):
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim={dim} must be a multiple of heads={heads}")
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Self-attention of the tokens x (B, N, D) -> (B, N, D)."""
        b, n, dim = x.shape
        d = dim // self.heads  # one head's length: the d of the scaling 1 / sqrt(d)
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, d).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # (b, heads, n, d) each
        scores = (q @ k.transpose(-2, -1)) * d**-0.5  # (b, heads, n, n)
        out = scores.softmax(dim=-1) @ v  # (b, heads, n, d)
        return self.proj(out.transpose(1, 2).reshape(b, n, dim))


class TransformerBlock(nn.Module):
    """Pre-norm transformer block: x + Attention(LN(x)), then x + MLP(LN(x)); (B, N, D) (Chapter 9).

    Both halves are residual blocks `y = F(x) + x`, as in Chapter 8.
    """

    def __init__(self, dim: int, heads: int, mlp_ratio: int = 2):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The two residual halves on tokens x (B, N, D)."""
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    """A small Vision Transformer: patch embedding + positions, blocks, mean of tokens, head (Chapter 9).

    Images (B, channels, image, image) -> logits (B, classes). `gemm_embed`
    computes the patch embedding as patchify + Linear instead of a Conv2d.
    """

    def __init__(
        self,
        *,
        image: int,
        patch: int,
        channels: int = 1,
        dim: int = 64,
        depth: int = 2,
        heads: int = 4,
        mlp_ratio: int = 2,
        classes: int = 10,
        gemm_embed: bool = False,
    ):
        super().__init__()
        self.embed = PatchEmbedding(channels, dim, patch, gemm=gemm_embed)
        self.pos = nn.Parameter(torch.zeros(1, num_patches(image, image, patch), dim))
        nn.init.trunc_normal_(self.pos, std=0.02)
        self.blocks = nn.Sequential(*[TransformerBlock(dim, heads, mlp_ratio) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def tokens(self, x: torch.Tensor) -> torch.Tensor:
        """The token sequence (B, N, D) entering the first block: patch embeddings plus positions."""
        return self.embed(x) + self.pos

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (B, classes) of images x (B, channels, image, image)."""
        return self.head(self.norm(self.blocks(self.tokens(x))).mean(dim=1))


class SmallCNN(nn.Module):
    """A small CNN: stages of two 3x3 conv + BatchNorm + ReLU and a 2x2 max-pool; pool, head (Chapter 9).

    Images (B, channels, H, W) -> logits (B, classes); `widths` has one
    entry per stage.
    """

    def __init__(self, *, channels: int = 1, widths: tuple[int, ...] = (16, 32), classes: int = 10):
        super().__init__()
        layers: list[nn.Module] = []
        c = channels
        for w in widths:
            for _ in range(2):
                layers += [nn.Conv2d(c, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU()]
                c = w
            layers.append(nn.MaxPool2d(2))
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (B, classes) of images x (B, channels, H, W)."""
        return self.head(self.features(x).mean(dim=(2, 3)))


def parameters(model: nn.Module) -> int:
    """Number of trainable parameters of `model` (Chapter 9)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def block_flops(tokens: int, dim: int, mlp_ratio: int = 2) -> dict[str, int]:
    """Forward FLOPs of one TransformerBlock's matmuls for one image, as FlopCounterMode counts (Chapter 9).

    'projections': Q, K, V and output projections, 2 * N * D * 4D;
    'mlp': the two MLP layers, 2 * 2 * N * D * (mlp_ratio * D);
    'attention': the scores Q K^T and the weighted sum of V, 2 * 2 * N^2 * D,
    the only term that grows with the square of the token count.
    """
    n, d = tokens, dim
    return {"projections": 8 * n * d * d, "mlp": 4 * mlp_ratio * n * d * d, "attention": 4 * n * n * d}


def receptive_field(fn: Callable[..., torch.Tensor], x: torch.Tensor, index: tuple) -> np.ndarray:
    """Which input pixels the output element fn(x)[index] depends on: a (H, W) bool map (Chapter 9).

    x (1, C, H, W). Found with autograd: the pixels whose gradient is not
    zero (summed over channels), i.e. the element's receptive field.
    """
    x = x.detach().clone().requires_grad_(True)
    out = fn(x)
    (grad,) = torch.autograd.grad(out[index], x)
    return (grad[0].abs().sum(0) > 0).cpu().numpy()


def show_patches(image: np.ndarray, p: int, *, tokens: int = 12, first: int = 0):
    """The image with its p x p patch grid, and tokens first .. first+tokens-1 as a sequence (Chapter 9).

    image (H, W, 3) uint8 with H and W multiples of p. The tokens shown are
    outlined and numbered on the image.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    h, w = image.shape[:2]
    rows, cols = h // p, w // p
    shown = range(first, min(first + tokens, rows * cols))
    fig = plt.figure(figsize=(9, 6.2))
    ax = fig.add_axes((0.05, 0.3, 0.9, 0.65))
    ax.imshow(image)
    for i in range(1, rows):
        ax.axhline(i * p - 0.5, color="white", lw=0.6)
    for j in range(1, cols):
        ax.axvline(j * p - 0.5, color="white", lw=0.6)
    for n in shown:
        i, j = divmod(n, cols)
        ax.add_patch(Rectangle((j * p - 0.5, i * p - 0.5), p, p, fill=False, ec="yellow", lw=1.5))
        ax.text(j * p + p / 2, i * p + p / 2, str(n), color="yellow", ha="center", va="center", fontsize=7)
    ax.set_title(f"{h}x{w} image, {p}x{p} patches: {rows}x{cols} = {rows * cols} tokens", fontsize=10)
    ax.set_axis_off()
    width = 0.9 / max(len(shown), 1)
    for k, n in enumerate(shown):
        i, j = divmod(n, cols)
        sub = fig.add_axes((0.05 + k * width, 0.05, width * 0.92, 0.18))
        sub.imshow(image[i * p : (i + 1) * p, j * p : (j + 1) * p])
        sub.set_title(f"token {n}", fontsize=7)
        sub.set_axis_off()
    return fig


def attention_share(tokens: int, dim: int, mlp_ratio: int = 2) -> float:
    """Fraction of a block's matmul FLOPs spent in the N x N attention products (Chapter 9)."""
    f = block_flops(tokens, dim, mlp_ratio)
    return f["attention"] / sum(f.values())


def patch_halving(image: int, p: int, dim: int, mlp_ratio: int) -> dict[str, Any]:
    """What halving the patch from p to p / 2 does to one block's FLOPs, from `block_flops` (Chapter 9, 9b).

    {"tokens": (N, N'), "share": attention's share at each, "growth": the block's FLOPs N' over N,
    "crossover": the N at which attention costs as much as the rest, (2 + mlp_ratio) * dim}.
    """
    n0, n1 = num_patches(image, image, p), num_patches(image, image, p // 2)
    total = {n: sum(block_flops(n, dim, mlp_ratio).values()) for n in (n0, n1)}
    return {
        "tokens": (n0, n1),
        "share": (attention_share(n0, dim, mlp_ratio), attention_share(n1, dim, mlp_ratio)),
        "growth": total[n1] / total[n0],
        "crossover": (2 + mlp_ratio) * dim,
    }


def plot_learning_curves(results: dict, *, title: str = "test accuracy against training-set size"):
    """Test accuracy vs training images for each (data set, model) of the chapter's experiment (Chapter 9).

    results: {data set: {model: {training images (str): mean test accuracy}}}.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4))
    for data_name, models in results.items():
        for model, curve in models.items():
            n = [int(k) for k in curve]
            style = "-" if model == "CNN" else "--"
            ax.semilogx(n, list(curve.values()), style, marker="o", label=f"{model}, {data_name} digits")
    ax.set_xlabel("training images")
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0, 1)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", lw=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_maps(maps: dict, *, title: str = "receptive field: input pixels that one output depends on"):
    """Side-by-side (H, W) bool maps {label: map}, e.g. from `receptive_field` (Chapter 9)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(maps), figsize=(3 * len(maps), 3.3))
    for ax, (label, m) in zip(np.atleast_1d(axes), maps.items(), strict=True):
        ax.imshow(m, cmap="Greys", vmin=0, vmax=1)
        ax.set_title(f"{label}\n{int(m.sum())} of {m.size} pixels", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def little_data_sizes(smallest: int, largest: int) -> list[int]:
    """Training-set sizes smallest, 3 * smallest, 9 * smallest, ... up to largest (Chapter 9)."""
    sizes = []
    n = smallest
    while n <= largest:
        sizes.append(n)
        n *= 3
    return sizes


def cnn_vs_vit(
    datasets: dict[str, tuple[int, int]],
    train_sizes: list[int],
    *,
    seeds: list[int],
    test: int,
    epochs: int,
    batch: int,
    dim: int,
    lr: float = 3e-3,
    device="cpu",
) -> dict:
    """Train a SmallCNN and a ViT on the same small training sets; their test accuracies (Chapter 9).

    datasets: {name: (canvas, ViT patch)}, each made by `cudalearn.nn.datasets.shifted_digits`
    (canvas 8: the digits as they are; larger: shifted at random). Both
    models train with AdamW (weight decay 0.05) for `epochs` epochs.
    Returns {'accuracy': {name: {'CNN' | 'ViT': {str(training images):
    mean test accuracy over the seeds}}}, 'params': {'CNN' | 'ViT':
    parameters on the last data set}}.
    """
    out: dict = {}
    params = {}
    for name, (canvas, patch) in datasets.items():
        curves: dict = {"CNN": {}, "ViT": {}}
        for n in train_sizes:
            accs: dict = {"CNN": [], "ViT": []}
            for seed in seeds:
                data = digit_sets.shifted_digits(canvas=canvas, train=n, test=test, seed=seed, device=device)
                for model_name in accs:
                    torch.manual_seed(seed)
                    if model_name == "CNN":
                        model: nn.Module = SmallCNN(widths=(16, 32))
                    else:
                        model = ViT(image=canvas, patch=patch, dim=dim, depth=2, heads=4)
                    params[model_name] = parameters(model)
                    hist = fit_epochs(
                        model.to(device),
                        data,
                        epochs=epochs,
                        lr=lr,
                        batch=batch,
                        seed=seed,
                        optimizer="adamw",
                        weight_decay=0.05,
                    )
                    accs[model_name].append(hist.test_acc)
            for model_name, values in accs.items():
                curves[model_name][str(n)] = round(float(np.mean(values)), 4)
        out[name] = curves
    return {"accuracy": out, "params": params}


def inference(fn: Callable[[], object]) -> Callable[[], object]:
    """`fn` wrapped to run under `torch.no_grad()`, as an inference call is timed (Chapter 9)."""

    def run():
        with torch.no_grad():
            return fn()

    return run
