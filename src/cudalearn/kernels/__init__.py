"""The reference kernels the book shows and the benchmarks time (Chapters 0-2 onward).

Importing this package runs a quiet `cudalearn.setup()` first, so that
Numba's CUDA target is imported in the right mode. Each kernel module lists
its kernels with a Numba signature in `SIGNATURES`, which the test suite
uses to compile every kernel to real PTX for sm_75 and sm_90.
"""

from cudalearn.device import setup as _setup

_setup(quiet=True)
