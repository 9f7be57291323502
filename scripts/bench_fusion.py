#!/usr/bin/env python3
"""Chapter 5's measurements in one run, with ratios and one verdict line per goal.

    CUDALEARN_MODE=gpu python3 scripts/bench_fusion.py

`scripts/gpu_run.py` runs it with `CUDALEARN_RECORD` set, so its figures are
stored as reference data under the keys `bench5.*`. Everything is measured
in this process: end-to-end training of the naive, optimised and PyTorch
networks (same weights, batches and epochs; FP32, TF32 off), each layer
kernel against the naive version and cuBLAS, the device-to-device copy
bandwidth and the elementwise chain, unfused and fused. The goals:

- the optimised network at least 3x faster than the naive one end to end;
- the optimised network faster than PyTorch: at most 0.8x its time;
- the fused elementwise chain at 90% of the copy bandwidth or more (the fastest fused kernel of
  the run: 4-byte accesses, 8-byte `bias_relu_dropout_pairs`, or its unsigned-index variants
  `bias_relu_dropout_pairs_u32(pairs)`; each one's share of the copy is printed).

A missed goal prints MISSED with its numbers; the exit status only says
whether the measurements ran. Under the simulator the script is a smoke
test: every candidate runs once at the simulator's sizes, a training run
on 32 rows exercises the timing code (its wall time is not a GPU time),
and the stored reference figures, if any, are shown in place of times.
"""

from __future__ import annotations

import sys

from cudalearn.chapters.ch05.bench import command_line

if __name__ == "__main__":
    sys.exit(command_line.main())
