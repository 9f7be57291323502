#!/usr/bin/env python3
"""Benchmark of Chapter 6's deep dive 06d: the hand-written tensor-core kernels against cuBLAS, one run.

    CUDALEARN_MODE=gpu python3 scripts/bench_tc.py      # N = 4096 on a GPU
    python3 scripts/bench_tc.py                         # a smoke test on the CPU tracer

The command line of `cudalearn.chapters.ch06.bench_tc.main`.
"""

import sys
from pathlib import Path

try:
    import cudalearn  # noqa: F401
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from cudalearn.chapters.ch06.bench_tc import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
