"""Chapter 2's timings read beside its prose: strided copy and naive products, checked (Chapter 2)."""

from __future__ import annotations

from typing import Any

import numpy as np

from cudalearn.measure import gpus, stated


def sectors_vs_stride1(stride: int) -> float:
    """A warp's sectors per request at `stride` (its reads, plus its 4 written) over stride 1's."""
    reads = len(np.unique(4 * stride * np.arange(32) // 32))
    return (reads + 4) / 8


def strided_copy(copy_results: Any, vec_results: Any) -> None:
    """Print each stride's time and sectors against stride 1's; check the text after the cell.

    It says: up to stride 8 the time grows more slowly than the sectors, at 16 and 32 faster; and
    stride 1 runs below torch.add's rate (compared only when both come from one run)."""
    times = {
        int(r["name"].split()[1]): 1 / r["vs_baseline"] for r in copy_results.rows if r.get("vs_baseline")
    }
    more = {s: sectors_vs_stride1(s) for s in times}
    for s, t in times.items():
        print(f"stride {s:>2}: {t:4.2f}x the time of stride 1, {more[s]:.1f}x its sectors")
    if not times:
        return
    stated.check(
        times,
        copy_results.label,
        lambda t: (
            all(t[s] < more[s] for s in (2, 4, 8))
            and all(t[s] > more[s] for s in (16, 32))
            and (copy_results.source != "reference" or "H200" in copy_results.label)
        ),
        "up to stride 8 the time grows more slowly than the sectors, at strides 16 and 32 faster; "
        "the stored run is an H200's",
    )
    if stated.one_run(copy_results.key, vec_results.key):
        stride1, add = copy_results.row("stride 1")["gbps"], vec_results.row("torch.add")["gbps"]
        print(f"stride 1: {stride1:,.0f} GB/s; torch.add, the same run: {add:,.0f} GB/s")
        stated.check(times, copy_results.label, lambda t: stride1 < add, "stride 1 is below torch.add's rate")


def naive_products(mm_results: Any) -> None:
    """Print each product's share of the FP32 peak and the swapped kernel's slowdown; check the text.

    It says: the swapped kernel is slower by far less than its 8x sectors of A; the naive kernel runs
    above 0.25 FLOP/byte x the memory bandwidth (its loads counted thread by thread)."""
    spec = gpus.spec_for(mm_results.label)
    if not (spec and any(row.get("gflops") for row in mm_results.rows)):
        return
    peak = spec.fp32_tflops * 1e3
    for row in mm_results.rows:
        print(f"{row['name']}: {row['gflops'] / peak:.1%} of the {spec.name} FP32 datasheet peak")
    naive, swapped = mm_results.row("matmul_naive"), mm_results.row("matmul_naive_swapped")
    slower = swapped["median_ms"] / naive["median_ms"]
    print(f"swapped: {slower:.2f}x the naive kernel's time, for 8x its sectors of A per load")
    stated.check(
        naive,
        mm_results.label,
        lambda f: 1 < slower < 8 and f["gflops"] > 0.25 * spec.bandwidth_gbs,
        "swapped slower by far less than 8x; naive above 0.25 FLOP/byte x the bandwidth",
    )
