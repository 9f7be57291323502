#!/usr/bin/env python3
"""Nsight Compute on Chapter 5's chain kernels: what limits the fused kernel with 4-byte accesses.

    python3 scripts/ncu_chain.py gpu --out src/cudalearn/data/ncu/h200_chain_ncu.json   # GPU with ncu

One ncu process runs `launch`, which runs `copy_2d`, `bias_relu_dropout` and
`bias_relu_dropout_pairs` twice each on the chapter's chain size; the second
launch of each is kept. The JSON gets the device, date and versions, and per
kernel: time, DRAM and SM throughput (% of peak), instructions executed,
DRAM bytes, and the warp state: cycles between two issued instructions per
warp, the part of them spent waiting on a global load (long scoreboard), and
the achieved occupancy. Chapter 5 reads it from the package data `cudalearn.data.ncu`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ncu_compare import find_ncu, no_nan, parse_ncu_csv, versions  # noqa: E402

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
    from numba import cuda

    from cudalearn.kernels import elementwise as ew

    rows, cols = cudalearn.size("ch5.chain_rows"), cudalearn.size("ch5.chain_cols")
    Z, b, mask, s = ew.chain_inputs(rows, cols)
    dZ, db, dm = cuda.to_device(Z), cuda.to_device(b), cuda.to_device(mask)
    dY = cuda.device_array_like(dZ)
    grid, block = ew.launch_chain((rows, cols))
    for _ in range(2):
        ew.copy_2d[grid, block](dZ, dY)
        ew.bias_relu_dropout[grid, block](dZ, db, dm, s, dY)
        ew.fused_chain_pairs(dZ, db, dm, s, dY)
    cuda.synchronize()
    print(json.dumps({"rows": rows, "cols": cols}))
    return 0


def cmd_gpu(out_path: str) -> int:
    """Profile the three kernels under ncu and write the JSON."""
    import cudalearn

    info = cudalearn.setup("gpu")
    ncu = find_ncu()
    if ncu is None:
        print("ncu not found", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "ncu.csv"
        cmd = [ncu, "--clock-control", "none", "--csv", "--page", "details", "--print-units", "base"]
        cmd += ["--metrics", ",".join(METRICS), "--log-file", str(log)]
        cmd += [sys.executable, str(Path(__file__).resolve()), "launch"]
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        text = log.read_text() if log.exists() else ""
    print(proc.stdout[-2000:], proc.stderr[-2000:])
    metrics = parse_ncu_csv(text, KERNELS, launch="last")  # the second, warm launch of each
    if proc.returncode != 0 or set(metrics) != set(KERNELS):
        print(f"ncu exit {proc.returncode}; parsed {sorted(metrics)}\n{text[-3000:]}", file=sys.stderr)
        return 1
    size = json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])
    result = {
        "device": info.device,
        "compute_capability": list(info.compute_capability or ()),
        "date": datetime.date.today().isoformat(),
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "versions": versions(ncu),
        "size": size,
        "metrics": no_nan(metrics),
    }
    Path(out_path).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    for name, m in metrics.items():
        print(f"{name:26s} " + "  ".join(f"{k.split('.')[0]}={v}" for k, v in m.items()))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("launch")
    gpu = sub.add_parser("gpu")
    gpu.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    return cmd_launch() if args.cmd == "launch" else cmd_gpu(args.out)


if __name__ == "__main__":
    sys.exit(main())
