"""Data-parallel training steps of the course's AlexNet, one process per device, under torchrun (Chapter 7).

    python -m torch.distributed.run --standalone --nproc_per_node=2 \\
        $(python -c 'from cudalearn.chapters.ch07 import ddp_step; print(ddp_step.__file__)') --out DIR

It ships inside the package (so Colab has it too); `ddp_step.__file__` is its path.

Every process builds the same network from the same seed (`ddp_problem`)
and takes its own slice of one global batch; DistributedDataParallel
averages the gradients over the processes during the backward pass (NCCL
between GPUs, gloo between CPU processes), so every process applies the
same update. After `--steps` steps (`sgd_steps`), process r writes its
weights to DIR/rank<r>.pt and a summary to DIR/rank<r>.json; the notebook
checks that all processes hold the same weights, equal to a single
process's steps on the whole batch (the same two functions, in one process).

With `--time-steps N`, each process then also times N steps of the 2012
network on `--time-batch` images of its own, and reports the time per step
and the bytes its gradients' all-reduce moves (meant for GPUs: on the CPU it
is slow, and only a test of the script).
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from cudalearn.dist import multigpu
from cudalearn.dist.program import barrier, parser, run_program
from cudalearn.nn.alexnet import AlexNet, AlexNetConfig
from cudalearn.nn.training import sgd_2012, train_step
from cudalearn.runtime import precision


def ddp_problem(batch: int, seed: int = 0):
    """The data-parallel check's network and batch: (small AlexNet without dropout, x (batch, 1, 32, 32), y).

    Every process and the single-process reference call it with the same
    seed and get the same weights and data (Chapter 7).
    """
    cfg = AlexNetConfig.small(dropout=0.0)  # no dropout: the processes' random masks would differ
    torch.manual_seed(seed)
    net = AlexNet(cfg)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, cfg.in_channels, cfg.image, cfg.image, generator=gen)
    y = torch.randint(0, cfg.classes, (batch,), generator=gen)
    return net, x, y


def sgd_steps(net, x, y, steps: int, lr: float = 0.01) -> list[float]:
    """`steps` training steps on one batch (SGD, momentum 0.9, weight decay 5e-4); the losses (Chapter 7)."""
    opt = sgd_2012(net.parameters(), lr)
    return [float(train_step(net, opt, x, y)) for _ in range(steps)]


def parse(argv=None) -> argparse.Namespace:
    """Chapter 7: the command line (`argv` or sys.argv): `dist_program.parser`'s, the check's, timing's."""
    p = parser(__doc__, "folder for rank<r>.pt and rank<r>.json")
    p.add_argument("--batch", type=int, default=16, help="global batch of the check, split over processes")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--time-steps", type=int, default=0, help="time this many steps of the 2012 network")
    p.add_argument("--time-batch", type=int, default=128, help="images per process when timing")
    return p.parse_args(argv)


def timed_steps(device: torch.device, batch: int, steps: int) -> dict:
    """Time `steps` data-parallel steps of the 2012 network on `batch` random images per process."""
    cfg = AlexNetConfig.original()
    cuda = device.type == "cuda"
    net = DDP(AlexNet(cfg).to(device), device_ids=[device.index] if cuda else None)
    opt = sgd_2012(net.parameters(), lr=0.01)
    x = torch.randn(batch, 3, cfg.image, cfg.image, device=device)
    y = torch.randint(0, cfg.classes, (batch,), device=device)

    def step():
        train_step(net, opt, x, y)

    for _ in range(3):  # warm-up: cuDNN picks its algorithms, DDP builds its buckets
        step()
    if cuda:
        torch.cuda.synchronize(device)
    barrier(device)
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


def run(args: argparse.Namespace, device: torch.device) -> None:
    """One process's part: its slice of the batch trained under DDP, then saved (Chapter 7)."""
    if args.backend == "nccl":
        precision.set_fp32()  # true FP32 in this process, as the notebook computes its reference
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch % world:
        raise SystemExit(f"--batch {args.batch} does not split evenly over {world} processes")

    net, x, y = ddp_problem(args.batch, args.seed)
    share = args.batch // world
    lo, hi = rank * share, (rank + 1) * share
    x, y = x[lo:hi].to(device), y[lo:hi].to(device)
    model = DDP(net.to(device), device_ids=[device.index] if device.type == "cuda" else None)
    losses = sgd_steps(model, x, y, args.steps, args.lr)

    args.out.mkdir(parents=True, exist_ok=True)
    weights = {k: v.detach().cpu() for k, v in model.module.state_dict().items()}
    torch.save(weights, args.out / f"rank{rank}.pt")
    gpu_name = f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""
    summary = {
        "rank": rank,
        "world": world,
        "backend": args.backend,
        "device": str(device) + gpu_name,
        "batch": args.batch,
        "steps": args.steps,
        "losses": losses,
        "timing": None,
    }
    if args.time_steps:
        summary["timing"] = timed_steps(device, args.time_batch, args.time_steps)
    (args.out / f"rank{rank}.json").write_text(json.dumps(summary, indent=1) + "\n")


def main(argv=None) -> None:
    """Chapter 7: one process, as torchrun starts it; process r writes DIR/rank<r>.pt and DIR/rank<r>.json."""
    run_program("ddp_step", parse(argv), run)


if __name__ == "__main__":
    main()
