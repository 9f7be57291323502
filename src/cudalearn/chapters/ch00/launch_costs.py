"""What one kernel launch costs the host, measured three ways in one run (Chapter 0).

`launch_costs` times, on one GPU, in one process and one call, the host's time to queue a launch of
`busy` in the three situations Chapter 0 compares: right after a long kernel finished (the no-sync
stopwatch of the chapter's first timing), after the host paused for a while with the GPU idle, and
in a row of launches queued back to back (what a training loop pays, Chapter 5). One run, so the
figures are comparable: same machine, driver, process and date.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

PAUSES_MS = (0, 0.1, 1, 10, 100)


def _host_ms(launch, before) -> float:
    """Host milliseconds of one unsynchronised `launch()`, after `before()` (which may wait)."""
    before()
    t0 = time.perf_counter()
    launch()
    return (time.perf_counter() - t0) * 1e3


def launch_costs(busy, blocks: int, threads: int, d_x, long_iters: int, repeat: int = 15) -> dict[str, Any]:
    """Host time (us, medians of `repeat`) of a launch of `busy`: after a long kernel, after pauses, in a row.

    `busy[blocks, threads](d_x, iters)` is Chapter 0's kernel on a device array; `long_iters` makes
    the long kernel of the chapter's first timing. The launch timed is a one-iteration `busy` of one
    block (`threads` elements), which the GPU finishes in microseconds, so in a row the queue never
    fills and the host's time is the launch's alone. Returns `after_long_kernel_us`,
    `long_kernel_ms` (the host's wait for it), `pauses_ms` and `after_pause_us`, `in_a_row_us`
    (1,000 launches queued back to back, divided by 1,000) and `repeat`.
    """
    import numpy as np

    from cudalearn.runtime.numba_backend import cuda

    d_one = cuda.to_device(np.zeros(threads, dtype=np.float32))

    def short():  # one block, one iteration: the kernel is done at once
        busy[1, threads](d_one, 1)

    def long():
        busy[blocks, threads](d_x, long_iters)

    short(), long()  # the first launch compiles the kernel
    cuda.synchronize()
    waits, after_long = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        long()
        cuda.synchronize()  # the host waits for the long kernel, as in the chapter's first timing
        waits.append((time.perf_counter() - t0) * 1e3)
        after_long.append(_host_ms(short, cuda.synchronize))
    after_pause = []
    for pause in PAUSES_MS:

        def idle(pause=pause):  # the queue is empty, and the last launch is `pause` ms old
            cuda.synchronize()
            time.sleep(pause / 1e3)

        after_pause.append(statistics.median(_host_ms(short, idle) for _ in range(repeat)))
    cuda.synchronize()
    rows = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(1000):
            short()
        rows.append((time.perf_counter() - t0) * 1e3)  # host time only: no synchronisation inside
        cuda.synchronize()
    return {
        "after_long_kernel_us": statistics.median(after_long) * 1e3,
        "long_kernel_ms": statistics.median(waits),
        "pauses_ms": list(PAUSES_MS),
        "after_pause_us": [ms * 1e3 for ms in after_pause],
        "in_a_row_us": statistics.median(rows),  # ms per 1,000 launches = us per launch
        "repeat": repeat,
    }


def lines(f: dict[str, Any]) -> str:
    """`launch_costs`'s figures as the lines Chapter 0 prints, each under 100 columns."""
    out = [f"Host time of one launch (median of {f['repeat']}):"]
    long, us = f"{f['long_kernel_ms']:.1f} ms", f["after_long_kernel_us"]
    out.append(f"  right after waiting out a {long} kernel: {us:{16 - len(long)}.1f} us")
    for pause, us in zip(f["pauses_ms"], f["after_pause_us"], strict=True):
        out.append(f"  after the host paused {pause:5g} ms:{us:19.1f} us")
    out.append(f"  in a row of 1,000 launches, each:{f['in_a_row_us']:16.1f} us")
    return "\n".join(out)


def cheap_in_a_row(f: dict[str, Any]) -> bool:
    """The shape Chapter 0's prose reads in `launch_costs`'s figures (its compared cell checks it).

    A launch in a row is the cheapest of all; after a long kernel, or after a pause of 10 ms or
    more, a launch costs over twice what it costs after any pause up to 1 ms.
    """
    pause = dict(zip(f["pauses_ms"], f["after_pause_us"], strict=True))
    short = max(us for ms, us in pause.items() if ms <= 1)
    long = min([f["after_long_kernel_us"], *(us for ms, us in pause.items() if ms >= 10)])
    return f["in_a_row_us"] < min(pause.values()) and long > 2 * short
