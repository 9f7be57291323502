"""The shallow network of Chapter 5, trained from scratch with Numba CUDA kernels: naive and fused.

A multilayer perceptron with layer sizes (d, h1, ..., c): hidden layers
Z = A_prev @ W + b, A = relu(Z); the last layer gives the logits; the loss
is the softmax cross-entropy averaged over the batch; training is plain
mini-batch SGD. Weights W are (inputs, outputs), biases (outputs,), all
float32, in the layout of `init_params`.

Three implementations of exactly that math, with the same interface
(`step`, `logits`, `params`), so one training loop (`train`) drives them:

* `NaiveMLP`: one thread per output, global memory only, one kernel per
  operation (matmul, bias, ReLU, ...), W read as stored in the backward pass;
* `FusedMLP`: register-tiled kernels, bias and ReLU fused into the forward
  product, ReLU's gradient into the backward one, the bias gradient into
  the weight gradient, a pre-transposed copy of every W kept up to date by
  a fused SGD kernel;
* `TorchMLP`: the same network in PyTorch (FP32, TF32 off), the reference.

`time_training`, `time_batch_sizes` and `layer_candidates` build what the
chapter and `scripts/bench_fusion.py` time; `goal_lines` judges the goals.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import cudalearn.kernels  # noqa: F401  (runs setup() before numba.cuda is imported)

# isort: split
from numba import cuda

from cudalearn import device
from cudalearn.datasets import DigitSet
from cudalearn.kernels import elementwise as ew
from cudalearn.kernels import fused
from cudalearn.kernels.matmul import matmul_naive
from cudalearn.sizes import size

#: The learning rate of the chapter's runs (plain SGD, batch mean loss).
LR = 0.3


# Parameters ------------------------------------------------------------------------------------


def init_params(sizes: tuple[int, ...] | list[int], seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """He-initialised [(W (d_in, d_out), b (d_out,)), ...] float32 for sizes (d, h1, ..., c) (Chapter 5)."""
    rng = np.random.default_rng(seed)
    params = []
    for d_in, d_out in zip(sizes[:-1], sizes[1:], strict=True):
        W = (rng.standard_normal((d_in, d_out)) * math.sqrt(2.0 / d_in)).astype(np.float32)
        params.append((W, np.zeros(d_out, dtype=np.float32)))
    return params


def layer_sizes(features: int, hidden: int, layers: int = 2, classes: int = 10) -> tuple[int, ...]:
    """(features, hidden, ..., hidden, classes) with `layers` hidden layers (Chapter 5)."""
    return (features, *([hidden] * layers), classes)


# Counting launches -----------------------------------------------------------------------------


@dataclass
class Launches:
    """The Numba kernel launches seen inside a `count_launches()` block: their number and names."""

    names: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.names)

    def __str__(self) -> str:
        return f"{self.count} launches: " + ", ".join(self.names)


@contextmanager
def count_launches() -> Iterator[Launches]:
    """Count every Numba kernel launch made inside the `with` block, in both modes (Chapter 5).

    Counted by `cudalearn.counting.observe`: device functions and PyTorch
    work are not launches of Numba kernels and are not counted.
    """
    from cudalearn import counting

    with counting.observe() as seen:
        yield Launches(seen.launches)  # the same list: it fills as the block runs


def quiet_small_grids() -> None:
    """Turn off Numba's low-occupancy warning in this process: Chapter 5's small grids are meant (Chapter 5).

    Numba warns when a launch has fewer than 128 blocks. The network's
    10-logit layer, the loss kernel on one row a thread, and the host-cost
    timings on one block launch such grids on purpose; the chapter measures
    what they cost instead of printing a warning for each.
    """
    import os

    from numba.cuda.core import config

    os.environ["NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS"] = "0"  # survives a reload of Numba's config
    config.CUDA_LOW_OCCUPANCY_WARNINGS = 0


@contextmanager
def _quiet_grids():
    """Silence Numba's small-grid performance warning (the last layer has 10 outputs) (Chapter 5)."""
    with warnings.catch_warnings():
        # by message: numba-cuda 0.30 raises its own copy of the warning class (numba.cuda.core.errors),
        # and on a GPU the message starts with colour codes
        warnings.filterwarnings("ignore", message=".*Grid size .* under-utilization")
        yield


# Data on the device ----------------------------------------------------------------------------


class NumbaData:
    """A DigitSet on the device, with a per-epoch shuffled copy of the training set (Chapter 5)."""

    def __init__(self, data: DigitSet):
        self.n_train, self.features = data.X_train.shape
        self.X_train = cuda.to_device(data.X_train)
        self.y_train = cuda.to_device(data.y_train)
        self.X_test = cuda.to_device(data.X_test)
        self.y_train_host, self.y_test_host = data.y_train, data.y_test
        self.X_epoch = cuda.device_array_like(self.X_train)
        self.y_epoch = cuda.device_array_like(self.y_train)

    def shuffle(self, perm: np.ndarray) -> None:
        """Gather the training rows in the order `perm` (int32) into the epoch buffers, on the device."""
        d_perm = cuda.to_device(perm)
        ew.gather_rows[ew.launch_2d(self.X_epoch.shape, block_2d())](self.X_train, d_perm, self.X_epoch)
        ew.gather[ew.launch_1d(self.n_train)](self.y_train, d_perm, self.y_epoch)

    def batch(self, s: int, batch: int):
        """(X, y) of step s of the epoch: views of rows s*batch ... (s+1)*batch - 1."""
        return self.X_epoch[s * batch : (s + 1) * batch], self.y_epoch[s * batch : (s + 1) * batch]

    def losses(self, n: int):
        """A zeroed device buffer for n per-step losses."""
        return cuda.to_device(np.zeros(n, dtype=np.float32))

    @staticmethod
    def host(buffer) -> np.ndarray:
        """A buffer (losses, logits) as a host array; waits for the GPU."""
        return buffer.copy_to_host()

    @staticmethod
    def synchronize() -> None:
        """Wait for all queued kernels."""
        cuda.synchronize()


class TorchData:
    """A DigitSet as PyTorch tensors on `cudalearn.torch_device()`, shuffled per epoch (Chapter 5)."""

    def __init__(self, data: DigitSet):
        import torch

        dev = device.torch_device()
        self.n_train, self.features = data.X_train.shape
        self.X_train = torch.from_numpy(data.X_train).to(dev)
        self.y_train = torch.from_numpy(data.y_train.astype(np.int64)).to(dev)
        self.X_test = torch.from_numpy(data.X_test).to(dev)
        self.y_train_host, self.y_test_host = data.y_train, data.y_test
        self.X_epoch, self.y_epoch = self.X_train, self.y_train

    def shuffle(self, perm: np.ndarray) -> None:
        """Gather the training rows in the order `perm` into new epoch tensors, on the device."""
        import torch

        idx = torch.from_numpy(perm.astype(np.int64)).to(self.X_train.device)
        self.X_epoch, self.y_epoch = self.X_train[idx], self.y_train[idx]

    def batch(self, s: int, batch: int):
        """(X, y) of step s of the epoch: views of rows s*batch ... (s+1)*batch - 1."""
        return self.X_epoch[s * batch : (s + 1) * batch], self.y_epoch[s * batch : (s + 1) * batch]

    def losses(self, n: int):
        """A zeroed tensor for n per-step losses."""
        import torch

        return torch.zeros(n, device=self.X_train.device)

    @staticmethod
    def host(buffer) -> np.ndarray:
        """A tensor as a host array; waits for the GPU."""
        return buffer.detach().cpu().numpy().copy()  # a copy: on the CPU .numpy() shares memory

    @staticmethod
    def synchronize() -> None:
        """Wait for all queued GPU work."""
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()


def block_2d() -> tuple[int, int]:
    """Block of the 2-D elementwise launches: (32, 8) on a GPU, smaller under the simulator (Chapter 5)."""
    return (size("ch5.ew_block_x"), size("ch5.ew_block_y"))


# The networks ----------------------------------------------------------------------------------


class _NumbaMLP:
    """What the two Numba networks share: parameters on the device, buffers, inference (Chapter 5)."""

    data_class = NumbaData

    def __init__(self, params, batch: int, lr: float):
        self.sizes = (params[0][0].shape[0], *(W.shape[1] for W, _ in params))
        self.layers = len(params)
        self.batch, self.lr = batch, np.float32(lr)
        self.inv_batch = np.float32(1.0 / batch)
        self.W = [cuda.to_device(W) for W, _ in params]
        self.b = [cuda.to_device(b) for _, b in params]
        self.dW = [cuda.device_array_like(W) for W in self.W]
        self.db = [cuda.device_array_like(b) for b in self.b]
        out = self.sizes[1:]
        self.A = [cuda.device_array((batch, n), dtype=np.float32) for n in out]  # A[l]: output of layer l
        self.dZ = [cuda.device_array((batch, n), dtype=np.float32) for n in out]  # dLoss/dZ of layer l

    def params(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """[(W, b), ...] copied to the host."""
        return [(W.copy_to_host(), b.copy_to_host()) for W, b in zip(self.W, self.b, strict=True)]

    def logits(self, X) -> np.ndarray:
        """Logits (n, classes) of device rows X (n, d), computed `batch` rows at a time."""
        out = np.empty((X.shape[0], self.sizes[-1]), dtype=np.float32)
        with _quiet_grids():
            for s in range(0, X.shape[0], self.batch):
                out[s : s + self.batch] = self.forward(X[s : s + self.batch]).copy_to_host()
        return out


class NaiveMLP(_NumbaMLP):
    """The naive network: one thread per output, global memory only, one kernel per operation (Chapter 5)."""

    name = "naive"

    def __init__(self, params, batch: int, lr: float):
        super().__init__(params, batch, lr)
        self.Z = [cuda.device_array((batch, n), dtype=np.float32) for n in self.sizes[1:]]
        self.dA = [cuda.device_array((batch, n), dtype=np.float32) for n in self.sizes[1:]]
        self.mm_block = (size("ch5.naive_block"), size("ch5.naive_block"))

    def _mm(self, m: int, n: int):
        bx, by = self.mm_block
        return (math.ceil(n / bx), math.ceil(m / by)), self.mm_block

    def forward(self, X):
        """Logits of X (m, d), m <= batch: matmul, then bias, then ReLU, each its own kernel."""
        m = X.shape[0]
        A_prev = X
        for layer in range(self.layers):
            Z, A = self.Z[layer][:m], self.A[layer][:m]
            ew_launch = ew.launch_2d(Z.shape, block_2d())
            matmul_naive[self._mm(m, Z.shape[1])](A_prev, self.W[layer], Z)
            ew.add_bias[ew_launch](Z, self.b[layer], Z)
            if layer < self.layers - 1:
                ew.relu[ew_launch](Z, A)
                A_prev = A
            else:
                A_prev = Z
        return A_prev

    def step(self, X, y, losses, s: int) -> None:
        """One SGD step on the batch (X (batch, d), y (batch,) int32); adds its loss to losses[s]."""
        L = self.layers
        logits = self.forward(X)
        ew.softmax_xent[ew.launch_1d(self.batch)](logits, y, self.dZ[L - 1], losses, s, self.inv_batch)
        for layer in range(L - 1, -1, -1):
            A_prev = X if layer == 0 else self.A[layer - 1]
            dZ = self.dZ[layer]
            W, dW = self.W[layer], self.dW[layer]
            matmul_at_naive = fused.matmul_at_naive
            matmul_at_naive[self._mm(W.shape[0], W.shape[1])](A_prev, dZ, dW)  # dW = A_prev.T @ dZ
            ew.bias_grad[ew.launch_1d(W.shape[1])](dZ, self.db[layer])
            if layer > 0:
                dA = self.dA[layer - 1]
                fused.matmul_bt_naive[self._mm(*dA.shape)](dZ, W, dA)  # dA = dZ @ W.T, W as stored
                ew.relu_backward[ew.launch_2d(dA.shape, block_2d())](dA, A_prev, self.dZ[layer - 1])
        for layer in range(L):
            W = self.W[layer]
            ew.sgd_update_2d[ew.launch_2d(W.shape, block_2d())](W, self.dW[layer], self.lr)
            ew.sgd_update[ew.launch_1d(W.shape[1])](self.b[layer], self.db[layer], self.lr)


class FusedMLP(_NumbaMLP):
    """The optimised network: register-tiled fused kernels and pre-transposed weights (Chapter 5)."""

    name = "fused"

    def __init__(self, params, batch: int, lr: float, tiles: fused.Tiles | None = None):
        super().__init__(params, batch, lr)
        self.tiles = tiles or fused.tiles_for_mode()
        self.k = fused.blocked(self.tiles)
        self.WT = [cuda.to_device(np.ascontiguousarray(W.T)) for W, _ in params]  # W.T, kept up to date

    def forward(self, X):
        """Logits of X (m, d), m <= batch: one fused kernel per layer (matmul, bias, ReLU)."""
        m = X.shape[0]
        A_prev = X
        for layer in range(self.layers):
            A = self.A[layer][:m]
            relu = int(layer < self.layers - 1)
            self.k["linear_forward"][self.tiles.launch(*A.shape)](
                A_prev, self.W[layer], self.b[layer], A, relu
            )
            A_prev = A
        return A_prev

    def step(self, X, y, losses, s: int) -> None:
        """One SGD step on the batch (X (batch, d), y (batch,) int32); adds its loss to losses[s]."""
        L, k, tiles = self.layers, self.k, self.tiles
        logits = self.forward(X)
        ew.softmax_xent[ew.launch_1d(self.batch)](logits, y, self.dZ[L - 1], losses, s, self.inv_batch)
        for layer in range(L - 1, -1, -1):
            A_prev = X if layer == 0 else self.A[layer - 1]
            dZ, W = self.dZ[layer], self.W[layer]
            # dW = A_prev.T @ dZ and db = sum of dZ's rows, in one launch
            k["linear_backward_weight"][tiles.launch(*W.shape)](A_prev, dZ, self.dW[layer], self.db[layer])
            if layer > 0:
                # dZ_prev = (dZ @ W.T) * (A_prev > 0), reading the pre-transposed WT row by row
                dZ_prev = self.dZ[layer - 1]
                k["linear_backward_input"][tiles.launch(*dZ_prev.shape)](dZ, self.WT[layer], A_prev, dZ_prev)
        for layer in range(L):
            W = self.W[layer]
            k["sgd_transpose"][tiles.sgd_launch(*W.shape)](
                W, self.dW[layer], self.WT[layer], self.b[layer], self.db[layer], self.lr
            )


def torch_model(params):
    """An nn.Sequential with the same layers and weights, on `cudalearn.torch_device()` (Chapter 5).

    nn.Linear stores its weight as (outputs, inputs): it gets W.T.
    """
    import torch

    layers: list[torch.nn.Module] = []
    for i, (W, b) in enumerate(params):
        lin = torch.nn.Linear(*W.shape)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(np.ascontiguousarray(W.T)))
            lin.bias.copy_(torch.from_numpy(b))
        layers.append(lin)
        if i < len(params) - 1:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).to(device.torch_device())


def fp32_only() -> None:
    """Switch TF32 off in PyTorch's matrix products and convolutions: true FP32, as ours (Chapter 5)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


class TorchMLP:
    """The same network in PyTorch: nn.Linear, F.cross_entropy, optim.SGD; FP32, TF32 off (Chapter 5)."""

    name = "torch"
    data_class = TorchData

    def __init__(self, params, batch: int, lr: float):
        import torch

        fp32_only()
        self.batch, self.lr = batch, lr
        self.model = torch_model(params)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr)

    def step(self, X, y, losses, s: int) -> None:
        """One SGD step on the batch (X (batch, d), y (batch,) int64); stores its loss in losses[s]."""
        import torch.nn.functional as F

        loss = F.cross_entropy(self.model(X), y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        losses[s] = loss.detach()

    def logits(self, X) -> np.ndarray:
        """Logits (n, classes) of rows X (n, d), computed `batch` rows at a time."""
        import torch

        with torch.no_grad():
            parts = [self.model(X[s : s + self.batch]) for s in range(0, X.shape[0], self.batch)]
            return torch.cat(parts).cpu().numpy()

    def params(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """[(W (inputs, outputs), b), ...] copied to the host, in the Numba networks' layout."""
        lins = [m for m in self.model if hasattr(m, "weight")]
        return [
            (m.weight.detach().cpu().numpy().T.copy(), m.bias.detach().cpu().numpy().copy()) for m in lins
        ]


# Training --------------------------------------------------------------------------------------


@dataclass
class History:
    """What `train` records: per-step and per-epoch losses, accuracies, wall time (Chapter 5)."""

    name: str
    step_loss: list[float] = field(default_factory=list)
    epoch_loss: list[float] = field(default_factory=list)
    train_accuracy: list[float] = field(default_factory=list)
    test_accuracy: list[float] = field(default_factory=list)
    seconds: float = 0.0


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of rows whose largest logit is at the label (Chapter 5)."""
    return float(np.mean(np.argmax(logits, axis=1) == labels))


def permutations(n: int, epochs: int, seed: int = 0) -> list[np.ndarray]:
    """The int32 row orders of `epochs` epochs: the same for every network trained with this seed."""
    rng = np.random.default_rng(seed)
    return [rng.permutation(n).astype(np.int32) for _ in range(epochs)]


def train(
    net,
    data,
    epochs: int,
    *,
    seed: int = 0,
    evaluate: bool = True,
    progress: bool = True,
    eval_rows: int | None = None,
) -> History:
    """Train `net` for `epochs` epochs of full batches; return its History (Chapter 5).

    `data` is a DigitSet, or the same already on the device (`net.data_class(data)`).
    Each epoch shuffles the training rows (the same orders for every
    network, from `seed`), runs `n_train // batch` steps, and copies the
    epoch's losses to the host once. With `evaluate`, the accuracy on the
    test set and on the first `eval_rows` training rows follows each epoch.
    A tqdm bar shows the steps and the last epoch's loss.
    """
    from tqdm.auto import tqdm

    dd = data if isinstance(data, net.data_class) else net.data_class(data)
    batch = net.batch
    steps = dd.n_train // batch
    if steps == 0:
        raise ValueError(f"batch {batch} is larger than the {dd.n_train} training rows")
    hist = History(net.name)
    losses = dd.losses(epochs * steps)
    eval_rows = dd.n_train if eval_rows is None else min(eval_rows, dd.n_train)
    t0 = time.perf_counter()
    bar = tqdm(total=epochs * steps, desc=f"{net.name} training", unit="step", disable=not progress)
    with _quiet_grids():
        for epoch, perm in enumerate(permutations(dd.n_train, epochs, seed)):
            dd.shuffle(perm)
            for s in range(steps):
                X, y = dd.batch(s, batch)
                net.step(X, y, losses, epoch * steps + s)
                bar.update(1)
            epoch_losses = dd.host(losses[epoch * steps : (epoch + 1) * steps])
            hist.step_loss += [float(v) for v in epoch_losses]
            hist.epoch_loss.append(float(np.mean(epoch_losses)))
            postfix = {"loss": f"{hist.epoch_loss[-1]:.4f}"}
            if evaluate:
                hist.test_accuracy.append(accuracy(net.logits(dd.X_test), dd.y_test_host))
                train_logits = net.logits(dd.X_train[:eval_rows])
                hist.train_accuracy.append(accuracy(train_logits, dd.y_train_host[:eval_rows]))
                postfix["test acc"] = f"{hist.test_accuracy[-1]:.3f}"
            bar.set_postfix(postfix)
    bar.close()
    dd.synchronize()
    hist.seconds = time.perf_counter() - t0
    return hist


def plot_history(histories: list[History], title: str = ""):
    """Loss per step and accuracy per epoch of one or more trainings, side by side (Chapter 5)."""
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 3.8))
    for h in histories:
        ax_loss.plot(np.arange(1, len(h.step_loss) + 1), h.step_loss, lw=1, label=h.name)
        epochs = np.arange(1, len(h.test_accuracy) + 1)
        if len(epochs):
            ax_acc.plot(epochs, h.test_accuracy, "o-", label=f"{h.name}: test")
        if h.train_accuracy:
            ax_acc.plot(epochs, h.train_accuracy, "s--", alpha=0.6, label=f"{h.name}: train")
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("training loss (batch mean)")
    ax_loss.set_yscale("log")
    ax_loss.legend()
    ax_acc.set_xlabel("epoch")
    ax_acc.set_ylabel("accuracy")
    ax_acc.legend()
    for ax in (ax_loss, ax_acc):
        ax.grid(True, lw=0.3)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


# What the chapter times ------------------------------------------------------------------------

IMPLEMENTATIONS: dict[str, type] = {"naive": NaiveMLP, "fused": FusedMLP, "torch": TorchMLP}


def time_training(
    data: DigitSet,
    sizes: tuple[int, ...],
    *,
    batch: int,
    lr: float,
    epochs: int,
    seed: int = 0,
    names: tuple[str, ...] = ("naive", "fused", "torch"),
) -> dict[str, Any]:
    """Seconds for `epochs` epochs of each implementation, after one warm-up epoch (Chapter 5).

    Every implementation starts from the same weights and sees the same
    batches. The warm-up epoch compiles the kernels and warms PyTorch up;
    then the GPU is synchronised, `epochs` epochs run, and the clock stops
    after a second synchronisation (one perf_counter interval: a whole
    training run is far longer than the clock's resolution). No evaluation
    runs inside the timed part. Returns JSON-ready figures: seconds, the
    per-epoch losses of the timed epochs, the test accuracy after them, and
    the kernel launches of one step of each Numba network.
    """
    params = init_params(sizes, seed)
    out: dict[str, Any] = {
        "sizes": list(sizes),
        "batch": batch,
        "lr": lr,
        "epochs": epochs,
        "samples": int(data.X_train.shape[0]),
        "steps_per_epoch": int(data.X_train.shape[0] // batch),
        "seconds": {},
        "epoch_loss": {},
        "test_accuracy": {},
        "launches_per_step": {},
    }
    uploaded: dict[type, Any] = {}
    for name in names:
        cls = IMPLEMENTATIONS[name]
        net = cls(params, batch, lr)
        if cls.data_class not in uploaded:  # one upload per kind of data, shared by naive and fused
            uploaded[cls.data_class] = cls.data_class(data)
        dd = uploaded[cls.data_class]
        train(net, dd, 1, seed=seed + 1, evaluate=False, progress=False)  # warm-up: compile, caches
        if name != "torch":
            X, y = dd.batch(0, batch)
            with count_launches() as launches, _quiet_grids():
                net.step(X, y, dd.losses(1), 0)
            out["launches_per_step"][name] = launches.count
        net = cls(params, batch, lr)  # the timed run starts from the initial weights again
        dd.synchronize()
        t0 = time.perf_counter()
        hist = train(net, dd, epochs, seed=seed, evaluate=False, progress=False)
        dd.synchronize()
        out["seconds"][name] = time.perf_counter() - t0
        out["epoch_loss"][name] = hist.epoch_loss
        out["test_accuracy"][name] = accuracy(net.logits(dd.X_test), dd.y_test_host)
    return out


def training_lines(training: dict[str, Any]) -> list[str]:
    """The end-to-end table of `time_training`'s figures: seconds, ratios, launches, accuracy (Chapter 5)."""
    sec = training["seconds"]
    head = ("seconds", "vs naive", "vs PyTorch", "launches/step", "test acc")
    lines = [f"{'':8s} {head[0]:>8s} {head[1]:>9s} {head[2]:>11s} {head[3]:>14s} {head[4]:>9s}"]
    for name in ("naive", "fused", "torch"):
        launches = str(training["launches_per_step"].get(name, "-"))
        lines.append(
            f"{name:8s} {sec[name]:8.3f} {sec['naive'] / sec[name]:8.2f}x {sec[name] / sec['torch']:10.2f}x "
            f"{launches:>14s} {training['test_accuracy'][name]:9.2%}"
        )
    return lines


def sweep_lines(sweep: dict[str, Any]) -> list[str]:
    """The batch sweep as a table: ms per step and us per sample of both networks (Chapter 5)."""
    lines = [f"{'batch':>6s} {'fused ms/step':>14s} {'PyTorch ms/step':>16s} {'fused us/sample':>16s}"]
    for b, f_ms, t_ms in zip(
        sweep["batches"], sweep["fused_ms_per_step"], sweep["torch_ms_per_step"], strict=True
    ):
        lines.append(f"{b:6d} {f_ms:14.3f} {t_ms:16.3f} {1e3 * f_ms / b:16.2f}")
    return lines


def time_batch_sizes(
    data: DigitSet,
    sizes: tuple[int, ...],
    batches: list[int],
    *,
    lr: float,
    steps: int,
    seed: int = 0,
    launches: int = 1000,
    repeats: int = 5,
) -> dict[str, Any]:
    """Milliseconds per training step of FusedMLP and TorchMLP at each batch size, and per launch (Chapter 5).

    Each point: after two warm-up steps, `repeats` runs of `steps` steps,
    each between two synchronisations; the median run's time per step (a
    host that is briefly busy elsewhere spoils one run, not the point).
    `launch_us` is the host time of one launch of an empty kernel (the mean
    of `launches`, queued without waiting): the floor under every step.
    """
    params = init_params(sizes, seed)
    out: dict[str, Any] = {"sizes": list(sizes), "batches": list(batches), "steps": steps}
    for cls in (FusedMLP, TorchMLP):
        dd = cls.data_class(data)
        dd.shuffle(permutations(dd.n_train, 1, seed)[0])
        per_epoch = dd.n_train
        per_step = []
        for batch in batches:
            net = cls(params, batch, lr)
            losses = dd.losses(steps + 2)
            runs = []
            with _quiet_grids():
                for s in range(2):
                    net.step(*dd.batch(s, batch), losses, s)
                for _ in range(repeats):
                    dd.synchronize()
                    t0 = time.perf_counter()
                    for s in range(steps):
                        net.step(*dd.batch(s % (per_epoch // batch), batch), losses, s + 2)
                    dd.synchronize()
                    runs.append((time.perf_counter() - t0) / steps * 1e3)
            per_step.append(float(np.median(runs)))
        out[f"{cls.name}_ms_per_step"] = per_step
    d = cuda.device_array(1, dtype=np.float32)
    with _quiet_grids():
        ew.empty_kernel[1, 32](d)
        cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(launches):
            ew.empty_kernel[1, 32](d)
        out["launch_us"] = (time.perf_counter() - t0) / launches * 1e6
        cuda.synchronize()
    return out


def _host_us(fn, calls: int) -> float:
    """Mean host microseconds of `calls` calls of fn(), after one warm-up call (Chapter 5)."""
    fn()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e6


def time_step_host(
    data: DigitSet,
    sizes: tuple[int, ...],
    *,
    batch: int,
    lr: float,
    steps: int,
    seed: int = 0,
    calls: int = 1000,
    repeats: int = 5,
) -> dict[str, Any]:
    """Where a FusedMLP step's time goes on the host: queueing, launches, slicing (Chapter 5).

    `steps` steps are queued with no synchronisation until the end (the
    run of median length of `repeats` runs is kept):
    'queue_ms_per_step' is the host's time per step, 'step_ms' the time per
    step until the GPU has finished them all, 'drain_ms' what the GPU still
    had to do after the host had queued the last step (near 0: the GPU was
    waiting for the host). Then the host cost of single calls:
    'launch_us_empty' (the empty kernel, one array), 'launch_us_forward'
    (`linear_forward` with its four arrays and a flag, on a one-block
    problem), 'slice_us' (one `NumbaData.batch`: two array views).
    """
    params = init_params(sizes, seed)
    dd = NumbaData(data)
    dd.shuffle(permutations(dd.n_train, 1, seed)[0])
    net = FusedMLP(params, batch, lr)
    losses = dd.losses(steps + 2)
    per_epoch = dd.n_train // batch
    out: dict[str, Any] = {"sizes": list(sizes), "batch": batch, "steps": steps, "calls": calls}
    with _quiet_grids():
        for s in range(2):
            net.step(*dd.batch(s, batch), losses, s)
        runs = []
        for _ in range(repeats):
            cuda.synchronize()
            t0 = time.perf_counter()
            for s in range(steps):
                net.step(*dd.batch(s % per_epoch, batch), losses, s + 2)
            t1 = time.perf_counter()
            cuda.synchronize()
            t2 = time.perf_counter()
            runs.append((t2 - t0, t1 - t0, t2 - t1))
        whole, queued, drain = sorted(runs)[len(runs) // 2]  # the run of median length
        out["queue_ms_per_step"] = queued / steps * 1e3
        out["step_ms"] = whole / steps * 1e3
        out["drain_ms"] = drain * 1e3
        with count_launches() as seen:
            net.step(*dd.batch(0, batch), losses, 0)
        out["launches_per_step"] = seen.count
        d = cuda.device_array(1, dtype=np.float32)
        out["launch_us_empty"] = _host_us(lambda: ew.empty_kernel[1, 32](d), calls)
        tiles = net.tiles
        X = cuda.to_device(np.zeros((tiles.bm, tiles.bk), np.float32))
        W = cuda.to_device(np.zeros((tiles.bk, tiles.bn), np.float32))
        b = cuda.to_device(np.zeros(tiles.bn, np.float32))
        Y = cuda.device_array((tiles.bm, tiles.bn), np.float32)
        forward = net.k["linear_forward"]
        launch = tiles.launch(tiles.bm, tiles.bn)  # one block
        out["launch_us_forward"] = _host_us(lambda: forward[launch](X, W, b, Y, 1), calls)
        out["slice_us"] = _host_us(lambda: dd.batch(1, batch), calls)
        cuda.synchronize()
    return out


def layer_candidates(m: int, k: int, n: int, seed: int = 0) -> dict[str, Any]:
    """The kernels of one hidden layer, ready to time: batch m, k inputs, n outputs (Chapter 5).

    Returns {'forward': {name: fn}, 'backward_input': {...},
    'backward_weight': {...}, 'flops': {part: FLOPs per call},
    'check': fn}. Each fn launches one candidate on arrays allocated here
    (PyTorch ones on `cudalearn.torch_device()`); check() runs every
    candidate once and raises AssertionError when one disagrees with NumPy.
    """
    import torch

    from cudalearn import checks

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((m, k), dtype=np.float32)
    W = (rng.standard_normal((k, n)) / math.sqrt(k)).astype(np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    dZ = rng.standard_normal((m, n), dtype=np.float32)
    A = np.maximum(X, 0)  # the previous layer's ReLU output: about half zeros
    d = {
        name: cuda.to_device(v)
        for name, v in dict(X=X, W=W, WT=np.ascontiguousarray(W.T), b=b, dZ=dZ, A=A).items()
    }
    Y, Z = cuda.device_array((m, n), np.float32), cuda.device_array((m, n), np.float32)
    dA, dXm = cuda.device_array((m, k), np.float32), cuda.device_array((m, k), np.float32)
    dW, db = cuda.device_array((k, n), np.float32), cuda.device_array(n, np.float32)
    dev = device.torch_device()
    t = {name: torch.from_numpy(v).to(dev) for name, v in dict(X=X, W=W, b=b, dZ=dZ, A=A).items()}
    tiles = fused.tiles_for_mode()
    kb = fused.blocked(tiles)
    kb_unpadded = fused.blocked(tiles, 0)
    tile = size("ch5.tile")
    _, linear_relu_tiled = fused.tiled(tile)
    nb = size("ch5.naive_block")

    def mm(rows, cols):
        return (math.ceil(cols / nb), math.ceil(rows / nb)), (nb, nb)

    ew_mn, ew_mk = ew.launch_2d((m, n), block_2d()), ew.launch_2d((m, k), block_2d())

    def naive_forward():
        matmul_naive[mm(m, n)](d["X"], d["W"], Z)
        ew.add_bias[ew_mn](Z, d["b"], Z)
        ew.relu[ew_mn](Z, Y)

    def naive_input(Wmat, kernel):
        def run():
            kernel[mm(m, k)](d["dZ"], Wmat, dA)
            ew.relu_backward[ew_mk](dA, d["A"], dXm)

        return run

    def naive_weight():
        fused.matmul_at_naive[mm(k, n)](d["X"], d["dZ"], dW)
        ew.bias_grad[ew.launch_1d(n)](d["dZ"], db)

    forward = {
        "naive: matmul, bias, ReLU (3 kernels)": naive_forward,
        "tiled, fused (1 output a thread)": lambda: linear_relu_tiled[fused.tiled_launch(m, n, tile)](
            d["X"], d["W"], d["b"], Y
        ),
        "register-tiled, fused": lambda: kb["linear_forward"][tiles.launch(m, n)](
            d["X"], d["W"], d["b"], Y, 1
        ),
        "PyTorch (cuBLAS + ReLU)": lambda: torch.relu(torch.addmm(t["b"], t["X"], t["W"])),
    }
    backward_input = {
        "naive, W as stored (2 kernels)": naive_input(d["W"], fused.matmul_bt_naive),
        "naive, W pre-transposed (2 kernels)": naive_input(d["WT"], matmul_naive),
        "register-tiled, WT, mask fused": lambda: kb["linear_backward_input"][tiles.launch(m, k)](
            d["dZ"], d["WT"], d["A"], dXm
        ),
        "PyTorch (cuBLAS + mask)": lambda: torch.mm(t["dZ"], t["W"].t()) * (t["A"] > 0),
    }
    backward_weight = {
        "naive: X.T @ dZ, then db (2 kernels)": naive_weight,
        "register-tiled, padded, db fused": lambda: kb["linear_backward_weight"][tiles.launch(k, n)](
            d["X"], d["dZ"], dW, db
        ),
        "register-tiled, no padding": lambda: kb_unpadded["linear_backward_weight"][tiles.launch(k, n)](
            d["X"], d["dZ"], dW, db
        ),
        "PyTorch (cuBLAS + sum)": lambda: (torch.mm(t["X"].t(), t["dZ"]), t["dZ"].sum(0)),
    }
    X64, W64, dZ64 = X.astype(np.float64), W.astype(np.float64), dZ.astype(np.float64)
    expected = {
        "forward": np.maximum(X64 @ W64 + b, 0).astype(np.float32),
        "backward_input": ((dZ64 @ W64.T) * (A > 0)).astype(np.float32),
        "backward_weight": (X64.T @ dZ64).astype(np.float32),
    }

    def blank(*arrays) -> None:
        """Fill device outputs with NaN, so that a candidate that writes nothing cannot pass."""
        for a in arrays:
            a.copy_to_device(np.full(a.shape, np.nan, dtype=np.float32))

    def check() -> None:
        tol = dict(rtol=1e-4, atol=1e-4 * math.sqrt(max(k, n, m)))
        for name, fn in forward.items():
            blank(Y)
            got = fn()
            got = got.cpu().numpy() if isinstance(got, torch.Tensor) else Y.copy_to_host()
            checks.check_close(got, expected["forward"], name=f"forward ({name})", **tol)
        for name, fn in backward_input.items():
            blank(dXm)
            got = fn()
            got = got.cpu().numpy() if isinstance(got, torch.Tensor) else dXm.copy_to_host()
            checks.check_close(got, expected["backward_input"], name=f"dZ_prev ({name})", **tol)
        for name, fn in backward_weight.items():
            blank(dW, db)
            got = fn()
            if isinstance(got, tuple):
                got_dW, got_db = (v.cpu().numpy() for v in got)
            else:
                got_dW, got_db = dW.copy_to_host(), db.copy_to_host()
            checks.check_close(got_dW, expected["backward_weight"], name=f"dW ({name})", **tol)
            checks.check_close(got_db, dZ.sum(0), name=f"db ({name})", **tol)

    return {
        "forward": forward,
        "backward_input": backward_input,
        "backward_weight": backward_weight,
        "flops": {
            "forward": 2 * m * k * n,
            "backward_input": 2 * m * n * k,
            "backward_weight": 2 * m * k * n,
        },
        "check": check,
    }


# The goals -------------------------------------------------------------------------------------

GOALS = {
    "fused_vs_naive": 3.0,  # the optimised network at least 3x faster than the naive one, end to end
    "fused_vs_torch": 2.0,  # and at most 2x slower than PyTorch
    "chain_vs_copy": 0.70,  # the fused elementwise chain above 70% of the copy bandwidth
}


def goal_lines(
    training: dict[str, Any] | None,
    chain_gbps: float | None,
    copy_gbps: float | None,
    source: str = "",
    chain_name: str = "",
) -> list[str]:
    """One verdict line per goal of the chapter, computed from one run's figures (Chapter 5).

    `training` is what `time_training` returns; the bandwidths are the
    fused chain's (the kernel named `chain_name`) and the copy's GB/s from
    the same run. A goal without figures says so; a missed goal says
    MISSED with its numbers.
    """
    lines = []
    sec = (training or {}).get("seconds", {})
    if {"naive", "fused"} <= sec.keys():
        r = sec["naive"] / sec["fused"]
        ok = r >= GOALS["fused_vs_naive"]
        lines.append(
            f"{'MET   ' if ok else 'MISSED'} optimised >= {GOALS['fused_vs_naive']:g}x faster than naive "
            f"end to end: {r:.2f}x ({sec['naive']:.2f} s vs {sec['fused']:.2f} s)"
        )
    else:
        lines.append("NO DATA optimised vs naive end to end: no GPU training times in this run")
    if {"fused", "torch"} <= sec.keys():
        r = sec["fused"] / sec["torch"]
        ok = r <= GOALS["fused_vs_torch"]
        lines.append(
            f"{'MET   ' if ok else 'MISSED'} optimised within {GOALS['fused_vs_torch']:g}x of PyTorch: "
            f"{r:.2f}x PyTorch's time ({sec['fused']:.2f} s vs {sec['torch']:.2f} s)"
        )
    else:
        lines.append("NO DATA optimised vs PyTorch: no GPU training times in this run")
    if chain_gbps and copy_gbps:
        r = chain_gbps / copy_gbps
        ok = r >= GOALS["chain_vs_copy"]
        lines.append(
            f"{'MET   ' if ok else 'MISSED'} fused elementwise chain >= {GOALS['chain_vs_copy']:.0%} of the "
            f"copy bandwidth: {r:.0%} ({chain_gbps:,.0f} GB/s vs {copy_gbps:,.0f} GB/s"
            f"{', ' + chain_name if chain_name else ''})"
        )
    else:
        lines.append("NO DATA fused chain vs copy bandwidth: no GPU bandwidths in this run")
    if source:
        lines = [f"{line} [{source}]" for line in lines]
    return lines
