"""The data set of Chapter 5: scikit-learn's handwritten digits, expanded by augmentation written here.

`sklearn.datasets.load_digits()` ships inside scikit-learn (1797 images of
8 x 8 pixels, values 0-16, ten classes), so it works offline and on
Colab. One copy of 1797 images is far too small to keep a GPU busy, so
`load_digits_augmented` renders every original several times with a
random affine transform (rotation, scale, shear, shift) and pixel noise,
onto a `side` x `side` canvas by bilinear interpolation. It is
deterministic for a seed.

The split into training and test sets is made on the *originals*, before
augmentation: all copies of one original digit land on the same side, so
the test accuracy measures recognising digits the network never saw, not
recognising a shifted copy of a training image.

The PyTorch chapters read the same originals (`originals`, pixels in
[0, 1]) as tensors: `digits_upsampled` (Chapter 7: 32x32, standardised),
`digits_split` (Chapter 8: [-1, 1], one held-out test set) and
`shifted_digits` (Chapter 9: pasted at random places on a larger canvas),
the last two as a `Split`. The originals' pixels are the integers 0-16
scaled by a power of two, so every one of these scalings is exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

SOURCE_SIDE = 8  # load_digits images are 8 x 8
CLASSES = 10


@dataclass(frozen=True)
class Augment:
    """Ranges of the random transforms, in source pixels and degrees (Chapter 5)."""

    rotate_deg: float = 12.0  # uniform in [-r, r]
    scale: tuple[float, float] = (0.9, 1.1)
    shear: float = 0.15  # uniform in [-s, s]
    shift: float = 1.0  # source pixels, uniform in [-s, s] in each direction
    noise: float = 0.05  # standard deviation of Gaussian pixel noise, pixels in [0, 1]


@dataclass(frozen=True)
class DigitSet:
    """A train/test split of augmented digits (Chapter 5).

    X_*: (n, side * side) float32 in [0, 1], one flattened image a row;
    y_*: (n,) int32 labels 0-9; origin_*: (n,) int64, the index in
    load_digits() of the original each sample was rendered from.
    """

    X_train: np.ndarray
    y_train: np.ndarray
    origin_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    origin_test: np.ndarray
    side: int

    @property
    def features(self) -> int:
        """Input size of a network: pixels per image."""
        return self.side * self.side

    def __str__(self) -> str:
        n_orig = len(np.unique(self.origin_train)) + len(np.unique(self.origin_test))
        return (
            f"{len(self.y_train):,} training and {len(self.y_test):,} test images of "
            f"{self.side}x{self.side} pixels, rendered from {n_orig:,} original digits"
        )


def originals() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits: images (1797, 8, 8) float32 in [0, 1], labels (1797,) int32 (Ch. 5, 7-9)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)
    return images, digits.target.astype(np.int32)


def random_affine(n: int, rng: np.random.Generator, aug: Augment = Augment()) -> np.ndarray:
    """n random 2x3 affine maps (rotation, scale, shear, shift) as an (n, 2, 3) float64 array (Chapter 5).

    Each maps a point (x, y) of the output image, centred, to the point of
    the centred source image it samples: [x_src, y_src] = M[:, :2] @ [x, y] + M[:, 2].
    """
    theta = np.deg2rad(rng.uniform(-aug.rotate_deg, aug.rotate_deg, n))
    scale = rng.uniform(*aug.scale, n)
    shear = rng.uniform(-aug.shear, aug.shear, n)
    shift = rng.uniform(-aug.shift, aug.shift, (n, 2))
    cos, sin = np.cos(theta), np.sin(theta)
    M = np.empty((n, 2, 3))
    # rotation @ (vertical shear) / scale: the linear part of the output-to-source map
    M[:, 0, 0] = (cos - sin * shear) / scale
    M[:, 0, 1] = -sin / scale
    M[:, 1, 0] = (sin + cos * shear) / scale
    M[:, 1, 1] = cos / scale
    M[:, :, 2] = shift
    return M


def render(images: np.ndarray, maps: np.ndarray, side: int) -> np.ndarray:
    """Sample each 8x8 image through its affine map onto a side x side canvas, bilinearly (Chapter 5).

    images (n, 8, 8) float32, maps (n, 2, 3) from `random_affine` (or the
    identity), returns (n, side, side) float32. The canvas covers the same
    area as the source, so side = 16 doubles the resolution. Points that
    fall outside the source read zeros (the digits' background).
    """
    n = images.shape[0]
    src = images.shape[1]
    # output pixel centres, in source pixel units, centred on the image's middle
    grid = (np.arange(side) + 0.5) * (src / side) - src / 2
    gy, gx = np.meshgrid(grid, grid, indexing="ij")
    pts = np.stack([gx.ravel(), gy.ravel()])  # (2, side*side): x, y
    xy = maps[:, :, :2] @ pts + maps[:, :, 2:]  # (n, 2, side*side), centred source coordinates
    u = xy[:, 0] + src / 2 - 0.5  # source column, as an index
    v = xy[:, 1] + src / 2 - 0.5  # source row
    u0, v0 = np.floor(u).astype(np.int64), np.floor(v).astype(np.int64)
    fu, fv = (u - u0).astype(np.float32), (v - v0).astype(np.float32)
    padded = np.zeros((n, src + 2, src + 2), dtype=np.float32)  # one pixel of background around it
    padded[:, 1:-1, 1:-1] = images
    rows = np.arange(n)[:, None]

    def tap(dv, du):
        r = np.clip(v0 + dv + 1, 0, src + 1)
        c = np.clip(u0 + du + 1, 0, src + 1)
        return padded[rows, r, c]

    out = (
        tap(0, 0) * (1 - fu) * (1 - fv)
        + tap(0, 1) * fu * (1 - fv)
        + tap(1, 0) * (1 - fu) * fv
        + tap(1, 1) * fu * fv
    )
    return out.reshape(n, side, side).astype(np.float32)


def augment(
    images: np.ndarray,
    copies: int,
    side: int,
    rng: np.random.Generator,
    aug: Augment = Augment(),
    chunk: int = 4096,
) -> np.ndarray:
    """`copies` renderings of each image: copy 0 unchanged (only resized), the others transformed (Chapter 5).

    images (n, 8, 8) float32 in [0, 1]; returns (n * copies, side, side)
    float32 in [0, 1], the copies of image i at rows i*copies ... i*copies + copies - 1.
    """
    n = images.shape[0]
    src = np.repeat(images, copies, axis=0)
    maps = random_affine(n * copies, rng, aug)
    maps[::copies] = [[1, 0, 0], [0, 1, 0]]  # copy 0 of each image: the identity
    noise_sd = np.full(n * copies, aug.noise, dtype=np.float32)
    noise_sd[::copies] = 0.0
    out = np.empty((n * copies, side, side), dtype=np.float32)
    for s in range(0, n * copies, chunk):  # in chunks, to keep the temporary arrays small
        part = render(src[s : s + chunk], maps[s : s + chunk], side)
        part += rng.standard_normal(part.shape, dtype=np.float32) * noise_sd[s : s + chunk, None, None]
        out[s : s + chunk] = np.clip(part, 0.0, 1.0)
    return out


def load_digits_augmented(
    copies: int,
    *,
    side: int = 16,
    originals_used: int | None = None,
    test_fraction: float = 0.2,
    seed: int = 0,
    aug: Augment = Augment(),
) -> DigitSet:
    """The augmented digits, split by original: `copies` renderings of each original digit (Chapter 5).

    `originals_used` takes a random subset of the 1797 originals (for the
    simulator's small runs); `test_fraction` of them go to the test set
    with all their copies. The training rows are shuffled; the result is
    the same for the same arguments.
    """
    images, labels = originals()
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(labels))
    if originals_used is not None:
        order = order[:originals_used]
    n_test = max(1, round(test_fraction * len(order)))
    parts = {}
    for name, idx in (("test", np.sort(order[:n_test])), ("train", np.sort(order[n_test:]))):
        X = augment(images[idx], copies, side, rng, aug).reshape(len(idx) * copies, side * side)
        y = np.repeat(labels[idx], copies)
        origin = np.repeat(idx, copies)
        if name == "train":
            shuffle = rng.permutation(len(y))
            X, y, origin = X[shuffle], y[shuffle], origin[shuffle]
        parts[name] = (np.ascontiguousarray(X), y.astype(np.int32), origin.astype(np.int64))
    return DigitSet(*parts["train"], *parts["test"], side=side)


# The originals as PyTorch tensors (Chapters 7-9) -------------------------------------------------


@dataclass(frozen=True)
class Split:
    """A training and a test set on one device: X (n, ...) float32, y (n,) int64 (Chapters 8-9)."""

    X_train: torch.Tensor
    y_train: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor

    def to(self, device) -> Split:
        """The same split on `device`."""
        return Split(*(t.to(device) for t in (self.X_train, self.y_train, self.X_test, self.y_test)))


def digits_upsampled(image: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """scikit-learn's 1797 handwritten digits, upsampled from 8x8: images (1797, 1, image, image), labels.

    Pixels are scaled to mean 0 and standard deviation 1 over the data set (Chapter 7).
    """
    import torch
    import torch.nn.functional as F

    images, labels = originals()
    x = torch.from_numpy(images).unsqueeze(1)
    x = F.interpolate(x, size=(image, image), mode="bilinear", align_corners=False)
    x = (x - x.mean()) / x.std()
    return x.contiguous(), torch.from_numpy(labels.astype(np.int64))


def digits_split(*, test: int = 497, images: bool = False, seed: int = 0, device="cpu") -> Split:
    """scikit-learn's 8x8 digits in [-1, 1], shuffled once with `seed`; the last `test` images held out.

    X is (n, 64) float32, or (n, 1, 8, 8) with `images=True` (Chapter 8).
    """
    import torch

    pixels, labels = originals()
    X = torch.from_numpy(pixels.reshape(len(pixels), -1) * 2 - 1)
    if images:
        X = X.reshape(-1, 1, 8, 8)
    y = torch.from_numpy(labels.astype(np.int64))
    order = torch.randperm(len(X), generator=torch.Generator().manual_seed(seed))
    X, y = X[order], y[order]
    if not 0 < test < len(X):
        raise ValueError(f"test={test} must be between 1 and {len(X) - 1}")
    n = len(X) - test
    return Split(X[:n], y[:n], X[n:], y[n:]).to(device)


def shifted_digits(
    *, canvas: int = 16, train: int = 300, test: int = 500, seed: int = 0, device="cpu"
) -> Split:
    """The 8x8 digits pasted at random positions on a canvas x canvas background: (n, 1, canvas, canvas).

    The digits are shuffled with `seed`; the first `train` are the training
    set and the last `test` the test set, so no image is in both (scikit-
    learn's digits carry no writer ids: one person's digits can be in both
    sets). Pixels in [-1, 1], background -1 (Chapter 9).
    """
    import torch

    if canvas < 8:
        raise ValueError("the canvas must be at least 8 pixels wide")
    pixels, labels = originals()
    n = len(pixels)
    if train + test > n:
        raise ValueError(f"train + test = {train + test} is more than the {n} digits")
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    offsets = rng.integers(0, canvas - 8 + 1, size=(n, 2))
    shifted = np.full((n, 1, canvas, canvas), -1.0, dtype=np.float32)
    for k, idx in enumerate(order):
        r, c = offsets[k]
        shifted[k, 0, r : r + 8, c : c + 8] = pixels[idx] * 2 - 1
    X_t, y_t = torch.from_numpy(shifted), torch.from_numpy(labels[order].astype(np.int64))
    return Split(X_t[:train], y_t[:train], X_t[n - test :], y_t[n - test :]).to(device)
