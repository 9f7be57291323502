"""Training on the course's data: one step, one loop, one history, one accuracy (Chapters 5, 7-9).

Every PyTorch chapter trains with softmax cross-entropy and the same step
(`train_step`: forward, loss, zero the gradients, backward, update), so one
loop drives them all: `fit` takes the mini-batches as index tensors, in
whatever order a chapter draws them (`random_batches`: with replacement,
the 2012 recipe of Chapter 7; `epoch_batches`: shuffled whole batches,
Chapters 8-9). `fit_steps` and `fit_epochs` are those two schedules with
their optimisers. `History` is what a training run records, for Chapter 5's
Numba networks as for the PyTorch ones; `accuracy` and `evaluate` score
logits and models.

torch is imported inside the functions: Chapter 5 records its Numba
networks' runs in a `History` without importing it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch
    from torch import nn

    from cudalearn.nn.datasets import Split

#: The 2012 recipe's weight decay (SGD with momentum 0.9), Chapter 7's default (Krizhevsky et al., 2012).
WEIGHT_DECAY_2012 = 5e-4
#: AdamW's decoupled weight decay unless one is given: torch.optim.AdamW's default (Chapters 9, 11).
ADAMW_WEIGHT_DECAY = 0.01


@dataclass
class History:
    """What a training run recorded: losses per step and per epoch, accuracies, wall time (Chapters 5, 8-9).

    `train_accuracy` and `test_accuracy` hold one entry per evaluation
    (after each epoch in Chapter 5, once at the end in `fit_epochs`);
    `train_loss` is the final training loss when it was measured.
    """

    name: str = ""
    step_loss: list[float] = field(default_factory=list)
    epoch_loss: list[float] = field(default_factory=list)
    train_accuracy: list[float] = field(default_factory=list)
    test_accuracy: list[float] = field(default_factory=list)
    seconds: float = 0.0
    train_loss: float = float("nan")

    @property
    def train_acc(self) -> float:
        """The last training accuracy measured (nan if none)."""
        return self.train_accuracy[-1] if self.train_accuracy else float("nan")

    @property
    def test_acc(self) -> float:
        """The last test accuracy measured (nan if none)."""
        return self.test_accuracy[-1] if self.test_accuracy else float("nan")

    def as_dict(self) -> dict:
        """Plain numbers, for printing and for the reference data (Chapter 8's stored runs)."""
        return {
            "epoch_loss": [round(v, 5) for v in self.epoch_loss],
            "train_loss": round(self.train_loss, 5),
            "train_acc": round(self.train_acc, 5),
            "test_acc": round(self.test_acc, 5),
        }


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of rows whose largest logit is at the label: logits (n, classes), labels (n,) (Chapter 5)."""
    return float(np.mean(np.argmax(logits, axis=1) == labels))


def evaluate(
    net: nn.Module, X: torch.Tensor, y: torch.Tensor, batch: int = 1024, *, keep_mode: bool = False
) -> tuple[float, float]:
    """(mean cross-entropy, accuracy) of `net` in eval mode on X (n, ...), y (n,) (Chapters 7-9).

    The rows are moved to the model's device `batch` at a time (X may stay
    on the CPU). The model is left in eval mode, or with `keep_mode` put
    back in the mode it was in.
    """
    import torch
    import torch.nn.functional as F

    device = next(net.parameters()).device
    was_training = net.training
    net.eval()
    loss, correct = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(X), batch):
            logits = net(X[i : i + batch].to(device))
            labels = y[i : i + batch].to(device)
            loss += F.cross_entropy(logits, labels, reduction="sum").item()
            correct += (logits.argmax(1) == labels).sum().item()
    if keep_mode:
        net.train(was_training)
    return loss / len(X), correct / len(X)


def model_accuracy(net: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 512) -> float:
    """Fraction of samples whose largest logit is the label, in eval mode, the mode kept (Chapter 7)."""
    return evaluate(net, x, y, batch, keep_mode=True)[1]


def make_optimizer(
    params, name: str = "sgd", *, lr: float, weight_decay: float | None = None
) -> torch.optim.Optimizer:
    """'sgd' (SGD with momentum 0.9) or 'adamw' over `params` (Chapters 7-9, 11).

    Without `weight_decay`, SGD has none and AdamW decouples ADAMW_WEIGHT_DECAY
    (PyTorch's default): AdamW with no weight decay would be Adam.
    """
    import torch

    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=weight_decay or 0.0)
    if name == "adamw":
        decay = ADAMW_WEIGHT_DECAY if weight_decay is None else weight_decay
        return torch.optim.AdamW(params, lr=lr, weight_decay=decay)
    raise ValueError(f"optimizer must be 'sgd' or 'adamw', not {name!r}")


def sgd_2012(params, lr: float = 0.01) -> torch.optim.Optimizer:
    """The 2012 recipe: SGD with momentum 0.9 and weight decay 5e-4 (Chapter 7)."""
    return make_optimizer(params, "sgd", lr=lr, weight_decay=WEIGHT_DECAY_2012)


def train_step(net: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """One step: cross-entropy of net(x) against y, gradients, update; the detached loss (Chapters 5, 7-9)."""
    import torch.nn.functional as F

    loss = F.cross_entropy(net(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.detach()


def fit(
    net: nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    batches: Iterable,
    opt: torch.optim.Optimizer,
    *,
    target: float | None = None,
    window: int = 10,
) -> list[torch.Tensor]:
    """Train `net` in training mode, one `train_step` on X[idx], y[idx] per idx of `batches` (Chapters 7-9).

    Returns each step's loss (a detached tensor on the device: no wait for
    the GPU unless `target` is set). With `target`, training stops at the
    first step where the mean loss of the last `window` steps is at or below it.
    """
    net.train()
    losses = []
    for idx in batches:
        losses.append(train_step(net, opt, X[idx], y[idx]))
        if target is not None and len(losses) >= window:
            if sum(float(v) for v in losses[-window:]) / window <= target:
                break
    return losses


def random_batches(n: int, batch: int, steps: int, seed: int, device) -> Iterator[torch.Tensor]:
    """`steps` batches of `batch` row indices drawn with replacement from n rows, from `seed` (Chapter 7)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        yield torch.randint(0, n, (batch,), generator=gen).to(device)


def epoch_batches(n: int, batch: int, gen: torch.Generator, device) -> list[torch.Tensor]:
    """One epoch's batches: the n rows shuffled by `gen`, cut into whole batches (Chapters 8-9).

    Whole batches only (a last batch of one sample would break BatchNorm);
    one batch of all the rows if there are fewer than `batch`.
    """
    import torch

    order = torch.randperm(n, generator=gen).to(device)
    return [order[i : i + batch] for i in range(0, max(n - batch, 0) + 1, batch)]


def fit_steps(
    net: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    steps: int,
    batch: int,
    lr: float = 0.01,
    seed: int = 0,
    target: float | None = None,
    window: int = 10,
) -> list[float]:
    """Train with the 2012 recipe (SGD, momentum 0.9, weight decay 5e-4); the loss of every step.

    Mini-batches of `batch` samples are drawn from (x, y) with a seeded
    generator, on the device of the model's first parameter. With `target`,
    training stops at the first step where the mean loss of the last
    `window` steps is at or below it (Chapter 7).
    """
    device = next(net.parameters()).device
    x, y = x.to(device), y.to(device)
    batches = random_batches(x.shape[0], batch, steps, seed, device)
    losses = fit(net, x, y, batches, sgd_2012(net.parameters(), lr), target=target, window=window)
    return [float(v) for v in losses]


def fit_epochs(
    net: nn.Module,
    data: Split,
    *,
    epochs: int,
    lr: float,
    batch: int = 64,
    seed: int = 0,
    optimizer: str = "sgd",
    weight_decay: float | None = None,
) -> History:
    """Train `net` with cross-entropy on data.X_train, batches shuffled by `seed` (Chapters 8-9).

    optimizer 'sgd' (momentum 0.9) or 'adamw', with `make_optimizer`'s weight
    decay unless `weight_decay` is given. Returns the History: the mean
    loss of each epoch as seen during training, then the final training
    loss and accuracy and the test accuracy, measured in eval mode.
    """
    import torch

    opt = make_optimizer(net.parameters(), optimizer, lr=lr, weight_decay=weight_decay)
    X, y = data.X_train, data.y_train
    gen = torch.Generator().manual_seed(seed)
    hist = History()
    for _ in range(epochs):
        losses = fit(net, X, y, epoch_batches(len(X), batch, gen, X.device), opt)
        total = torch.zeros((), device=X.device)
        for v in losses:
            total += v
        hist.epoch_loss.append(total.item() / max(len(losses), 1))  # one device sync per epoch
    hist.train_loss, train_acc = evaluate(net, X, y)
    hist.train_accuracy.append(train_acc)
    hist.test_accuracy.append(evaluate(net, data.X_test, data.y_test)[1])
    return hist
