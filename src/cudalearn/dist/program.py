"""What every torchrun program of Chapters 7 and 11 does first and last: options, backend, a run's header.

`ddp_step` (Chapter 7), `tp_step`, `collectives_bench`, `ddp_scaling` and
`fsdp_fit` (Chapter 11) run one process per GPU under torchrun. Each builds
its command line on `parser` (--out, --backend), and its `main` hands
`run_program` only what is its own: the work of one process. `run_program`
starts (`start`: NVLink multicast off, the backend chosen, NCCL refused
without a GPU per process, the process group started), runs that work,
writes `run_info` at the head of the run's JSON (`write_run`), meets the
other processes (`barrier`) and ends the group. `fill_unset` and
`at_least` give options their backend's defaults and refuse wrong ones;
`gather` and `slowest_ms` meet the other processes with figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import torch
import torch.distributed as dist

from cudalearn.dist import multigpu
from cudalearn.runtime.device import cpu_name

#: Chapter 11's dtypes by name: float32 (true FP32: TF32 off), bfloat16, and float64 (the checks').
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float64": torch.float64}
#: What the --dtype of ddp_scaling and fsdp_fit names: float32, or bfloat16 under autocast (no float64).
COMPUTE_DTYPES = ("float32", "bfloat16")
#: What --backend names: 'auto' (NCCL with a GPU per process, else gloo), or one of the two.
BACKENDS = ("auto", "nccl", "gloo")


def parser(doc: str, out_help: str) -> argparse.ArgumentParser:
    """Chapters 7 and 11: a torchrun program's command line: `doc`'s first paragraph, --out and --backend.

    The program adds its own options, then parses.
    """
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help=out_help)
    p.add_argument("--backend", choices=list(BACKENDS), default="auto")
    return p


def fill_unset(args: argparse.Namespace, names: Sequence[str], values: Sequence) -> argparse.Namespace:
    """Chapter 11: each option of `names` left unset (None) takes its value in `values` (its backend's)."""
    for name, value in zip(names, values, strict=True):
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def at_least(
    program: str, args: argparse.Namespace, names: Sequence[str], least: int = 1, why: str = ""
) -> None:
    """Chapter 11: SystemExit, a sentence naming `program` and the option, when one of `names` < `least`."""
    for name in names:
        value = getattr(args, name)
        if value < least:
            because = f": {why}" if why else ""
            raise SystemExit(
                f"{program}: --{name.replace('_', '-')} must be at least {least}, not {value}{because}"
            )


def choose_backend(requested: str, local_world: int, gpus: int) -> str:
    """Chapter 11: 'nccl' or 'gloo' for `local_world` processes per node that see `gpus` GPUs.

    'auto' gives NCCL when each process can have a GPU of its own, else
    gloo; 'nccl' without that many GPUs raises `multigpu.NotEnoughGPUs`
    with a sentence naming the cause.
    """
    if requested == "auto":
        return "nccl" if gpus >= local_world else "gloo"
    if requested == "nccl" and gpus < local_world:
        raise multigpu.NotEnoughGPUs(
            f"NCCL was asked for with {local_world} process{'es' * (local_world > 1)} on this node, but "
            + ("there is no GPU (this PyTorch sees none)" if gpus == 0 else f"only {gpus} GPU(s) are visible")
            + ": NCCL needs one GPU per process. Use fewer processes (--nproc_per_node), or --backend gloo "
            "to run on the CPU."
        )
    return requested


def nccl_version() -> str:
    """Chapter 11: NCCL's version as 'major.minor.patch' (a tuple in recent PyTorch, an integer in old)."""
    v = torch.cuda.nccl.version()
    return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)


def start(requested: str, program: str) -> tuple[str, torch.device]:
    """Chapter 11: multicast off, the backend (NCCL refused without a GPU per process), the group started.

    Returns (backend, this process's device: cuda:LOCAL_RANK with NCCL, else
    the CPU). Raises SystemExit with `choose_backend`'s sentence, prefixed
    by `program`, before any process group starts.
    """
    os.environ.update(multigpu.MULTICAST_OFF)  # before NCCL reads its environment
    local_rank, local_world = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    try:
        backend = choose_backend(requested, local_world, gpus)
    except multigpu.NotEnoughGPUs as e:
        raise SystemExit(f"{program}: {e}") from None
    if backend == "nccl":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group(backend, device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group(backend)
    return backend, device


def barrier(device: torch.device) -> None:
    """Chapter 11: every process waits for all the others (on this process's GPU with NCCL)."""
    dist.barrier(device_ids=[device.index] if device.type == "cuda" else None)


def run_info(backend: str, device: torch.device) -> dict:
    """Chapter 11: what a run's JSON says about where it ran: world, nodes, device, versions, date, NVLS."""
    world, local_world = dist.get_world_size(), int(os.environ["LOCAL_WORLD_SIZE"])
    cuda = device.type == "cuda"
    return {
        "world": world,
        "nodes": world // local_world,
        "backend": backend,
        "device": torch.cuda.get_device_name(device) if cuda else f"CPU ({cpu_name()})",
        "versions": {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "nccl": nccl_version() if cuda else None,
            "python": platform.python_version(),
        },
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE"),
    }


def gather(value) -> list:
    """Chapter 11: every process's `value` (any picklable object), in rank order, on every process."""
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def slowest_ms(fn, device: torch.device, *, steps: int, warmup: int, repeat: int = 3) -> dict:
    """Chapter 11: `multigpu.step_ms` of `fn` on every process after a barrier, the slowest process's figures.

    {'median_ms', 'min_ms': the largest over the processes; 'rank_ms': every
    process's median, in rank order; 'steps', 'repeat'}.
    """
    barrier(device)
    t = multigpu.step_ms(fn, [device], steps=steps, warmup=warmup, repeat=repeat)
    medians, mins = zip(*gather((t["median_ms"], t["min_ms"])), strict=True)
    return {
        "median_ms": max(medians),
        "min_ms": max(mins),
        "rank_ms": list(medians),
        "steps": steps,
        "repeat": repeat,
    }


def write_run(out: Path, prefix: str, summary: dict) -> Path | None:
    """Chapter 11: process 0 writes `summary` to out/<prefix>-<backend>-<world>.json; the others nothing.

    `summary` starts with `run_info`'s header; `parallel_runs.launch` reads the file back.
    """
    if dist.get_rank() != 0:
        return None
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{prefix}-{summary['backend']}-{summary['world']}.json"
    path.write_text(json.dumps(summary, indent=1) + "\n")
    print(f"wrote {path}")
    return path


def run_program(
    program: str,
    args: argparse.Namespace,
    work: Callable[[argparse.Namespace, torch.device], dict | None],
    *,
    prefix: str | None = None,
    named: bool = False,
) -> None:
    """Chapters 7 and 11: one process of `program` as torchrun starts it, from `start` to the group's end.

    `args.backend` becomes the backend `start` chose; `work(args, device)`
    runs the program's own part on every process and returns what its run's
    JSON holds after the header (None: it writes its own files). With
    `prefix`, process 0 writes out/<prefix>-<backend>-<world>.json
    (`write_run`): {"program": program} first when `named`, `run_info`'s
    header, then `work`'s. Every process then waits for the others, and the
    process group ends even when `work` stops the run with a sentence.
    """
    args.backend, device = start(args.backend, program)
    try:
        summary = work(args, device)
        if prefix is not None:
            header = {"program": program} if named else {}
            write_run(args.out, prefix, {**header, **run_info(args.backend, device), **summary})
        barrier(device)
    finally:
        dist.destroy_process_group()
