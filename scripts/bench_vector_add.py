#!/usr/bin/env python3
"""Chapter 2's benchmark: the vector add with one and several elements a thread against torch.add, one run.

    CUDALEARN_MODE=gpu python3 scripts/bench_vector_add.py

The command line of `cudalearn.chapters.ch02.bench.main`, where the candidates and the goal live. Under the
simulator it times nothing: each candidate runs once at the simulator's sizes and the stored figures show.
"""

import sys
from pathlib import Path

try:
    import cudalearn  # noqa: F401
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from cudalearn.chapters.ch02.bench import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
