"""Square float32 matrix-product operands on the host, the device and in PyTorch (Chapters 3-6 benchmarks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class MatmulOperands:
    """Square float32 operands on the device for Numba and PyTorch, and cuBLAS's FP32 product of them."""

    A: Any  # (n, n) float32 on the host
    B: Any
    dA: Any  # the same on the device, for Numba kernels; dC receives their product
    dB: Any
    dC: Any
    tA: Any  # the same as PyTorch tensors on cudalearn.torch_device(); tC receives their product
    tB: Any
    tC: Any
    expected: Any  # torch.matmul(tA, tB) in true FP32 (TF32 off), on the host


def matmul_operands(n: int, seed: int = 0) -> MatmulOperands:
    """Random (n, n) float32 A and B everywhere a benchmark needs them; the product with TF32 off."""
    import numpy as np
    import torch

    from cudalearn.runtime import device, precision
    from cudalearn.runtime.numba_backend import cuda

    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n), dtype=np.float32)
    B = rng.standard_normal((n, n), dtype=np.float32)
    dev = device.torch_device()
    tA, tB = torch.from_numpy(A).to(dev), torch.from_numpy(B).to(dev)
    tC = torch.empty((n, n), device=dev)
    with precision.fp32():  # true FP32, as the Numba kernels compute
        torch.matmul(tA, tB, out=tC)
    return MatmulOperands(
        A,
        B,
        cuda.to_device(A),
        cuda.to_device(B),
        cuda.device_array((n, n), dtype=np.float32),
        tA,
        tB,
        tC,
        tC.cpu().numpy(),
    )
