"""Honest timing: warm-up, CUDA events, synchronisation, medians, rates and ratios (Chapters 0-2).

On a GPU, `gpu_time` brackets a callable with CUDA events on the default
stream after warm-up runs and reports the median of several runs. Under the
simulator there is no GPU clock to read: `gpu_time` refuses, and
`measure` runs each candidate once (so the code is still exercised) and
returns the stored reference results of a real GPU, labelled as such.
"""

from __future__ import annotations

import math
import statistics
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cudalearn.measure import reference
from cudalearn.runtime import device


class SimulatorTimingError(RuntimeError):
    """Raised when simulator wall time would be passed off as GPU time (Chapter 0)."""


@dataclass(frozen=True)
class Timing:
    """Times of repeated runs of one callable, in milliseconds (Chapter 0)."""

    times_ms: tuple[float, ...]
    clock: str  # 'cuda-events' or 'cpu-wall'
    launches_per_sample: int = 1

    @property
    def median_ms(self) -> float:
        """Median of the runs, in ms."""
        return statistics.median(self.times_ms)

    @property
    def min_ms(self) -> float:
        """Fastest run, in ms."""
        return min(self.times_ms)

    def __str__(self) -> str:
        return f"{self.median_ms:.4g} ms median of {len(self.times_ms)} ({self.clock})"


def gflops(flops: float, ms: float) -> float:
    """GFLOP/s for `flops` floating-point operations done in `ms` milliseconds (Chapter 1)."""
    return flops / (ms * 1e-3) / 1e9


def gbps(nbytes: float, ms: float) -> float:
    """GB/s (1e9 bytes per second) for `nbytes` moved in `ms` milliseconds (Chapter 2)."""
    return nbytes / (ms * 1e-3) / 1e9


def matmul_flops(m: int, n: int, k: int) -> int:
    """Floating-point operations of an (m,k) @ (k,n) product: one multiply and one add each (Chapter 1)."""
    return 2 * m * n * k


def cpu_time(fn: Callable[[], Any], *, warmup: int = 1, repeat: int = 5) -> Timing:
    """Wall-clock time of a CPU callable: warm-up runs, then `repeat` timed runs (Chapter 1)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return Timing(tuple(times), "cpu-wall")


def _refuse_sim(what: str) -> None:
    if device.mode() == "sim":
        raise SimulatorTimingError(
            f"{what} measures GPU time, and this process runs the Numba CUDA simulator: "
            "its wall time says nothing about a GPU. Use timing.measure(), which shows "
            "stored reference results from a real GPU under the simulator."
        )


def synchronize() -> None:
    """Wait for all GPU work of Numba (numba-cuda, numba-cuda-mlir) and of PyTorch to finish (Chapter 0)."""
    from cudalearn.runtime import numba_backend

    numba_backend.cuda_module()  # the course's compiler: imported, so that it is synchronised too
    numba_backend.synchronize()
    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _event_ms(fn: Callable[[], Any], launches: int) -> float:
    """Milliseconds between two CUDA events around `launches` back-to-back calls of `fn`.

    The events are the course's compiler's (`cudalearn.runtime.numba_backend`), recorded on the legacy
    default stream of the device's primary context, where numba-cuda and PyTorch launch unless told
    otherwise; that numba-cuda-mlir's launches land there too is what scripts/mlir_gpu_smoke.py checks.
    """
    from cudalearn.runtime.numba_backend import cuda

    start, end = cuda.event(), cuda.event()
    fn()  # queued first: the clock starts when the GPU finishes it, with the next calls already issued
    start.record()
    for _ in range(launches):
        fn()
    end.record()
    end.synchronize()
    return cuda.event_elapsed_time(start, end)


def gpu_time(
    fn: Callable[[], Any],
    *,
    warmup: int = 2,
    repeat: int = 10,
    min_sample_ms: float = 1.0,
    max_launches: int = 200,
) -> Timing:
    """GPU time per call of `fn` from CUDA events on the default stream, after warm-up (Chapter 0).

    A launch from Python costs tens of microseconds of CPU time before the
    GPU sees it; with one call between the events a short kernel would be
    timed together with that cost. So each sample brackets enough
    back-to-back calls to last `min_sample_ms` (at most `max_launches`),
    letting the launches queue up while the GPU works, and divides by
    their number. One more call is issued before the first event, so the
    clock starts on a busy GPU when that call outlasts the host's time to
    record the event and issue the next one: the host's time to issue the
    first timed call is then not counted (it is when the host cannot keep
    up with the GPU, whose time per call is then the host's). Numba
    kernels and PyTorch operations both run on the legacy default stream
    unless told otherwise, so the events bracket their work.
    """
    _refuse_sim("gpu_time()")
    for _ in range(warmup):
        fn()
    synchronize()
    one = _event_ms(fn, 1)
    launches = max(1, min(max_launches, math.ceil(min_sample_ms / max(one, 1e-3))))
    times = tuple(_event_ms(fn, launches) / launches for _ in range(repeat))
    return Timing(times, "cuda-events", launches)


@dataclass
class Results:
    """A table of timed candidates with rates and speed relative to a baseline (Chapters 0-2)."""

    key: str
    rows: list[dict[str, Any]]
    baseline: str | None
    source: str  # 'measured' or 'reference'
    label: str
    size: dict[str, Any] = field(default_factory=dict)

    def row(self, name: str) -> dict[str, Any]:
        """The row of candidate `name`."""
        for r in self.rows:
            if r["name"] == name:
                return r
        raise KeyError(f"no candidate {name!r} in {self.key}; have {[r['name'] for r in self.rows]}")

    def __str__(self) -> str:
        cols = [
            ("name", "{}"),
            ("median_ms", "{:.4g}"),
            ("gflops", "{:.4g}"),
            ("gbps", "{:.4g}"),
            ("vs_baseline", "{:.3g}x"),
        ]
        present = [(c, f) for c, f in cols if any(r.get(c) is not None for r in self.rows)]
        head = [c for c, _ in present]
        body = [[f.format(r[c]) if r.get(c) is not None else "-" for c, f in present] for r in self.rows]
        widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
        if self.source == "reference" and not any(r.get("median_ms") for r in self.rows):
            said = f"{self.key}: {self.label} (the candidates ran once on the simulator; no GPU time to show)"
            return textwrap.fill(said, 100)  # no output line over 100 columns
        where = "measured on" if self.source == "measured" else "reference run on"
        lines = [f"{self.key}: {where} {self.label}"] + ([f"size {self.size}"] if self.size else [])
        lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
        lines += ["  ".join(v.ljust(w) for v, w in zip(b, widths, strict=True)) for b in body]
        if self.baseline:
            lines.append(f"vs_baseline = speed relative to '{self.baseline}', timed in the same run")
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle) -> None:  # IPython display
        p.text(str(self))


def _rows(timings: dict[str, Timing], baseline: str | None, flops, nbytes) -> list[dict[str, Any]]:
    rows = []
    base = timings[baseline].median_ms if baseline else None
    for name, t in timings.items():
        ms = t.median_ms
        rows.append(
            {
                "name": name,
                "median_ms": ms,
                "min_ms": t.min_ms,
                "runs": len(t.times_ms),
                "launches_per_run": t.launches_per_sample,
                "gflops": gflops(flops, ms) if flops else None,
                "gbps": gbps(nbytes, ms) if nbytes else None,
                "vs_baseline": base / ms if base else None,
            }
        )
    return rows


def measure(
    key: str,
    candidates: dict[str, Callable[[], Any]],
    *,
    baseline: str | None = None,
    flops: float | None = None,
    nbytes: float | None = None,
    size: dict[str, Any] | None = None,
    warmup: int = 2,
    repeat: int = 10,
) -> Results:
    """Time each candidate on the GPU in one run, or show the stored GPU reference under the simulator.

    `key` names the figure in the reference data (e.g. 'ch2.matmul').
    `flops`/`nbytes` are per call; `baseline` names the candidate the
    others are compared with. On a GPU the result is recorded when
    `CUDALEARN_RECORD` is set (scripts/gpu_run.py). Chapters 0-2.
    """
    if baseline is not None and baseline not in candidates:
        raise KeyError(f"baseline {baseline!r} is not one of the candidates {list(candidates)}")
    size = dict(size or {})
    if device.mode() == "gpu":
        timings = {name: gpu_time(fn, warmup=warmup, repeat=repeat) for name, fn in candidates.items()}
        rows = _rows(timings, baseline, flops, nbytes)
        info = device.info()
        reference.record(key, {"rows": rows, "baseline": baseline, "size": size})
        return Results(key, rows, baseline, "measured", info.device, size)
    for fn in candidates.values():  # exercise the code once; its wall time is not reported
        fn()
    stored = stored_results(key)
    if stored is None:
        rows = [{"name": name} for name in candidates]
        label = "no reference GPU run is stored for this figure yet"
        return Results(key, rows, baseline, "reference", label, size)
    return stored


def stored_results(key: str) -> Results | None:
    """The stored reference Results that `measure(key, ...)` recorded on a GPU, or None (all chapters)."""
    stored, data = reference.lookup(key)
    if stored is None or "rows" not in stored:
        return None
    return Results(
        key,
        stored["rows"],
        stored.get("baseline"),
        "reference",
        reference.label(data, key),
        stored.get("size", {}),
    )


#: What a benchmark that checks every candidate under the simulator prints there (Chapters 2 and 10).
SIMULATED = (
    "This benchmark times GPU kernels and this process runs the simulator: nothing is timed. "
    "Every candidate runs once at the simulator's sizes (a check); the stored GPU figures follow, if any."
)
