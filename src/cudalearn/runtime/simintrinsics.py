"""Numba's CUDA simulator given a GPU's intrinsics, so it computes what the tracer and a GPU compute
(Chapters 2, 10).

numba-cuda 0.30's simulator computes `cuda.popc(-1)` as 1 (a GPU: 64), `clz`, `brev` and `ffs` over
32 bits whatever the type, `fma` with two roundings, `cbrt` of a negative as a complex number, and
fills `cuda.local.array` with whatever `np.empty` holds; its `threadIdx` and siblings are plain ints
where Numba types them int32. A kernel could branch on such a value and run one path in the simulator
and another in the tracer (`cudalearn.trace`), whose race check would then pass a racy kernel.
`apply()` gives the simulator `runtime.intrinsics`' functions (the tracer's too), int32 thread
coordinates, one lock for all its atomics with the GPU's update rules, local arrays filled as the
tracer fills them (NaN for floats, 0 otherwise), and a kernel's `max` and `min` of two floats as a GPU
computes them (fmaxf drops a NaN), put in its globals for the launch. Called by `simfix.apply()`.
"""

from __future__ import annotations

import builtins
import contextlib
import threading

from cudalearn.runtime import intrinsics

_LOCK = threading.Lock()
_APPLIED = False


def _dim3(cls, d):
    """The simulator's Dim3 with int32-typed values."""
    return cls(*(intrinsics.Int32(v) for v in d))


def _atomic(name):
    """A simulator cuda.atomic.<name>: the GPU's update under one lock; returns the old value."""
    update = intrinsics.ATOMIC_UPDATES[name]

    def op(self, array, index, val):
        with _LOCK:
            old = array[index]
            array[index] = update(old, intrinsics.cast(val, array.dtype))
        return old

    op.__name__ = name
    return op


def _with_kernel_builtins(swapped):
    """The simulator's `swapped_cuda_module`, also giving the kernel's globals a GPU's `max` and `min`
    (`intrinsics.KERNEL_BUILTINS`) for the launch, where they are Python's builtins; counted per globals
    dict, as the simulator counts its swaps (a launch's threads and device calls nest)."""

    @contextlib.contextmanager
    def swapped_with_builtins(fn, fake_cuda_module):
        g = fn.__globals__
        with _LOCK:
            entry = _INJECTED.get(id(g))
            if entry is None:
                gpu = intrinsics.KERNEL_BUILTINS
                names = [n for n in gpu if g.get(n, getattr(builtins, n)) is getattr(builtins, n)]
                entry = _INJECTED[id(g)] = [0, {n: g[n] for n in names if n in g}, names]
                g.update({n: gpu[n] for n in names})
            entry[0] += 1
        try:
            with swapped(fn, fake_cuda_module):
                yield
        finally:
            with _LOCK:
                entry[0] -= 1
                if not entry[0]:
                    _, saved, names = _INJECTED.pop(id(g))
                    for n in names:
                        if n in saved:
                            g[n] = saved[n]
                        else:
                            g.pop(n, None)

    return swapped_with_builtins


_INJECTED: dict = {}  # id(a kernel's globals) -> [launches and calls inside, what it held, names given]


def apply() -> bool:
    """Install the GPU's intrinsics in the simulator; True when installed (Chapters 2, 10)."""
    global _APPLIED
    if _APPLIED:
        return True
    try:
        from numba.cuda.simulator import kernel, kernelapi
    except ImportError:  # not running the simulator
        return False
    module, atomic, thread = kernelapi.FakeCUDAModule, kernelapi.FakeCUDAAtomic, kernel.BlockThread
    for name in ("popc", "clz", "brev", "ffs", "fma", "cbrt", "selp"):
        fn = getattr(intrinsics, name)
        setattr(module, name, staticmethod(fn))
    for name in intrinsics.ATOMIC_UPDATES:
        setattr(atomic, name, _atomic(name))
    module.laneid = property(lambda self: intrinsics.Int32(threading.current_thread().thread_id % 32))
    module.warpsize = property(lambda self: intrinsics.Int32(32))
    module_init, thread_init = module.__init__, thread.__init__

    def init_module(self, grid_dim, block_dim, dynshared_size):
        module_init(self, grid_dim, block_dim, dynshared_size)
        self.gridDim, self.blockDim = _dim3(kernelapi.Dim3, grid_dim), _dim3(kernelapi.Dim3, block_dim)

    def init_thread(self, f, manager, blockIdx, threadIdx, debug):
        thread_init(self, f, manager, blockIdx, threadIdx, debug)
        self.blockIdx, self.threadIdx = _dim3(kernelapi.Dim3, blockIdx), _dim3(kernelapi.Dim3, threadIdx)

    def local_array(self, shape, dtype, alignment=None):
        if alignment is not None:
            raise RuntimeError("Array alignment is not supported in cudasim")
        return intrinsics.fresh(shape, dtype)

    module.__init__, thread.__init__ = init_module, init_thread
    kernel.swapped_cuda_module = _with_kernel_builtins(kernel.swapped_cuda_module)
    kernelapi.FakeCUDALocal.array = local_array
    _APPLIED = True
    return True
