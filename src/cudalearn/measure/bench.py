"""The speed harness: a kernel timed on fresh inputs, its every run checked (graded labs, `cudalearn bench`).

One harness for the grader's timing judge and the student's `cudalearn bench`,
so the speed a student sees is the speed that is graded. For each timed run it
allocates fresh random inputs and a poisoned output (NaN) between guard zones,
flushes the L2 cache (a write of a buffer twice its size), launches the kernel
itself on its own stream between two CUDA events, then checks that run's
output, that the inputs are unchanged and that nothing outside the output was
written. After the loop one more launch on fresh inputs is checked. A time
below what the bytes and FLOPs allow on the GPU (its datasheet or attribute
peaks) is refused, and so is a launch that outlasts the limit. What the
kernel did wrong is the `cause`; a cause means no speed points.

The `Device` is the GPU (`GpuDevice`) or, in the tests, a fake with a fake clock.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Launch = tuple[tuple[int, ...], tuple[int, ...]]  # (grid, block)


@dataclass(frozen=True)
class Case:
    """What one speed exercise times: inputs, outputs, the answer, the launch, bytes and FLOPs (labs 2-10).

    `inputs(rng)` makes fresh random inputs (name -> array); `outputs(inputs)` the outputs' (shape,
    dtype, initial value: None for fresh random values, 0 where the kernel accumulates);
    `expected(inputs)` the right outputs; `launch(consts)` the (grid, block) from the kernel's
    constants (`consts` names them: TILE, BLOCK...); `args` the kernel's arguments in order.
    """

    name: str
    args: tuple[str, ...]
    inputs: Callable[[np.random.Generator], dict[str, np.ndarray]]
    outputs: Callable[[dict], dict[str, tuple[tuple[int, ...], Any, float]]]
    expected: Callable[[dict], dict[str, np.ndarray]]
    launch: Callable[[dict], Launch]
    nbytes: float
    flops: float
    consts: tuple[str, ...] = ()
    rtol: float = 1e-4
    atol: float = 1e-4


@dataclass
class Timed:
    """A kernel's timed runs (ms) and, when it may not be graded, why (`cause`; "" when honest)."""

    times_ms: list[float] = field(default_factory=list)
    cause: str = ""
    floor_ms: float = 0.0

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms) if self.times_ms else float("nan")

    @property
    def spread(self) -> float:
        """(slowest - fastest) / median of the runs: 0.05 means they lie within 5 % of the median."""
        if len(self.times_ms) < 2:
            return 0.0
        return (max(self.times_ms) - min(self.times_ms)) / self.median_ms

    def __str__(self) -> str:
        if self.cause:
            return f"not graded: {self.cause}"
        return (
            f"{self.median_ms:.4g} ms median of {len(self.times_ms)} runs (spread {100 * self.spread:.1f} %)"
        )


class OverLimit(Exception):
    """A launch did not finish within the time limit (it may still be running on the GPU)."""


class Unclean(Exception):
    """The clock may have counted the host's time to issue the launch: the run is checked, then redone."""


def floor_ms(nbytes: float, flops: float, peak_gbs: float, peak_gflops: float) -> float:
    """The least time the bytes (at the peak bandwidth) and FLOPs (at the peak rate) allow, in ms."""
    return 1e3 * max(
        nbytes / (peak_gbs * 1e9) if peak_gbs else 0.0, flops / (peak_gflops * 1e9) if peak_gflops else 0.0
    )


def initial(rng: np.random.Generator, shape: tuple, dtype, fill: float | None) -> np.ndarray:
    """An output's initial contents: `fill`, or fresh random values when None (no marker to look for)."""
    if fill is None:
        return rng.random(shape, dtype=np.float32).astype(dtype, copy=False)
    return np.full(shape, fill, dtype=dtype)


def _mismatch(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str:
    """'' when `got` matches `want`, else the first wrong element, expected vs got."""
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    bad = ~np.isclose(got, want, rtol=rtol, atol=atol)
    if not bad.any():
        return ""
    at = tuple(int(i) for i in np.argwhere(bad)[0])
    return f"{int(bad.sum())} wrong elements, first at {at}: expected {want[at]!r}, got {got[at]!r}"


def _check_run(case: Case, run: str, host: dict, arrays: dict, device: Device) -> str:
    """Why run `run`'s results are not what the kernel must produce ('' when they are)."""
    want = case.expected(host)
    outs = case.outputs(host)
    for name in case.args:
        before, after = device.overwritten(arrays[name])
        if before or after:
            return (
                f"{run}: {before + after} elements outside `{name}` were written (guard zones of random "
                f"bytes around every array): a store without its bounds guard, or on purpose"
            )
        got = device.read(arrays[name])
        if name in outs:
            wrong = _mismatch(got, want[name], case.rtol, case.atol)
            if wrong:
                return f"{run}: the output `{name}` is wrong ({wrong}); every timed run gets fresh inputs"
        elif not np.array_equal(got, host[name], equal_nan=True):
            return f"{run}: the kernel changed its input `{name}`; a kernel may write only its outputs"
    return ""


def time_kernel(
    kernel: Any,
    case: Case,
    consts: dict,
    device: Device,
    *,
    runs: int = 5,
    warmup: int = 1,
    limit_ms: float = 2000.0,
    seed: int | None = None,
) -> Timed:
    """Time `kernel` on `case` with fresh checked inputs each run (see the module's docstring)."""
    rng = np.random.default_rng(seed)
    grid, block = case.launch(consts)
    timed = Timed(floor_ms=floor_ms(case.nbytes, case.flops, *device.peaks()))
    retries, i = 3, 0
    while i < warmup + runs + 1:
        run = (
            "warm-up run"
            if i < warmup
            else ("the check after the timing loop" if i == warmup + runs else f"timed run {i - warmup + 1}")
        )
        host = case.inputs(rng)
        for name, (shape, dtype, fill) in case.outputs(host).items():
            host[name] = initial(rng, shape, dtype, fill)
        arrays = {name: device.upload(host[name]) for name in case.args}
        device.flush_l2()
        ms = None
        try:
            ms = device.launch_timed(
                kernel, grid, block, [device.view(arrays[n]) for n in case.args], limit_ms
            )
        except OverLimit:
            timed.cause = f"{run}: the kernel ran past the time limit ({limit_ms:g} ms a launch)"
            return timed
        except Unclean:
            retries -= 1
            if retries < 0:
                raise RuntimeError("the host could not issue a launch while the gate kernel ran") from None
        timed.cause = _check_run(case, run, host, arrays, device)
        if timed.cause:
            return timed
        if ms is None:
            continue  # the same run again, on fresh inputs
        if warmup <= i < warmup + runs:
            timed.times_ms.append(ms)
        i += 1
    fast = min(timed.times_ms)
    if fast < timed.floor_ms:
        timed.cause = (
            f"a run took {fast:.4g} ms, less than the {timed.floor_ms:.4g} ms that moving "
            f"{case.nbytes / 1e6:.4g} MB and doing {case.flops / 1e9:.4g} GFLOP take at this GPU's peaks: "
            "not a possible time"
        )
    return timed


class Device:
    """The harness's view of a GPU: guarded arrays, an L2 flush, a timed launch and the peaks."""

    name = "device"

    def peaks(self) -> tuple[float, float]:
        """(peak memory bandwidth in GB/s, peak FP32 GFLOP/s)."""
        raise NotImplementedError

    def upload(self, host: np.ndarray) -> Any:
        raise NotImplementedError

    def view(self, array: Any) -> Any:
        raise NotImplementedError

    def read(self, array: Any) -> np.ndarray:
        raise NotImplementedError

    def overwritten(self, array: Any) -> tuple[int, int]:
        raise NotImplementedError

    def flush_l2(self) -> None:
        raise NotImplementedError

    def launch_timed(self, kernel: Any, grid, block, args: list, limit_ms: float) -> float:
        raise NotImplementedError


class GpuDevice(Device):
    """The current CUDA device through the course's Numba: own stream and events, guard zones, L2 flush."""

    def __init__(self) -> None:
        from cudalearn.measure import gpus
        from cudalearn.runtime.numba_backend import cuda

        self.cuda = cuda
        dev = cuda.get_current_device()
        name = getattr(dev, "name", "a CUDA device")
        self.name = name.decode() if isinstance(name, bytes) else str(name)
        self.stream = cuda.stream()
        self._compiled: dict[int, Any] = {}  # id -> kernel (kept, so that an id is never reused)
        l2 = int(getattr(dev, "L2_CACHE_SIZE", 0) or 64 << 20)
        self._flush = cuda.device_array(2 * l2 // 4, dtype=np.float32)  # twice the L2, in float32
        self.l2_reset = reset_persisting_l2()
        self._calibrate_gate()
        spec = gpus.spec_for(self.name)

        def attr(name: str) -> float:
            try:
                return float(getattr(dev, name) or 0)
            except Exception:  # an attribute this driver does not have (CUDA 13 dropped some): 0
                return 0.0

        # attribute peaks: 128 FP32 lanes an SM (the most of any NVIDIA SM), memory at its DDR rate
        attr_gflops = 2 * 128 * attr("MULTIPROCESSOR_COUNT") * attr("CLOCK_RATE") * 1e3 / 1e9
        attr_gbs = 2 * attr("MEMORY_CLOCK_RATE") * 1e3 * attr("GLOBAL_MEMORY_BUS_WIDTH") / 8 / 1e9
        # the larger of datasheet and attributes: a time below the floor is impossible by either
        self._peaks = (
            max(attr_gbs, spec.bandwidth_gbs if spec else 0.0),
            max(attr_gflops, spec.fp32_tflops * 1e3 if spec else 0.0),
        )

    def peaks(self) -> tuple[float, float]:
        return self._peaks

    def upload(self, host: np.ndarray) -> Any:
        from cudalearn.checks.guard import Guarded

        return Guarded(host, self.cuda)

    def view(self, array: Any) -> Any:
        return array.view

    def read(self, array: Any) -> np.ndarray:
        return array.result()

    def overwritten(self, array: Any) -> tuple[int, int]:
        return array.overwritten()

    def flush_l2(self) -> None:
        self.l2_reset = reset_persisting_l2()  # device-wide: lines another process made persisting too
        _fill_kernel(self.cuda)[(self._flush.size + 255) // 256, 256, self.stream](
            self._flush, np.float32(1.0)
        )
        self.stream.synchronize()

    def launch_timed(self, kernel: Any, grid, block, args: list, limit_ms: float) -> float:
        """The kernel's time between two events on this device's stream, the GPU held busy meanwhile.

        A launch from Python takes tens of microseconds of host time; with an idle stream the start
        event would fire at once and the clock count that time too. So a gate kernel (one thread
        spinning about GATE_MS) is queued first: the start event fires when it ends, by which time the
        launch is queued behind it. If the start event has already fired when the launch returns, the
        gate was too short: Unclean (the harness does the run again) and the gate doubles.
        """
        cuda = self.cuda
        if id(kernel) not in self._compiled and hasattr(kernel, "compile"):  # before the gate and clock
            from numba import typeof

            kernel.compile(tuple(typeof(a) for a in args))
            self._compiled[id(kernel)] = kernel
        self.cuda.synchronize()  # the uploads (default stream) are done before the clock starts
        start, end = cuda.event(), cuda.event()
        gate = _gate_kernel(cuda)
        gate[1, 1, self.stream](self._dummy, self._gate_n)
        start.record(self.stream)
        kernel[grid, block, self.stream](*args)
        end.record(self.stream)
        early = start.query()
        deadline = time.monotonic() + limit_ms / 1e3
        while not end.query():
            if time.monotonic() > deadline:
                raise OverLimit
            time.sleep(1e-4)
        self.cuda.synchronize()  # nothing of the launch outlives the clock (another stream's work too)
        if early:
            self._gate_n *= 2
            raise Unclean
        return start.elapsed_time(end)

    def _calibrate_gate(self) -> None:
        """Set the gate's loop count so that it spins about GATE_MS on this GPU."""
        cuda, gate = self.cuda, _gate_kernel(self.cuda)
        self._dummy = cuda.device_array(1, dtype=np.float32)
        self._gate_n = 1 << 12
        gate[1, 1, self.stream](self._dummy, self._gate_n)  # compiled and warm
        start, end = cuda.event(), cuda.event()
        start.record(self.stream)
        gate[1, 1, self.stream](self._dummy, self._gate_n)
        end.record(self.stream)
        end.synchronize()
        per_loop = max(start.elapsed_time(end), 1e-3) / self._gate_n
        self._gate_n = max(1 << 12, int(GATE_MS / per_loop))


GATE_MS = 1.0  # how long the gate kernel holds the stream before the clock starts

# The harness's own kernels, made with `cuda` as a global (what Numba and its simulator both resolve).
_KERNELS_SOURCE = """
@cuda.jit
def fill(buf, v):
    i = cuda.grid(1)
    if i < buf.shape[0]:
        buf[i] = v


@cuda.jit
def gate(dummy, n):
    acc = dummy[0] * 0.0 + 1.0
    for _ in range(n):
        acc = acc * 0.999 + 1.0
    if acc == -1.0:  # never true: the loop cannot be removed
        dummy[0] = acc
"""
_KERNELS: dict = {}


def _fill_kernel(cuda) -> Any:
    """A kernel writing `v` into every element of a float32 array (the L2 flush), compiled once."""
    return _kernels(cuda)["fill"]


def _gate_kernel(cuda) -> Any:
    """One thread's chain of `n` dependent multiply-adds (the gate before the clock), compiled once."""
    return _kernels(cuda)["gate"]


def _kernels(cuda) -> dict:
    if not _KERNELS:
        exec(
            compile(_KERNELS_SOURCE, "<cudalearn.measure.bench>", "exec"),
            _KERNELS.setdefault("ns", {"cuda": cuda}),
        )
        _KERNELS.update(fill=_KERNELS["ns"]["fill"], gate=_KERNELS["ns"]["gate"])
    return _KERNELS


def reset_persisting_l2() -> str:
    """Reset any persisting-L2 access policy of this context (cuCtxResetPersistingL2Cache); what happened."""
    try:
        from cuda.bindings import driver
    except ImportError:
        try:
            from cuda import cuda as driver  # older cuda-python
        except ImportError:
            return (
                "not reset: cuda-bindings is not installed, so lines another process made persisting "
                "may survive the flush"
            )
    try:
        err = driver.cuCtxResetPersistingL2Cache()
        err = err[0] if isinstance(err, tuple) else err
        return "reset" if int(err) == 0 else f"not reset: the driver answered {err}"
    except Exception as e:  # a driver older than CUDA 11
        return f"not reset: {type(e).__name__}: {e}"
