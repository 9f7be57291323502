"""The memory of a training step on the GPU: weights, gradients, optimiser state, activations (Chapter 7).

A training step holds four kinds of bytes on the device:

- the **weights**;
- their **gradients**, one per weight;
- the **optimiser state**: nothing for plain SGD, one buffer per weight for
  SGD with momentum (the 2012 recipe), two for Adam;
- the **activations** that autograd keeps from the forward pass for the
  backward pass (layer inputs, activation outputs, pooling indices, dropout
  masks); they grow with the batch.

`SavedTensors` measures the last kind on any device by watching what
autograd saves; `alexnet_saved_bytes` predicts it for an AlexNet
configuration without building the network. On a GPU, `peak_bytes` reads
what the caching allocator reports and `memory_cap` limits what the process
may allocate, to provoke an out-of-memory error on purpose.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from cudalearn.nn.alexnet import CONVS, FCS, AlexNetConfig
from cudalearn.runtime import precision

#: Parameter-sized buffers an optimiser keeps per parameter (Chapter 7).
OPTIMIZER_BUFFERS = {"sgd": 0, "momentum": 1, "adam": 2}

GiB = 2**30
MiB = 2**20


def fmt_bytes(n: float) -> str:
    """'1.23 GiB', '45.6 MiB' or '789 B': a byte count for people."""
    if abs(n) >= GiB:
        return f"{n / GiB:.2f} GiB"
    if abs(n) >= MiB:
        return f"{n / MiB:.1f} MiB"
    return f"{n:.0f} B"


@dataclass
class StepMemory:
    """The bytes of one training step by kind: weights, gradients, optimiser state, saved activations."""

    weights: int
    gradients: int
    optimizer: int
    activations: int
    detail: dict[str, int] = field(default_factory=dict)  # activations by layer, when known

    @property
    def static(self) -> int:
        """Bytes that stay between steps and do not depend on the batch: weights, gradients, optimiser."""
        return self.weights + self.gradients + self.optimizer

    @property
    def total(self) -> int:
        """All four kinds together."""
        return self.static + self.activations

    def rows(self) -> list[tuple[str, int]]:
        """(kind, bytes) for each kind and the total."""
        return [
            ("weights", self.weights),
            ("gradients", self.gradients),
            ("optimiser state", self.optimizer),
            ("activations saved for backward", self.activations),
            ("total", self.total),
        ]

    def __str__(self) -> str:
        return "\n".join(f"{k:<32}{fmt_bytes(v):>12}" for k, v in self.rows())


def parameter_bytes(model: nn.Module) -> int:
    """Bytes of all parameters of `model`."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def static_bytes(n_params: int, optimizer: str = "momentum", bytes_per_element: int = 4) -> StepMemory:
    """Weights, gradients and optimiser state of `n_params` parameters (activations left at 0)."""
    if optimizer not in OPTIMIZER_BUFFERS:
        raise ValueError(f"optimizer {optimizer!r}: choose among {sorted(OPTIMIZER_BUFFERS)}")
    w = n_params * bytes_per_element
    return StepMemory(w, w, OPTIMIZER_BUFFERS[optimizer] * w, 0)


def optimizer_state_bytes(opt: torch.optim.Optimizer) -> int:
    """Bytes of the parameter-sized tensors in an optimiser's state (scalars such as 'step' left out)."""
    total = 0
    for state in opt.state.values():
        for v in state.values():
            if torch.is_tensor(v) and v.dim() > 0:
                total += v.numel() * v.element_size()
    return total


class SavedTensors:
    """Context manager: the bytes autograd saves for the backward pass, per device, parameters left out.

    Tensors that share memory (a ReLU's output that the next pooling also
    saves, a flattened view) are counted once, at the size of the largest
    view of that memory that was saved. Tensors sharing memory with
    `exclude` (the batch, say) are left out, like the parameters.

        with SavedTensors(model) as saved:
            loss = loss_fn(model(x), y)
        saved.bytes  # {device: bytes}
    """

    def __init__(self, model: nn.Module | None = None, exclude: Sequence[torch.Tensor] = ()) -> None:
        params = [] if model is None else list(model.parameters())
        self._params = {t.untyped_storage().data_ptr() for t in [*params, *exclude]}
        self._seen: dict[tuple[str, int], int] = {}
        self._hooks = None

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in self._params:
            key = (str(t.device), ptr)
            self._seen[key] = max(self._seen.get(key, 0), t.numel() * t.element_size())
        return t

    def __enter__(self) -> SavedTensors:
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)

    @property
    def bytes(self) -> dict[str, int]:
        """{device: bytes saved there}."""
        out: dict[str, int] = {}
        for (dev, _), n in self._seen.items():
            out[dev] = out.get(dev, 0) + n
        return out

    @property
    def total(self) -> int:
        """Bytes saved on all devices together."""
        return sum(self.bytes.values())


def measure_step(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    optimizer: str = "momentum",
    loss_fn: Callable | None = None,
) -> StepMemory:
    """The memory of a training step of `model` on (x, y): parameters counted, activations measured."""
    loss_fn = loss_fn or torch.nn.functional.cross_entropy
    with SavedTensors(model) as saved:
        loss = loss_fn(model(x), y)
    del loss
    n = sum(p.numel() for p in model.parameters())
    mem = static_bytes(n, optimizer, next(model.parameters()).element_size())
    mem.activations = saved.total
    return mem


def alexnet_saved_bytes(cfg: AlexNetConfig, batch: int, device_type: str = "cuda") -> dict[str, int]:
    """What autograd keeps of one float32 training step of `AlexNet(cfg)`, by layer, without building it.

    Per layer: its input (saved by the convolution or matrix product), its
    activation's output (ReLU and tanh save their result), the max-pooling
    indices (int64) and the pooled output, the dropout mask (1 byte per
    element on a GPU, a float32 on the CPU) and the dropout output; for the
    loss, the log-probabilities, the int64 labels and one float32 scalar.
    Shared memory is counted once, as `SavedTensors` does. Assumes the
    fully connected layers exchange (as in both 2012 schemes).
    """
    if any(cfg.groups(n) != 1 for n in FCS):
        raise ValueError("alexnet_saved_bytes assumes every fully connected layer exchanges")
    f32, i64 = 4, 8
    mask = 1 if device_type == "cuda" else 4
    numel = lambda shape: batch * int(np.prod(shape))  # noqa: E731
    out = {"input": numel(cfg.input_shape("conv1")) * f32}
    size = cfg.image
    for i, name in enumerate(CONVS):
        spec = cfg.convs[i]
        size = (size + 2 * spec.padding - spec.kernel) // spec.stride + 1
        act = numel((spec.channels, size, size))
        n = act * f32  # the activation's output (also the next layer's input, or the pooling's)
        if spec.pool:
            size = (size - cfg.pool_kernel) // cfg.pool_stride + 1
            pooled = numel((spec.channels, size, size))
            n += pooled * (f32 + i64)  # pooled output (next input) and the argmax indices
        out[name] = n
    for name in FCS[:-1]:
        width = numel(cfg.output_shape(name))
        out[name] = width * f32 + (width * (mask + f32) if cfg.dropout > 0 else 0)
    out["loss"] = numel((cfg.classes,)) * f32 + f32  # log-probabilities, the total-weight scalar
    out["labels"] = batch * i64
    return out


def peak_bytes(step: Callable[[], object], devices: Sequence[str | torch.device]) -> dict[str, int]:
    """Run `step` once on a GPU; the most bytes the caching allocator held allocated on each device."""
    devices = [torch.device(d) for d in devices]
    for d in devices:
        torch.cuda.synchronize(d)
        torch.cuda.reset_peak_memory_stats(d)
    step()
    for d in devices:
        torch.cuda.synchronize(d)
    return {str(d): int(torch.cuda.max_memory_allocated(d)) for d in devices}


@contextlib.contextmanager
def memory_cap(nbytes: int, devices: Sequence[str | torch.device]) -> Iterator[None]:
    """Let this process allocate at most `nbytes` on each of `devices` (PyTorch's caching allocator).

    Uses `torch.cuda.set_per_process_memory_fraction`; cached blocks are
    released first, so the cap applies to what is really in use. The cap
    is lifted on exit, whatever happened inside.
    """
    devices = [torch.device(d) for d in dict.fromkeys(str(d) for d in devices)]
    torch.cuda.empty_cache()
    for d in devices:
        total = torch.cuda.get_device_properties(d).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, nbytes / total), d)
    try:
        yield
    finally:
        for d in devices:
            torch.cuda.set_per_process_memory_fraction(1.0, d)
        torch.cuda.empty_cache()


def oom_variants(cfg: AlexNetConfig, batch: int, gpus: int) -> dict[str, dict]:
    """Chapter 7's out-of-memory remedies as `TrainStep` settings, by name (the stored figures' keys)."""
    lowp = precision.tensor_core_16bit(gpus > 0)
    variants = {
        "float32, unsplit": {},
        "smaller batch (a quarter)": {"batch": batch // 4},
        f"lower precision ({str(lowp).split('.')[1]} autocast)": {"amp": lowp},
        "activation checkpointing": {"checkpoint": True},
    }
    if gpus >= 2:
        variants["split over two GPUs"] = {"split": True}
    return variants


def attempt(cfg: AlexNetConfig, batch: int, kw: dict, cap: int | None = None) -> dict:
    """Two training steps of a variant, under a memory cap if given: its needs, or the error."""
    import gc

    from cudalearn.dist import multigpu
    from cudalearn.nn.alexnet import TrainStep

    kw = dict(kw)
    b = kw.pop("batch", batch)
    devices = ("cuda:0", "cuda:1") if kw.get("split") else ("cuda:0",)
    base = {d: torch.cuda.memory_allocated(d) for d in devices}
    for d in devices:
        torch.cuda.reset_peak_memory_stats(d)  # the reserved peak covers the whole attempt
    step = None
    try:
        with memory_cap(cap, devices) if cap else contextlib.nullcontext():
            step = TrainStep(cfg, b, devices, **kw)
            step()  # the first step creates the gradients and the momentum buffers
            multigpu.synchronize(devices)
            held = {d: torch.cuda.memory_allocated(d) - base[d] for d in devices}
            peak = peak_bytes(step, devices)
            reserved = {d: torch.cuda.max_memory_reserved(d) for d in devices}
            ms = multigpu.step_ms(step, devices, steps=3, warmup=0, repeat=1)["median_ms"]
        return {
            "fits": True,
            "held": held,
            "peak": {d: peak[d] - base[d] for d in devices},
            "reserved": reserved,
            "ms": ms,
            "batch": b,
        }
    except torch.OutOfMemoryError as e:
        return {"fits": False, "error": str(e)[:700], "batch": b}
    finally:
        step = None
        gc.collect()
        torch.cuda.empty_cache()


def saved_by_unsplit_step(cfg: AlexNetConfig, batch: int) -> int:
    """Bytes autograd saves in one forward pass of the unsplit float32 step on cuda:0 (batch left out)."""
    import gc

    import torch.nn.functional as F

    from cudalearn.nn.alexnet import TrainStep

    step = TrainStep(cfg, batch, ("cuda:0",))
    step()
    with SavedTensors(step.net, exclude=(step.x, step.y)) as saved:
        loss = F.cross_entropy(step.net(step.x), step.y)
    del loss, step
    gc.collect()
    torch.cuda.empty_cache()
    return saved.total


def oom_experiment(cfg: AlexNetConfig, batch: int, variants: dict[str, dict]) -> dict:
    """Chapter 7's `ch7.oom`: every variant without a cap, then under a cap that the unsplit step exceeds.

    The cap lies half-way between the unsplit step's allocated peak and the
    largest peak of the remedies, above what the process held before.
    """
    import gc

    gc.collect()
    torch.cuda.empty_cache()
    free = {name: attempt(cfg, batch, kw) for name, kw in variants.items()}  # no cap: what each needs
    base_reserved = torch.cuda.memory_reserved("cuda:0")
    # like with like: the most each variant had allocated at once (per GPU); the reserved figure is
    # no measure of need, since without a cap the allocator keeps freed blocks cached
    need = {name: max(r["peak"].values()) for name, r in free.items()}
    remedies = max(need[name] for name in variants if name != "float32, unsplit")
    cap = base_reserved + (need["float32, unsplit"] + remedies) // 2
    capped = {name: attempt(cfg, batch, kw, cap) for name, kw in variants.items()}
    return {
        "batch": batch,
        "cap_bytes": cap,
        "base_reserved": base_reserved,
        "free": free,
        "capped": capped,
        "saved_measured": saved_by_unsplit_step(cfg, batch),
    }


_UNITS = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def _error_bytes(error: str, pattern: str) -> float:
    """The size in bytes that `pattern` (a regex with a number and a unit group) finds in `error`."""
    found = re.search(pattern, error)
    if found is None:
        raise AssertionError(f"the out-of-memory message no longer matches {pattern!r}: reread Chapter 7")
    return float(found.group(1)) * _UNITS[found.group(2)]


def check_fragmented(error: str) -> None:
    """Chapter 7: raise unless the OOM message's cached-but-unallocated bytes exceed the failed request.

    The text reads the stored error as fragmentation: the cache held more
    than the request, in pieces too small to serve it.
    """
    request = _error_bytes(error, r"Tried to allocate ([0-9.]+) (KiB|MiB|GiB)")
    cached = _error_bytes(error, r"([0-9.]+) (KiB|MiB|GiB) is reserved by PyTorch but unallocated")
    if cached <= request:
        raise AssertionError(
            f"the text says the cache held more than the failed request ({cached / 2**20:.0f} MiB cached, "
            f"{request / 2**20:.0f} MiB requested): reread the paragraph on fragmentation"
        )


def check_over_cap(error: str) -> None:
    """Chapter 7: raise unless the capped OOM message reads as the text says: the process holds more
    than the cap (the cap binds PyTorch's allocator only, not the CUDA context), and PyTorch's
    allocated plus reserved-but-unused bytes plus the request exceed the cap."""
    number = r"([0-9.]+) (KiB|MiB|GiB)"
    in_use = _error_bytes(error, rf"this process has {number} memory in use")
    allowed = _error_bytes(error, rf"{number} allowed")
    allocated = _error_bytes(error, rf"{number} is allocated by PyTorch")
    cached = _error_bytes(error, rf"{number} is reserved by PyTorch but unallocated")
    request = _error_bytes(error, rf"Tried to allocate {number}")
    if not (in_use > allowed and allocated + cached + request > allowed):
        raise AssertionError(
            f"the text says the process holds more than the cap and that allocated + cached + request "
            f"exceed it ({in_use / 2**30:.2f} GiB in use, {allowed / 2**30:.2f} GiB allowed, "
            f"{(allocated + cached + request) / 2**30:.2f} GiB in the sum): reread the paragraph on the error"
        )
