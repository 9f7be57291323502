"""Deep dive 06d's fast step (`tc_steps.FAST`: 8 warps of 64 x 64, dynamic shared memory, 32-bit shared
addresses, prefetched fragments) run by the tracer, and the benchmark's bookkeeping of candidate variants
(`bench_tc`: the probe in child processes, the goal's verdict)."""

import subprocess
from types import SimpleNamespace

import numpy as np
import pytest

from cudalearn import trace
from cudalearn.chapters.ch06 import bench_tc, tc_steps
from cudalearn.chapters.ch06.kernels import tc_gemm, tc_parts

RNG = np.random.default_rng(3)


def _run(tiles, grid_n=1, grid_m=1, ktiles=None):
    """C = A @ B.T + bias by the kernel of `tiles` on a grid_n x grid_m grid, the ring wrapping once."""
    m, n, k = tiles["BM"] * grid_m, tiles["BN"] * grid_n, tiles["BK"] * (ktiles or tiles["stages"] + 1)
    A = RNG.standard_normal((m, k)).astype(np.float16)
    B = RNG.standard_normal((n, k)).astype(np.float16)
    bias = RNG.standard_normal(n).astype(np.float32)
    C = np.full((m, n), np.nan, np.float32)
    kernel = tc_gemm.make_tc_gemm(**tiles)
    threads = tc_gemm.threads_per_block(tiles)
    rep = trace.run(kernel, (grid_n, grid_m), threads, tc_gemm.words(A), tc_gemm.words(B), bias, C)
    np.testing.assert_allclose(C, A.astype(np.float64) @ B.T + bias, rtol=1e-5, atol=1e-4)
    assert not rep.races and rep.barrier_error_count == 0 and rep.uninitialized_reads == 0
    return rep


FAST = tc_steps.FAST_TILES
#: the fast step, and the same without each of its parts (all timed on the H100: bench.tc.N4096)
SHAPES = {
    "fast": FAST,
    "no prefetch": {**FAST, "prefetch": False},
    "64-bit addresses": {**FAST, "addr32": False},
    "4 warps of 64x64, static": {**FAST, "BN": 128, "WARPS_N": 2, "dynamic": False, "blocks": 2},
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_the_fast_step_and_its_parts_compute_the_product_without_bank_conflicts(name):
    tiles = tc_steps.sim_tiles(SHAPES[name])
    rep = _run(tiles)
    lines = [s for s in rep.by_line.values() if "x4(" in s.source]
    warps, ksteps = tc_gemm.threads_per_block(tiles) // 32, tiles["BK"] // 16
    tm, tn = tiles["BM"] // tiles["WARPS_M"], tiles["BN"] // tiles["WARPS_N"]
    per_step = (tm // 16 + tn // 16) * 4  # ldmatrix.x4 of A's and of B's pieces, 4 matrices each
    assert sum(s.shared_load_requests for s in lines) == warps * (tiles["stages"] + 1) * ksteps * per_step
    assert sum(s.shared_load_bank_conflicts for s in lines) == 0


def test_the_fast_step_is_built_with_its_tiles_and_scaled_down_for_the_tracer():
    kernel, tiles = tc_steps.build(None)[tc_steps.FAST]
    assert tiles == tc_steps.sim_tiles(FAST) and tiles["BM"] == 64 and tiles["BN"] == 128
    assert tc_parts.shared_bytes(FAST) == 3 * (128 + 256) * 16 * 4  # 72 KB: dynamic shared memory


@pytest.mark.parametrize("ktiles", [1, 2])
def test_prefetching_fragments_works_with_fewer_tiles_than_stages(ktiles):
    _run(tc_steps.sim_tiles(FAST), ktiles=ktiles)


def test_shared_memory_above_48_kb_must_be_dynamic_and_pipelined():
    w8 = dict(FAST)
    with pytest.raises(ValueError, match="48 KB static"):
        tc_gemm.make_tc_gemm(**{**w8, "dynamic": False})
    with pytest.raises(ValueError, match="pipelined"):
        tc_gemm.make_tc_gemm(**{**w8, "stages": 1})
    with pytest.raises(ValueError, match="227 KB"):
        tc_gemm.make_tc_gemm(**{**w8, "BM": 256, "stages": 8})  # 8 x 512 rows x 64 bytes: 256 KB


def test_the_probe_goes_on_after_a_failure_and_after_a_silent_crash(monkeypatch):
    fake = {f"variant {i}": FAST for i in range(6)}
    monkeypatch.setattr(bench_tc, "VARIANTS", fake)
    names = list(fake)
    calls = []

    def fake_run(cmd, **kw):
        rest = [int(i) for i in cmd[cmd.index("--probe") + 1 :]]
        calls.append(rest)
        if len(calls) == 1:  # variant 0 ran, variant 1 raised: the child stops
            return SimpleNamespace(stdout="PROBE 0 ok error 1e-07\nPROBE 1 failed OSError: x\n", stderr="")
        if len(calls) == 2:  # the child dies in variant 2 without a word
            return SimpleNamespace(stdout="", stderr="Fatal Python error: Segmentation fault\n")
        out = "".join(
            f"PROBE {i} wrong error 1.0e+00\n" if i == 3 else f"PROBE {i} ok error 2e-07\n" for i in rest
        )
        return SimpleNamespace(stdout=out, stderr="")

    monkeypatch.setattr(subprocess, "run", fake_run)
    found = bench_tc.probe(names)
    assert calls[:3] == [list(range(len(names))), list(range(2, len(names))), list(range(3, len(names)))]
    assert found[names[0]].startswith("ok") and found[names[1]].startswith("failed")
    assert found[names[2]].startswith("crashed") and "Segmentation fault" in found[names[2]]
    assert found[names[3]].startswith("wrong") and set(found) == set(names)


def test_the_verdict_counts_only_kernels_whose_error_is_small():
    fast, slow = tc_steps.FAST, "cp.async pipeline"
    rows = [
        {"name": fast, "gflops": 500e3},
        {"name": slow, "gflops": 300e3},
        {"name": "regblock_2d_async FP32 (Ch. 6)", "gflops": 50e3},
        {"name": bench_tc.BASELINE, "gflops": 700e3},
    ]
    results = SimpleNamespace(rows=rows)
    assert bench_tc.verdict(results)["best"] == fast
    v = bench_tc.verdict(results, errors={fast: 0.5, slow: 1e-3})  # the fast one computes garbage
    assert v["best"] == slow and v["fraction_of_cublas_fp16"] == pytest.approx(3 / 7)
    assert v["speedup_over_best_fp32"] == pytest.approx(6.0) and not v["met"]
