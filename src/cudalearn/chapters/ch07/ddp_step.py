"""Data-parallel training steps of the course's AlexNet, one process per device, under torchrun (Chapter 7).

    python -m torch.distributed.run --standalone --nproc_per_node=2 \\
        $(python -c 'from cudalearn.dist import multigpu; print(multigpu.DDP_STEP)') --out DIR

It ships inside the package (so Colab has it too); `multigpu.DDP_STEP` is its path.

Every process builds the same network from the same seed and takes its own
slice of one global batch; DistributedDataParallel averages the gradients
over the processes during the backward pass (NCCL between GPUs, gloo
between CPU processes), so every process applies the same update. After
`--steps` steps, process r writes its weights to DIR/rank<r>.pt and a
summary to DIR/rank<r>.json; the notebook checks that all processes hold
the same weights, equal to a single process's steps on the whole batch.

With `--time-steps N`, each process then also times N steps of the 2012
network on `--time-batch` images of its own, and reports the time per step
and the bytes its gradients' all-reduce moves (meant for GPUs: on the CPU it
is slow, and only a test of the script).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from cudalearn.dist import multigpu
from cudalearn.nn.alexnet import AlexNet, AlexNetConfig
from cudalearn.nn.training import sgd_2012, train_step
from cudalearn.runtime import precision


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for rank<r>.pt and rank<r>.json")
    p.add_argument("--batch", type=int, default=16, help="global batch of the check, split over processes")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", choices=["auto", "nccl", "gloo"], default="auto")
    p.add_argument("--time-steps", type=int, default=0, help="time this many steps of the 2012 network")
    p.add_argument("--time-batch", type=int, default=128, help="images per process when timing")
    return p.parse_args()


def timed_steps(device: torch.device, local_rank: int, batch: int, steps: int) -> dict:
    """Time `steps` data-parallel steps of the 2012 network on `batch` random images per process."""
    cfg = AlexNetConfig.original()
    cuda = device.type == "cuda"
    net = DDP(AlexNet(cfg).to(device), device_ids=[local_rank] if cuda else None)
    opt = sgd_2012(net.parameters(), lr=0.01)
    x = torch.randn(batch, 3, cfg.image, cfg.image, device=device)
    y = torch.randint(0, cfg.classes, (batch,), device=device)

    def step():
        train_step(net, opt, x, y)

    for _ in range(3):  # warm-up: cuDNN picks its algorithms, DDP builds its buckets
        step()
    if cuda:
        torch.cuda.synchronize(device)
    dist.barrier(device_ids=[local_rank] if cuda else None)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    if cuda:
        torch.cuda.synchronize(device)
    ms = (time.perf_counter() - t0) * 1e3 / steps
    world = dist.get_world_size()
    return {
        "step_ms": ms,
        "batch_per_process": batch,
        "images_per_s": world * batch / (ms * 1e-3),
        "allreduce_bytes": multigpu.allreduce_bytes(cfg.n_params(), world),
        "steps": steps,
    }


def main() -> None:
    args = parse()
    backend = args.backend
    if backend == "auto":
        backend = (
            "nccl"
            if torch.cuda.is_available() and torch.cuda.device_count() >= int(os.environ["LOCAL_WORLD_SIZE"])
            else "gloo"
        )
    local_rank = int(os.environ["LOCAL_RANK"])
    if backend == "nccl":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        precision.set_fp32()  # true FP32 in this process, as the notebook computes its reference
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch % world:
        raise SystemExit(f"--batch {args.batch} does not split evenly over {world} processes")

    net, x, y = multigpu.ddp_problem(args.batch, args.seed)
    share = args.batch // world
    x, y = x[rank * share : (rank + 1) * share].to(device), y[rank * share : (rank + 1) * share].to(device)
    model = DDP(net.to(device), device_ids=[local_rank] if device.type == "cuda" else None)
    losses = multigpu.sgd_steps(model, x, y, args.steps, args.lr)

    args.out.mkdir(parents=True, exist_ok=True)
    weights = {k: v.detach().cpu() for k, v in model.module.state_dict().items()}
    torch.save(weights, args.out / f"rank{rank}.pt")
    summary = {
        "rank": rank,
        "world": world,
        "backend": backend,
        "device": str(device) + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""),
        "batch": args.batch,
        "steps": args.steps,
        "losses": losses,
        "timing": None,
    }
    if args.time_steps:
        summary["timing"] = timed_steps(device, local_rank, args.time_batch, args.time_steps)
    (args.out / f"rank{rank}.json").write_text(json.dumps(summary, indent=1) + "\n")
    dist.barrier(device_ids=[local_rank] if device.type == "cuda" else None)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
