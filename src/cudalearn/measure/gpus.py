"""Datasheet peaks of common GPUs, for the roofline of Chapter 1 and the fractions of later chapters.

Figures are NVIDIA's published dense (no sparsity) peaks for the SXM
versions of the data-centre parts; each entry cites its datasheet. They
are vendor claims, not measurements: the course's own measurements live in
the reference data and are always shown next to them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GPUSpec:
    """Peak FP32 (CUDA cores) and FP16 tensor-core TFLOP/s, memory and NVLink bandwidth of one GPU.

    `nvlink_gbs` is the datasheet's NVLink figure, both directions together
    (0: no NVLink); one direction carries half of it (Chapter 11).
    """

    name: str
    fp32_tflops: float
    fp16_tensor_tflops: float
    bandwidth_gbs: float
    memory_gb: float
    compute_capability: tuple[int, int]
    source: str
    nvlink_gbs: float = 0.0

    def ridge_point(self, tensor: bool = False) -> float:
        """FLOP per byte where the roofline turns from memory-bound to compute-bound."""
        peak = self.fp16_tensor_tflops if tensor else self.fp32_tflops
        return peak * 1e12 / (self.bandwidth_gbs * 1e9)


SPECS = {
    "T4": GPUSpec(
        "NVIDIA T4",
        8.1,
        65.0,
        320.0,
        16,
        (7, 5),
        "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf",
    ),
    "A100": GPUSpec(
        "NVIDIA A100 80GB SXM",
        19.5,
        312.0,
        2039.0,
        80,
        (8, 0),
        "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
        nvlink_gbs=600.0,
    ),
    "H100": GPUSpec(
        "NVIDIA H100 SXM",
        67.0,
        989.0,
        3350.0,
        80,
        (9, 0),
        "https://www.nvidia.com/en-us/data-center/h100/",
        nvlink_gbs=900.0,
    ),
    "H200": GPUSpec(
        "NVIDIA H200 SXM",
        67.0,
        989.0,
        4800.0,
        141,
        (9, 0),
        "https://www.nvidia.com/en-us/data-center/h200/",
        nvlink_gbs=900.0,
    ),
}


def attainable_gflops(intensity: float, peak_gflops: float, bandwidth_gbs: float) -> float:
    """The roofline: min(peak, intensity x bandwidth) in GFLOP/s for `intensity` FLOP/byte (Chapter 1)."""
    return min(peak_gflops, intensity * bandwidth_gbs)


def spec_for(device_name: str | None) -> GPUSpec | None:
    """The datasheet entry whose short name (T4, A100, H100, H200) is in `device_name`, or None (Ch. 2)."""
    if not device_name:
        return None
    return next((spec for key, spec in SPECS.items() if key in device_name), None)


def tensor_core_precisions(cc: tuple[int, int] | None) -> dict[str, bool]:
    """Which precisions have tensor-core support on compute capability `cc` (Chapters 0 and 6)."""
    cc = tuple(cc or (0, 0))
    return {
        "fp16": cc >= (7, 0),
        "int8": cc >= (7, 2),
        "tf32": cc >= (8, 0),
        "bf16": cc >= (8, 0),
        "fp8": cc >= (8, 9),
    }
