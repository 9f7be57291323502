"""Tensor parallelism and the collectives' bandwidths (Chapter 11), checked with gloo in CPU processes."""

import json
import multiprocessing
import os
import platform

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from cudalearn.chapters.ch11 import collectives_bench, tp_step
from cudalearn.chapters.ch11 import tensor_parallel as tp
from cudalearn.dist import multigpu
from cudalearn.dist import program as dist_program
from cudalearn.dist import runs as parallel_runs
from cudalearn.nn.alexnet import Traffic
from cudalearn.runtime import device

TOKENS, D_IN, HIDDEN, D_OUT = 6, 8, 16, 12  # hidden and d_out split over 2 and 4 ranks


def _unsplit(seed: int = 0):
    """The unsplit pair of layers, an input and the loss's weights, in float64, the same in every process."""
    torch.manual_seed(seed)
    fc1 = torch.nn.Linear(D_IN, HIDDEN, dtype=torch.float64)
    fc2 = torch.nn.Linear(HIDDEN, D_OUT, dtype=torch.float64)
    x = torch.randn(TOKENS, D_IN, dtype=torch.float64)
    g = torch.randn(TOKENS, D_OUT, dtype=torch.float64)
    return fc1, fc2, x, g


def _gather(t: torch.Tensor, dim: int, group) -> torch.Tensor:
    """Every rank's `t` joined along `dim`, in rank order (no autograd)."""
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, t.contiguous(), group=group)
    return torch.cat(parts, dim=dim)


def _check_tp(group) -> None:
    """The tensor-parallel layers on `group` against the unsplit layers: outputs, gradients, bytes."""
    world = dist.get_world_size(group)

    def close(got, want, what):
        torch.testing.assert_close(
            got,
            want,
            rtol=1e-12,
            atol=1e-12,
            msg=lambda m: f"{world} ranks, rank {dist.get_rank()}, {what}: {m}",
        )

    fc1, fc2, x, g = _unsplit()
    act = torch.nn.GELU()
    x_ref = x.clone().requires_grad_()  # the reference: the unsplit layers in this process
    y_ref = fc2(act(fc1(x_ref)))
    (y_ref * g).sum().backward()
    h_ref = fc1(x).detach()

    traffic = Traffic()
    mlp = tp.tp_mlp(fc1, fc2, act, group=group, traffic=traffic)
    col, row = mlp[0], mlp[2]
    assert col.weight.shape == (HIDDEN // world, D_IN) and row.weight.shape == (D_OUT, HIDDEN // world)
    xp = x.clone().requires_grad_()
    y = mlp(xp)
    close(y, y_ref, "output")
    want = tp.bytes_per_step("mlp", TOKENS, D_IN, D_OUT, world, bytes_per_element=8)
    assert traffic.total() == want["forward"], (traffic.bytes, want)
    (y * g).sum().backward()
    close(xp.grad, x_ref.grad, "input gradient")
    close(_gather(col.weight.grad, 0, group), fc1.weight.grad, "fc1 weight gradient (gathered rows)")
    close(_gather(col.bias.grad, 0, group), fc1.bias.grad, "fc1 bias gradient (gathered)")
    close(_gather(row.weight.grad, 1, group), fc2.weight.grad, "fc2 weight gradient (gathered columns)")
    close(row.bias.grad, fc2.bias.grad, "fc2 bias gradient (whole on every rank)")
    counted = {k: tuple(v) for k, v in traffic.bytes.items()}
    assert counted == {"fc1": (0, want["backward"]), "fc2": (want["forward"], 0)}, counted

    # gather_output=True, then a row-parallel layer that splits its whole input itself
    traffic = Traffic()
    first = tp.ColumnParallelLinear.from_linear(
        fc1, gather_output=True, group=group, traffic=traffic, name="col"
    )
    second = tp.RowParallelLinear.from_linear(
        fc2, input_is_parallel=False, group=group, traffic=traffic, name="row"
    )
    xp = x.clone().requires_grad_()
    h = first(xp)
    assert h.shape == (TOKENS, HIDDEN)
    close(h, h_ref, "gathered output of the column-parallel layer")
    y = second(act(h))
    close(y, y_ref, "output through gather_output and a splitting row layer")
    (y * g).sum().backward()
    close(xp.grad, x_ref.grad, "input gradient through gather and split")
    close(_gather(first.weight.grad, 0, group), fc1.weight.grad, "gathered column layer's weight gradient")
    close(_gather(second.weight.grad, 1, group), fc2.weight.grad, "splitting row layer's weight gradient")
    close(second.bias.grad, fc2.bias.grad, "splitting row layer's bias gradient")
    c = tp.bytes_per_step("column", TOKENS, D_IN, HIDDEN, world, bytes_per_element=8, gather_output=True)
    r = tp.bytes_per_step("row", TOKENS, HIDDEN, D_OUT, world, bytes_per_element=8, input_is_parallel=False)
    counted = {k: tuple(v) for k, v in traffic.bytes.items()}
    assert counted == {"col": (c["forward"], c["backward"]), "row": (r["forward"], r["backward"])}, counted


def _worker(rank: int, world: int, init: str) -> None:
    """One of `world` processes: the checks on all of them, then on a group of the first two."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        _check_tp(None)
        pair = dist.new_group([0, 1])  # every process takes part in creating it
        if rank < 2:
            _check_tp(pair)
    finally:
        dist.destroy_process_group()


def test_tp_mlp_equals_the_unsplit_layers_on_4_and_2_ranks(tmp_path):
    # One start of 4 processes serves both world sizes. They fork from a server that imported torch and
    # this module once (not each: seconds apiece on a busy CPU). A file rendezvous needs no free port
    # (one found free can be taken by another process before it is bound).
    multiprocessing.set_forkserver_preload(["torch", "torch.distributed", __name__])
    mp.start_processes(
        _worker, args=(4, f"file://{tmp_path / 'rendezvous'}"), nprocs=4, join=True, start_method="forkserver"
    )


@pytest.mark.parametrize("world", [2, 4, 8])
def test_bytes_per_step_is_the_ring_formula(world):
    t, d_in, d_out, b = 512, 1024, 768, 2
    ring = 2 * (world - 1) / world  # an all-reduce sends 2(N-1)/N of the message; an all-gather (N-1)/N
    mlp = tp.bytes_per_step("mlp", t, d_in, d_out, world, bytes_per_element=b)
    assert mlp == {
        "forward": ring * t * d_out * b,
        "backward": ring * t * d_in * b,
        "total": ring * t * (d_in + d_out) * b,
    }
    col = tp.bytes_per_step("column", t, d_in, d_out, world, bytes_per_element=b)
    assert (col["forward"], col["backward"]) == (0, ring * t * d_in * b)
    col = tp.bytes_per_step("column", t, d_in, d_out, world, bytes_per_element=b, gather_output=True)
    assert col["forward"] == (world - 1) / world * t * d_out * b
    row = tp.bytes_per_step("row", t, d_in, d_out, world, bytes_per_element=b)
    assert (row["forward"], row["backward"]) == (ring * t * d_out * b, 0)
    row = tp.bytes_per_step("row", t, d_in, d_out, world, bytes_per_element=b, input_is_parallel=False)
    assert row["backward"] == (world - 1) / world * t * d_in * b
    with pytest.raises(ValueError, match="'column', 'row' or 'mlp'"):
        tp.bytes_per_step("attention", t, d_in, d_out, world)


def test_allgather_bytes():
    assert multigpu.allgather_bytes(1000, 1) == 0
    assert multigpu.allgather_bytes(1000, 4) == 3000
    assert multigpu.allgather_bytes(1000, 8, bytes_per_element=2) == 1750


def test_bus_bandwidth_is_nccl_tests():
    # 1 GiB all-reduced in 10 ms over 8 ranks: algbw = 107.37 GB/s, busbw = algbw * 14/8
    bw = tp.bus_bandwidth("all_reduce", 2**30, 0.01, 8)
    assert bw.algbw == pytest.approx(107.3741824) and bw.busbw == pytest.approx(107.3741824 * 1.75)
    assert tp.bus_bandwidth("all_reduce", 10**9, 1.0, 2) == pytest.approx((1.0, 1.0))
    assert tp.bus_bandwidth("all_reduce", 10**9, 1.0, 4) == pytest.approx((1.0, 1.5))
    assert tp.bus_bandwidth("all_gather", 10**9, 0.5, 4) == pytest.approx((2.0, 1.5))
    assert tp.bus_bandwidth("reduce_scatter", 10**9, 2.0, 8) == pytest.approx((0.5, 0.4375))
    assert tp.bus_bandwidth("broadcast", 10**9, 1.0, 8) == pytest.approx((1.0, 1.0))
    assert tp.bus_bandwidth("all_reduce", 10**9, 1.0, 1).busbw == 0.0
    with pytest.raises(ValueError, match="op is one of"):
        tp.bus_bandwidth("allreduce", 1, 1.0, 2)


def test_shards_must_split_evenly():
    with pytest.raises(ValueError, match="10 features do not split evenly over 4"):
        tp.shard_size(10, 4)


def test_a_cpu_run_names_its_cpu(monkeypatch):
    """run_info on the CPU says which CPU, even where platform.processor() is empty (most Linux systems)."""
    monkeypatch.setattr(platform, "processor", lambda: "")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        info = dist_program.run_info("gloo", torch.device("cpu"))
    finally:
        dist.destroy_process_group()
    assert info["device"] == f"CPU ({device.cpu_name()})" and "?" not in info["device"]
    assert platform.machine() in info["device"]


def test_collectives_bench_runs_with_gloo(tmp_path):
    multigpu.torchrun(
        collectives_bench.__file__, "--out", tmp_path, "--max-bytes", 4096, "--iters", 3, nproc=2, timeout=120
    )
    run = json.loads((tmp_path / "collectives-gloo-2.json").read_text())
    assert (run["world"], run["backend"], run["NCCL_NVLS_ENABLE"]) == (2, "gloo", "0")
    assert run["versions"]["torch"] == torch.__version__ and run["device"].startswith("CPU")
    rows = run["rows"]
    assert [(r["op"], r["bytes"]) for r in rows] == [
        ("all_reduce", 1024),
        ("all_gather", 1024),
        ("all_reduce", 4096),
        ("all_gather", 4096),
    ]
    for r in rows:
        assert r["wrong"] == 0 and 0 < r["min_us"] <= r["median_us"], r
        bw = tp.bus_bandwidth(r["op"], r["bytes"], r["median_us"] * 1e-6, 2)
        assert (r["algbw_gbs"], r["busbw_gbs"]) == pytest.approx(tuple(bw))


def test_collectives_bench_defaults_and_sizes():
    assert collectives_bench.sizes(2**10, 2**30) == [4**k * 2**10 for k in range(11)]  # 1 KiB .. 1 GiB
    smallest, largest, _, _ = collectives_bench.DEFAULTS["nccl"]
    assert (smallest, largest) == (2**10, 2**30)
    assert collectives_bench.DEFAULTS["gloo"][1] <= 2**16  # gloo on the CPU: small sizes only


def test_collectives_bench_refuses_nccl_without_gpus():
    with pytest.raises(multigpu.NotEnoughGPUs, match="NCCL was asked for with 2 processes.*no GPU"):
        dist_program.choose_backend("nccl", 2, 0)
    with pytest.raises(multigpu.NotEnoughGPUs, match="only 2 GPU"):
        dist_program.choose_backend("nccl", 4, 2)
    assert dist_program.choose_backend("auto", 2, 0) == "gloo"
    assert dist_program.choose_backend("auto", 2, 2) == "nccl"
    assert dist_program.choose_backend("nccl", 2, 8) == "nccl"


def test_collectives_bench_says_why_it_refuses(tmp_path, monkeypatch):
    # main() as torchrun would start it in one process: it must stop before any process group starts
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for name in multigpu.MULTICAST_OFF:  # restored after the test: main() sets them in its environment
        monkeypatch.setenv(name, "1")
    with pytest.raises(
        SystemExit,
        match="collectives_bench: NCCL was asked for with 1 process on this node, but there is no GPU",
    ):
        collectives_bench.main(["--out", str(tmp_path), "--backend", "nccl"])
    assert not list(tmp_path.iterdir()) and not dist.is_initialized()
    assert os.environ["NCCL_NVLS_ENABLE"] == "0"  # NVLink multicast off, whatever it was


def test_tp_step_checks_and_times_the_split_mlp_with_gloo():
    run = parallel_runs.launch(
        tp_step.__file__, "tp", 2, "--time-steps", 2, "--tokens", 16, "--d-model", 8, "--hidden", 32,
        "--dtype", "float32", backend="gloo", timeout=200,
    )  # fmt: skip
    assert (run["world"], run["nodes"], run["backend"], run["NCCL_NVLS_ENABLE"]) == (2, 1, "gloo", "0")
    check = run["check"]
    assert max(check["max_abs_error"].values()) <= 1e-12, check
    assert check["bytes_counted"] == check["bytes_predicted"], check
    timing = run["timing"]
    assert timing["bytes_per_step"] == tp.bytes_per_step("mlp", 16, 8, 8, 2, bytes_per_element=4)
    assert timing["flops_per_process"] == 12 * 16 * 8 * 32 // 2  # 3 GEMM passes x 2 layers x 2 FLOP, halved
    assert (
        0 < timing["step"]["min_ms"] <= timing["step"]["median_ms"] and timing["all_reduce"]["median_ms"] > 0
    )


def test_tp_step_refuses_nccl_without_gpus_and_uneven_splits(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for name in multigpu.MULTICAST_OFF:
        monkeypatch.setenv(name, "1")
    with pytest.raises(
        SystemExit, match="tp_step: NCCL was asked for with 1 process on this node, but there is no GPU"
    ):
        tp_step.main(["--out", str(tmp_path), "--backend", "nccl"])
    assert not list(tmp_path.iterdir()) and not dist.is_initialized()
    with pytest.raises(RuntimeError, match="do not split evenly over 3 processes"):
        parallel_runs.launch(tp_step.__file__, "tp", 3, backend="gloo", timeout=200)


def test_parallel_runs_worlds_and_rendezvous():
    assert [parallel_runs.worlds(g) for g in (0, 1, 2, 3, 4, 7, 8)] == [
        [1], [1], [1, 2], [1, 2], [1, 2, 4], [1, 2, 4], [1, 2, 4, 8]
    ]  # fmt: skip
    assert parallel_runs.rendezvous("h", 29500, nodes=2) == [
        "--nnodes=2", "--rdzv_backend=c10d", "--rdzv_endpoint=h:29500", "--rdzv_id=cudalearn"
    ]  # fmt: skip
    with pytest.raises(ValueError, match="at least one node, not 0"):
        parallel_runs.rendezvous("h", 29500, nodes=0)
    assert 0 < parallel_runs.free_port() < 65536


def test_a_sweep_stored_from_more_gpus_is_kept(monkeypatch):
    from cudalearn.measure import reference
    from cudalearn.runtime import device

    wide = {"gpus": 8, "worlds": {"1": {}, "8": {}}}
    monkeypatch.setattr(
        reference, "lookup", lambda key: (wide, {"device": "NVIDIA H200", "date": "2026-12-05"})
    )
    monkeypatch.setattr(device, "mode", lambda: "gpu")
    monkeypatch.setattr(multigpu, "gpu_count", lambda: 4)

    def measure():
        raise AssertionError("a 4-GPU machine must not replace a sweep stored from 8 GPUs")

    figures, source = multigpu.figures("ch11.tp_mlp", measure, gpus=2)
    assert figures is wide and "stored from 8 GPUs, here 4" in source


def test_traffic_by_layer_takes_chapter_11_names():
    traffic = Traffic()
    traffic.add("fc2", 0, 8)
    traffic.add("fc1", 1, 4)
    traffic.add("conv3", 0, 2)
    assert traffic.by_layer() == {"conv3": (2, 0), "fc2": (8, 0), "fc1": (0, 4)}
