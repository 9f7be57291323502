"""The Nsight Compute scripts' shared parts: store a profile as a run, print it, their command line.

Used by scripts/ncu_chain.py (Chapter 5's chain) and scripts/ncu_rows.py (Chapter 10's row kernels):
each profiles a `launch` child of its own under ncu and stores the second launch of each kernel.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cudalearn.compile import toolchain
from cudalearn.measure import reference


def store(
    out_path: str | Path, info: Any, ncu: str, stdout: str, metrics: dict, key: str, source: str
) -> None:
    """Write `metrics` as the stored run of `key` (reference.write_ncu_run) and print a line a kernel."""
    reference.write_ncu_run(
        out_path, info, toolchain.ncu_versions(ncu), stdout, toolchain.no_nan(metrics), key, source
    )
    width = max(map(len, metrics), default=0) + 2
    for name, m in metrics.items():
        print(f"{name:{width}s}" + "  ".join(f"{k.split('.')[0]}={v}" for k, v in m.items()))


def main(
    doc: str, launch: Callable[[], int], gpu: Callable[[str], int], argv: list[str] | None = None
) -> int:
    """The scripts' command line: `launch` (the profiled child) or `gpu --out FILE` (profile and store)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("launch")
    sub.add_parser("gpu").add_argument("--out", required=True)
    args = parser.parse_args(argv)
    return launch() if args.cmd == "launch" else gpu(args.out)
