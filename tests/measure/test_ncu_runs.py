"""measure.ncu_runs: the Nsight Compute scripts' store-and-print and command line (ncu_chain, ncu_rows)."""

import json

import pytest

from cudalearn.measure import ncu_runs


def test_store_writes_the_run_and_prints_a_line_a_kernel(tmp_path, capsys):
    class Info:
        device, compute_capability = "NVIDIA H100 80GB HBM3", (9, 0)

    out = tmp_path / "run.json"
    metrics = {"softmax_warp": {"dram__bytes_read.sum": 1.0, "gpu__time_duration.sum": float("nan")}}
    ncu_runs.store(out, Info(), None, '{"rows": 8}\n', metrics, "ch10.ncu_rows", "scripts/ncu_rows.py")
    data = json.loads(out.read_text())
    assert data["source"] == "scripts/ncu_rows.py" and "ncu" not in data["versions"]
    got = data["figures"]["ch10.ncu_rows"]["metrics"]["softmax_warp"]
    assert got == {"dram__bytes_read.sum": 1.0, "gpu__time_duration.sum": None}, "NaN stored as null"
    assert capsys.readouterr().out == "softmax_warp  dram__bytes_read=1.0  gpu__time_duration=nan\n"


def test_main_runs_the_child_or_the_profile_and_refuses_gpu_without_out():
    calls = []
    launch, gpu = (lambda: calls.append("launch") or 0), (lambda out: calls.append(out) or 3)
    assert ncu_runs.main("doc", launch, gpu, ["launch"]) == 0
    assert ncu_runs.main("doc", launch, gpu, ["gpu", "--out", "x.json"]) == 3
    assert calls == ["launch", "x.json"]
    with pytest.raises(SystemExit):
        ncu_runs.main("doc", launch, gpu, ["gpu"])
