#!/usr/bin/env python3
"""Benchmark of Chapter 6: every float32 and tensor-core matmul of the course against cuBLAS, one run.

    CUDALEARN_MODE=gpu python3 scripts/bench_gemm.py      # N = 4096 on a GPU (plus Nsight Compute if found)
    python3 scripts/bench_gemm.py                         # a smoke test under the simulator (N = 32)

The command line of `cudalearn.chapters.ch06.bench.main`, where the candidates, the goal and the profile live.
"""

import sys
from pathlib import Path

try:
    import cudalearn  # noqa: F401
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from cudalearn.chapters.ch06.bench import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
