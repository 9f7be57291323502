"""Chapter 5's readings of its stored runs: who sets the pace, the sweep's shape, the goals, section 8."""

from types import SimpleNamespace

import pytest

from cudalearn.chapters.ch05.bench import batch_sweep, fused_layer, goals, shallow_net
from cudalearn.measure.stated import StaleProse


def test_pace_the_gpu_sets_it_only_when_it_trails_the_host_by_more_than_a_step():
    behind = {"queue_ms_per_step": 0.7, "step_ms": 0.8, "drain_ms": 2.0}
    assert shallow_net.pace(behind)["gpu_sets_pace"] and shallow_net.pace(behind)["behind"] == 2.5
    kept_up = {"queue_ms_per_step": 0.8, "step_ms": 0.81, "drain_ms": 0.3}
    assert not shallow_net.pace(kept_up)["gpu_sets_pace"]
    assert "the host set the pace" in shallow_net.pace_lines(kept_up)[-1]


def test_sweep_shape_reads_the_least_favourable_repeats():
    sweep = {
        "batches": [64, 256, 1024, 2048],
        "fused_ms_per_step": [0.7, 0.7, 0.8, 1.5],
        "fused_runs_ms": [[0.5, 0.7, 1.1], [0.7, 0.7, 0.7], [0.8, 0.8, 1.2], [1.5, 1.5, 1.5]],
    }
    read = batch_sweep.shape(sweep)
    assert read["worst_case"] and read["step_ratio"] == pytest.approx(1.2 / 0.5)  # medians: 1.14
    assert read["last_step_ratio"] == pytest.approx(1.5 / 1.2)
    medians_only = batch_sweep.shape({k: v for k, v in sweep.items() if k != "fused_runs_ms"})
    assert not medians_only["worst_case"] and medians_only["step_ratio"] == pytest.approx(0.8 / 0.7)


def test_network_verdicts_hold_the_introduction_to_the_run():
    seconds = {"naive": 9.0, "fused": 1.3, "prepared": 1.3, "tuned": 1.0, "torch": 1.5}
    run = {"seconds": seconds, "spread": dict.fromkeys(seconds, 0.02), "repeats": 3}
    lines = goals.network_verdicts(run, "H100")
    assert lines[-1].startswith("The network this chapter builds (fused) takes 0.87x"), lines[-1]
    assert "short of the 0.8x goal in this run" in lines[-1]
    fast_fused = {**run, "seconds": {**seconds, "fused": 1.1}}  # 0.73x: a run where PyTorch was slower
    assert "within the 0.8x goal in this run" in goals.network_verdicts(fast_fused, "H100")[-1]
    slow_tuned = {**run, "seconds": {**seconds, "tuned": 1.3}}  # tuned misses 0.8x: the intro is stale
    with pytest.raises(StaleProse, match="tuned"):
        goals.network_verdicts(slow_tuned, "H100")


def test_section_8_readback_fails_when_an_ordering_it_states_flips():
    def results(rows):
        return SimpleNamespace(rows=[{"name": n, "median_ms": t} for n, t in rows.items()])

    tables = {
        "forward": results(
            {
                "naive: matmul, bias, ReLU (3 kernels)": 1.6,
                "tiled, fused (1 output a thread)": 0.28,
                "register-tiled, fused": 0.14,
                "PyTorch (cuBLAS + ReLU)": 0.06,
            }
        ),
        "backward_input": results(
            {
                "naive, W as stored (2 kernels)": 2.4,
                "naive, W pre-transposed (2 kernels)": 1.6,
                "register-tiled, WT, mask fused": 0.14,
                "PyTorch (cuBLAS + mask)": 0.07,
            }
        ),
        "backward_weight": results(
            {
                "register-tiled, padded, db fused": 0.148,
                "register-tiled, no padding": 0.162,
                "PyTorch (cuBLAS + sum)": 0.066,
            }
        ),
    }
    text = fused_layer.readback(tables, "H100", 6.5)
    assert "5.71x" in text and "no tiled, unfused row" in text and "saves 9%" in text
    forward = {r["name"]: r["median_ms"] for r in tables["forward"].rows}
    split = results({**forward, fused_layer.TILED_UNFUSED: 0.29})  # the 2026-12-07 H100 run's shape
    text = fused_layer.readback({**tables, "forward": split}, "H100", 6.5)
    words = " ".join(text.split())
    assert "tiling alone gives 5.52x, fusing the epilogue a further 1.04x (10 us of" in words
    assert "no tiled, unfused row" not in text
    for unfused in (0.28, 0.40):  # fusion slower, or most of the gain: the prose's "small share" is stale
        split = results({**forward, fused_layer.TILED_UNFUSED: unfused})
        with pytest.raises(StaleProse, match="tiling brings most"):
            fused_layer.readback({**tables, "forward": split}, "H100", 6.5)
    tables["backward_weight"].rows[1]["median_ms"] = 0.140  # the padding no longer pays
    with pytest.raises(StaleProse, match="padding"):
        fused_layer.readback(tables, "H100", 6.5)
