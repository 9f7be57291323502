"""Chapter 6: two stored runs of Triton FP32 and the best Numba kernel, checked against the prose.

The chapter's timing (`ch6.triton`) and the course benchmark whose verdict judges the goal
(`bench.gemm.N4096`) both time the best Numba kernel and Triton FP32 on one GPU model. Their ratios
differ; the prose says why, and `compare` checks it on the stored runs.
"""

from __future__ import annotations

from cudalearn.measure import stated, timing
from cudalearn.measure.reference import lookup

TRITON = "Triton FP32"


def compare(n: int) -> None:
    """Print both runs' best-Numba and Triton FP32 times; check the text after the cell (Chapter 6).

    It says: the benchmark's verdict is its own run's ratio; the Numba kernel is faster in both runs;
    the two ratios differ mostly because Triton's time moved more between the runs than the Numba kernel's."""
    goal, _ = lookup(f"bench.gemm.N{n}.goal")
    runs = {"this chapter's timing": "ch6.triton", "the course benchmark": f"bench.gemm.N{n}"}
    results = {where: timing.stored_results(key) for where, key in runs.items()}
    if goal is None or None in results.values():
        print("the stored runs to compare are not all there yet")
        return
    best = goal["best"]
    ms = {where: {r["name"]: r["median_ms"] for r in res.rows} for where, res in results.items()}
    for where, t in ms.items():
        print(f"{where}, stored run: {results[where].label}")
        ratio = t[TRITON] / t[best]
        print(f"  {best} {t[best]:.3f} ms, {TRITON} {t[TRITON]:.3f} ms: {ratio:.2f}x {TRITON}'s speed")
    chapter, bench = ms.values()
    moved = {name: abs(chapter[name] / bench[name] - 1) for name in (best, TRITON)}
    stated.check(
        ms,
        "; ".join(r.label for r in results.values()),
        lambda m: (
            f"{bench[TRITON] / bench[best]:.2f}" == f"{goal['vs_triton_fp32']:.2f}"
            and all(t[TRITON] > t[best] for t in m.values())
            and moved[TRITON] > moved[best]
            and all("H100" in r.label for r in results.values())
        ),
        "two H100 runs; the benchmark's verdict is its run's ratio; the Numba kernel is faster in both; "
        "Triton's time moved more between the runs",
    )
