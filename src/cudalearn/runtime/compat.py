"""numpy 2.5 under numba-cuda 0.30 (every chapter): what numba-cuda still asks of numpy, restored.

numba-cuda 0.30 (maintenance mode since June 2026, no numpy 2.5 support planned) registers an
overload for `np.row_stack` when it first compiles a kernel. numpy 2.5 removed `row_stack`, an alias
of `vstack` since numpy 2.0, so the first compile dies with "module 'numpy' has no attribute
'row_stack'". `apply()`, called by `cudalearn.setup()`, puts the alias back before any compile.
"""

from __future__ import annotations

from types import ModuleType

#: numpy names numba-cuda 0.30 reads that a later numpy removed: name -> the numpy function it aliased
ALIASES = {"row_stack": "vstack"}


#: what `apply()` restored in this process (the doctor reports it)
APPLIED: list[str] = []


def apply(np: ModuleType | None = None) -> list[str]:
    """Restore the ALIASES numpy lacks; return what this call restored, [] when nothing was missing."""
    real = np is None
    if real:
        import numpy as np
    restored = []
    for name, target in ALIASES.items():
        if not hasattr(np, name):
            setattr(np, name, getattr(np, target))
            restored.append(f"numpy.{name} = numpy.{target}")
    if real:  # a test's stand-in module is not recorded
        APPLIED.extend(restored)
    return restored
