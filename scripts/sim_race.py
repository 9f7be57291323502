#!/usr/bin/env python3
"""Count wrong results of a one-block shared-memory kernel under Numba's simulator, with and without the fix.

    python3 scripts/sim_race.py --launches 400            # cudalearn's locked shared arrays
    python3 scripts/sim_race.py --launches 400 --unfixed  # the simulator's own check-then-set

Each launch builds a fresh shared array (one per launch, shared by all
blocks), so only launches, not blocks, give the race a chance: that is why
a 640-block stress test did not reproduce it. See cudalearn/runtime/simfix.py.
"""

from __future__ import annotations

import argparse
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launches", type=int, default=400)
    parser.add_argument("--tile", type=int, default=16)
    parser.add_argument("--switch-interval", type=float, default=1e-4)
    parser.add_argument("--unfixed", action="store_true", help="restore the simulator's unlocked method")
    args = parser.parse_args()

    import cudalearn
    from cudalearn.runtime import simfix

    cudalearn.setup("sim", quiet=True)
    sys.setswitchinterval(args.switch_interval)
    global cuda, float32  # module globals: the simulator swaps a kernel's global `cuda` for its fake one
    import numpy as np
    from numba import cuda, float32
    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    if args.unfixed:
        FakeCUDAShared.array = simfix.ORIGINAL_ARRAY
    t = args.tile

    @cuda.jit
    def transpose_tile(out):
        tile = cuda.shared.array((t, t), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        tile[ty, tx] = ty * t + tx
        cuda.syncthreads()
        out[ty, tx] = tile[tx, ty]

    expected = np.arange(t * t, dtype=np.float32).reshape(t, t).T
    wrong, t0 = 0, time.time()
    for _ in range(args.launches):
        out = np.zeros((t, t), np.float32)
        transpose_tile[1, (t, t)](out)
        wrong += not np.array_equal(out, expected)
    label = "unfixed" if args.unfixed else "fixed"
    print(
        f"{label}: {wrong} wrong of {args.launches} launches ({t}x{t} threads, switch interval "
        f"{args.switch_interval:g} s) in {time.time() - t0:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
