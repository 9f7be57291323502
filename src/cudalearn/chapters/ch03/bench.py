"""Benchmark of Chapters 3-4: naive, tiled and padded matmul kernels against cuBLAS FP32, in one run.

    CUDALEARN_MODE=gpu python3 scripts/bench_tiling.py      # N = 1024, 2048, 4096 on a GPU
    python3 scripts/bench_tiling.py --sizes 32              # a smoke test; the simulator is fine

For each N, all kernels are timed in one `timing.measure` call (CUDA
events, warm-up, median), which records the figures under
`bench.tiling.N{N}` when `CUDALEARN_RECORD` is set (scripts/gpu_run.py sets
it); each kernel's first (warm-up) call is checked against cuBLAS's result.
cuBLAS runs through PyTorch with TF32 off, so it computes in true FP32 like
the kernels. The last lines judge two goals set for these kernels with the
numbers of this same run: the padded transposed-tile kernel at least 2x
faster than the unpadded one at T = 32, and the tiled kernel at least 5x
faster than the naive one. A missed goal is printed as missed.

Under the simulator nothing can be timed: without --sizes the script only
shows the stored reference run (if any); with --sizes it runs each kernel
once at those sizes, to check that it works, and shows what the reference
holds for them. `scripts/bench_tiling.py` is the command line of `main` here.
"""

from __future__ import annotations

import argparse
import math

from cudalearn.runtime import device
from cudalearn.runtime import launch as grids

GPU_SIZES = (1024, 2048, 4096)
NAIVE_BLOCK = 16  # the naive kernel's blocks are 16x16, as in Chapter 2
BASELINE = "cuBLAS FP32 (torch)"
NAIVE = "naive (16x16 blocks)"
TILED = {16: "tiled T=16", 32: "tiled T=32"}
PADDED_ROWS = "tiled T=32, padded tiles (32x33)"
BT = "transposed B tile T=32 (32x32)"
BT_PADDED = "transposed B tile T=32, padded (32x33)"
GOAL_PADDING = 2.0  # padded transposed tile vs unpadded, T = 32
GOAL_TILED = 5.0  # tiled vs naive


def key(n: int) -> str:
    """The reference-data key of size n."""
    return f"bench.tiling.N{n}"


def candidates(n: int) -> dict:
    """{name: callable launching one product} on random (n, n) float32 matrices.

    Each kernel's first call (a warm-up call of `timing.measure`, or the
    single call under the simulator) is checked against cuBLAS's result.
    """
    import numpy as np
    import torch

    from cudalearn import checks
    from cudalearn.chapters.ch02.kernels.matmul import matmul_naive
    from cudalearn.chapters.ch03 import kernels as tiled
    from cudalearn.chapters.ch03.operands import matmul_operands

    ops = matmul_operands(n)  # cuBLAS's FP32 product is the expected result
    dA, dB, dC, tA, tB, tC, expected = ops.dA, ops.dB, ops.dC, ops.tA, ops.tB, ops.tC, ops.expected

    def launch(name, kernel, tile):
        grid, block = grids.square(n, n, tile)
        checked = []

        def run():
            if not checked:  # the first call: start from NaN, so a kernel that writes nothing fails
                dC.copy_to_device(np.full((n, n), np.nan, np.float32))
            kernel[grid, block](dA, dB, dC)
            if not checked:
                got = dC.copy_to_host()
                checks.check_close(got, expected, name=f"C of {name}", rtol=1e-3, atol=1e-3 * math.sqrt(n))
                checked.append(True)

        return run

    kernels = {
        NAIVE: (matmul_naive, NAIVE_BLOCK),
        TILED[16]: (tiled.matmul_tiled16, 16),
        TILED[32]: (tiled.matmul_tiled32, 32),
        PADDED_ROWS: (tiled.matmul_tiled32_padded, 32),
        BT: (tiled.matmul_bt_tiled32, 32),
        BT_PADDED: (tiled.matmul_bt_tiled32_padded, 32),
    }
    found = {name: launch(name, kernel, tile) for name, (kernel, tile) in kernels.items()}
    found[BASELINE] = lambda: torch.matmul(tA, tB, out=tC)
    return found


def table(results) -> str:
    """The rows of one size as text: median ms, TFLOP/s, speed relative to cuBLAS."""
    head = f"{'kernel':<42} {'median ms':>10} {'TFLOP/s':>8} {'vs cuBLAS':>10}"
    lines = [f"N = {results.size.get('N', '?')}: {results.source} on {results.label}", head]
    for r in results.rows:
        ms, gf, vs = r.get("median_ms"), r.get("gflops"), r.get("vs_baseline")
        cells = (
            f"{ms:>10.4g}" if ms else f"{'-':>10}",
            f"{gf / 1e3:>8.3g}" if gf else f"{'-':>8}",
            f"{vs:>9.3g}x" if vs else f"{'-':>10}",
        )
        lines.append(f"{r['name']:<42} " + " ".join(cells))
    return "\n".join(lines)


def goals(results) -> dict | None:
    """The two speed-ups the goals are about, from one size's rows; None when the rows hold no times."""
    ms = {r["name"]: r.get("median_ms") for r in results.rows}
    needed = (NAIVE, TILED[16], TILED[32], BT, BT_PADDED)
    if not all(ms.get(name) for name in needed):
        return None
    tiled = {t: ms[NAIVE] / ms[name] for t, name in TILED.items()}
    best = max(tiled, key=tiled.get)
    return {
        "N": results.size.get("N"),
        "padding_speedup_T32": ms[BT] / ms[BT_PADDED],
        "tiled_speedup": {f"T={t}": v for t, v in tiled.items()},
        "best_tile": best,
        "padding_goal_met": ms[BT] / ms[BT_PADDED] >= GOAL_PADDING,
        "tiled_goal_met": tiled[best] >= GOAL_TILED,
    }


def verdict_lines(g: dict) -> list[str]:
    """Two lines saying, with the numbers, whether each goal is met at one size."""
    met = {True: "met", False: "MISSED"}
    tiled = ", ".join(f"{t} {v:.2f}x" for t, v in g["tiled_speedup"].items())
    return [
        f"goal N={g['N']}: padded vs unpadded transposed tile, T=32: {g['padding_speedup_T32']:.2f}x faster "
        f"(goal >= {GOAL_PADDING:g}x): {met[g['padding_goal_met']]}",
        f"goal N={g['N']}: tiled vs naive: {tiled} (goal >= {GOAL_TILED:g}x, best T={g['best_tile']}): "
        f"{met[g['tiled_goal_met']]}",
    ]


def from_reference(n: int):
    """The stored reference figures of size n as a timing.Results, or None."""
    from cudalearn.measure import timing

    return timing.stored_results(key(n))


def main(argv: list[str] | None = None) -> int:
    """Run (or, under the simulator, show) the benchmark; print tables and the verdicts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", help=f"matrix sizes N (default {GPU_SIZES} on a GPU)")
    args = parser.parse_args(argv)
    device.setup()
    from cudalearn.measure import reference, timing
    from cudalearn.runtime import precision

    mode = device.mode()
    if mode == "sim" and not args.sizes:
        print(
            "This benchmark times GPU kernels, and this process runs the simulator: nothing is timed. "
            "Stored reference results follow, if any (run with --sizes 32 for a smoke test here)."
        )
    sizes = args.sizes or GPU_SIZES
    found = []
    for n in sizes:
        if mode == "sim" and not args.sizes:
            results = from_reference(n)
            if results is None:
                print(f"N = {n}: no reference GPU run stored for {key(n)}")
                continue
        else:
            with precision.fp32():  # cuBLAS in true FP32, as the kernels compute
                results = timing.measure(
                    key(n), candidates(n), baseline=BASELINE, flops=2 * n**3, size={"N": n}
                )
        print(table(results))
        g = goals(results)
        if g is None:
            print(f"goal N={n}: no GPU times for this size in this run or the reference: not judged")
        else:
            found.append(g)
            print("\n".join(verdict_lines(g)))
        print()
    if found:
        reference.record("bench.tiling.goals", {"sizes": found})
        for name, field in (
            ("padding >= 2x at T=32", "padding_goal_met"),
            ("tiled >= 5x naive", "tiled_goal_met"),
        ):
            met = [g["N"] for g in found if g[field]]
            missed = [g["N"] for g in found if not g[field]]
            print(
                f"summary: {name}: met at N={met or 'none'}" + (f", MISSED at N={missed}" if missed else "")
            )
    else:
        print("summary: no GPU times, so no goal is judged")
    return 0
