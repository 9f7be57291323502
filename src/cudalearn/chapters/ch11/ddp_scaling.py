"""Training steps of a compute-bound ViT timed under DDP on N processes, by torchrun (Chapter 11).

    python -m torch.distributed.run --standalone --nproc_per_node=N \\
        $(python -c 'from cudalearn.chapters.ch11 import ddp_scaling as d; print(d.__file__)') \\
        --out DIR --no-overlap

Multi-node: the same command on each of the M nodes, `torchrun --nnodes=M
--rdzv_backend=c10d --rdzv_endpoint=HOST:PORT --nproc_per_node=N ...`
(HOST:PORT a port on one node that every node can reach; the rendezvous
numbers the nodes, `parallel_runs.rendezvous`). Nothing here assumes one node: a process takes its GPU from
LOCAL_RANK and its share of the data from RANK and WORLD_SIZE.

It ships inside the package (so Colab has it too). Every process builds the
same Vision Transformer (Chapter 9's `cudalearn.chapters.ch09.model.ViT`) from one seed,
draws its own `--batch` random images (from a generator seeded by its RANK:
the data split) and trains with AdamW under DistributedDataParallel.

**Why this model is compute-bound.** Per process, a training step costs
about 3 x (2 x parameters x tokens) FLOPs (forward, and a backward twice as
long), while DDP all-reduces one float32 gradient per parameter, whatever
the batch: a ring sends 2 (N-1)/N x 4 bytes per parameter and per process
(`multigpu.allreduce_bytes`). The ratio, FLOPs per byte sent, grows with
the images (and tokens) per process; a GPU keeps its links idle most of the
step when that ratio is far above its FLOP rate divided by its link
bandwidth (Chapter 6 measures the one, `collectives_bench` the other). For
the GPU default, ViT-B/16 (224 x 224 images in 16 x 16 patches) at 64
images per process, `step_costs("vit-b16", 64, 8)` counts the FLOPs with
PyTorch's FlopCounterMode on the meta device (no memory, no GPU) and gives
the parameters, the bytes and their ratio; every run writes them into its
JSON, beside the measured time of one flat all-reduce of the gradients
(`allreduce_ms`) and the FLOP rate each process reached. `--batch` takes
several sizes (GPU default 64,16): at 16 images the same all-reduce meets a
quarter of the compute, so the overlap and the bucket size show.

For each batch size and each `--bucket-mb` value (DDP's `bucket_cap_mb`; `default` leaves it
unset: 25 MiB buckets and a first bucket of 1 MiB), a fresh model is wrapped
in a fresh DDP: DDP all-reduces each bucket as soon as its gradients are
ready, while the backward pass goes on (the overlap). With `--no-overlap`,
one more row per batch size times the same step with the all-reduce after the whole
backward pass: backward under `DDP.no_sync()` (no all-reduce), then, just
before the optimiser step, one all-reduce of all gradients copied into one
flat buffer, divided by the world size (`average_gradients`). One flat
buffer is the honest baseline: one large message reaches the link's full
bandwidth and pays one launch latency, so what DDP gains over it is the
overlap alone, not better-sized messages. That row first checks that it
averages the same gradients DDP does.

Timing (per row, per process): `--warmup` steps (at least 2: DDP rebuilds
its buckets in the order the gradients arrived, at the start of the second
step), a check that every process holds the parameters of process 0
(broadcast and compare: a program that stopped averaging cannot time
garbage), then barrier, wait for the GPU, `multigpu.step_ms` (`--repeat`
loops of `--steps` steps, the GPU waited for before the clock stops; the
median loop). A row's step time is the slowest process's; images/s = world
x batch / step time. Process 0 writes DIR/ddp-scaling-<backend>-<world>.json:
world, nodes, backend, device, versions, date, the environment's
NCCL_NVLS_ENABLE (NVLink multicast is off: `multigpu.MULTICAST_OFF` is set
before NCCL starts), the model's costs and the rows. `scaling_efficiency`
turns the runs of several world sizes into efficiencies.

Asked for NCCL (`--backend nccl`) without a GPU for each process on the
node, it refuses, naming how many GPUs it sees
(`dist_program.choose_backend`).
"""

from __future__ import annotations

import argparse
import gc
import json
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from cudalearn.chapters.ch09.model import ViT, parameters
from cudalearn.dist import multigpu
from cudalearn.dist.program import (
    COMPUTE_DTYPES,
    DTYPES,
    at_least,
    fill_unset,
    parser,
    run_program,
    slowest_ms,
)
from cudalearn.nn.op_costs import op_flops
from cudalearn.nn.training import ADAMW_WEIGHT_DECAY, make_optimizer, train_step
from cudalearn.runtime import precision

#: Chapter 11's models: keyword arguments of Chapter 9's `ViT`, by name.
MODELS = {
    # ViT-B/16 (Dosovitskiy et al. 2021, table 1) on 224 x 224 RGB images: the GPU default of ddp_scaling
    "vit-b16": dict(image=224, patch=16, channels=3, dim=768, depth=12, heads=12, mlp_ratio=4, classes=1000),
    # about 1.2 billion parameters (24 blocks of width 2048): the GPU default of fsdp_fit
    "vit-1b": dict(image=224, patch=16, channels=3, dim=2048, depth=24, heads=16, mlp_ratio=4, classes=1000),
    # about twenty thousand parameters: the CPU tests' model
    "tiny": dict(image=16, patch=4, channels=3, dim=32, depth=2, heads=2, mlp_ratio=2, classes=10),
}
#: Defaults per backend: (model, images per process, timed steps, warm-up steps, timed loops, dtype),
#: for the options of `DEFAULTED`.
DEFAULTS = {"nccl": ("vit-b16", [64, 16], 20, 5, 3, "bfloat16"), "gloo": ("tiny", [4], 2, 2, 1, "float32")}
DEFAULTED = ("model", "batch", "steps", "warmup", "repeat", "dtype")
#: The bucket sizes swept by default (MiB); 'default' is DDP's own choice (25 MiB, first bucket 1 MiB).
BUCKETS = "default,1,5,25,100,1000"
#: Largest parameter difference between two processes that still counts as equal, in units of --lr:
#: AdamW moves a weight by about lr a step, so processes that stopped averaging differ by about that.
SAME_PARAMS = 1e-3
#: Largest difference between DDP's averaged gradients and `average_gradients`', relative to the largest.
SAME_GRADS = 1e-4


def scaling_efficiency(images_per_s_by_world: dict[int, float]) -> dict[int, float]:
    """Chapter 11: {N: throughput at N / (N x throughput at 1)} for throughputs (images/s) by world size."""
    if 1 not in images_per_s_by_world:
        raise ValueError(
            "scaling efficiency compares N processes with one: the throughputs need world size 1, "
            f"and have only {sorted(images_per_s_by_world)}"
        )
    one = images_per_s_by_world[1]
    return {n: ips / (n * one) for n, ips in sorted(images_per_s_by_world.items())}


def row_key(row: dict) -> str:
    """Chapter 11: a row's name: 'batch 64, bucket 25 MiB', '... bucket default' or '... no overlap'."""
    if not row["overlap"]:
        how = "no overlap"
    else:
        how = "bucket default" if row["bucket_mb"] is None else f"bucket {row['bucket_mb']:g} MiB"
    return f"batch {row['batch_per_process']}, {how}"


def throughputs(folder: str | Path, backend: str = "nccl") -> dict[str, dict[int, float]]:
    """Chapter 11: images/s by row name (`row_key`) and world size, from the JSON runs in `folder`."""
    out: dict[str, dict[int, float]] = {}
    for path in sorted(Path(folder).glob(f"ddp-scaling-{backend}-*.json")):
        run = json.loads(path.read_text())
        for row in run["rows"]:
            out.setdefault(row_key(row), {})[run["world"]] = row["images_per_s"]
    return out


def make_model(name: str, seed: int, device: torch.device | str = "cpu") -> ViT:
    """Chapter 11: `ViT(**MODELS[name])` with its weights drawn from `seed`, created on `device`."""
    if name not in MODELS:
        raise ValueError(f"model {name!r}: choose among {', '.join(MODELS)}")
    torch.manual_seed(seed)
    with torch.device(device):
        return ViT(**MODELS[name])


def synthetic_batch(name: str, batch: int, seed: int, device: torch.device | str = "cpu"):
    """Chapter 11: (images (batch, C, H, W) float32, labels (batch,) int64) drawn from `seed`, on `device`."""
    cfg = MODELS[name]
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, cfg["channels"], cfg["image"], cfg["image"], generator=gen)
    y = torch.randint(0, cfg["classes"], (batch,), generator=gen)
    return x.to(device), y.to(device)


def step_costs(name: str, batch: int, world: int) -> dict:
    """Chapter 11: one process's training-step FLOPs (FlopCounterMode, meta device), gradient bytes, ratio.

    FLOPs count matrix products and convolutions of the forward and
    backward passes (`op_costs.op_flops`); the gradients are float32, one
    per parameter, whatever the compute dtype; `allreduce_bytes` is what
    one process sends in a ring all-reduce of them over `world` processes.
    """
    with torch.device("meta"):
        net = ViT(**MODELS[name])
        x, y = synthetic_batch(name, batch, 0, "meta")
    flops = sum(op_flops(lambda: F.cross_entropy(net(x), y).backward()).values())
    n = parameters(net)
    sent = multigpu.allreduce_bytes(n, world, 4)
    return {
        "batch": batch,
        "params": n,
        "flops_per_step": flops,
        "grad_bytes": 4 * n,
        "allreduce_bytes": sent,
        "flops_per_grad_byte": flops / (4 * n),
        "flops_per_allreduce_byte": flops / sent if sent else None,
    }


class AutocastForward(nn.Module):
    """Chapter 11: `module`'s forward under torch.autocast in `dtype`; the logits come back in float32."""

    def __init__(self, module: nn.Module, dtype: torch.dtype):
        super().__init__()
        self.module, self.dtype = module, dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (B, classes) float32 of images x, computed under autocast."""
        with torch.autocast(x.device.type, dtype=self.dtype):
            return self.module(x).float()


def free_memory(device: torch.device) -> None:
    """Chapter 11: collect the garbage and, on a GPU, hand the allocator's cached blocks back."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def average_gradients(params: list[torch.Tensor]) -> None:
    """Chapter 11: every process's gradients of `params` replaced by their mean over the processes.

    All of them are copied into one flat buffer, summed by one all-reduce
    and divided by the world size (gloo has no average), then copied back.
    """
    grads = [p.grad for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    for g, part in zip(grads, flat.split([g.numel() for g in grads]), strict=True):
        g.copy_(part.view_as(g))


def max_param_difference(params: list[torch.Tensor]) -> float:
    """Chapter 11: largest |parameter - process 0's| over parameters and processes (broadcast, compare)."""
    with torch.no_grad():
        mine = torch.cat([p.reshape(-1) for p in params])
        first = mine.clone()
        dist.broadcast(first, src=0)
        diff = (mine - first).abs().max().reshape(1)
    dist.all_reduce(diff, op=dist.ReduceOp.MAX)
    return float(diff.item())


def grad_difference(model: DDP, step_grads) -> float:
    """Chapter 11: max |DDP's averaged gradient - `average_gradients`'| / max |gradient|, on one batch.

    `step_grads(sync)` runs one forward and backward pass, with DDP's
    all-reduce (sync=True) or under no_sync; the parameters do not change.
    """
    params = list(model.parameters())
    step_grads(True)
    ddp = [p.grad.detach().clone() for p in params]
    step_grads(False)
    average_gradients(params)
    diff = max((a - p.grad).abs().max().item() for a, p in zip(ddp, params, strict=True))
    scale = max(a.abs().max().item() for a in ddp)
    model.zero_grad(set_to_none=True)
    out = torch.tensor([diff / scale if scale else diff], dtype=torch.float64, device=ddp[0].device)
    dist.all_reduce(out, op=dist.ReduceOp.MAX)
    return float(out.item())


def time_row(args, device: torch.device, costs: dict, bucket_mb: float | None, overlap: bool) -> dict:
    """Chapter 11: one row: a fresh model in a fresh DDP, warmed up, checked, timed; its figures.

    `costs` is `step_costs` of the row's batch (images per process).
    """
    batch = costs["batch"]
    rank, world = dist.get_rank(), dist.get_world_size()
    cuda = device.type == "cuda"
    net: nn.Module = make_model(args.model, args.seed, device)
    if args.dtype != "float32":
        net = AutocastForward(net, DTYPES[args.dtype])
    model = DDP(net, device_ids=[device.index] if cuda else None, bucket_cap_mb=bucket_mb)
    opt = make_optimizer(model.parameters(), "adamw", lr=args.lr)
    x, y = synthetic_batch(args.model, batch, args.seed + 1 + rank, device)  # the data split, by RANK
    row: dict = {"batch_per_process": batch, "bucket_mb": bucket_mb, "overlap": overlap}
    if overlap:

        def step():
            train_step(model, opt, x, y)

    else:

        def grads(sync: bool):
            model.zero_grad(set_to_none=True)
            if sync:
                F.cross_entropy(model(x), y).backward()
            else:
                with model.no_sync():
                    F.cross_entropy(model(x), y).backward()

        row["grad_difference"] = grad_difference(model, grads)
        if row["grad_difference"] > SAME_GRADS:
            raise SystemExit(
                f"ddp_scaling: the no-overlap step's averaged gradients differ from DDP's by "
                f"{row['grad_difference']:.3g} of the largest gradient (allowed {SAME_GRADS:g}): "
                "average_gradients is broken"
            )
        params = list(model.parameters())
        opt.register_step_pre_hook(lambda *_: average_gradients(params))

        def step():
            with model.no_sync():  # the forward pass too, or DDP would still all-reduce in the backward
                train_step(model, opt, x, y)

    for _ in range(args.warmup):
        step()
    row["max_param_difference"] = max_param_difference(list(model.parameters()))
    if row["max_param_difference"] > SAME_PARAMS * args.lr:
        raise SystemExit(
            f"ddp_scaling: after {args.warmup} steps ({row_key(row)}), a process's parameters differ from "
            f"process 0's by {row['max_param_difference']:.3g} (allowed {SAME_PARAMS * args.lr:.3g}): the "
            "gradients were not averaged, and the timing would measure a broken program"
        )
    multigpu.synchronize([device])
    t = slowest_ms(step, device, steps=args.steps, warmup=0, repeat=args.repeat)
    logging = model._get_ddp_logging_data() if overlap else {}
    sizes = logging.get("rebuilt_bucket_sizes") or logging.get("bucket_sizes")
    row["buckets_bytes"] = [int(s) for s in str(sizes).split(",")] if sizes else None
    row["rank_ms"], row["step_ms"] = t["rank_ms"], t["median_ms"]
    row["images_per_s"] = world * batch / (row["step_ms"] * 1e-3)
    row["flops_per_step"] = costs["flops_per_step"]
    row["tflops_per_process"] = costs["flops_per_step"] / (row["step_ms"] * 1e-3) / 1e12
    row["allreduce_bytes"] = costs["allreduce_bytes"]
    row["flops_per_allreduce_byte"] = costs["flops_per_allreduce_byte"]
    model = opt = net = step = None  # the next row builds its own
    free_memory(device)
    return row


def allreduce_ms(n_params: int, device: torch.device, steps: int, repeat: int) -> float | None:
    """Chapter 11: ms of one all-reduce of `n_params` float32 (the flat gradients), slowest process."""
    if dist.get_world_size() == 1:
        return None
    buf = torch.zeros(n_params, device=device)
    multigpu.synchronize([device])
    t = slowest_ms(lambda: dist.all_reduce(buf), device, steps=steps, warmup=2, repeat=repeat)
    buf = None
    free_memory(device)
    return t["median_ms"]


def parse_buckets(text: str) -> list[float | None]:
    """Chapter 11: '--bucket-mb default,1,25' -> [None, 1.0, 25.0] (None: DDP's default buckets)."""
    out: list[float | None] = []
    for part in (p.strip() for p in text.split(",")):
        if part == "default":
            out.append(None)
            continue
        try:
            mb = float(part)
        except ValueError:
            mb = -1.0
        if not mb > 0:
            raise argparse.ArgumentTypeError(
                f"--bucket-mb takes sizes in MiB above 0 or 'default', separated by commas; {part!r} is "
                "neither"
            )
        out.append(mb)
    return out


def parse_counts(text: str) -> list[int]:
    """Chapter 11: '--batch 64,16' -> [64, 16]: whole numbers of at least 1, separated by commas."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part.isdigit() or int(part) < 1:
            raise argparse.ArgumentTypeError(
                f"--batch takes whole numbers of images per process, at least 1, separated by commas; "
                f"{part!r} is not one"
            )
        out.append(int(part))
    return out


def parse(argv=None) -> argparse.Namespace:
    """Chapter 11: the command line (`argv` or sys.argv); unset options get the backend's defaults later."""
    p = parser(__doc__, "folder for ddp-scaling-<backend>-<world>.json")
    p.add_argument("--model", choices=list(MODELS), help="default: vit-b16 with NCCL, tiny with gloo")
    p.add_argument(
        "--batch", type=parse_counts, help="images per process, comma-separated (default: 64,16 / 4)"
    )
    p.add_argument("--steps", type=int, help="timed steps per loop (default: 20 with NCCL, 2 with gloo)")
    p.add_argument("--warmup", type=int, help="untimed steps first, at least 2 (default: 5 / 2)")
    p.add_argument("--repeat", type=int, help="timed loops; the median counts (default: 3 / 1)")
    p.add_argument(
        "--bucket-mb",
        type=parse_buckets,
        default=parse_buckets(BUCKETS),
        help=f"DDP bucket_cap_mb values to sweep, comma-separated, 'default' for DDP's (default: {BUCKETS})",
    )
    p.add_argument(
        "--no-overlap", action="store_true", help="also time the step with the all-reduce after the backward"
    )
    p.add_argument(
        "--dtype", choices=COMPUTE_DTYPES, help="compute dtype (bfloat16: autocast); default bfloat16 on GPUs"
    )
    p.add_argument("--lr", type=float, default=1e-3, help="AdamW's learning rate")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def fill_defaults(args: argparse.Namespace, backend: str) -> argparse.Namespace:
    """Chapter 11: options left unset take the backend's defaults (`DEFAULTS`); wrong ones stop the run."""
    fill_unset(args, DEFAULTED, DEFAULTS[backend])
    at_least("ddp_scaling", args, ("steps", "repeat"))
    at_least(
        "ddp_scaling",
        args,
        ("warmup",),
        2,
        why="DDP rebuilds its buckets in the order the gradients arrived in the first step, at the start of "
        "the second",
    )
    return args


def run(args: argparse.Namespace, device: torch.device) -> dict:
    """Chapter 11: one process's part: a row per batch and bucket size, timed; the rows, the model's costs."""
    args = fill_defaults(args, args.backend)
    if args.backend == "nccl" and args.dtype == "float32":
        precision.set_fp32()  # float32 means true FP32: no TF32 in matrix products and convolutions
    world = dist.get_world_size()
    plan = [(b, True) for b in args.bucket_mb] + ([(None, False)] if args.no_overlap else [])
    costs = [step_costs(args.model, n, world) for n in args.batch]
    rows = [time_row(args, device, c, b, overlap) for c in costs for b, overlap in plan]
    flat_ms = allreduce_ms(costs[0]["params"], device, args.steps, args.repeat)
    return {
        "model": args.model,
        "model_config": MODELS[args.model],
        "dtype": args.dtype,
        "optimizer": f"AdamW (lr {args.lr:g}, weight decay {ADAMW_WEIGHT_DECAY:g})",
        "batch_per_process": args.batch,
        "costs": costs,
        "steps": args.steps,
        "warmup": args.warmup,
        "repeat": args.repeat,
        "allreduce_ms": flat_ms,
        "time": "per process: median of --repeat loops of --steps steps; a row: the slowest process",
        "rows": rows,
    }


def main(argv=None) -> None:
    """Chapter 11: one process, as torchrun starts it; process 0 writes the JSON into --out."""
    run_program("ddp_scaling", parse(argv), run, prefix="ddp-scaling", named=True)


if __name__ == "__main__":
    main()
