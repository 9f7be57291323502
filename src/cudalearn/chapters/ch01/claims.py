"""Chapter 1's claims: the roofline's two readings, and datasheet peaks against stored GPU runs.

Each stored figure is judged against the datasheet of the GPU that measured it (the device its own
run names), never of another run's.
"""

from __future__ import annotations

from typing import Any

from cudalearn.measure import gpus, reference
from cudalearn.measure.sources import Claim

ROOFLINE = "Williams, Waterman and Patterson, CACM 2009"


def stored_row(figures: dict[str, Any], name: str) -> dict[str, Any]:
    """The row called `name` of a stored timing.measure result."""
    return next(r for r in figures["rows"] if r["name"] == name)


def datasheet_of(key: str) -> gpus.GPUSpec | None:
    """The datasheet entry of the GPU whose run stored `key`, or None (no run, or a GPU not in SPECS)."""
    return gpus.spec_for(reference.lookup(key)[1].get("device"))


def core(where: dict[str, float], n: int) -> list[Claim]:
    """The roofline's readings (`where`: intensities and ridge points) and two datasheet bounds."""
    add_spec, mm_spec = datasheet_of("ch2.vector_add"), datasheet_of("ch2.matmul")
    return [
        Claim(
            f"A vector add lies left of every GPU's ridge point, a product of n = {n} right of it",
            ROOFLINE,
            value=where,
            show=lambda v: f"{v['add']:.3f} and {v['mm']:.0f} FLOP/B; ridges {v['lo']:.1f} to {v['hi']:.1f}",
            holds=lambda v: v["add"] < v["lo"] and v["mm"] > v["hi"],
        ),
        Claim(
            "The datasheet bandwidth bounds what a kernel reaches (torch.add, Chapter 2)",
            f"NVIDIA datasheet ({add_spec.name if add_spec else 'the GPU of the run'})",
            key="ch2.vector_add",
            show=lambda f: f"{stored_row(f, 'torch.add')['gbps']:,.0f} GB/s",
            holds=lambda f: bool(add_spec) and stored_row(f, "torch.add")["gbps"] <= add_spec.bandwidth_gbs,
        ),
        Claim(
            "The FP32 peak bounds an FP32 matrix product (cuBLAS, TF32 off, Chapter 2)",
            f"NVIDIA datasheet ({mm_spec.name if mm_spec else 'the GPU of the run'})",
            key="ch2.matmul",
            show=lambda f: f"{stored_row(f, 'cuBLAS (torch)')['gflops'] / 1e3:.1f} TFLOP/s",
            holds=lambda f: (
                bool(mm_spec) and stored_row(f, "cuBLAS (torch)")["gflops"] <= mm_spec.fp32_tflops * 1e3
            ),
        ),
    ]
