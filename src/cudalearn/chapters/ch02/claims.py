"""Chapter 2's claims from its sources, each judged by our measurement (the core notebook and deep dive 2a).

`core` holds what the chapter tests: warps of consecutive thread IDs, strided access, PyTorch's TF32
default; `bytes_in_flight` the instruction-level parallelism claim of deep dive 2a.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from cudalearn.chapters.ch02 import bench
from cudalearn.measure.sources import Claim


def stored_row(figures: dict[str, Any], name: str) -> dict[str, Any]:
    """The row called `name` of a stored timing.measure result."""
    return next(r for r in figures["rows"] if r["name"] == name)


def ilp_speeds(figures: dict[str, Any]) -> list[float]:
    """vector_add_ilp(k)'s speed relative to torch.add for each k timed, smallest k first."""
    return [stored_row(figures, bench.ilp_name(k))["vs_baseline"] for k in figures["size"]["per_thread"]]


def tf32_default() -> str:
    """PyTorch's default `allow_tf32` for matrix products, read in a fresh process (this one may set it)."""
    ask = "import torch; print(torch.backends.cuda.matmul.allow_tf32)"
    return subprocess.run([sys.executable, "-c", ask], capture_output=True, text=True).stdout.strip()


def core(warps: list[int], expected_warps: list[int]) -> list[Claim]:
    """The chapter's claims: warps of 32 consecutive IDs (thread_ids), strided access, TF32's default."""
    return [
        Claim(
            "A block is split into warps of 32 consecutive thread IDs, the first holding thread 0",
            "CUDA C++ Programming Guide, SIMT Architecture",
            value={"warps": warps, "expected": expected_warps},
            show=lambda v: f"thread_ids reports warps {sorted(set(v['warps']))} per 48-thread block",
            holds=lambda v: v["warps"] == v["expected"],
        ),
        Claim(
            "Strided access wastes bandwidth: a warp's loads are served in 32-byte sectors",
            "CUDA C++ Best Practices Guide, Coalesced Access to Global Memory",
            key="ch2.copy_strided",
            show=lambda f: f"stride 32 at {stored_row(f, 'stride 32')['vs_baseline']:.2f}x stride 1's speed",
            holds=lambda f: stored_row(f, "stride 32")["vs_baseline"] < 1,
        ),
        Claim(
            "TF32 is off for float32 matrix products by default (since PyTorch 1.12)",
            "PyTorch docs, CUDA semantics: TF32 on Ampere devices",
            value={"default": tf32_default()},
            show=lambda v: f"a fresh process reads allow_tf32 = {v['default']}",
            holds=lambda v: v["default"] == "False",
        ),
    ]


def bytes_in_flight() -> list[Claim]:
    """Deep dive 2a's claim: independent loads of one warp hide latency (vector_add_ilp against k = 1)."""
    return [
        Claim(
            "Independent instructions of one warp hide latency as those of other warps do (ILP)",
            "CUDA C++ Programming Guide, Multiprocessor Level",
            key="ch2.vector_add_ilp",
            show=lambda f: (
                f"vector_add_ilp(k) at {max(ilp_speeds(f)[1:]):.2f}x torch.add's speed at best (k > 1), "
                f"{ilp_speeds(f)[0]:.2f}x with k = 1"
            ),
            holds=lambda f: max(ilp_speeds(f)[1:]) > ilp_speeds(f)[0],
        ),
    ]
