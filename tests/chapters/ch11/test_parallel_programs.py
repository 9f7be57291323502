"""The torchrun programs of Chapters 11 and 7 in CPU processes with gloo, and the skeleton they share."""

import json
import math
import os

import pytest
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from cudalearn.chapters.ch07 import ddp_step
from cudalearn.chapters.ch11 import collectives_bench, ddp_scaling, fsdp_fit, tp_step
from cudalearn.dist import multigpu
from cudalearn.dist import program as dist_program
from cudalearn.dist import runs as parallel_runs

# two batch sizes; buckets of 0.01 MiB (the tiny model's gradients in 5) and DDP's default; no overlap
DDP_ARGS = ("--batch", "4,2", "--bucket-mb", "0.01,default", "--no-overlap")


@pytest.fixture(scope="module")
def ddp_runs(tmp_path_factory):
    """ddp_scaling in 1 process (--standalone) and in 2 (a multi-node-style c10d rendezvous on this node)."""
    out = tmp_path_factory.mktemp("ddp")
    multigpu.torchrun(ddp_scaling.__file__, "--out", out, *DDP_ARGS, nproc=1, timeout=120)
    meet = parallel_runs.rendezvous("localhost", parallel_runs.free_port(), nodes=1)
    multigpu.torchrun(ddp_scaling.__file__, "--out", out, *DDP_ARGS, nproc=2, timeout=120, rendezvous=meet)
    return out, {w: json.loads((out / f"ddp-scaling-gloo-{w}.json").read_text()) for w in (1, 2)}


@pytest.fixture(scope="module")
def fsdp_run(tmp_path_factory):
    """fsdp_fit in 2 processes with its float64 check."""
    out = tmp_path_factory.mktemp("fsdp")
    multigpu.torchrun(fsdp_fit.__file__, "--out", out, "--check", nproc=2, timeout=120)
    return out, json.loads((out / "fsdp-fit-gloo-2.json").read_text())


def test_ddp_scaling_rows(ddp_runs):
    _, runs = ddp_runs
    how = [(0.01, True), (None, True), (None, False)]  # (bucket MiB, overlap) of each row, per batch size
    for world, run in runs.items():
        assert (run["world"], run["backend"], run["nodes"]) == (world, "gloo", 1)
        assert run["NCCL_NVLS_ENABLE"] == "0" and run["versions"]["torch"] == torch.__version__
        assert run["model"] == "tiny" and run["batch_per_process"] == [4, 2]
        costs = [ddp_scaling.step_costs("tiny", n, world) for n in (4, 2)]
        for written, want in zip(run["costs"], costs, strict=True):
            assert written == pytest.approx(want)
        grad_bytes = costs[0]["grad_bytes"]
        assert grad_bytes == 4 * costs[0]["params"] and costs[0]["flops_per_step"] > 0
        assert costs[0]["flops_per_step"] == 2 * costs[1]["flops_per_step"]  # twice the images, same bytes
        rows = run["rows"]
        got = [(r["batch_per_process"], r["bucket_mb"], r["overlap"]) for r in rows]
        assert got == [(n, *h) for n in (4, 2) for h in how]
        for r in rows:
            n = r["batch_per_process"]
            assert len(r["rank_ms"]) == world and r["step_ms"] == max(r["rank_ms"]) > 0, r
            assert r["images_per_s"] == pytest.approx(world * n / (r["step_ms"] * 1e-3))
            assert r["allreduce_bytes"] == multigpu.allreduce_bytes(costs[0]["params"], world)
            assert r["max_param_difference"] == 0.0, r  # every process holds process 0's parameters
        small, default, flat = rows[:3]
        assert sum(small["buckets_bytes"]) == grad_bytes and len(small["buckets_bytes"]) > 1
        assert default["buckets_bytes"] == [grad_bytes]  # all under DDP's default first bucket of 1 MiB
        assert flat["grad_difference"] <= ddp_scaling.SAME_GRADS
    assert runs[1]["allreduce_ms"] is None and runs[2]["allreduce_ms"] > 0


def test_a_multi_node_style_launch_works(ddp_runs):
    # the 2-process run met through torchrun's c10d rendezvous (--nnodes=1 --rdzv_endpoint=localhost:PORT)
    run = ddp_runs[1][2]
    assert (run["world"], run["nodes"]) == (2, 1) and run["rows"]
    assert all(r["max_param_difference"] == 0.0 for r in run["rows"])


def test_scaling_efficiency_from_the_runs(ddp_runs):
    out, _ = ddp_runs
    table = ddp_scaling.throughputs(out, "gloo")
    names = ("bucket 0.01 MiB", "bucket default", "no overlap")
    assert set(table) == {f"batch {n}, {h}" for n in (4, 2) for h in names}
    for name, by_world in table.items():
        eff = ddp_scaling.scaling_efficiency(by_world)
        assert eff[1] == 1.0 and eff[2] == pytest.approx(by_world[2] / (2 * by_world[1])) and eff[2] > 0, name


def test_scaling_efficiency():
    assert ddp_scaling.scaling_efficiency({1: 100.0, 2: 190.0, 8: 720.0}) == pytest.approx(
        {1: 1.0, 2: 0.95, 8: 0.9}
    )
    with pytest.raises(ValueError, match="need world size 1"):
        ddp_scaling.scaling_efficiency({2: 190.0, 4: 360.0})


def test_fsdp_holds_a_shard_of_what_ddp_holds(fsdp_run):
    _, run = fsdp_run
    assert (run["world"], run["backend"], run["cap_bytes"]) == (2, "gloo", None) and "GPU-only" in run["cap"]
    n = run["params"]
    shapes = fsdp_fit.param_shapes("tiny")
    assert n == sum(math.prod(s) for s in shapes)
    replicated, sharded = run["predicted"]["replicated"], run["predicted"]["sharded"]
    assert replicated == fsdp_fit.model_state_bytes(n, sharded=False) and replicated["total"] == 16 * n
    ddp, fsdp = run["attempts"]["ddp"], run["attempts"]["fsdp"]
    for rank in range(2):
        assert ddp[rank]["fits"] and fsdp[rank]["fits"]
        assert ddp[rank]["held"] == pytest.approx(replicated)  # DDP: everything on every process
        assert fsdp[rank]["held"] == pytest.approx(run["predicted"]["sharded_by_rank"][rank])
        assert fsdp[rank]["held"]["total"] == pytest.approx(sharded["total"], rel=0.05)  # about 1/N
        # the same model and data: replicated and sharded training take the same first step
        assert fsdp[rank]["losses"][0] == pytest.approx(ddp[rank]["losses"][0], rel=1e-6)
        assert fsdp[rank]["losses"] == pytest.approx(ddp[rank]["losses"], rel=1e-4)
    assert sum(r["held"]["total"] for r in fsdp) == replicated["total"]  # the shards cover each byte once


def test_fsdp_trains_like_one_process(fsdp_run):
    out, run = fsdp_run
    check = run["check"]
    assert check["max_abs_difference"] <= fsdp_fit.CHECK_TOLERANCE and len(check["losses"]) == 2
    got = torch.load(out / "fsdp-check-gloo-2.pt")
    want = fsdp_fit.reference_params(check["batch"], check["steps"], lr=1e-3)
    assert got.keys() == want.keys()
    for name in want:
        assert got[name].dtype == torch.float64
        torch.testing.assert_close(got[name], want[name], rtol=0, atol=fsdp_fit.CHECK_TOLERANCE)
    start, _, _ = fsdp_fit.check_problem(check["batch"])
    moved = max((p.detach() - want[k]).abs().max().item() for k, p in start.named_parameters())
    assert moved > 100 * fsdp_fit.CHECK_TOLERANCE  # the check trained: the parameters moved


def test_model_state_bytes_is_zero():
    psi = 1000
    assert fsdp_fit.model_state_bytes(psi, sharded=False) == {
        "params": 4000,
        "grads": 4000,
        "optimizer": 8000,
        "total": 16000,
    }
    mixed = fsdp_fit.model_state_bytes(psi, sharded=False, recipe="mixed-adam")
    assert (mixed["params"], mixed["grads"], mixed["optimizer"], mixed["total"]) == (2000, 2000, 12000, 16000)
    assert fsdp_fit.model_state_bytes(psi, 8, sharded=True)["total"] == 2000
    with pytest.raises(ValueError, match="recipe 'adam'"):
        fsdp_fit.model_state_bytes(psi, sharded=False, recipe="adam")


def test_shards_by_rank_follow_torch_chunk():
    # (5, 2) over 4 ranks: chunks of 2 rows, 2, 1, 0; (1, 3) whole on rank 0
    by_rank = fsdp_fit.shard_bytes_by_rank([(5, 2), (1, 3)], 4)
    assert [r["params"] for r in by_rank] == [4 * 7, 4 * 4, 4 * 2, 0]
    assert sum(r["total"] for r in by_rank) == 16 * 13


@pytest.mark.parametrize("program", [ddp_scaling, fsdp_fit, ddp_step])
def test_refuses_nccl_without_gpus(program, tmp_path, monkeypatch):
    # main() as torchrun would start it in one process: it stops before any process group starts
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for name in multigpu.MULTICAST_OFF:  # restored after the test: main() sets them in its environment
        monkeypatch.setenv(name, "1")
    name = program.__name__.rsplit(".", 1)[1]
    with pytest.raises(
        SystemExit, match=f"{name}: NCCL was asked for with 1 process on this node, but there is no GPU"
    ):
        program.main(["--out", str(tmp_path), "--backend", "nccl"])
    assert not list(tmp_path.iterdir()) and not dist.is_initialized()
    assert os.environ["NCCL_NVLS_ENABLE"] == "0"


def test_the_programs_name_their_dtypes_from_one_table(tmp_path):
    for program in (tp_step, ddp_scaling, fsdp_fit):
        assert program.DTYPES is dist_program.DTYPES, program.__name__
    assert tp_step.parse(["--out", str(tmp_path), "--dtype", "float64"]).dtype == "float64"
    for program in (ddp_scaling, fsdp_fit):  # autocast has no float64: the option refuses it
        assert program.parse(["--out", str(tmp_path), "--dtype", "bfloat16"]).dtype == "bfloat16"
        with pytest.raises(SystemExit):
            program.parse(["--out", str(tmp_path), "--dtype", "float64"])


def test_every_program_takes_the_skeletons_options(tmp_path):
    # dist_program.parser gives every torchrun program --out and --backend; run_program resolves 'auto'
    for program in (ddp_step, tp_step, collectives_bench, ddp_scaling, fsdp_fit):
        args = program.parse(["--out", str(tmp_path)])
        assert (args.out, args.backend) == (tmp_path, "auto"), program.__name__
        with pytest.raises(SystemExit):
            program.parse(["--out", str(tmp_path), "--backend", "mpi"])


def test_wrong_options_are_sentences(tmp_path):
    args = ddp_scaling.parse(["--out", str(tmp_path), "--warmup", "1"])
    with pytest.raises(SystemExit, match="--warmup must be at least 2.*rebuilds its buckets"):
        ddp_scaling.fill_defaults(args, "gloo")
    with pytest.raises(Exception, match="'0' is neither"):
        ddp_scaling.parse_buckets("default,0")
    assert ddp_scaling.parse_buckets("default, 1,25") == [None, 1.0, 25.0]
    with pytest.raises(Exception, match="'-3' is not one"):
        ddp_scaling.parse_counts("64,-3")
    assert ddp_scaling.parse_counts("64, 16") == [64, 16]
    args = fsdp_fit.parse(["--out", str(tmp_path), "--check", "--check-batch", "6"])
    with pytest.raises(SystemExit, match="--check-batch 6 does not split evenly over 4 processes"):
        fsdp_fit.fill_defaults(args, "gloo", 4)
    assert fsdp_fit.fill_defaults(args, "gloo", 2).model == "tiny"


def test_out_of_memory_is_reported_not_raised(tmp_path, monkeypatch):
    # attempt() in this process, in a group of one: a training step that runs out of memory is a row
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        args = fsdp_fit.fill_defaults(fsdp_fit.parse(["--out", str(tmp_path), "--steps", "1"]), "gloo", 1)
        mesh = init_device_mesh("cpu", (1,))
        real = fsdp_fit.adamw_steps

        def out_of_memory(*_, **__):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.50 GiB.\nmore about it")

        monkeypatch.setattr(fsdp_fit, "adamw_steps", out_of_memory)
        for kind in ("ddp", "fsdp"):
            r = fsdp_fit.attempt(kind, args, torch.device("cpu"), mesh, None)
            assert (r["fits"], r["error"], r["held"]) == (
                False,
                "CUDA out of memory. Tried to allocate 4.50 GiB.",
                None,
            ), kind
        monkeypatch.setattr(fsdp_fit, "adamw_steps", real)
        r = fsdp_fit.attempt("fsdp", args, torch.device("cpu"), mesh, None)  # the group lives on
        (whole,) = fsdp_fit.shard_bytes_by_rank(fsdp_fit.param_shapes("tiny"), 1)
        n = sum(math.prod(s) for s in fsdp_fit.param_shapes("tiny"))
        assert whole == fsdp_fit.model_state_bytes(n, sharded=False)  # sharded over one: everything
        assert r["fits"] and r["held"] == pytest.approx(whole)
    finally:
        dist.destroy_process_group()
