"""Counting what code does on the device: Numba kernel launches and device-to-host copies (Chapter 5).

`observe()` counts, inside a `with` block, every launch of a Numba kernel
(by name) and every `copy_to_host`, in both modes: on a GPU it wraps
numba-cuda's `_Kernel.launch`, which every plain launch of a compiled kernel
goes through (a `launch.prepared` launch bypasses it and reports itself
through `launched`), and `DeviceNDArrayBase.copy_to_host` (and numba-cuda-mlir's launcher
and arrays when it compiles the course's kernels); under the simulator, the
simulated kernel's call (not device functions, not launches inside a kernel)
and the simulated array's copy. Blocks nest: each sees what ran inside it.
Chapter 5's network and checks (`counting.count_launches`,
`exercises.fusion`) and the grader's sandbox, which reports a student's
launches and copies to the judge, all count through here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)  # blocks are told apart by identity: two may have seen the same so far
class Observed:
    """What ran inside one `observe()` block: launched kernels' names, and copies to the host."""

    launches: list[str] = field(default_factory=list)
    copies: int = 0


_active: list[Observed] = []
_undo: list[tuple[type, str, Any]] = []


def device_array_class() -> type:
    """The class whose copy_to_host every Numba device array uses, in this process's mode."""
    from numba import config

    if config.ENABLE_CUDASIM:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        return FakeCUDAArray
    from numba.cuda.cudadrv.devicearray import DeviceNDArrayBase

    return DeviceNDArrayBase


def _targets() -> list[tuple[type, str, Callable[[Any], str | None], type]]:
    """(kernel class, its launch method, kernel -> launched name or None, device array class) to wrap.

    numba-cuda's simulator or GPU target, and numba-cuda-mlir's launcher and arrays when it compiles
    the course's kernels (`cudalearn.runtime.numba_backend`; its `_ArgMarshaller.__call__` is what every
    `kernel[grid, block](...)` of numba-cuda-mlir 0.6.0 calls).
    """
    import sys

    from numba import config

    from cudalearn.runtime import numba_backend

    if config.ENABLE_CUDASIM:
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        sim = sys.modules[FakeCUDAKernel.__module__]

        def simulated(k: Any) -> str | None:
            return None if k._device or sim._kernel_context is not None else k.fn.__name__

        return [(FakeCUDAKernel, "__call__", simulated, device_array_class())]
    from numba.cuda.dispatcher import _Kernel

    targets = [(_Kernel, "launch", lambda k: k.py_func.__name__, device_array_class())]
    chosen = numba_backend.current()
    if chosen is not None and chosen.package == numba_backend.NUMBA_CUDA_MLIR:
        from numba_cuda_mlir.descriptor import _ArgMarshaller
        from numba_cuda_mlir.numba_cuda.cudadrv.devicearray import DeviceNDArrayBase

        def configured(m: Any) -> str | None:
            return getattr(getattr(m, "_dispatcher", None), "__name__", None)

        targets.append((_ArgMarshaller, "__call__", configured, DeviceNDArrayBase))
    return targets


def _patch() -> None:
    for kernels, attr, name_of, arrays in _targets():
        launch = getattr(kernels, attr)

        def counted_launch(kernel: Any, *args: Any, _launch=launch, _name_of=name_of, **kwargs: Any) -> Any:
            name = _name_of(kernel)
            if name is not None:
                launched(str(name))
            return _launch(kernel, *args, **kwargs)

        copy = arrays.copy_to_host

        def counted_copy(array: Any, *args: Any, _copy=copy, **kwargs: Any) -> Any:
            for seen in _active:
                seen.copies += 1
            return _copy(array, *args, **kwargs)

        setattr(kernels, attr, counted_launch)
        arrays.copy_to_host = counted_copy
        _undo.extend([(kernels, attr, launch), (arrays, "copy_to_host", copy)])


def active() -> bool:
    """Whether an `observe()` block is counting now (a prepared launch asks before it reports)."""
    return bool(_active)


def launched(name: str) -> None:
    """Count a launch of kernel `name` made without numba-cuda's launch path (`launch.prepared`)."""
    for seen in _active:
        seen.launches.append(name)


@contextmanager
def observe() -> Iterator[Observed]:
    """Count the kernel launches and host copies made inside the block (Chapter 5; the grader)."""
    seen = Observed()
    if not _active:
        _patch()
    _active.append(seen)
    try:
        yield seen
    finally:
        _active.remove(seen)
        if not _active:
            for cls, attr, original in reversed(_undo):
                setattr(cls, attr, original)
            _undo.clear()


# Counting launches (Chapter 5's network and checks, lab 0) ----------------------------------------


@dataclass
class Launches:
    """The Numba kernel launches seen inside a `count_launches()` block: their number and names."""

    names: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.names)

    def __str__(self) -> str:
        return f"{self.count} launches: " + ", ".join(self.names)


@contextmanager
def count_launches() -> Iterator[Launches]:
    """Count every Numba kernel launch made inside the `with` block, in both modes (Chapter 5).

    Counted by `cudalearn.runtime.counting.observe`: device functions and PyTorch
    work are not launches of Numba kernels and are not counted.
    """
    with observe() as seen:
        yield Launches(seen.launches)  # the same list: it fills as the block runs
