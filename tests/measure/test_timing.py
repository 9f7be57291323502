"""Timing: rates, the refusal to pass simulator time off as GPU time, and reference results."""

import json

import pytest

from cudalearn.measure import reference, timing


def test_rates():
    assert timing.matmul_flops(2, 3, 4) == 48
    assert timing.gflops(2e9, 1000.0) == pytest.approx(2.0)
    assert timing.gbps(4e9, 2.0) == pytest.approx(2000.0)


def test_cpu_time_runs_warmup_and_repeats():
    calls = []
    t = timing.cpu_time(lambda: calls.append(1), warmup=2, repeat=5)
    assert len(calls) == 7 and len(t.times_ms) == 5 and t.clock == "cpu-wall"
    assert t.min_ms <= t.median_ms


def test_gpu_time_refuses_under_the_simulator():
    with pytest.raises(timing.SimulatorTimingError, match="not .*GPU|says nothing about a GPU"):
        timing.gpu_time(lambda: None)


def test_measure_under_sim_runs_candidates_and_shows_reference_not_wall_time(monkeypatch):
    ran = []
    stored = {
        "rows": [
            {"name": "a", "median_ms": 2.0, "gflops": 1.0, "vs_baseline": 0.5},
            {"name": "b", "median_ms": 1.0, "gflops": 2.0, "vs_baseline": 1.0},
        ],
        "baseline": "b",
        "size": {"N": 4096},
    }
    header = {
        "device": "NVIDIA H200",
        "compute_capability": [9, 0],
        "date": "2026-11-29",
        "versions": {"numba-cuda": "0.30.4"},
    }
    monkeypatch.setattr(reference, "lookup", lambda key, name=None: (stored if key == "k" else None, header))
    res = timing.measure("k", {"a": lambda: ran.append("a"), "b": lambda: ran.append("b")}, baseline="b")
    assert ran == ["a", "b"]
    assert res.source == "reference" and "NVIDIA H200 (sm_90), 2026-11-29" in res.label
    assert res.row("a")["vs_baseline"] == 0.5
    assert "speed relative to 'b'" in str(res) and "reference run on NVIDIA H200" in str(res)
    assert "no GPU time to show" in str(timing.measure("other", {"a": lambda: None}))
    missing = timing.measure("other", {"a": lambda: None})
    assert "no reference GPU run is stored" in missing.label and missing.rows == [{"name": "a"}]


def test_measure_rejects_an_unknown_baseline():
    with pytest.raises(KeyError, match="baseline"):
        timing.measure("k", {"a": lambda: None}, baseline="cuBLAS")


def test_rows_compute_rates_and_ratio_against_the_baseline():
    rows = timing._rows(
        {"slow": timing.Timing((4.0, 4.0), "x"), "fast": timing.Timing((1.0,), "x")},
        "fast",
        flops=2e9,
        nbytes=None,
    )
    slow = rows[0]
    assert slow["gflops"] == pytest.approx(500.0) and slow["vs_baseline"] == pytest.approx(0.25)
    assert slow["gbps"] is None


def test_record_writes_only_on_a_gpu(tmp_path, monkeypatch):
    path = tmp_path / "rec.json"
    monkeypatch.setenv(reference.RECORD_ENV, str(path))
    assert reference.record("x", {"v": 1}) == {"v": 1}
    assert not path.exists(), "a simulator run must never write reference figures"
    from cudalearn.runtime import device

    monkeypatch.setattr(device, "mode", lambda: "gpu")
    monkeypatch.setattr(reference, "run_header", lambda: {"device": "Fake GPU"})
    reference.record("x", {"v": 1})
    reference.record("y", {"v": 2})
    data = json.loads(path.read_text())
    assert data["device"] == "Fake GPU" and data["figures"] == {"x": {"v": 1}, "y": {"v": 2}}


def test_stored_reference_files_are_labelled_gpu_runs():
    for name in reference.reference_files():
        data = reference.load(name)
        assert data["mode"] == "gpu" and data["device"] and data["date"] and data["versions"]["numba-cuda"]
        assert data["figures"], f"{name} stores no figure"


def test_matmul_operands_compute_in_fp32_and_leave_the_tf32_settings_as_they_were():
    torch = pytest.importorskip("torch")
    from cudalearn.chapters.ch03.operands import matmul_operands
    from cudalearn.runtime import precision

    before = precision.settings()
    torch.set_float32_matmul_precision("high")  # TF32 allowed, as a notebook might leave it
    try:
        changed = precision.settings()
        ops = matmul_operands(8, seed=1)
        assert precision.settings() == changed, "a benchmark's operands must not change global torch state"
    finally:
        precision.restore(before)
    assert ops.A.shape == ops.B.shape == ops.expected.shape == (8, 8)
    np = pytest.importorskip("numpy")
    np.testing.assert_allclose(ops.expected, ops.A @ ops.B, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(ops.dA.copy_to_host(), ops.A)
