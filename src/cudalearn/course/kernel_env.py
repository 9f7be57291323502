"""The environment of notebook kernels run side by side: their CPU threads shared out (site build, progress).

PyTorch (OpenMP, MKL) and NumPy's BLAS start one thread per core in every kernel. Two kernels on two
cores then run four spinning threads, and each barrier waits for a thread the OS has parked: a small
training loop took 18 s with two threads and 1.3 s with one on this course's 2-core CI machine under
load (2026-12-06). Kernels run `jobs` at a time get the cores divided among them instead.
"""

from __future__ import annotations

import os

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def threads_each(jobs: int, cores: int | None = None) -> int:
    """CPU threads for each of `jobs` kernels run at once on `cores` cores (all of this machine's)."""
    cores = cores or os.cpu_count() or 1
    return max(1, cores // max(1, jobs))


def side_by_side(jobs: int, environ: dict[str, str] | None = None) -> dict[str, str]:
    """`environ` (this process's) with each kernel's thread count set, unless the user set it already."""
    env = dict(os.environ if environ is None else environ)
    for name in THREAD_VARS:
        env.setdefault(name, str(threads_each(jobs)))
    return env
