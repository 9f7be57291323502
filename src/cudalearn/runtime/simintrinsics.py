"""Numba's CUDA simulator given a GPU's intrinsics, so it computes what the tracer and a GPU compute
(Chapters 2, 10).

numba-cuda 0.30's simulator computes `cuda.popc(-1)` as 1 (a GPU: 64), `clz`, `brev` and `ffs` over
32 bits whatever the type, `fma` with two roundings, `cbrt` of a negative as a complex number, and
fills `cuda.local.array` with whatever `np.empty` holds; its `threadIdx` and siblings are plain ints
where Numba types them int32. A kernel could branch on such a value and run one path in the simulator
and another in the tracer (`cudalearn.trace`), whose race check would then pass a racy kernel.
`apply()` gives the simulator `runtime.intrinsics`' functions (the tracer's too), int32 thread
coordinates, one lock for all its atomics with the GPU's update rules, and local arrays filled as
the tracer fills them (NaN for floats, 0 otherwise). Called by `simfix.apply()`.
"""

from __future__ import annotations

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
    kernelapi.FakeCUDALocal.array = local_array
    _APPLIED = True
    return True
