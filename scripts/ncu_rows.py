#!/usr/bin/env python3
"""Nsight Compute on Chapter 10's row kernels (softmax and LayerNorm): where their bytes come from.

    python3 scripts/ncu_rows.py gpu --out "$OUT/ncu-rows.json"   # on a GPU with ncu

One ncu process runs `launch` (`cudalearn.chapters.ch10.profile_rows.launch_twice`); the second launch
of each kernel is kept. The JSON is a stored reference run (key `ch10.ncu_rows`): per kernel, time,
DRAM bytes read and written, instructions executed, registers, active warps, global load requests and
sectors, and (where ncu accepts them) the L1 hit rate of global loads and the L2 sectors L1 read.
"""

from __future__ import annotations

import json
import sys

from cudalearn.chapters.ch10 import profile_rows
from cudalearn.compile import toolchain
from cudalearn.measure import ncu_runs


def cmd_gpu(out_path: str) -> int:
    """Profile the row kernels under ncu and write the stored JSON."""
    import cudalearn

    info = cudalearn.setup("gpu")
    ncu = toolchain.find_ncu()
    if ncu is None:
        print("ncu not found", file=sys.stderr)
        return 1
    child = toolchain.child_command(__file__, "launch")
    for metrics in (profile_rows.CORE_METRICS + profile_rows.EXTRA_METRICS, profile_rows.CORE_METRICS):
        prof = toolchain.profile(
            ncu, child, profile_rows.KERNELS, metrics=metrics, launch="last", all_processes=False, timeout=300
        )
        if prof.failure() is None and set(prof.metrics) == set(profile_rows.KERNELS):
            break
        why = prof.failure() or f"kernels parsed: {sorted(prof.metrics)}"
        print(f"ncu with {len(metrics)} metrics failed:\n{why}", file=sys.stderr)
    else:
        return 1
    ncu_runs.store(out_path, info, ncu, prof.stdout, prof.metrics, "ch10.ncu_rows", "scripts/ncu_rows.py")
    return 0


def cmd_launch() -> int:
    """The profiled child: each row kernel twice at the chapter's sizes."""
    import cudalearn

    cudalearn.setup("gpu")
    print(json.dumps(profile_rows.launch_twice()))
    return 0


def main(argv: list[str] | None = None) -> int:
    return ncu_runs.main(__doc__, cmd_launch, cmd_gpu, argv)


if __name__ == "__main__":
    sys.exit(main())
