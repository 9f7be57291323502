"""Where a model's FLOPs and time go, by operator: FlopCounterMode and torch.profiler (Chapter 9).

`op_flops` counts the FLOPs of each aten operator of a call; `time_shares`
splits a step's time into matrix products, convolutions and the rest;
`gpu_kernels` names the GPU kernels that took the most time; `working_ops` lists the operators of a
call that do work (each at least one kernel launch on a GPU).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable

import torch


def op_flops(fn: Callable[[], object]) -> dict[str, int]:
    """FLOPs per aten operator (e.g. 'mm', 'bmm', 'convolution') of running `fn()` (Chapter 9).

    torch.utils.flop_counter counts only matrix products and convolutions
    (forward and backward); elementwise work, normalisation and softmax
    count zero.
    """
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    out: dict[str, int] = {}
    for op, flops in counter.get_flop_counts().get("Global", {}).items():
        name = str(op).split(".")[-1] if "." in str(op) else str(op)
        out[name] = out.get(name, 0) + int(flops)
    return out


# Operators that only allocate or relabel memory: no kernel runs for them.
NO_KERNEL_OPS = ("empty", "empty_like", "_unsafe_view", "detach")


def working_ops(fn: Callable[[], object]) -> list[str]:
    """The aten operators of `fn()` that compute or copy, in order (Chapter 9b counts its launches).

    Views (reshape without a copy, transpose, select, expand) and allocations are left out: what is
    left runs at least one GPU kernel each, so its length is a lower bound on the launches of `fn`.
    Run `fn` on the `meta` device to count without computing.
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Record(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            if not func.is_view and name not in NO_KERNEL_OPS:
                self.ops.append(name)
            return func(*args, **(kwargs or {}))

    with _Record() as record:
        fn()
    return record.ops


MATMUL_OPS = (
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::matmul",
    "aten::_addmm_activation",
)


def op_category(name: str) -> str:
    """'matmul', 'convolution' or 'other' for a profiler operator name such as 'aten::addmm' (Chapter 9)."""
    if name in MATMUL_OPS:
        return "matmul"
    if "conv" in name:
        return "convolution"
    return "other"


def _profile(step: Callable[[], object], *, cuda: bool, repeat: int):
    """torch.profiler's key averages of `repeat` runs of `step()`, after one unprofiled warm-up run."""
    from torch.profiler import ProfilerActivity, profile

    # Kineto, the profiler's backend, logs every start and stop to stderr at its level 5 ("USDT");
    # from level 6 on it is silent. It reads the variable when the first profile starts.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    step()
    if cuda:
        torch.cuda.synchronize()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    # torch 2.11 on an H200 warns, once a process, that each profile's events are cleared at its end:
    # each call here profiles one cycle in a fresh profiler, so there is nothing to keep
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Profiler clears events")
        with profile(activities=activities) as prof:
            for _ in range(repeat):
                step()
            if cuda:
                torch.cuda.synchronize()
    return prof.key_averages()


def _on_cpu(evt) -> bool:
    """True for an operator event (run by the CPU), False for a GPU kernel or copy event."""
    return str(getattr(evt, "device_type", "CPU")).rsplit(".", 1)[-1] == "CPU"


def _device_us(evt) -> float:
    """The GPU time of an event in microseconds, across PyTorch versions."""
    us = getattr(evt, "self_device_time_total", None)
    if us is None:
        us = getattr(evt, "self_cuda_time_total", 0.0)
    return float(us)


def time_shares(step: Callable[[], object], *, cuda: bool, repeat: int = 3) -> dict[str, float]:
    """Share of `step()`'s time in matmuls, convolutions and the rest (torch.profiler, Chapter 9).

    Each operator's *self* time is counted (on the GPU the time of the
    kernels it launched, on the CPU its own CPU time), so nested operators
    are not counted twice. `step` runs once unprofiled (warm-up), then
    `repeat` times under the profiler. Returns {'matmul', 'convolution',
    'other': share, 'total_ms': busy time per step}.
    """
    totals = {"matmul": 0.0, "convolution": 0.0, "other": 0.0}
    for evt in _profile(step, cuda=cuda, repeat=repeat):
        if not _on_cpu(evt):
            continue  # a kernel's time is already in the self time of the operator that launched it
        us = _device_us(evt) if cuda else float(evt.self_cpu_time_total)
        totals[op_category(evt.key)] += us
    total = sum(totals.values())
    shares = {k: v / total if total else 0.0 for k, v in totals.items()}
    shares["total_ms"] = total / 1e3 / repeat
    return shares


def gpu_kernels(step: Callable[[], object], *, repeat: int = 3, top: int = 5) -> list[dict]:
    """The `top` GPU kernels of `step()` by time: [{'name', 'us' per step}], from torch.profiler (Chapter 9).

    GPU only: the names say which library routine ran (cuBLAS and cuDNN
    kernels name their tile shapes and, for tensor-core kernels, the MMA
    instruction family and data type).
    """
    rows = [
        {"name": evt.key, "us": round(_device_us(evt) / repeat, 2)}
        for evt in _profile(step, cuda=True, repeat=repeat)
        if not _on_cpu(evt) and _device_us(evt) > 0
    ]
    return sorted(rows, key=lambda r: -r["us"])[:top]
