#!/usr/bin/env python3
"""Benchmark of Chapters 3-4: naive, tiled and padded matmul kernels against cuBLAS FP32, in one run.

    CUDALEARN_MODE=gpu python3 scripts/bench_tiling.py      # N = 1024, 2048, 4096 on a GPU
    python3 scripts/bench_tiling.py --sizes 32              # a smoke test; the simulator is fine

The command line of `cudalearn.chapters.ch03.bench.main`, where the candidates and the goals live.
"""

import sys
from pathlib import Path

try:
    import cudalearn  # noqa: F401
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from cudalearn.chapters.ch03.bench import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
