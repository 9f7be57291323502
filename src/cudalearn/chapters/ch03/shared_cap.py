"""The tiled kernels' speed-ups beside their cut in sectors, and shared memory's cap on them (Chapter 3)."""

from __future__ import annotations

from typing import Any

from cudalearn.measure import gpus, stated
from cudalearn.measure.reference import label, lookup

FFMA_PER_CLOCK = {(7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 9): 128, (9, 0): 128}  # FP32 lanes of an SM
PROFILED = "course_tiled_32x32"  # the stored Nsight Compute profile of matmul_tiled32 (ch4.ncu_compare)


def wavefronts_per_ffma() -> tuple[float, str]:
    """(shared-load wavefronts per warp-wide multiply-add of matmul_tiled32, the stored run they come from).

    Nsight Compute counted the wavefronts of a small product (N = grid x block); its warp-wide FFMAs are
    N**3 / 32. Without the stored profile: 2, the two loads each multiply-add names in the source."""
    figures, data = lookup("ch4.ncu_compare")
    if figures is None:
        return 2.0, "two loads per multiply-add, as the source reads (no stored profile)"
    run = figures["patterns"][PROFILED]
    n = run["launch"]["griddim"][0] * run["launch"]["blockdim"][0]
    wavefronts = run["ncu"]["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"]
    return wavefronts / (n**3 / 32), f"Nsight Compute, {label(data)}"


def cap_gflops(device_label: str) -> float | None:
    """Shared memory's cap on a tiled kernel's GFLOP/s on the GPU of `device_label`, or None if unknown.

    An SM's shared memory serves one wavefront a clock; its FP32 lanes do FFMA_PER_CLOCK / 32 warp-wide
    multiply-adds a clock. So the cap is the FP32 peak x 32 / (FFMA_PER_CLOCK x wavefronts per FFMA)."""
    spec = gpus.spec_for(device_label)
    lanes = FFMA_PER_CLOCK.get(spec.compute_capability) if spec else None
    if not lanes:
        return None
    return spec.fp32_tflops * 1e3 * 32 / (lanes * wavefronts_per_ffma()[0])


def report(mm_results: Any, cut: dict[str, float]) -> None:
    """Print each tiled kernel's speed-up beside its cut in sectors and the cap; check the prose's reading.

    `cut` maps the timed names to the tracer's cut in global sectors. The prose says: tiling gains less
    than its cut, stays under half cuBLAS's speed, the profile counts 1.5 wavefronts per FFMA, and no
    run beats the cap (by more than 5%); the stored run's faster kernel reaches more than half the cap
    but not all of it (shared memory is not the only limit)."""
    rows = {row["name"]: row for row in mm_results.rows}
    if not all(row.get("median_ms") for row in mm_results.rows):
        print("No GPU figures for ch3.matmul yet: run this notebook on a GPU.")
        return
    naive_ms = rows["matmul_naive (16x16)"]["median_ms"]
    speedup = {name: naive_ms / rows[name]["median_ms"] for name in cut}
    for name in cut:
        print(
            f"{name}: {speedup[name]:.2f}x matmul_naive's speed for {cut[name]:.1f}x fewer sectors, "
            f"{rows[name]['vs_baseline']:.2f}x cuBLAS's ({rows[name]['gflops'] / 1e3:.3g} TFLOP/s)"
        )
    per_ffma, profiled = wavefronts_per_ffma()
    cap = cap_gflops(mm_results.label)
    best = max(rows[k]["gflops"] for k in cut)
    if cap:
        print(
            stated.wrap(
                f"shared memory's cap: {cap / 1e3:.3g} TFLOP/s, "
                f"{per_ffma:.2f} wavefronts per FFMA ({profiled})"
            )
        )
        print(f"the faster tiled kernel reaches {best / cap:.0%} of the cap")
    stored = mm_results.source == "reference"
    stated.check(
        rows,
        mm_results.label,
        lambda r: (
            all(speedup[k] < cut[k] and r[k]["vs_baseline"] < 0.5 for k in cut)
            and per_ffma == 1.5  # the stored profile, whatever GPU runs the notebook
            and (cap is None or best / cap < 1.05)
            and (cap is None or not stored or 0.5 < best / cap < 0.95)
        ),
        "tiling gains less than its cut in sectors, under half cuBLAS's speed, more than half of "
        "shared memory's cap (at 1.5 wavefronts per FFMA) but not all of it",
    )
