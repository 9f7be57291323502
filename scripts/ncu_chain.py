#!/usr/bin/env python3
"""Nsight Compute on Chapter 5's chain kernels: what limits the fused kernel with 4-byte accesses.

    python3 scripts/ncu_chain.py gpu --out src/cudalearn/data/reference/h200-ncu-chain.json   # GPU with ncu

One ncu process runs `launch`, which runs `copy_2d`, `bias_relu_dropout` and
`bias_relu_dropout_pairs` twice each on the chapter's chain size; the second
launch of each is kept. The JSON gets the device, date and versions, and per
kernel: time, DRAM and SM throughput (% of peak), instructions executed,
DRAM bytes, and the warp state: cycles between two issued instructions per
warp, the part of them spent waiting on a global load (long scoreboard), and
the achieved occupancy. It is stored as a reference run (key `ch5.ncu_chain`), which Chapter 5
reads with `reference.lookup("ch5.ncu_chain")`.
"""

from __future__ import annotations

import json
import sys

from cudalearn.compile import toolchain
from cudalearn.measure import ncu_runs

KERNELS = ("copy_2d", "bias_relu_dropout", "bias_relu_dropout_pairs")
METRICS = (
    "gpu__time_duration.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "smsp__inst_executed.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "launch__registers_per_thread",
    # warp state: what a warp waits for between two instructions (Chapter 5 reads these when present)
    "smsp__average_warp_latency_per_inst_issued.ratio",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
)


def cmd_launch() -> int:
    """The profiled child: each kernel twice at the chain's GPU size."""
    import cudalearn

    cudalearn.setup("gpu")
    from cudalearn.chapters.ch05.kernels import chain_pairs
    from cudalearn.chapters.ch05.kernels import elementwise as ew
    from cudalearn.runtime.numba_backend import cuda

    rows, cols = cudalearn.size("ch5.chain_rows"), cudalearn.size("ch5.chain_cols")
    Z, b, mask, s = ew.chain_inputs(rows, cols)
    dZ, db, dm = cuda.to_device(Z), cuda.to_device(b), cuda.to_device(mask)
    dY = cuda.device_array_like(dZ)
    grid, block = ew.launch_chain((rows, cols))
    for _ in range(2):
        ew.copy_2d[grid, block](dZ, dY)
        ew.bias_relu_dropout[grid, block](dZ, db, dm, s, dY)
        chain_pairs.fused_chain_pairs(dZ, db, dm, s, dY)
    cuda.synchronize()
    print(json.dumps({"rows": rows, "cols": cols}))
    return 0


def cmd_gpu(out_path: str) -> int:
    """Profile the three kernels under ncu and write the JSON."""
    import cudalearn

    info = cudalearn.setup("gpu")
    ncu = toolchain.find_ncu()
    if ncu is None:
        print("ncu not found", file=sys.stderr)
        return 1
    child = toolchain.child_command(__file__, "launch")
    prof = toolchain.profile(
        ncu, child, KERNELS, metrics=METRICS, launch="last", all_processes=False, timeout=300, echo=False
    )  # the second, warm launch of each kernel
    print(prof.stdout[-2000:], prof.stderr[-2000:])
    metrics = prof.metrics
    if prof.error or prof.returncode != 0 or set(metrics) != set(KERNELS):
        why = prof.error or prof.text[-3000:]
        print(f"ncu exit {prof.returncode}; parsed {sorted(metrics)}\n{why}", file=sys.stderr)
        return 1
    ncu_runs.store(out_path, info, ncu, prof.stdout, metrics, "ch5.ncu_chain", "scripts/ncu_chain.py")
    return 0


def main(argv: list[str] | None = None) -> int:
    return ncu_runs.main(__doc__, cmd_launch, cmd_gpu, argv)


if __name__ == "__main__":
    sys.exit(main())
