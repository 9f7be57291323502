"""Several devices: where the columns go, with fallbacks, and data-parallel runs under torchrun (Chapter 7).

`place_columns(2)` gives two GPUs when the process has them, else both
columns on one GPU, else the CPU, and says which in one sentence; asking
for two GPUs on a one-GPU machine (a Colab runtime) gives that sentence and
the fallback, never a crash (`strict=True` turns it into `NotEnoughGPUs`).

`torchrun(script, ...)` starts a script in several processes with
`python -m torch.distributed.run --standalone`, with this process's
environment: the NVLink-multicast switches of `MULTICAST_OFF` always set,
and the package importable. `ddp_backend` picks NCCL when every process
can have a GPU of its own, else gloo on the CPU.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: Environment that every process started here gets: no NVLink multicast, no multimem (Chapter 7).
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}


class NotEnoughGPUs(RuntimeError):
    """More GPUs were asked for, with strict=True, than this process can use (Chapter 7)."""


@dataclass(frozen=True)
class Placement:
    """Where the two columns run: `devices[c]` for column c; `kind` and a sentence (Chapter 7)."""

    devices: tuple[str, str]
    kind: str  # 'two GPUs', 'one GPU' or 'CPU'
    note: str

    def __str__(self) -> str:
        return self.note


def gpu_count() -> int:
    """GPUs PyTorch can use in this process: 0 under the simulator or without a CUDA build of PyTorch."""
    from cudalearn.runtime import device

    if device.mode() != "gpu":
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _gpu_name(i: int) -> str:
    import torch

    try:
        return torch.cuda.get_device_name(i)
    except (RuntimeError, AssertionError):
        return f"GPU {i}"


def place_columns(want: int = 2, *, gpus: int | None = None, strict: bool = False) -> Placement:
    """Devices for the two columns: `want` GPUs (1 or 2) if there are that many, else the best fallback.

    `gpus` pretends the machine has that many GPUs (to show the fallbacks
    anywhere). With fewer GPUs than asked for, `strict=True` raises
    `NotEnoughGPUs` with the same sentence instead of falling back.
    """
    if want not in (1, 2):
        raise ValueError(f"want is 1 or 2 GPUs (one per column at most), not {want}")
    have = gpu_count() if gpus is None else gpus
    if have >= 2 and want == 2:
        names = f"{_gpu_name(0)} and {_gpu_name(1)}" if gpus is None else "two GPUs"
        return Placement(
            ("cuda:0", "cuda:1"),
            "two GPUs",
            f"Two GPUs ({names}): column 0 on cuda:0, column 1 on cuda:1; activations cross between "
            "them at the exchange layers.",
        )
    if have >= 1:
        note = (
            "One GPU asked for: both columns on cuda:0; the exchanges copy nothing, "
            "but their bytes are still counted."
        )
        if want == 2:
            name = f" ({_gpu_name(0)})" if gpus is None else ""
            note = (
                f"You asked for two GPUs, but this process can use only {have}{name}. "
                "Falling back to one GPU: both columns "
                "run on cuda:0 and compute exactly the same thing; the exchanges copy nothing, but their "
                "bytes are still counted. (A Colab runtime has one GPU; a second needs a machine with two.)"
            )
            if strict:
                raise NotEnoughGPUs(note)
        return Placement(("cuda:0", "cuda:0"), "one GPU", note)
    note = (
        "No GPU in this process: both columns run on the CPU and compute exactly the same thing; the "
        "exchanges copy nothing, but their bytes are still counted."
    )
    if strict:
        raise NotEnoughGPUs(note)
    return Placement(("cpu", "cpu"), "CPU", note)


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


#: The data-parallel training program of Chapter 7 (chapters/ch07/ddp_step.py), run by torchrun as a
#: file (a path, not an import: it is a program); it ships in the package.
DDP_STEP = Path(__file__).resolve().parents[1] / "chapters" / "ch07" / "ddp_step.py"


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


def ddp_problem(batch: int, seed: int = 0):
    """The data-parallel check's network and batch: (small AlexNet without dropout, x (batch, 1, 32, 32), y).

    Every process and the single-process reference call it with the same
    seed and get the same weights and data (Chapter 7).
    """
    import torch

    from cudalearn.nn.alexnet import AlexNet, AlexNetConfig

    cfg = AlexNetConfig.small(dropout=0.0)  # no dropout: the processes' random masks would differ
    torch.manual_seed(seed)
    net = AlexNet(cfg)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, cfg.in_channels, cfg.image, cfg.image, generator=gen)
    y = torch.randint(0, cfg.classes, (batch,), generator=gen)
    return net, x, y


def sgd_steps(net, x, y, steps: int, lr: float = 0.01) -> list[float]:
    """`steps` training steps on one batch (SGD, momentum 0.9, weight decay 5e-4); the losses (Chapter 7)."""
    from cudalearn.nn.training import sgd_2012, train_step

    opt = sgd_2012(net.parameters(), lr)
    return [float(train_step(net, opt, x, y)) for _ in range(steps)]


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


def split_step_figures(cfg, batch: int, steps: int) -> dict:
    """Chapter 7's `ch7.split_step`: a training step timed unsplit, in two columns on one GPU and on two.

    Each row holds `step_ms`'s figures and images/s; the split rows also
    the bytes their step moved between the columns; with two GPUs,
    `copy_gbs` is the speed of a 256 MiB copy from one GPU to the other.
    """
    import gc

    import torch

    from cudalearn.nn.alexnet import TrainStep

    plans = {
        "unsplit, one GPU": dict(devices=("cuda:0",)),
        "two columns, one GPU": dict(devices=("cuda:0", "cuda:0"), split=True),
    }
    if gpu_count() >= 2:
        plans["two columns, two GPUs"] = dict(devices=("cuda:0", "cuda:1"), split=True)
    rows = {}
    for name, kw in plans.items():
        step = TrainStep(cfg, batch, **kw)
        t = step_ms(step, step.devices, steps=steps)
        rows[name] = {**t, "images_per_s": batch / (t["median_ms"] * 1e-3)}
        if kw.get("split"):
            step.net.traffic.reset()
            step()
            synchronize(step.devices)
            rows[name]["bytes_per_step"] = step.net.traffic.total()
        del step
        gc.collect()
        torch.cuda.empty_cache()
    out = {"batch": batch, "rows": rows}
    if gpu_count() >= 2:
        a = torch.empty(2**26, device="cuda:0")  # 256 MiB of float32
        b = torch.empty(2**26, device="cuda:1")
        t = step_ms(lambda: b.copy_(a), ("cuda:0", "cuda:1"), steps=10)
        out["copy_gbs"] = 4 * 2**26 / (t["median_ms"] * 1e-3) / 1e9
    return out


def figures(key: str, measure, *, gpus: int = 1) -> tuple[dict | None, str]:
    """`reference.figures`, measuring only where this process has `gpus` GPUs, else stored (Chapter 7).

    A figure that needs two GPUs (a split step, a data-parallel step) is
    neither measured nor recorded on a one-GPU machine, so the stored
    two-GPU run is never replaced by a partial one; nor is a stored figure
    that records `"gpus"` (a sweep over world sizes, Chapter 11) measured on
    more GPUs than this machine has.
    """
    from cudalearn.runtime import device
    from cudalearn.measure import reference

    have = gpu_count()
    stored, data = reference.lookup(key)
    wider = stored is not None and stored.get("gpus", 0) > have  # a sweep stored from a bigger machine
    if device.mode() != "gpu" or (have >= gpus and not wider):
        return reference.figures(key, measure)
    if stored is None:
        return None, f"not measured: this figure needs {gpus} GPUs, this process has {have}"
    why = f"stored from {stored['gpus']} GPUs" if wider else f"this figure needs {gpus} GPUs"
    return stored, f"reference run on {reference.label(data, key)} ({why}, here {have})"


def _grouped_conv_ms(c_in: int, c_out: int, h: int, kernel: int, padding: int, batch: int, steps: int):
    """(grouped, as two halves): ms of forward + backward of one groups=2 convolution on cuda:0."""
    import torch

    def conv(i, o, groups=1):
        return torch.nn.Conv2d(i, o, kernel, 1, padding, groups=groups).to("cuda:0")

    x = torch.randn(batch, c_in, h, h, device="cuda:0", requires_grad=True)
    grouped, left, right = conv(c_in, c_out, 2), conv(c_in // 2, c_out // 2), conv(c_in // 2, c_out // 2)
    a, b = x[:, : c_in // 2], x[:, c_in // 2 :]
    one = step_ms(lambda: grouped(x).sum().backward(), ("cuda:0",), steps=steps)["median_ms"]
    two = step_ms(lambda: (left(a).sum() + right(b).sum()).backward(), ("cuda:0",), steps=steps)["median_ms"]
    return one, two


def grouped_conv_figures(cfg, batch: int, steps: int = 20) -> dict:
    """Chapter 7's `ch7.grouped_conv`: each grouped convolution timed as one, and as two halves.

    For the convolutions of `cfg` whose columns do not exchange (conv2,
    conv4, conv5 in 2012), on `batch` random inputs on cuda:0: forward +
    backward of one `groups=2` convolution, and of two ordinary
    convolutions of half the channels each (what the two columns run), in
    milliseconds (`step_ms`).
    """
    from cudalearn.nn.alexnet import CONVS

    out: dict = {"batch": batch}
    for name in CONVS[1:]:
        if cfg.groups(name) == 2:
            spec = cfg.convs[CONVS.index(name)]
            c_in, c_out, h = cfg.input_shape(name)[0], cfg.output_shape(name)[0], cfg.input_shape(name)[1]
            one, two = _grouped_conv_ms(c_in, c_out, h, spec.kernel, spec.padding, batch, steps)
            out[name] = {"grouped_ms": one, "halves_ms": two}
    return out
