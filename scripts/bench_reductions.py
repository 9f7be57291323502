#!/usr/bin/env python3
"""Chapter 10's benchmark: sums, row softmax, LayerNorm and attention against PyTorch and the copy, one run.

    CUDALEARN_MODE=gpu python3 scripts/bench_reductions.py

The command line of `cudalearn.chapters.ch10.bench.main`, where the candidates and the goals live. Under the
simulator it times nothing: each candidate runs once at the simulator's sizes and the stored figures show.
"""

import sys
from pathlib import Path

try:
    import cudalearn  # noqa: F401
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from cudalearn.chapters.ch10.bench import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
