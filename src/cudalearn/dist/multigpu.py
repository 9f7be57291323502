"""Several processes on several devices: GPUs counted, torchrun started, bytes and time of a step (Ch. 7, 11).

`torchrun(script, ...)` starts a script in several processes with
`python -m torch.distributed.run --standalone`, with this process's
environment (`launch_env`): the NVLink-multicast switches of
`MULTICAST_OFF` always set, and the package importable. `ddp_backend`
picks NCCL when every process can have a GPU of its own, else gloo on the
CPU. `allreduce_bytes` and `allgather_bytes` count what a ring sends;
`step_ms` times work that spans several devices; `figures` measures a
figure only where this process has the GPUs it needs. Chapter 7's own
uses of them live in `cudalearn.chapters.ch07` (`placement`,
`split_timing`, `ddp_step`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

#: Environment that every process started here gets: no NVLink multicast, no multimem (Chapter 7).
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}


class NotEnoughGPUs(RuntimeError):
    """More GPUs were asked for than this process can use (Chapter 7's strict placement, Chapter 11)."""


def gpu_count() -> int:
    """GPUs PyTorch can use in this process: 0 under the simulator or without a CUDA build of PyTorch."""
    from cudalearn.runtime import device

    if device.mode() != "gpu":
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def allreduce_bytes(n_params: int, world: int, bytes_per_element: int = 4) -> int:
    """Bytes each process sends (and receives) to average `n_params` gradients over `world` processes.

    A ring all-reduce sends each gradient in `world` chunks, twice round the
    ring (reduce-scatter, then all-gather): 2 (world - 1) / world of the
    gradients per process, whatever the batch (Chapter 7).
    """
    return 2 * (world - 1) * n_params * bytes_per_element // world


def allgather_bytes(n_elements: int, world: int, bytes_per_element: int = 4) -> int:
    """Bytes each process sends in a ring all-gather whose output holds `n_elements` (Chapter 11).

    Each process starts with 1 / world of the output and passes world - 1
    chunks round the ring: (world - 1) / world of the output per process,
    the second half of `allreduce_bytes`'s ring.
    """
    return (world - 1) * n_elements * bytes_per_element // world


def ddp_backend(nproc: int) -> str:
    """'nccl' when each of `nproc` processes can have a GPU of its own, else 'gloo' (on the CPU)."""
    return "nccl" if gpu_count() >= nproc else "gloo"


def launch_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment for a child: MULTICAST_OFF set, the package importable, one CPU thread."""
    env = dict(os.environ)
    env.update(MULTICAST_OFF)
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(extra or {})
    return env


def torchrun(
    script: str | Path,
    *args: str,
    nproc: int = 2,
    timeout: float = 300,
    cwd: str | Path | None = None,
    rendezvous: Sequence[str] = ("--standalone",),
) -> subprocess.CompletedProcess:
    """Run `script` in `nproc` processes under torchrun on this machine; raise with its output if it fails.

    `rendezvous` is how the processes find each other: one node by default;
    Chapter 11's `parallel_runs.rendezvous` gives the flags of a node of several.
    """
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        *rendezvous,
        f"--nproc_per_node={nproc}",
        str(script),
        *map(str, args),
    ]
    try:
        done = subprocess.run(cmd, env=launch_env(), cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(
            f"torchrun did not finish in {timeout:.0f} s: {' '.join(cmd)}\n"
            f"{(e.stderr or '')[-3000:] if isinstance(e.stderr, str) else ''}"
        ) from None
    if done.returncode != 0:
        raise RuntimeError(
            f"torchrun failed (exit {done.returncode}): {' '.join(cmd)}\n"
            f"--- stdout ---\n{done.stdout[-2000:]}\n--- stderr ---\n{done.stderr[-4000:]}"
        )
    return done


def synchronize(devices) -> None:
    """Wait for the work queued on every CUDA device of `devices` (CPU devices need no wait)."""
    import torch

    for d in dict.fromkeys(str(d) for d in devices):
        if torch.device(d).type == "cuda":
            torch.cuda.synchronize(d)


def step_ms(fn, devices, *, steps: int = 10, warmup: int = 3, repeat: int = 3) -> dict:
    """Milliseconds per call of `fn`, whose work may span several devices: median of `repeat` timed loops.

    Each loop queues `steps` calls and waits for every device before the
    clock stops, so work still running on a second GPU is not missed (CUDA
    events on one device would miss it). Chapter 7.
    """
    import statistics
    import time

    for _ in range(warmup):
        fn()
    synchronize(devices)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(steps):
            fn()
        synchronize(devices)
        times.append((time.perf_counter() - t0) * 1e3 / steps)
    return {"median_ms": statistics.median(times), "min_ms": min(times), "steps": steps, "repeat": repeat}


def figures(key: str, measure, *, gpus: int = 1) -> tuple[dict | None, str]:
    """`reference.figures`, measuring only where this process has `gpus` GPUs, else stored (Chapter 7).

    A figure that needs two GPUs (a split step, a data-parallel step) is
    neither measured nor recorded on a one-GPU machine, so the stored
    two-GPU run is never replaced by a partial one; nor is a stored figure
    that records `"gpus"` (a sweep over world sizes, Chapter 11) measured on
    more GPUs than this machine has.
    """
    from cudalearn.measure import reference
    from cudalearn.runtime import device

    have = gpu_count()
    stored, data = reference.lookup(key)
    wider = stored is not None and stored.get("gpus", 0) > have  # a sweep stored from a bigger machine
    if device.mode() != "gpu" or (have >= gpus and not wider):
        return reference.figures(key, measure)
    if stored is None:
        return None, f"not measured: this figure needs {gpus} GPUs, this process has {have}"
    why = f"stored from {stored['gpus']} GPUs" if wider else f"this figure needs {gpus} GPUs"
    return stored, f"reference run on {reference.label(data, key)} ({why}, here {have})"
