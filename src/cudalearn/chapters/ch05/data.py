"""Chapter 5's digits on the device, shuffled per epoch and cut into batches: Numba arrays or tensors.

`NumbaData` (the Numba networks' `data_class`) and `TorchData` (PyTorch's)
hold a `DigitSet` on the device with the same interface: `shuffle` gathers
the training rows of an epoch in a given order, on the device; `batch`
gives the views of one step; `losses`, `host` and `synchronize` keep the
per-step losses on the device until the epoch ends.
"""

from __future__ import annotations

import numpy as np

from cudalearn.chapters.ch05.kernels import elementwise as ew
from cudalearn.nn.datasets import DigitSet
from cudalearn.runtime import device
from cudalearn.runtime.numba_backend import cuda
from cudalearn.runtime.sizes import size


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
        self._views: dict[tuple[int, int], tuple] = {}  # (s, batch): the views, made once

    def shuffle(self, perm: np.ndarray) -> None:
        """Gather the training rows in the order `perm` (int32) into the epoch buffers, on the device."""
        d_perm = cuda.to_device(perm)
        ew.gather_rows[ew.launch_2d(self.X_epoch.shape, block_2d())](self.X_train, d_perm, self.X_epoch)
        ew.gather[ew.launch_1d(self.n_train)](self.y_train, d_perm, self.y_epoch)

    def batch(self, s: int, batch: int):
        """(X, y) of step s of the epoch: views of rows s*batch ... (s+1)*batch - 1.

        `shuffle` writes the epoch buffers in place, so each step's views are made once (slicing a
        Numba device array costs tens of microseconds of host time) and are the same objects every
        epoch: what lets `PreparedMLP` prepare its launches once per step of an epoch.
        """
        views = self._views.get((s, batch))
        if views is None:
            views = self._views[s, batch] = (
                self.X_epoch[s * batch : (s + 1) * batch],
                self.y_epoch[s * batch : (s + 1) * batch],
            )
        return views

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
