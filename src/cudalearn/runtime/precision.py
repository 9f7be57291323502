"""True FP32 in PyTorch: TF32 off in matrix products and convolutions, and back as it was (Chapters 2-9).

The course's kernels compute in FP32; PyTorch, on an Ampere or later GPU, may
compute an FP32 matrix product or convolution in TF32 (10-bit mantissa)
unless told not to. `fp32()` turns TF32 off for a block and restores the
previous settings after it; `set_fp32()` turns it off for the rest of the
session and returns what was set before, for `restore`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


def settings() -> dict:
    """PyTorch's three TF32 switches as they are now."""
    import torch

    return {
        "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }


def restore(before: dict) -> None:
    """Put back the settings `settings()` (or `set_fp32()`) returned."""
    import torch

    torch.set_float32_matmul_precision(before["float32_matmul_precision"])
    torch.backends.cuda.matmul.allow_tf32 = before["matmul_allow_tf32"]
    torch.backends.cudnn.allow_tf32 = before["cudnn_allow_tf32"]


def set_fp32() -> dict:
    """TF32 off in matrix products (cuBLAS) and convolutions (cuDNN) from now on; the settings before."""
    import torch

    before = settings()
    torch.set_float32_matmul_precision("highest")  # also sets matmul.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return before


def tensor_core_16bit(on_gpu: bool):
    """The 16-bit format of this GPU's tensor cores: bfloat16 from sm_80, float16 before (Chapters 7, 9).

    Off a GPU, bfloat16 (the CPU runs both). Not `torch.cuda.is_bf16_supported()`: it counts software
    emulation as support, so it says True on a T4 (sm_75), whose tensor cores and cuDNN convolutions
    have no bfloat16.
    """
    import torch

    if on_gpu and torch.cuda.get_device_capability()[0] < 8:
        return torch.float16
    return torch.bfloat16


@contextlib.contextmanager
def fp32() -> Iterator[None]:
    """TF32 off inside the block, the previous settings back after it (even when the block raises)."""
    before = set_fp32()
    try:
        yield
    finally:
        restore(before)
