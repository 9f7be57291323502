"""Several devices (Chapter 7): column placement and its fallbacks, the torchrun launcher, the DDP step."""

import json
import os
from pathlib import Path

import pytest
import torch

from cudalearn.chapters.ch07 import ddp_step, placement
from cudalearn.dist import multigpu


@pytest.mark.parametrize(
    ("gpus", "want", "devices", "kind"),
    [
        (2, 2, ("cuda:0", "cuda:1"), "two GPUs"),
        (4, 2, ("cuda:0", "cuda:1"), "two GPUs"),
        (1, 2, ("cuda:0", "cuda:0"), "one GPU"),
        (2, 1, ("cuda:0", "cuda:0"), "one GPU"),
        (0, 2, ("cpu", "cpu"), "CPU"),
        (0, 1, ("cpu", "cpu"), "CPU"),
    ],
)
def test_place_columns_falls_back(gpus, want, devices, kind):
    p = placement.place_columns(want, gpus=gpus)
    assert (p.devices, p.kind) == (devices, kind)
    assert str(p) == p.note and p.note


def test_asking_for_two_gpus_on_one_says_so_and_strict_refuses():
    p = placement.place_columns(2, gpus=1)
    assert "You asked for two GPUs" in p.note and "Falling back to one GPU" in p.note and "Colab" in p.note
    with pytest.raises(multigpu.NotEnoughGPUs, match="only 1"):
        placement.place_columns(2, gpus=1, strict=True)
    with pytest.raises(multigpu.NotEnoughGPUs, match="No GPU"):
        placement.place_columns(2, gpus=0, strict=True)
    assert placement.place_columns(1, gpus=1, strict=True).kind == "one GPU"
    with pytest.raises(ValueError, match="1 or 2"):
        placement.place_columns(3)


def test_the_simulator_uses_the_cpu_and_gloo():
    assert multigpu.gpu_count() == 0
    assert placement.place_columns(2).devices == ("cpu", "cpu")
    assert multigpu.ddp_backend(2) == "gloo"


def test_children_never_get_nvlink_multicast(monkeypatch):
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    env = multigpu.launch_env({"EXTRA": "x"})
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert env["PYTHONPATH"].split(os.pathsep)[1] == "/somewhere" and env["EXTRA"] == "x"
    assert os.path.isdir(os.path.join(env["PYTHONPATH"].split(os.pathsep)[0], "cudalearn"))


def test_allreduce_bytes():
    assert multigpu.allreduce_bytes(1000, 1) == 0
    assert multigpu.allreduce_bytes(1000, 2) == 4000
    assert multigpu.allreduce_bytes(1000, 4, bytes_per_element=2) == 3000


def test_the_ddp_program_ships_in_the_package():
    path = Path(ddp_step.__file__)
    assert path.is_file() and path.parent.name == "ch07"


def test_step_ms_on_the_cpu():
    calls = []
    t = multigpu.step_ms(lambda: calls.append(1), ["cpu"], steps=4, warmup=2, repeat=3)
    assert len(calls) == 2 + 4 * 3 and t["median_ms"] >= 0 and t["steps"] == 4


def test_data_parallel_step_equals_one_process_on_the_whole_batch(tmp_path):
    done = multigpu.torchrun(ddp_step.__file__, "--out", tmp_path, "--batch", 8, nproc=2, timeout=240)
    assert done.returncode == 0
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["backend"] for r in ranks] == ["gloo", "gloo"] and ranks[0]["world"] == 2
    weights = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    net, x, y = ddp_step.ddp_problem(8)
    losses = ddp_step.sgd_steps(net, x, y, 2)
    for key, value in net.state_dict().items():
        assert torch.equal(weights[0][key], weights[1][key]), key
        torch.testing.assert_close(weights[0][key], value, rtol=1e-4, atol=1e-6)
    assert abs(sum(r["losses"][0] for r in ranks) / 2 - losses[0]) < 1e-4


def test_torchrun_failure_shows_the_output(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import sys\nprint('about to fail')\nsys.exit(3)\n")
    with pytest.raises(RuntimeError, match="about to fail"):
        multigpu.torchrun(script, nproc=1, timeout=120)


def test_figures_needing_two_gpus_keep_the_stored_run_on_one(monkeypatch):
    from cudalearn.measure import reference
    from cudalearn.runtime import device

    stored, _ = reference.lookup("ch7.split_step")
    assert stored is not None and "two columns, two GPUs" in stored["rows"]

    def measure():
        raise AssertionError("a two-GPU figure must not be measured (and recorded) on one GPU")

    monkeypatch.setattr(device, "mode", lambda: "gpu")
    monkeypatch.setattr(multigpu, "gpu_count", lambda: 1)
    figures, source = multigpu.figures("ch7.split_step", measure, gpus=2)
    assert figures == stored and "needs 2 GPUs, here 1" in source
    figures, source = multigpu.figures("ch7.no-such-figure", measure, gpus=2)
    assert figures is None and "needs 2 GPUs" in source
