"""FSDP trains a model whose training state does not fit one GPU under a memory cap, by torchrun (Chapter 11).

    python -m torch.distributed.run --standalone --nproc_per_node=N \\
        $(python -c 'from cudalearn.chapters.ch11 import fsdp_fit as f; print(f.__file__)') --out DIR --check

Multi-node: the same command on each of M nodes, `torchrun --nnodes=M
--rdzv_backend=c10d --rdzv_endpoint=HOST:PORT --nproc_per_node=N ...`; a process
takes its GPU from LOCAL_RANK and its data from RANK, and the parameters are
sharded over all M x N processes.

It ships inside the package. Every process builds the same Vision
Transformer (Chapter 9's `ViT`, about 1.2 billion parameters by default on
GPUs: `ddp_scaling.MODELS['vit-1b']`) from one seed and trains it a few
steps with AdamW on `--batch` random images of its own, twice, under the
same memory cap: first replicated with DistributedDataParallel (every
process holds all parameters, gradients and optimiser state), then fully
sharded with FSDP (each process holds 1/N of each). An out-of-memory error
is caught and reported (`fits: false` and the error's first line), not a
crash: every process runs the same allocations under the same cap, so they
all fail at the same point, and no collective is left waiting.

**Which FSDP.** FSDP2, `torch.distributed.fsdp.fully_shard` (PyTorch's
current FSDP; FSDP1's `FullyShardedDataParallel` is its predecessor). It
runs on CPU processes with gloo in this PyTorch (2.13: its all-gather and
reduce-scatter work there, in float64 too), so one program serves the CPU
test and the GPUs; and it shards each parameter on its first dimension as a
`DTensor`, so a process's logical share is the sum of its parameters' local
shards (`DTensor.to_local()`, what `held_bytes` counts). In memory FSDP2 pads
each parameter's shard to the size of rank 0's chunk of it, so that its
collectives move equal pieces (the shards of the parameters and the
reduce-scatter output the gradients are views of; not Adam's state, made from
the unpadded shards); FSDP1 pads one FlatParameter instead. `fully_shard` is
applied to each transformer block, then to the whole model (the embedding,
positions, final norm and head): a block's
parameters are all-gathered before its forward pass and again before its
backward pass (FSDP2 frees them after the forward: `reshard_after_forward`),
and its gradients reduce-scattered after it; the root's are gathered once. With `--dtype bfloat16` (the
GPU default) it computes in bfloat16 (`MixedPrecisionPolicy`: bfloat16
parameters for compute and all-gather, float32 gradient reduction and
logits), and the DDP attempt under autocast, as `ddp_scaling` does.

**What each process should hold.** `model_state_bytes` is ZeRO's count
(Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion
Parameter Models", SC 2020, section 3.1 and 5): Ψ parameters trained with
Adam take 4Ψ bytes of float32 parameters, 4Ψ of gradients and 8Ψ of Adam's
two moments when replicated (16Ψ); in mixed precision ZeRO counts
2Ψ + 2Ψ + KΨ with K = 12 (float16 parameters and gradients; a float32
copy and the two moments), the same 16Ψ. Fully sharded over N processes
(ZeRO stage 3, which FSDP is) each holds 1/N. Here the persistent state is
the float32 recipe in both dtypes (bfloat16 copies exist only while a block
computes), and DDP keeps its gradients as views into its all-reduce buckets
(`gradient_as_bucket_view=True`; without it the buckets would be another
4Ψ). Each process reports what it holds, counted tensor by tensor, beside
the prediction.

**The cap** (GPU only): `--cap-gib G` lets each process allocate G GiB
(`torch.cuda.set_per_process_memory_fraction(G / total)`, through
`step_memory.memory_cap`); `auto` (the default) is 3/4 of the predicted
replicated model state, so the replicated training state cannot fit and a
sharded one over two or more GPUs can, activations included at the default
batch. Each process reports its peak (`torch.cuda.max_memory_allocated`).
On the CPU there is no cap: the program reports the bytes held only.

**The check** (`--check`): a tiny ViT in float64 trained `--check-steps`
steps under FSDP, each process on its 1/N of a `--check-batch` batch, ends
with the same parameters (gathered: `DTensor.full_tensor()`) as one process
trained on the whole batch, to `CHECK_TOLERANCE`; process 0 saves them to
DIR/fsdp-check-<backend>-<world>.pt. Process 0 writes
DIR/fsdp-fit-<backend>-<world>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import math

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel as DDP

from cudalearn.chapters.ch07.step_memory import memory_cap
from cudalearn.chapters.ch09.model import ViT
from cudalearn.chapters.ch11.ddp_scaling import (
    MODELS,
    AutocastForward,
    free_memory,
    make_model,
    synthetic_batch,
)
from cudalearn.dist import multigpu
from cudalearn.dist.program import (
    COMPUTE_DTYPES,
    DTYPES,
    at_least,
    barrier,
    fill_unset,
    gather,
    parser,
    run_program,
)
from cudalearn.nn.training import ADAMW_WEIGHT_DECAY, make_optimizer, train_step
from cudalearn.runtime import precision

#: Bytes per parameter of (parameters, gradients, optimiser state) with Adam (ZeRO, section 3.1).
RECIPES = {"fp32-adam": (4, 4, 8), "mixed-adam": (2, 2, 12)}
#: Defaults per backend: (model, images per process, steps, dtype), for the options of `DEFAULTED`.
DEFAULTS = {"nccl": ("vit-1b", 4, 3, "bfloat16"), "gloo": ("tiny", 4, 3, "float32")}
DEFAULTED = ("model", "batch", "steps", "dtype")
#: `--cap-gib auto`: this share of the predicted replicated model state.
CAP_SHARE = 0.75
#: Largest |FSDP parameter - single-process parameter| the float64 check allows.
CHECK_TOLERANCE = 1e-10
GiB = 2**30


def model_state_bytes(n_params: int, world: int = 1, *, sharded: bool, recipe: str = "fp32-adam") -> dict:
    """Chapter 11: ZeRO's bytes of parameters, gradients, Adam state per process; sharded: divided by world.

    recipe 'fp32-adam': 4Ψ + 4Ψ + 8Ψ; 'mixed-adam': 2Ψ + 2Ψ + 12Ψ
    (Rajbhandari et al. 2020). Sharded figures are the mean over the
    processes (a parameter's first dimension may not split evenly).
    """
    if recipe not in RECIPES:
        raise ValueError(f"recipe {recipe!r}: choose among {', '.join(RECIPES)}")
    if world < 1:
        raise ValueError(f"world must be at least 1, not {world}")
    share = world if sharded else 1
    out = {
        k: b * n_params / share
        for k, b in zip(("params", "grads", "optimizer"), RECIPES[recipe], strict=True)
    }
    out["total"] = sum(out.values())
    return out


def param_shapes(name: str) -> list[tuple[int, ...]]:
    """Chapter 11: the shapes of the parameters of `ViT(**MODELS[name])`, built on the meta device."""
    with torch.device("meta"):
        return [tuple(p.shape) for p in ViT(**MODELS[name]).parameters()]


def block_params(name: str) -> int:
    """Chapter 11: the parameters of one transformer block of `ViT(**MODELS[name])`, FSDP's unit here."""
    with torch.device("meta"):
        return sum(p.numel() for p in ViT(**MODELS[name]).blocks[0].parameters())


def shard_bytes_by_rank(shapes: list[tuple[int, ...]], world: int, recipe: str = "fp32-adam") -> list[dict]:
    """Chapter 11: each process's bytes when every parameter's first dimension is cut as FSDP2 cuts it.

    FSDP2 splits dim 0 like `torch.chunk`: chunks of ceil(d0 / world) rows,
    the last ones smaller or empty. ZeRO's mean (`model_state_bytes`) is
    their average; a parameter with one row (a ViT's positions, (1, N, D))
    belongs whole to process 0. These are the logical shards: FSDP2 stores
    each one padded to rank 0's chunk (see the module's docstring).
    """
    out = []
    for rank in range(world):
        numel = 0
        for shape in shapes:
            rows = shape[0] if shape else 1
            chunk = math.ceil(rows / world)
            mine = max(0, min(chunk, rows - rank * chunk))
            numel += mine * math.prod(shape[1:])
        out.append(model_state_bytes(numel, sharded=False, recipe=recipe))
    return out


def local_bytes(t: torch.Tensor | None) -> int:
    """Chapter 11: bytes of the part of `t` this process holds (a DTensor's local shard; 0 for None)."""
    if t is None:
        return 0
    if isinstance(t, DTensor):
        t = t.to_local()
    return t.numel() * t.element_size()


def held_bytes(model: nn.Module, opt: torch.optim.Optimizer) -> dict:
    """Chapter 11: bytes this process holds of parameters, gradients and optimiser state (local shards).

    Under FSDP2 these are the logical shards; its padded storage of a
    parameter's shard can be larger (see the module's docstring).

    The optimiser's parameter-sized tensors are counted; scalars such as
    Adam's step count are left out, as `step_memory.optimizer_state_bytes`
    does.
    """
    params = list(model.parameters())
    state = [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0]
    out = {
        "params": sum(local_bytes(p) for p in params),
        "grads": sum(local_bytes(p.grad) for p in params),
        "optimizer": sum(local_bytes(v) for v in state),
    }
    out["total"] = sum(out.values())
    return out


def mp_policy(dtype: str, *, root: bool = False) -> MixedPrecisionPolicy:
    """Chapter 11: FSDP2's policy: compute in `dtype`, reduce gradients in float32; the root gives float32."""
    if dtype == "float32" or dtype == "float64":
        return MixedPrecisionPolicy()
    return MixedPrecisionPolicy(
        param_dtype=DTYPES[dtype], reduce_dtype=torch.float32, output_dtype=torch.float32 if root else None
    )


def shard(net: nn.Module, mesh: DeviceMesh, dtype: str = "float32") -> nn.Module:
    """Chapter 11: `fully_shard` on each transformer block of a `ViT`, then on the whole; returns `net`."""
    for block in net.blocks:
        fully_shard(block, mesh=mesh, mp_policy=mp_policy(dtype))
    fully_shard(net, mesh=mesh, mp_policy=mp_policy(dtype, root=True))
    return net


def adamw_steps(net: nn.Module, x, y, steps: int, lr: float) -> tuple[list[float], torch.optim.Optimizer]:
    """Chapter 11: `steps` training steps of `net` on (x, y) with AdamW; (the losses, the optimiser)."""
    opt = make_optimizer(net.parameters(), "adamw", lr=lr)
    return [float(train_step(net, opt, x, y)) for _ in range(steps)], opt


def check_problem(batch: int, seed: int = 0):
    """Chapter 11: the check's tiny ViT in float64 on the CPU, images (batch, 3, 16, 16) float64, labels."""
    net = make_model("tiny", seed).double()
    x, y = synthetic_batch("tiny", batch, seed + 1)
    return net, x.double(), y


def reference_params(batch: int, steps: int, lr: float, seed: int = 0) -> dict[str, torch.Tensor]:
    """Chapter 11: the check's parameters after one process trained `steps` steps on the whole batch."""
    net, x, y = check_problem(batch, seed)
    adamw_steps(net, x, y, steps, lr)
    return {k: v.detach() for k, v in net.named_parameters()}


def run_check(args, device: torch.device, mesh: DeviceMesh) -> dict:
    """Chapter 11: FSDP on the processes' slices against one process on the whole batch, float64."""
    rank, world = dist.get_rank(), dist.get_world_size()
    net, x, y = check_problem(args.check_batch, args.seed)
    share = args.check_batch // world
    part = slice(rank * share, (rank + 1) * share)  # the data split, by RANK
    net = shard(net.to(device), mesh, "float64")
    losses, _ = adamw_steps(net, x[part].to(device), y[part].to(device), args.check_steps, args.lr)
    full = {k: v.full_tensor().detach().cpu() for k, v in net.named_parameters()}
    want = reference_params(args.check_batch, args.check_steps, args.lr, args.seed)
    diff = max((full[k] - want[k]).abs().max().item() for k in want)
    if rank == 0:
        args.out.mkdir(parents=True, exist_ok=True)
        torch.save(full, args.out / f"fsdp-check-{args.backend}-{world}.pt")
    if diff > CHECK_TOLERANCE:
        raise SystemExit(
            f"fsdp_fit: after {args.check_steps} steps, FSDP's parameters differ from one process's on the "
            f"whole batch by {diff:.3g} (allowed {CHECK_TOLERANCE:g}): the sharded training is wrong"
        )
    return {
        "model": "tiny",
        "dtype": "float64",
        "batch": args.check_batch,
        "steps": args.check_steps,
        "losses": gather(losses),
        "max_abs_difference": diff,
        "tolerance": CHECK_TOLERANCE,
    }


def attempt(kind: str, args, device: torch.device, mesh: DeviceMesh, cap: int | None) -> dict:
    """Chapter 11: build and train the model replicated ('ddp') or sharded ('fsdp') under `cap`; what it held.

    Returns this process's figures: fits, the error's first line if not,
    the losses, the bytes held (`held_bytes`) and, on a GPU, the peak
    allocated.
    """
    if kind not in ("ddp", "fsdp"):
        raise ValueError(f"kind is 'ddp' or 'fsdp', not {kind!r}")
    cuda = device.type == "cuda"
    free_memory(device)
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    out: dict = {"rank": dist.get_rank(), "fits": True, "error": None, "losses": None, "held": None}
    try:
        with memory_cap(cap, [device]) if cap else contextlib.nullcontext():
            net = make_model(args.model, args.seed, device)
            if kind == "ddp":
                wrapped = net if args.dtype == "float32" else AutocastForward(net, DTYPES[args.dtype])
                model = DDP(
                    wrapped, device_ids=[device.index] if cuda else None, gradient_as_bucket_view=True
                )
            else:
                model = shard(net, mesh, args.dtype)
            x, y = synthetic_batch(args.model, args.batch, args.seed + 1 + dist.get_rank(), device)
            out["losses"], opt = adamw_steps(model, x, y, args.steps, args.lr)
            out["held"] = held_bytes(model, opt)
            multigpu.synchronize([device])
    except torch.OutOfMemoryError as e:
        out.update(fits=False, error=str(e).strip().split("\n")[0][:400])
    if cuda:
        out["peak_bytes"] = torch.cuda.max_memory_allocated(device)
    net = model = opt = x = y = wrapped = None
    free_memory(device)
    barrier(device)
    return out


def cap_bytes(text: str, replicated: float, device: torch.device) -> tuple[int | None, str]:
    """Chapter 11: (the cap in bytes or None, a sentence saying what it is) for `--cap-gib`."""
    if device.type != "cuda":
        return None, (
            "no cap: the cap is GPU-only (it limits PyTorch's CUDA caching allocator); on the CPU the "
            "program reports the bytes each process holds, not what fits"
        )
    if text == "none":
        return None, "no cap (--cap-gib none)"
    total = torch.cuda.get_device_properties(device).total_memory
    if text == "auto":
        cap = int(CAP_SHARE * replicated)
        note = f"auto: {CAP_SHARE:g} of the predicted replicated model state"
    else:
        try:
            cap = int(float(text) * GiB)
        except ValueError:
            raise SystemExit(f"fsdp_fit: --cap-gib takes GiB, 'auto' or 'none', not {text!r}") from None
        note = f"--cap-gib {text}"
    if not 0 < cap <= total:
        raise SystemExit(
            f"fsdp_fit: a cap of {cap / GiB:.2f} GiB is not between 0 and this GPU's "
            f"{total / GiB:.2f} GiB ({torch.cuda.get_device_name(device)})"
        )
    return cap, f"{note}: {cap / GiB:.2f} GiB of {total / GiB:.2f} GiB (fraction {cap / total:.4f})"


def parse(argv=None) -> argparse.Namespace:
    """Chapter 11: the command line (`argv` or sys.argv); unset options get the backend's defaults later."""
    p = parser(__doc__, "folder for fsdp-fit-<backend>-<world>.json")
    p.add_argument("--model", choices=list(MODELS), help="default: vit-1b with NCCL, tiny with gloo")
    p.add_argument("--batch", type=int, help="images per process (default: 4)")
    p.add_argument("--steps", type=int, help="training steps of each attempt (default: 3)")
    p.add_argument("--dtype", choices=COMPUTE_DTYPES, help="compute dtype; default bfloat16 on GPUs")
    p.add_argument("--cap-gib", default="auto", help="GPU memory cap per process in GiB, 'auto' or 'none'")
    p.add_argument("--lr", type=float, default=1e-3, help="AdamW's learning rate")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check", action="store_true", help="first check FSDP against one process, in float64")
    p.add_argument("--check-batch", type=int, default=8, help="the check's whole batch, split over processes")
    p.add_argument("--check-steps", type=int, default=3)
    return p.parse_args(argv)


def fill_defaults(args: argparse.Namespace, backend: str, world: int) -> argparse.Namespace:
    """Chapter 11: options left unset take the backend's defaults (`DEFAULTS`); wrong ones stop the run."""
    fill_unset(args, DEFAULTED, DEFAULTS[backend])
    at_least("fsdp_fit", args, ("batch", "steps", "check_steps"))
    if args.check and (args.check_batch < world or args.check_batch % world):
        raise SystemExit(
            f"fsdp_fit: --check-batch {args.check_batch} does not split evenly over {world} processes: "
            f"give a multiple of {world}"
        )
    return args


def run(args: argparse.Namespace, device: torch.device) -> dict:
    """Chapter 11: one process's part: the check, then the model trained replicated and sharded, capped."""
    world = dist.get_world_size()
    args = fill_defaults(args, args.backend, world)
    if device.type == "cuda" and args.dtype == "float32":
        precision.set_fp32()  # float32 means true FP32, as in ddp_scaling
    mesh = init_device_mesh(device.type, (world,))
    check = run_check(args, device, mesh) if args.check else None
    shapes = param_shapes(args.model)
    n = sum(math.prod(s) for s in shapes)
    predicted = {
        "replicated": model_state_bytes(n, sharded=False),
        "sharded": model_state_bytes(n, world, sharded=True),
        "sharded_by_rank": shard_bytes_by_rank(shapes, world),
        "zero_mixed_precision_replicated": model_state_bytes(n, sharded=False, recipe="mixed-adam"),
    }
    cap, cap_note = cap_bytes(args.cap_gib, predicted["replicated"]["total"], device)
    attempts = {kind: gather(attempt(kind, args, device, mesh, cap)) for kind in ("ddp", "fsdp")}
    return {
        "fsdp": "FSDP2 (torch.distributed.fsdp.fully_shard): a group per transformer block, the root",
        "model": args.model,
        "model_config": MODELS[args.model],
        "params": n,
        "dtype": args.dtype,
        "optimizer": f"AdamW (lr {args.lr:g}, weight decay {ADAMW_WEIGHT_DECAY:g})",
        "batch_per_process": args.batch,
        "steps": args.steps,
        "cap_bytes": cap,
        "cap": cap_note,
        "predicted": predicted,
        "attempts": attempts,
        "check": check,
    }


def main(argv=None) -> None:
    """Chapter 11: one process, as torchrun starts it; process 0 writes the JSON into --out."""
    run_program("fsdp_fit", parse(argv), run, prefix="fsdp-fit", named=True)


if __name__ == "__main__":
    main()
