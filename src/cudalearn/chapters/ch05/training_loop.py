"""The training loop of Chapter 5's networks: shuffled epochs of full batches, one History a run.

`train` drives any of `cudalearn.chapters.ch05.model`'s networks through their common interface
(`step`, `logits`, `batch`, `name`, `data_class`); `permutations` gives every network the same row
orders, and `computing(net)` the context a network's steps run in. What the chapter times around
them is in `cudalearn.chapters.ch05.bench.shallow_net`.
"""

from __future__ import annotations

import time
from contextlib import nullcontext

import numpy as np

from cudalearn.chapters.ch05.data import TorchData
from cudalearn.chapters.ch05.grid_warnings import quiet_grids
from cudalearn.nn.training import History, accuracy
from cudalearn.runtime import precision


def permutations(n: int, epochs: int, seed: int = 0) -> list[np.ndarray]:
    """The int32 row orders of `epochs` epochs: the same for every network trained with this seed."""
    rng = np.random.default_rng(seed)
    return [rng.permutation(n).astype(np.int32) for _ in range(epochs)]


def computing(net):
    """The context `net`'s steps run in: `precision.fp32()` for the PyTorch network, else none (Chapter 5).

    `model.TorchMLP` is told apart by its `data_class`, TorchData (every Numba network's is NumbaData),
    so that the training loop needs none of the network classes.
    """
    return precision.fp32() if issubclass(net.data_class, TorchData) else nullcontext()


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
    with quiet_grids(), computing(net):
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
