"""Guard zones around device arrays, so an out-of-bounds store shows on a GPU (all labs, the grader).

A GPU does not raise on a store past the end of an array: it overwrites
whatever lies beside it. The checks (`checks.run_kernel`) and the grader's
sandbox both hand a kernel each array argument as a view into a larger
buffer, GUARD elements of random bytes on each side, and compare those
zones after the launch. One size and one rule for both, so an overrun that
fails a lab's check also fails its grading. (The simulator and the tracer
raise on any out-of-bounds index themselves.)
"""

from __future__ import annotations

import os

import numpy as np

GUARD = 4096  # elements of random bytes on each side of an array


class Guarded:
    """A device copy of `host` between two guard zones: `view` for the kernel, then `overwritten()`.

    `cuda` is the package of the kernel that will get `view` (`numba_backend.cuda_of(kernel)`);
    by default numba.cuda, which compiles a notebook's own kernels.
    """

    def __init__(self, host: np.ndarray, cuda=None) -> None:
        if cuda is None:
            from numba import cuda

        host = np.ascontiguousarray(host)
        flat = np.empty(host.size + 2 * GUARD, dtype=host.dtype)
        zone = GUARD * flat.itemsize  # random bytes in the zones only: the middle is the array
        flat[:GUARD].view(np.uint8)[:] = np.frombuffer(os.urandom(zone), dtype=np.uint8)
        flat[GUARD + host.size :].view(np.uint8)[:] = np.frombuffer(os.urandom(zone), dtype=np.uint8)
        flat[GUARD : GUARD + host.size] = host.ravel()
        self.shape, self.size = host.shape, host.size
        self._zones = (flat[:GUARD].copy(), flat[GUARD + host.size :].copy())
        self.buffer = cuda.to_device(flat)
        self.view = self.buffer[GUARD : GUARD + host.size].reshape(host.shape)
        self._after: np.ndarray | None = None

    def _flat(self) -> np.ndarray:
        if self._after is None:
            self._after = self.buffer.copy_to_host()
        return self._after

    def overwritten(self) -> tuple[int, int]:
        """(elements changed before the start, elements changed past the end) of the array."""
        flat = self._flat()
        zones = (flat[:GUARD], flat[GUARD + self.size :])
        return tuple(
            int(
                (now.view(np.uint8).reshape(GUARD, -1) != then.view(np.uint8).reshape(GUARD, -1)).any(1).sum()
            )
            for now, then in zip(zones, self._zones, strict=True)
        )

    def result(self) -> np.ndarray:
        """The array as the kernel left it, on the host."""
        return self._flat()[GUARD : GUARD + self.size].reshape(self.shape)
