"""Chapter 5's batch sweep: time per step against the batch, each point's repeats kept, and its shape read.

`time_batch_sizes` times training steps of the optimised network and of PyTorch at several batch
sizes and stores, for each point, every repeat, the median and the spread ((slowest - fastest) /
median), so that a point out of line with its neighbours can be told apart from noise. The repeats
go round the batch sizes (every repeat times each batch once), so a moment when the machine was
busy spoils one repeat of several points, not every repeat of one. `sweep_lines` prints it;
`shape` reads what Chapter 5's prose states about it, and `check_shape` raises when a rerun no
longer shows it.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from cudalearn.chapters.ch05.grid_warnings import quiet_grids
from cudalearn.nn.datasets import DigitSet

NAMES = ("fused", "torch")
NOISY = 0.20  # a point whose repeats spread over more than this share of their median is not read
OUT_OF_LINE = 1.5  # a point this many times above both neighbours is named


def time_batch_sizes(
    data: DigitSet,
    sizes: tuple[int, ...],
    batches: list[int],
    *,
    lr: float,
    steps: int,
    seed: int = 0,
    launches: int = 1000,
    repeats: int = 5,
) -> dict[str, Any]:
    """Milliseconds per step of FusedMLP and TorchMLP at each batch size, repeats kept, and per launch.

    Each point: two warm-up steps, then `repeats` runs of `steps` steps, each between two
    synchronisations, taken in rounds over the batch sizes. Stored per network: `{name}_runs_ms`
    (a list of the repeats, per batch), `{name}_ms_per_step` (their medians) and `{name}_spread`.
    `launch_us` is the host time of one launch of an empty kernel (the mean of `launches`, queued
    without waiting): the floor under every step (Chapter 5).
    """
    from cudalearn.chapters.ch05 import model as mlp
    from cudalearn.chapters.ch05 import training_loop
    from cudalearn.chapters.ch05.kernels import elementwise as ew
    from cudalearn.runtime.numba_backend import cuda

    params = mlp.init_params(sizes, seed)
    out: dict[str, Any] = {"sizes": list(sizes), "batches": list(batches), "steps": steps, "repeats": repeats}
    for cls in (mlp.FusedMLP, mlp.TorchMLP):
        dd = cls.data_class(data)
        dd.shuffle(training_loop.permutations(dd.n_train, 1, seed)[0])
        nets = [cls(params, batch, lr) for batch in batches]
        losses = dd.losses(steps + 2)
        runs: list[list[float]] = [[] for _ in batches]
        with quiet_grids():
            for net, batch in zip(nets, batches, strict=True):
                with training_loop.computing(net):
                    for s in range(2):
                        net.step(*dd.batch(s, batch), losses, s)
            for _ in range(repeats):
                for i, (net, batch) in enumerate(zip(nets, batches, strict=True)):
                    per_epoch = dd.n_train // batch
                    with training_loop.computing(net):
                        dd.synchronize()
                        t0 = time.perf_counter()
                        for s in range(steps):
                            net.step(*dd.batch(s % per_epoch, batch), losses, s + 2)
                        dd.synchronize()
                        runs[i].append((time.perf_counter() - t0) / steps * 1e3)
        medians = [float(np.median(r)) for r in runs]
        out[f"{cls.name}_runs_ms"] = runs
        out[f"{cls.name}_ms_per_step"] = medians
        out[f"{cls.name}_spread"] = [(max(r) - min(r)) / m for r, m in zip(runs, medians, strict=True)]
    d = cuda.device_array(1, dtype=np.float32)
    with quiet_grids():
        ew.empty_kernel[1, 32](d)
        cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(launches):
            ew.empty_kernel[1, 32](d)
        out["launch_us"] = (time.perf_counter() - t0) / launches * 1e6
        cuda.synchronize()
    return out


def sweep_lines(sweep: dict[str, Any]) -> list[str]:
    """The batch sweep as a table: ms per step (and spread, when stored) and us per sample (Chapter 5)."""
    spread = {name: sweep.get(f"{name}_spread") for name in NAMES}
    lines = [f"{'batch':>6s} {'fused ms/step':>14s} {'spread':>7s} {'PyTorch ms/step':>16s} {'spread':>7s}"]
    lines[0] += f" {'fused us/sample':>16s}"
    for i, b in enumerate(sweep["batches"]):
        f_ms, t_ms = sweep["fused_ms_per_step"][i], sweep["torch_ms_per_step"][i]
        f_sp, t_sp = (f"{s[i]:7.0%}" if s else f"{'-':>7s}" for s in (spread["fused"], spread["torch"]))
        lines.append(f"{b:6d} {f_ms:14.3f} {f_sp} {t_ms:16.3f} {t_sp} {1e3 * f_ms / b:16.2f}")
    if not spread["fused"]:
        lines.append("spread: not stored by this run (it kept each point's median only)")
    return lines


def shape(sweep: dict[str, Any]) -> dict[str, Any]:
    """What the prose reads in the optimised network's sweep: the first-to-run-batch ratios, odd points.

    The sweep's points are (batch / 16, batch / 4, batch, 2 batch), its third the chapter's batch.
    `rows` is how many times more rows the run's batch has than the first point, `step_ratio` how
    many times longer its step takes, `sample_falls` whether the time per sample falls at every
    point up to the run's batch (past it the step grows with the rows, and the time a sample barely
    moves: `last_step_ratio` reads that), `out_of_line` the batches whose step takes OUT_OF_LINE
    times both neighbours' and `noisy` those whose repeats spread more than NOISY (empty when the
    run stored no spread).

    Where the run kept every repeat, the ratios compare the repeats least favourable to what the
    prose says (the slowest against the fastest), so that a point's spread cannot carry the reading:
    `step_ratio` is the slowest repeat at the run's batch over the fastest at the first point,
    `last_step_ratio` the fastest at the last point over the slowest at the run's batch, and the time
    a sample falls only if every repeat of a point beats every repeat of the point before. Without
    repeats, the medians. `worst_case` says which.
    """
    b, ms = sweep["batches"], sweep["fused_ms_per_step"]
    spread = sweep.get("fused_spread") or []
    runs = sweep.get("fused_runs_ms") or [[t] for t in ms]
    slow, fast = [max(r) for r in runs], [min(r) for r in runs]
    odd = [b[i] for i in range(1, len(b) - 1) if ms[i] > OUT_OF_LINE * max(ms[i - 1], ms[i + 1])]
    return {
        "rows": b[2] / b[0],
        "step_ratio": slow[2] / fast[0],
        "sample_falls": all(slow[i + 1] / b[i + 1] < fast[i] / b[i] for i in range(2)),  # up to b[2]
        "last_step_ratio": fast[3] / slow[2],
        "worst_case": "fused_runs_ms" in sweep,
        "out_of_line": odd,
        "noisy": [n for n, s in zip(b, spread, strict=True) if s > NOISY] if spread else [],
        "spread_stored": bool(spread),
    }
