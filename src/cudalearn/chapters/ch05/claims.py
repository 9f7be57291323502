"""Chapter 5's claims from its sources, each judged by our measurement (the core notebook and deep dives).

`core` holds the article's claims the core notebook tests (the end-to-end speed-up, pre-transposed
weights, fusion's bytes), `padding` those of deep dive 5a (the padding column), `nsight` the
profiler's rule that deep dive 5c reads in a stored profile. A value computed from stored figures
names its run (`on=`); a value the notebook computed (a tracer count) says "this notebook".
"""

from __future__ import annotations

from typing import Any

from cudalearn.measure.sources import Claim

Q2B = "Q2BSTUDIO blog post (Spanish), CUDA for shallow networks"
BPG_PADDING = "CUDA C++ Best Practices Guide, Shared Memory in Matrix Multiplication (C=AA^T)"
LOAD = "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"
CPI = "smsp__average_warp_latency_per_inst_issued.ratio"


def _speedup(f: dict[str, Any]) -> float:
    return f["seconds"]["naive"] / f["seconds"]["fused"]


def padding_speedup(f: dict[str, Any]) -> float:
    """How much faster the padded weight-gradient kernel ran than the unpadded one, in stored figures f."""
    t = {r["name"]: r["median_ms"] for r in f["rows"]}
    return t["register-tiled, no padding"] / t["register-tiled, padded, db fused"]


def core(transpose_ratio: float, saved: int, m: int, n: int) -> list[Claim]:
    """The article's claims the core notebook tests: speed-up end to end, coalesced reads, fusion's bytes."""
    return [
        Claim(
            "The three techniques together: about 40% faster than a naive CUDA version (21 s to < 15 s, T4)",
            Q2B,
            key="ch5.training",
            show=lambda f: f"{_speedup(f):.1f}x faster end to end",
            holds=None,
            note="not comparable: another GPU, each speed-up over its own naive baseline (section 10)",
        ),
        Claim(
            "Pre-transposed weights give coalesced global reads in backpropagation",
            Q2B + "; CUDA C++ Best Practices Guide, Coalesced Access to Global Memory",
            value={"ratio": transpose_ratio},
            show=lambda f: f"{f['ratio']:.1f}x fewer sectors for dZ @ W.T (tracer)",
            holds=lambda f: f["ratio"] > 1,
        ),
        Claim(
            "Fusing matmul and ReLU removes the intermediate reads and writes to global memory",
            Q2B,
            value={"saved": saved, "m": m, "n": n},
            show=lambda f: f"{f['saved']:,} bytes saved = 16 m n for m, n = {f['m']}, {f['n']} (tracer)",
            holds=lambda f: f["saved"] == 16 * f["m"] * f["n"],
        ),
    ]


def padding(extra_wavefronts: float, conflicts_padded: int, conflicts_unpadded: int) -> list[Claim]:
    """The padding column's claims (deep dive 5a): the article's 2x, and the Best Practices Guide's rule."""
    return [
        Claim(
            "The padding column doubles the efficiency of data access within a block",
            Q2B,
            key="ch5.backward_weight",
            show=lambda f: (
                f"{padding_speedup(f):.2f}x faster; unpadded: {extra_wavefronts:.0%} more wavefronts (tracer)"
            ),
            holds=lambda f: padding_speedup(f) >= 2,
            note="the conflicting store is 4 of 136 shared requests",
        ),
        Claim(
            "A padding column removes the bank conflicts of a tile stored transposed",
            BPG_PADDING,
            value={"padded": conflicts_padded, "unpadded": conflicts_unpadded},
            show=lambda f: f"{f['unpadded']:,} conflicts unpadded, {f['padded']} padded (tracer)",
            holds=lambda f: f["padded"] == 0 < f["unpadded"],
        ),
    ]


def nsight(profile: dict[str, Any], run: str) -> list[Claim]:
    """Nsight Compute's latency rule, read in the stored profile of the fused chain (deep dive 5c)."""
    scalar = profile["bias_relu_dropout"]
    waits = [m[LOAD] / m[CPI] for m in profile.values() if LOAD in m and CPI in m]
    value = {
        "dram": scalar["dram__throughput.avg.pct_of_peak_sustained_elapsed"],
        "sm": scalar["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
        "wait": min(waits) if len(waits) == len(profile) else None,
    }
    return [
        Claim(
            "Compute and memory throughput both below 60% of peak typically indicate latency issues",
            "Nsight Compute 2025.3, Speed Of Light rule",
            value=value,
            on=run,
            show=lambda f: (
                f"bias_relu_dropout: DRAM {f['dram']:.0f}%, SM {f['sm']:.0f}% of peak"
                + (f"; {f['wait']:.0%}+ of warp cycles waiting on loads" if f["wait"] else "")
            ),
            note=(
                "the rule does not fire: SM at 60% of peak or more"
                if value["sm"] >= 60
                else "not judged: the run stored DRAM's share, not the busiest memory unit's the rule reads"
            )
            + "; the warp state shows the latency (cells above)",
        ),
    ]
