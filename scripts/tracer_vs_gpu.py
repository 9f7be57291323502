#!/usr/bin/env python3
"""Chapter 10's kernels on a GPU and on the course's tracer, same inputs: are the results equal?

    CUDALEARN_MODE=gpu python3 scripts/tracer_vs_gpu.py --out tracer_vs_gpu.json

Every launch the chapter's host functions make (`cudalearn.trace.launch`) is run twice: on the GPU,
and on copies of the same arguments by `cudalearn.trace.run`, the CPU execution the chapter uses
where Numba's simulator has no warp shuffles. For each array a launch writes, the file records how
many elements are equal bit for bit and the largest difference in units of the last place (ulp).
Sizes are small: the tracer runs one Python generator per GPU thread.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path

import numpy as np

#: the kernels' output parameters (an output buffer may hold an earlier launch's equal result, so what a
#: launch wrote is told by its name, not by a change)
OUTPUTS = {"partial", "out", "y", "s", "o", "C"}


def ulps(a: np.ndarray, b: np.ndarray) -> int:
    """The largest distance in float32 units of the last place between a and b (0: bit for bit)."""
    ia = a.astype(np.float32).view(np.int32).astype(np.int64)
    ib = b.astype(np.float32).view(np.int32).astype(np.int64)
    ia = np.where(ia < 0, np.int64(-(2**31)) - ia, ia)  # the float order on the integers
    ib = np.where(ib < 0, np.int64(-(2**31)) - ib, ib)
    return int(np.abs(ia - ib).max()) if a.size else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    out_path = parser.parse_args().out

    import cudalearn
    from cudalearn import trace
    from cudalearn.measure import reference

    if cudalearn.setup().mode != "gpu":
        sys.exit("this comparison needs a GPU (CUDALEARN_MODE=gpu)")
    from cudalearn.chapters.ch10.kernels import attention, layernorm, reductions, softmax
    from cudalearn.runtime.numba_backend import cuda

    rows: list[dict] = []
    case = {"name": ""}

    def both(kernel, griddim, blockdim, *args):
        """The launch on the GPU, then on the tracer from the same inputs; record what it wrote."""
        before = [
            a.copy_to_host()
            if hasattr(a, "copy_to_host")
            else np.array(a)
            if isinstance(a, np.ndarray)
            else a
            for a in args
        ]
        kernel[griddim, blockdim](*args)
        cuda.synchronize()
        host = [np.array(b, copy=True) if isinstance(b, np.ndarray) else b for b in before]
        trace.run(kernel, griddim, blockdim, *host)
        fn = trace.execute._python_function(kernel)
        params = inspect.signature(fn).parameters
        for i, (a, param) in enumerate(zip(args, params, strict=True)):
            if param not in OUTPUTS:
                continue
            gpu = a.copy_to_host() if hasattr(a, "copy_to_host") else a  # numba copies a host array back
            same = int(np.sum((gpu == host[i]) | (np.isnan(gpu) & np.isnan(host[i]))))
            rows.append(
                {
                    "case": case["name"],
                    "kernel": fn.__name__,
                    "output": param,
                    "launch": [[int(g) for g in np.atleast_1d(d)] for d in (griddim, blockdim)],
                    "argument": i,
                    "elements": int(gpu.size),
                    "bit_equal": same,
                    "max_ulp": ulps(gpu, host[i]),
                    "max_abs": float(np.max(np.abs(gpu.astype(np.float64) - host[i]))) if gpu.size else 0.0,
                }
            )

    trace.launch = both  # every host function of the chapter launches through trace.launch
    rng = np.random.default_rng(10)
    x = rng.standard_normal(4096 + 37).astype(np.float32)
    for k in ("sum_interleaved", "sum_strided_index", "sum_sequential", "sum_shuffle", "sum_atomic"):
        case["name"] = f"sum of {x.size} floats"
        reductions.launch_sum(getattr(reductions, k), x)
    s = (rng.standard_normal((16, 197)) * 4).astype(np.float32)
    for k in ("softmax_block", "softmax_warp", "softmax_online"):
        case["name"] = f"softmax of {s.shape}"
        softmax.launch_rows(getattr(softmax, k), s, np.empty_like(s))
    case["name"] = "LayerNorm of (16, 768)"
    ln = rng.standard_normal((16, 768)).astype(np.float32) * 3 + 1
    gamma, beta = rng.standard_normal((2, 768)).astype(np.float32)
    softmax.launch_rows(layernorm.layernorm, ln, np.empty_like(ln), gamma, beta, np.float32(1e-5))
    q, k, v = rng.standard_normal((3, 64, 16)).astype(np.float32)
    case["name"] = "attention, three kernels, n=64, d=16"
    attention.attention_three(q, k, v)
    case["name"] = "attention, fused, n=64, d=16"
    attention.launch_attention_fused(q, k, v)

    result = {**reference.run_header(), "source": "scripts/tracer_vs_gpu.py", "launches": rows}
    out_path.write_text(json.dumps(result, indent=1) + "\n")
    for r in rows:
        print(
            f"{r['case']:<38} {r['kernel']:<18} {r['output']:<8} {r['bit_equal']:>6}/{r['elements']:<6}"
            f" bit-equal, max {r['max_ulp']} ulp ({r['max_abs']:.2e})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
