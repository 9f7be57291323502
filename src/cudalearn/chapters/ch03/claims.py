"""Chapter 3's claims from its sources, each judged by the tracer's counts or a stored GPU run (Chapter 3)."""

from __future__ import annotations

from typing import Any

from cudalearn.measure.sources import Claim

BPG_TILES = "CUDA C++ Best Practices Guide, Shared Memory in Matrix Multiplication"


def ms(figures: dict[str, Any], name: str) -> float:
    """Median ms of the row called `name` of a stored timing.measure result."""
    return next(r["median_ms"] for r in figures["rows"] if r["name"] == name)


def core(fewer_loads: dict[str, float], races: dict[str, int]) -> list[Claim]:
    """Tiles cut global loads by T (tracer), the second barrier prevents races (tracer), tiling is faster."""
    return [
        Claim(
            "Tiles of width T cut the global loads of each output by T",
            BPG_TILES,
            value=fewer_loads,
            show=lambda v: (
                f"tracer: {v['tiled, T = 16']:.0f}x, {v['tiled, T = 32']:.0f}x fewer load requests"
            ),
            holds=lambda v: v["tiled, T = 16"] >= 16 and v["tiled, T = 32"] >= 32,
        ),
        Claim(
            "Without the barrier after the multiply-adds, threads overwrite tiles still being read",
            "CUDA C++ Programming Guide, Shared Memory (the second __syncthreads)",
            value=races,
            show=lambda v: (
                f"tracer: {v['one barrier']:,} races with one barrier, {v['two barriers']} with two"
            ),
            holds=lambda v: v["one barrier"] > 0 and v["two barriers"] == 0,
        ),
        Claim(
            "Tiling makes the matrix product faster than the naive kernel",
            BPG_TILES,
            key="ch3.matmul",
            show=lambda f: (
                f"tiled16 {ms(f, 'matmul_naive (16x16)') / ms(f, 'matmul_tiled16'):.2f}x naive's speed"
            ),
            holds=lambda f: ms(f, "matmul_tiled16") < ms(f, "matmul_naive (16x16)"),
        ),
    ]
