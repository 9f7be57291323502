"""Chapter 2's vector addition timed: one element a thread, several, and torch.add, in one run.

    CUDALEARN_MODE=gpu python3 scripts/bench_vector_add.py

`candidates(n, threads)` makes what Chapter 2's "bytes in flight" section and
this benchmark time with one `timing.measure` call: `torch.add`, the
chapter's `vector_add` (one element a thread, signed indices) and
`vector_add_ilp(k)` for each k of PER_THREAD (k elements a thread, unsigned
indices; k = 1 separates the effect of the indices from that of k), on the
same two float32 inputs, each writing its own output. The Numba kernels are
launched through `launch.prepared`: a plain Numba launch costs the host tens
of microseconds, close to the GPU's time for the whole addition (on an H200,
2026-12-04: 38 us of host time a plain launch, 49 us for torch.add on 2^24
floats; data/gpu-runs/2026-12-04-h200-probe/rows_probe.log), and the timing
must measure the GPU. `check()` runs every candidate once and compares its
output with NumPy's `a + b` bit for bit (one float32 addition per element,
correctly rounded everywhere).

The goal (issue 17): the fastest Numba kernel at >= GOAL x torch.add's speed,
judged on the figures of one run (`goal_line`). Under the simulator nothing
is timed: every candidate runs once at the simulator's sizes, is checked,
and the stored GPU figures are shown, if any.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cudalearn.measure import stated
from cudalearn.measure.timing import SIMULATED

TORCH = "torch.add"
ONE = "vector_add"  # Chapter 2's kernel: one element a thread, signed indices
PER_THREAD = (1, 2, 4, 8)  # the values of k timed
GOAL = 0.90  # the fastest Numba kernel's speed / torch.add's (issue 17)
KEY = "ch2.bench_vector_add"


def ilp_name(k: int) -> str:
    """The row name of `vector_add_ilp(k)` in the timings: 'vector_add_ilp(4)' (Chapter 2)."""
    return f"vector_add_ilp({k})"


def candidates(n: int, threads: int, per_thread=PER_THREAD, seed: int = 0):
    """({name: callable}, check): torch.add and the Numba vector adds on n float32, outputs apart (Ch. 2).

    The inputs are PyTorch tensors on `device.torch_device()`; the Numba
    kernels read them without a copy (`launch.cuda_view`) and are launched
    with `threads` threads a block through `launch.prepared`. `check()` runs
    each candidate once, its output first filled with NaN, and raises an
    AssertionError naming the first candidate whose output differs from
    NumPy's a + b; it returns the names checked.
    """
    import torch

    from cudalearn import checks
    from cudalearn.chapters.ch00.kernels import vector_add, vector_add_ilp
    from cudalearn.runtime import launch
    from cudalearn.runtime.device import torch_device

    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    dev = torch_device()
    ta, tb = torch.from_numpy(a).to(dev), torch.from_numpy(b).to(dev)
    outs: dict[str, Any] = {}

    def numba_add(name, kernel, per):
        outs[name] = torch.empty_like(ta)
        views = [launch.cuda_view(t) for t in (ta, tb, outs[name])]
        return launch.prepared(kernel, max(1, launch.blocks(n, threads * per)), threads, *views)

    outs[TORCH] = torch.empty_like(ta)
    found = {TORCH: lambda: torch.add(ta, tb, out=outs[TORCH])}
    found[ONE] = numba_add(ONE, vector_add, 1)
    for k in per_thread:
        found[ilp_name(k)] = numba_add(ilp_name(k), vector_add_ilp(k), k)
    expected = a + b

    def check() -> list[str]:
        for name, run in found.items():
            outs[name].fill_(float("nan"))
            run()
            got = outs[name].cpu().numpy()
            checks.check_close(got, expected, name=name, rtol=0, atol=0, block=(threads,))
        return list(found)

    return found, check


def goal_line(results) -> str:
    """The verdict on issue 17's goal from one `timing.measure` result of `candidates` (Chapter 2).

    'MET' or 'MISSED' with the fastest Numba kernel's speed relative to
    torch.add and vector_add's; 'NO DATA' when the result has no GPU times
    (under the simulator with no stored run).
    """
    speed = {r["name"]: r.get("vs_baseline") for r in results.rows if r.get("median_ms")}
    numba = {name: v for name, v in speed.items() if name != TORCH and v}
    if not numba or TORCH not in speed:
        return f"NO DATA fastest Numba vector add >= {GOAL:.2f}x torch.add: no GPU times in these figures"
    best = max(numba, key=numba.get)
    verdict = "MET   " if numba[best] >= GOAL else "MISSED"
    one = f"; {ONE} {numba[ONE]:.2f}x" if ONE in numba else ""
    return (
        f"{verdict} fastest Numba vector add >= {GOAL:.2f}x torch.add: {best} {numba[best]:.2f}x{one} "
        f"[{results.label}]"
    )


def main() -> int:
    """Chapter 2's vector adds checked, timed and judged: scripts/bench_vector_add.py."""
    from cudalearn.runtime import device

    info = device.setup()
    from cudalearn.measure import timing
    from cudalearn.runtime.sizes import size

    if info.mode == "sim":
        print(SIMULATED)
    threads = size("ch2.block")
    odd = size("ch2.vector_odd_n")
    names = candidates(odd, threads, seed=1)[1]()  # off the block grid: every guard has work to do
    print(f"checked against NumPy, bit for bit, at n = {odd:,}: {', '.join(names)}")
    n = size("ch2.vector_n")
    found, check = candidates(n, threads)
    check()
    results = timing.measure(
        KEY,
        found,
        baseline=TORCH,
        nbytes=3 * 4 * n,  # read a and b, write out
        size={"n": n, "threads": threads, "per_thread": list(PER_THREAD)},
    )
    print(results)
    print("goal " + goal_line(results))
    return 0


def ilp_steps(results: Any) -> None:
    """Print deep dive 2a's two steps (unsigned indices, then bytes in flight) as speed ratios.

    On the stored run it also checks what the text says of them: the indices change the speed by
    under 5%, more bytes in flight by over 10%, to within 5% of torch.add. On a GPU it prints the
    reader's own ratios unchecked: a GPU whose memory needs fewer bytes in flight may gain less."""
    speed = {row["name"]: row.get("vs_baseline") for row in results.rows}  # relative to torch.add
    best_k = max(PER_THREAD[1:], key=lambda k: speed[ilp_name(k)] or 0)
    steps = None
    if all(speed.values()):
        ilp1 = speed[ilp_name(1)]
        steps = {"indices": ilp1 / speed[ONE], "in_flight": speed[ilp_name(best_k)] / ilp1}
        steps["best"] = speed[ilp_name(best_k)]
    stated.say(
        steps,
        results.label,
        lambda s: (
            f"unsigned indices: vector_add_ilp(1) at {s['indices']:.3f}x vector_add's speed\n"
            f"bytes in flight: vector_add_ilp({best_k}) at {s['in_flight']:.2f}x vector_add_ilp(1)'s speed, "
            f"{s['best']:.2f}x torch.add's"
        ),
        holds=(lambda s: abs(s["indices"] - 1) < 0.05 and s["in_flight"] > 1.1 and s["best"] > 0.95)
        if results.source == "reference"
        else None,
        states="the indices change the speed by under 5%, bytes in flight by over 10%, to near torch.add",
    )
