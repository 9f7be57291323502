"""A fix for a race in Numba's CUDA simulator that corrupts shared memory (Chapters 3-5).

The simulator runs each CUDA thread as a Python thread. In numba-cuda 0.30,
`FakeCUDAShared.array` finds a launch's shared array with check-then-set and
no lock::

    res = self._allocations.get(caller)
    if res is None:
        res = np.empty(shape, dtype)      # a thread switch can happen here
        self._allocations[caller] = res

When the interpreter switches threads between the check and the set, two
threads of the first block each create an array, and the threads that got
the discarded one write their tile where nobody reads it: one block's output
is garbage. `tests/runtime/test_simfix.py` widens that window to show the race
happens, and shows that `apply()` removes it. `apply()` replaces the method
with one that does the same lookup under a lock (and finds the caller's
line without `traceback.extract_stack`, which also makes it faster), and
installs `simintrinsics` (the simulator given a GPU's intrinsics).
"""

from __future__ import annotations

import sys
import threading
import warnings

from cudalearn.runtime import simintrinsics

_LOCK = threading.Lock()
_APPLIED = False
ORIGINAL_ARRAY = None  # the simulator's own method, kept so a test can show the race


def _locked_array(self, shape, dtype, alignment=None):
    """`cuda.shared.array` for the simulator, with the get-or-create under a lock."""
    import numpy as np
    from numba.core import types
    from numba.np import numpy_support

    if alignment is not None:
        raise RuntimeError("Array alignment is not supported in cudasim")
    if isinstance(dtype, types.Type):
        dtype = numpy_support.as_dtype(dtype)
    if shape == 0:
        count = self._dynshared_size // dtype.itemsize
        return np.frombuffer(self._dynshared.data, dtype=dtype, count=count)
    frame = sys._getframe(1)
    caller = (frame.f_code.co_filename, frame.f_lineno)
    with _LOCK:
        res = self._allocations.get(caller)
        if res is None:
            res = np.empty(shape, dtype)
            self._allocations[caller] = res
    return res


def apply() -> bool:
    """Install the locked `cuda.shared.array` in the simulator; True when installed (Chapter 3)."""
    global _APPLIED, ORIGINAL_ARRAY
    simintrinsics.apply()  # what popc, clz, fma... compute: a GPU's values, as the tracer's
    if _APPLIED:
        return True
    try:
        from numba.cuda.simulator import kernelapi
    except ImportError:  # not running the simulator
        return False
    shared = getattr(kernelapi, "FakeCUDAShared", None)
    probe = shared(0) if shared is not None else None
    if probe is None or not hasattr(probe, "_allocations") or not hasattr(probe, "_dynshared"):
        warnings.warn(
            "cudalearn could not patch this numba-cuda's simulator (FakeCUDAShared changed); "
            "shared-memory kernels may rarely give wrong results under the simulator.",
            RuntimeWarning,
            stacklevel=2,
        )
        return False
    ORIGINAL_ARRAY = shared.array
    shared.array = _locked_array
    _APPLIED = True
    return True
