"""Numba's small-grid warning, silenced where Chapter 5's small grids are meant (Chapter 5).

Numba warns when a launch has fewer than 128 blocks. The network's 10-logit layer, the loss kernel
on one row a thread and the host-cost timings on one block launch such grids on purpose.
`quiet_small_grids` turns the warning off for a whole process (the book, `scripts/bench_fusion.py`);
`quiet_grids` silences it inside a `with` block (the networks' inference, training, timings).
"""

import importlib
import os
import warnings
from contextlib import contextmanager


def quiet_small_grids() -> None:
    """Turn off Numba's low-occupancy warning in this process: Chapter 5's small grids are meant (Chapter 5).

    Numba warns when a launch has fewer than 128 blocks. The network's
    10-logit layer, the loss kernel on one row a thread, and the host-cost
    timings on one block launch such grids on purpose; the chapter measures
    what they cost instead of printing a warning for each.
    """
    from cudalearn.runtime import numba_backend  # here: importing this module chooses no run mode

    os.environ["NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS"] = "0"  # survives a reload of Numba's config
    configs = ["numba.cuda.core.config"]
    if numba_backend.choice().package == numba_backend.NUMBA_CUDA_MLIR:
        configs.append("numba_cuda_mlir.numba_cuda.core.config")  # its own copy of the setting
    for name in configs:
        importlib.import_module(name).CUDA_LOW_OCCUPANCY_WARNINGS = 0


@contextmanager
def quiet_grids():
    """Silence Numba's small-grid performance warning (the last layer has 10 outputs) (Chapter 5)."""
    with warnings.catch_warnings():
        # by message: numba-cuda 0.30 raises its own copy of the warning class (numba.cuda.core.errors),
        # and on a GPU the message starts with colour codes
        warnings.filterwarnings("ignore", message=".*Grid size .* under-utilization")
        yield
