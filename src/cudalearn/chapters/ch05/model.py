"""The shallow network of Chapter 5, trained from scratch with Numba CUDA kernels: naive, fused, tuned.

A multilayer perceptron with layer sizes (d, h1, ..., c): hidden layers
Z = A_prev @ W + b, A = relu(Z); the last layer gives the logits; the loss
is the softmax cross-entropy averaged over the batch; training is plain
mini-batch SGD. Weights W are (inputs, outputs), biases (outputs,), all
float32, in the layout of `init_params`.

Five implementations of exactly that math, with the same interface
(`step`, `logits`, `params`), so one training loop
(`cudalearn.chapters.ch05.training_loop.train`) drives them:

* `NaiveMLP`: one thread per output, global memory only, one kernel per
  operation (matmul, bias, ReLU, ...), W read as stored in the backward pass;
* `FusedMLP`: register-tiled kernels, bias and ReLU fused into the forward
  product, ReLU's gradient into the backward one, the bias gradient into
  the weight gradient, a pre-transposed copy of every W kept up to date by
  a fused SGD kernel;
* `PreparedMLP`: `FusedMLP`'s kernels and step, each launch's host work
  done once and replayed (`launch.prepared`);
* `TunedMLP`: `PreparedMLP` with faster products: 128-bit shared reads
  (`tuned.make_blocked_vec`) and small tiles for the 10-logit layer;
* `TorchMLP`: the same network in PyTorch (FP32, TF32 off), the reference.

Each network's data lives on the device in its `data_class`
(`cudalearn.chapters.ch05.data`); `train` records a `cudalearn.nn.training.History`.
What the chapter times (harnesses, kernel candidates, goals) is in
`cudalearn.chapters.ch05.bench`.
"""

from __future__ import annotations

import math

import numpy as np

from cudalearn.chapters.ch02.kernels.matmul import matmul_naive
from cudalearn.chapters.ch05.data import NumbaData, TorchData, block_2d
from cudalearn.chapters.ch05.grid_warnings import quiet_grids
from cudalearn.chapters.ch05.kernels import elementwise as ew
from cudalearn.chapters.ch05.kernels import linear
from cudalearn.chapters.ch05.kernels.blocked import blocked
from cudalearn.chapters.ch05.kernels.tiles import Tiles, tiles_for_mode, tuned_tiles_for_mode
from cudalearn.chapters.ch05.kernels.tuned import blocked_vec
from cudalearn.chapters.ch05.training_loop import train  # noqa: F401  (the book cites mlp.train)
from cudalearn.nn.training import train_step
from cudalearn.runtime import device, launch, precision
from cudalearn.runtime.counting import Launches, count_launches  # noqa: F401  (mlp.count_launches)
from cudalearn.runtime.numba_backend import cuda
from cudalearn.runtime.sizes import size

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

    def load_params(self, params) -> None:
        """Copy [(W, b), ...] into the network's device arrays (a fresh start; the arrays stay the same)."""
        for dW, db, (W, b) in zip(self.W, self.b, params, strict=True):
            dW.copy_to_device(W)
            db.copy_to_device(b)

    def logits(self, X) -> np.ndarray:
        """Logits (n, classes) of device rows X (n, d), computed `batch` rows at a time."""
        out = np.empty((X.shape[0], self.sizes[-1]), dtype=np.float32)
        with quiet_grids():
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
        return launch.grid_2d(m, n, self.mm_block)

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
        """One SGD step on a batch (X (batch, d), y (batch,) int32); adds its loss to losses[s]."""
        L = self.layers
        logits = self.forward(X)
        loss_grid = ew.launch_1d(self.batch)
        ew.softmax_xent[loss_grid](logits, y, self.dZ[L - 1], losses, s, self.inv_batch)
        for layer in range(L - 1, -1, -1):
            A_prev = X if layer == 0 else self.A[layer - 1]
            dZ = self.dZ[layer]
            W, dW = self.W[layer], self.dW[layer]
            matmul_at_naive = linear.matmul_at_naive
            matmul_at_naive[self._mm(W.shape[0], W.shape[1])](A_prev, dZ, dW)  # dW = A_prev.T @ dZ
            ew.bias_grad[ew.launch_1d(W.shape[1])](dZ, self.db[layer])
            if layer > 0:
                dA = self.dA[layer - 1]
                linear.matmul_bt_naive[self._mm(*dA.shape)](dZ, W, dA)  # dA = dZ @ W.T, W as stored
                ew.relu_backward[ew.launch_2d(dA.shape, block_2d())](dA, A_prev, self.dZ[layer - 1])
        for layer in range(L):
            W = self.W[layer]
            ew.sgd_update_2d[ew.launch_2d(W.shape, block_2d())](W, self.dW[layer], self.lr)
            ew.sgd_update[ew.launch_1d(W.shape[1])](self.b[layer], self.db[layer], self.lr)


class FusedMLP(_NumbaMLP):
    """The optimised network: register-tiled fused kernels and pre-transposed weights (Chapter 5)."""

    name = "fused"

    def __init__(self, params, batch: int, lr: float, tiles: Tiles | None = None):
        super().__init__(params, batch, lr)
        self.tiles = tiles or tiles_for_mode()
        self.k = blocked(self.tiles)
        self.WT = [cuda.to_device(np.ascontiguousarray(W.T)) for W, _ in params]  # W.T, kept up to date

    def load_params(self, params) -> None:
        """Copy [(W, b), ...] into the network's device arrays, W.T included (a fresh start, same arrays)."""
        super().load_params(params)
        for WT, (W, _) in zip(self.WT, params, strict=True):
            WT.copy_to_device(np.ascontiguousarray(W.T))

    def forward_launches(self, X) -> list:
        """The forward pass's launches on X (m, d), m <= batch: [(kernel, (grid, block), args)]."""
        m = X.shape[0]
        out = []
        A_prev = X
        for layer in range(self.layers):
            A = self.A[layer] if m == self.batch else self.A[layer][:m]  # a slice costs host time
            relu = int(layer < self.layers - 1)
            args = (A_prev, self.W[layer], self.b[layer], A, relu)
            out.append((*self.product("linear_forward", A.shape), args))
            A_prev = A
        return out

    def product(self, name: str, shape) -> tuple:
        """(kernel, (grid, block)) of the product `name` whose result has `shape` (TunedMLP overrides)."""
        return self.k[name], self.tiles.launch(*shape)

    def forward(self, X):
        """Logits of X (m, d), m <= batch: one fused kernel per layer (matmul, bias, ReLU)."""
        for kernel, config, args in self.forward_launches(X):
            kernel[config](*args)
        return args[3]

    def step_launches(self, X, y, losses, s: int) -> list:
        """One SGD step's launches, in order: [(kernel, (grid, block), args)]; `step` runs them.

        The loss kernel's loss buffer and step index are its arguments
        LOSS_BUFFER_ARG and LOSS_STEP_ARG.
        """
        L, k, tiles = self.layers, self.k, self.tiles
        out = self.forward_launches(X)
        logits = out[-1][2][3]
        out.append(
            (
                ew.softmax_xent,
                ew.launch_1d(self.batch),
                (logits, y, self.dZ[L - 1], losses, s, self.inv_batch),
            )
        )
        for layer in range(L - 1, -1, -1):
            A_prev = X if layer == 0 else self.A[layer - 1]
            dZ, W = self.dZ[layer], self.W[layer]
            # dW = A_prev.T @ dZ and db = sum of dZ's rows, in one launch
            out.append(
                (
                    *self.product("linear_backward_weight", W.shape),
                    (A_prev, dZ, self.dW[layer], self.db[layer]),
                )
            )
            if layer > 0:
                # dZ_prev = (dZ @ W.T) * (A_prev > 0), reading the pre-transposed WT row by row
                dZ_prev = self.dZ[layer - 1]
                out.append(
                    (
                        *self.product("linear_backward_input", dZ_prev.shape),
                        (dZ, self.WT[layer], A_prev, dZ_prev),
                    )
                )
        for layer in range(L):
            W = self.W[layer]
            args = (W, self.dW[layer], self.WT[layer], self.b[layer], self.db[layer], self.lr)
            out.append((k["sgd_transpose"], tiles.sgd_launch(*W.shape), args))
        return out

    #: Where the loss buffer and the step index are among `ew.softmax_xent`'s arguments
    #: (logits, y, dZ, losses, s, inv_batch).
    LOSS_BUFFER_ARG, LOSS_STEP_ARG = 3, 4

    def step(self, X, y, losses, s: int) -> None:
        """One SGD step on a batch (X (batch, d), y (batch,) int32); adds its loss to losses[s]."""
        for kernel, config, args in self.step_launches(X, y, losses, s):
            kernel[config](*args)


class PreparedMLP(FusedMLP):
    """FusedMLP's kernels and steps, each launch's host work done once (`launch.prepared`) (Chapter 5).

    A plain launch types and packs every argument again at every call (tens of microseconds of
    host time, more than these kernels take on the GPU at the chapter's sizes). Here the launches
    of a step are prepared the first time that step's batch views are seen (`NumbaData.batch`
    gives the same views every epoch) and replayed after that. Only the loss kernel's arguments
    change between calls: the step index at every step (`Prepared.set_scalar`), and the loss
    buffer when a new training run brings a new one (`Prepared.set_array`). The activations,
    gradients and weights are the same device arrays throughout, so the prepared launches stay
    valid.
    """

    name = "prepared"
    #: Plans kept at most (a plan keeps its batch views, and so their data set, alive): an epoch's steps
    #: fit many times over; a training run that brings a new data set starts the cache again.
    MAX_PLANS = 1024

    def __init__(self, params, batch: int, lr: float, tiles: Tiles | None = None):
        super().__init__(params, batch, lr, tiles)
        self._plans: dict[tuple[int, int], list] = {}  # (id X, id y): the step's prepared launches
        self._loss = self.layers  # the loss launch comes right after the forward pass's launches

    def step(self, X, y, losses, s: int) -> None:
        """As FusedMLP.step, replaying the launches prepared for these X and y arrays."""
        key = (id(X), id(y))  # each Prepared keeps its arrays alive, so these ids stay theirs
        plan = self._plans.get(key)
        if plan is None:
            if X.shape[0] != self.batch:
                raise ValueError(
                    f"PreparedMLP steps take full batches of {self.batch} rows, got {X.shape[0]}"
                )
            launches = self.step_launches(X, y, losses, s)
            if launches[self._loss][0] is not ew.softmax_xent:  # the arguments set below are its own
                raise RuntimeError(
                    f"launch {self._loss} of a step is not the loss kernel: update PreparedMLP"
                )
            if len(self._plans) >= self.MAX_PLANS:  # views of another data set: forget the old ones
                self._plans.clear()
            plan = self._plans[key] = [launch.prepared(k, *config, *args) for k, config, args in launches]
        loss = plan[self._loss]
        if loss.arguments[self.LOSS_BUFFER_ARG] is not losses:  # a new run's buffer: repack only it
            loss.set_array(self.LOSS_BUFFER_ARG, losses)
        loss.set_scalar(self.LOSS_STEP_ARG, s)
        for prepared in plan:
            prepared()


class TunedMLP(PreparedMLP):
    """PreparedMLP with Chapter 6's shared-memory reads in its products (deep dive 5b).

    The three products are `tuned.make_blocked_vec`'s: each thread's 4 x 4 outputs in groups of
    four, so a step along k reads them with 128-bit shared loads, and a tile's 32 steps written out.
    A product whose result has at most `tiles.SKINNY_COLS` columns (the 10 logits and their weight
    gradient) runs the package's kernels on small tiles of one output a thread instead
    (`tiles.SKINNY_TILES`). The same arguments, number of launches a step and results as FusedMLP
    (other kernels and grids for the products); the SGD kernel is FusedMLP's. `tiles`:
    (main, skinny, skinny_cols), `tiles.tuned_tiles_for_mode()` by default.
    """

    name = "tuned"

    def __init__(self, params, batch: int, lr: float, tiles: tuple | None = None):
        main, skinny, self.skinny_cols = tiles or tuned_tiles_for_mode()
        super().__init__(params, batch, lr, main)
        self.k = blocked_vec(main)
        self.skinny_tiles, self.skinny = skinny, blocked(skinny)

    def product(self, name: str, shape) -> tuple:
        """The 128-bit-read kernel, or the small-tile one for a result of <= skinny_cols columns."""
        if shape[1] <= self.skinny_cols:
            return self.skinny[name], self.skinny_tiles.launch(*shape)
        return self.k[name], self.tiles.launch(*shape)


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


class TorchMLP:
    """The same network in PyTorch: nn.Linear, F.cross_entropy, optim.SGD; FP32, TF32 off (Chapter 5).

    It computes in true FP32, as the Numba networks do, inside `training_loop.computing(net)`
    (`precision.fp32()`), which `train` and the timings of `bench.shallow_net`
    enter once per run, so no step pays for switching; PyTorch's TF32 settings
    are put back after it. `logits` enters it itself.
    """

    name = "torch"
    data_class = TorchData

    def __init__(self, params, batch: int, lr: float):
        import torch

        self.batch, self.lr = batch, lr
        self.model = torch_model(params)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr)

    def load_params(self, params) -> None:
        """Copy [(W, b), ...] into the model's layers (W as W.T), as `torch_model` does (a fresh start)."""
        import torch

        lins = [m for m in self.model if hasattr(m, "weight")]
        with torch.no_grad():
            for lin, (W, b) in zip(lins, params, strict=True):
                lin.weight.copy_(torch.from_numpy(np.ascontiguousarray(W.T)))
                lin.bias.copy_(torch.from_numpy(b))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=self.lr)

    def step(self, X, y, losses, s: int) -> None:
        """One SGD step on the batch (X (batch, d), y (batch,) int64); stores its loss in losses[s]."""
        losses[s] = train_step(self.model, self.opt, X, y)

    def logits(self, X) -> np.ndarray:
        """Logits (n, classes) of rows X (n, d), computed `batch` rows at a time."""
        import torch

        with torch.no_grad(), precision.fp32():
            parts = [self.model(X[s : s + self.batch]) for s in range(0, X.shape[0], self.batch)]
            return torch.cat(parts).cpu().numpy()

    def params(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """[(W (inputs, outputs), b), ...] copied to the host, in the Numba networks' layout."""
        lins = [m for m in self.model if hasattr(m, "weight")]
        return [
            (m.weight.detach().cpu().numpy().T.copy(), m.bias.detach().cpu().numpy().copy()) for m in lins
        ]
