"""What Chapter 5 measures on its shallow network: whole trainings and single steps, timed (Chapter 5).

- `time_training` times whole trainings of the naive, fused, prepared, tuned
  and PyTorch networks (`cudalearn.chapters.ch05.model`) from the same weights on the same batches;
  `training_lines` prints them as a table.
- `time_step_host` times single steps: where a step's host time goes (the
  sweep over batch sizes is `cudalearn.chapters.ch05.bench.batch_sweep`); `pace` reads who set the
  pace, the host or the GPU.
- the kernels of one hidden layer are `cudalearn.chapters.ch05.bench.fused_layer`, the
  memory-bound chain `cudalearn.chapters.ch05.bench.dropout_chain`.
- `cudalearn.chapters.ch05.bench.goals` judges the chapter's goals from one run's figures, and
  `cudalearn.chapters.ch05.bench.command_line` is `scripts/bench_fusion.py`: all of it in one run.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from cudalearn.chapters.ch05.grid_warnings import quiet_grids
from cudalearn.measure import stated
from cudalearn.nn.datasets import DigitSet
from cudalearn.runtime.counting import count_launches

#: The networks `time_training` can time, by the names of its figures (classes of ch05.model).
IMPLEMENTATIONS = {
    "naive": "NaiveMLP",
    "fused": "FusedMLP",
    "prepared": "PreparedMLP",
    "tuned": "TunedMLP",
    "torch": "TorchMLP",
}


def time_training(
    data: DigitSet,
    sizes: tuple[int, ...],
    *,
    batch: int,
    lr: float,
    epochs: int,
    seed: int = 0,
    names: tuple[str, ...] = tuple(IMPLEMENTATIONS),
    repeats: int = 3,
) -> dict[str, Any]:
    """Seconds for `epochs` epochs of each implementation, `repeats` times, after a warm-up (Chapter 5).

    Every implementation starts from the same weights and sees the same
    batches. One warm-up epoch each compiles the kernels, warms PyTorch up
    and lets `PreparedMLP` prepare its launches. Then `repeats` rounds, each
    training every implementation in turn from the initial weights again
    (`load_params`, the same device arrays): the GPU is synchronised,
    `epochs` epochs run, and the clock stops after a second synchronisation
    (one perf_counter interval: a whole training run is far longer than the
    clock's resolution). Interleaving the rounds, each starting with the
    next implementation, spreads any drift of the machine over all of them.
    No evaluation runs inside the timed part. Returns JSON-ready figures: every run's seconds (`runs`), their
    median (`seconds`) and spread ((max - min) / median), the per-epoch
    losses and the test accuracy of the last run, and the kernel launches of
    one step of each Numba network.
    """
    from cudalearn.chapters.ch05 import model as mlp
    from cudalearn.chapters.ch05 import training_loop
    from cudalearn.nn.training import accuracy

    params = mlp.init_params(sizes, seed)
    out: dict[str, Any] = {
        "sizes": list(sizes),
        "batch": batch,
        "lr": lr,
        "epochs": epochs,
        "repeats": repeats,
        "samples": int(data.X_train.shape[0]),
        "steps_per_epoch": int(data.X_train.shape[0] // batch),
        "runs": {name: [] for name in names},
        "seconds": {},
        "spread": {},
        "epoch_loss": {},
        "test_accuracy": {},
        "launches_per_step": {},
    }
    uploaded: dict[type, Any] = {}
    nets = {}
    for name in names:
        cls = getattr(mlp, IMPLEMENTATIONS[name])
        net = nets[name] = cls(params, batch, lr)
        if cls.data_class not in uploaded:  # one upload per kind of data, shared by the Numba networks
            uploaded[cls.data_class] = cls.data_class(data)
        dd = uploaded[cls.data_class]
        training_loop.train(
            net, dd, 1, seed=seed + 1, evaluate=False, progress=False
        )  # warm-up: compile, caches
        if name != "torch":
            X, y = dd.batch(0, batch)
            with count_launches() as launches, quiet_grids():
                net.step(X, y, dd.losses(1), 0)
            out["launches_per_step"][name] = launches.count
    order = list(nets)
    for r in range(repeats):
        for name in order[r % len(order) :] + order[: r % len(order)]:  # each round starts elsewhere
            net = nets[name]
            dd = uploaded[net.data_class]
            net.load_params(params)  # the timed run starts from the initial weights again
            dd.synchronize()
            t0 = time.perf_counter()
            hist = training_loop.train(net, dd, epochs, seed=seed, evaluate=False, progress=False)
            dd.synchronize()
            out["runs"][name].append(time.perf_counter() - t0)
            out["epoch_loss"][name] = hist.epoch_loss
    for name, net in nets.items():
        runs = out["runs"][name]
        out["seconds"][name] = float(np.median(runs))
        out["spread"][name] = (max(runs) - min(runs)) / out["seconds"][name]
        dd = uploaded[net.data_class]
        out["test_accuracy"][name] = accuracy(net.logits(dd.X_test), dd.y_test_host)
    return out


def training_lines(training: dict[str, Any]) -> list[str]:
    """The end-to-end table of `time_training`'s figures: seconds, ratios, launches, accuracy (Chapter 5).

    A run stored before `PreparedMLP` existed has no 'prepared' row, and one stored before the
    repeats no spread: the table shows what the run has.
    """
    sec = training["seconds"]
    spread = training.get("spread", {})
    head = ("seconds", "spread", "vs naive", "vs PyTorch", "launches/step", "test acc")
    lines = [f"{'':9s} {head[0]:>8s} {head[1]:>7s} {head[2]:>9s} {head[3]:>11s} {head[4]:>14s} {head[5]:>9s}"]
    for name in IMPLEMENTATIONS:
        if name not in sec:
            continue
        launches = str(training["launches_per_step"].get(name, "-"))
        agree = f"{spread[name]:7.1%}" if name in spread else f"{'-':>7s}"
        lines.append(
            f"{name:9s} {sec[name]:8.3f} {agree} {sec['naive'] / sec[name]:8.2f}x "
            f"{sec[name] / sec['torch']:10.2f}x {launches:>14s} {training['test_accuracy'][name]:9.2%}"
        )
    return lines


def check_training(training: dict[str, Any], source: str) -> None:
    """Check the stored end-to-end run against what Chapter 5's text says of it (Chapter 5, section 10).

    Every time positive; every network's last loss within 10% of the naive one's; after five epochs
    the Numba networks' test accuracies within a point of each other and PyTorch's within two."""
    sec, acc = training["seconds"], training["test_accuracy"]
    assert all(v > 0 for v in sec.values()), "every implementation must have a positive time"
    final = {name: losses[-1] for name, losses in training["epoch_loss"].items()}
    for name in ("fused", "prepared", "tuned", "torch"):
        if name in final:  # a run stored before PreparedMLP (or TunedMLP) has no 'prepared' ('tuned')
            assert np.isclose(final[name], final["naive"], rtol=0.1), f"{name} trained differently: {final}"
    numba_acc = [acc[name] for name in sec if name != "torch"]
    stated.check(
        training,
        source,
        lambda f: (
            f["epochs"] == 5
            and max(numba_acc) - min(numba_acc) < 0.01
            and abs(acc["torch"] - acc["naive"]) < 0.02
        ),
        "after five epochs the Numba networks' test accuracies agree within a point, PyTorch's within two",
    )


def training_notes(training: dict[str, Any]) -> list[str]:
    """Under the end-to-end table: the last epoch's losses; the post's speed-up beside ours (Chapter 5)."""
    sec = training["seconds"]
    last = ", ".join(f"{name} {losses[-1]:.4f}" for name, losses in training["epoch_loss"].items())
    return [
        f"mean training loss of the last epoch: {last}",
        f"the post's 1.4x on a T4 and our {sec['naive'] / sec['fused']:.1f}x are not comparable: other GPUs, "
        f"each over its own naive baseline (ours takes {sec['naive'] / sec['torch']:.1f}x PyTorch's time)",
    ]


def pace(host: dict[str, Any]) -> dict[str, Any]:
    """Who sets the pace of the steps a `time_step_host` run queued: the host or the GPU (Chapter 5).

    A GPU that keeps up with the host finishes at most one step's work after the host has queued the
    last launch, so within one step's time; one that finishes later had work queued up, steps it had
    fallen behind: it set the pace. `behind` is that lag in steps, `busy` the share of a step the host
    spent queueing it.
    """
    behind = host["drain_ms"] / host["step_ms"]
    return {
        "busy": host["queue_ms_per_step"] / host["step_ms"],
        "behind": behind,
        "gpu_sets_pace": behind > 1,
    }


def pace_lines(host: dict[str, Any]) -> list[str]:
    """The lines that say who set the pace of a `time_step_host` run, from `pace` (Chapter 5)."""
    p = pace(host)
    lead = "so the GPU set the pace" if p["gpu_sets_pace"] else "so the GPU kept up: the host set the pace"
    return [
        f"  host time to queue a step {host['queue_ms_per_step']:.3f} ms ({p['busy']:.0%} of a step), "
        f"whole step {host['step_ms']:.3f} ms",
        f"  the GPU finished {host['drain_ms']:.3f} ms after the host queued the last step, "
        f"{p['behind']:.1f} steps' time:",
        f"  {lead} (a GPU that keeps up finishes within one step's time)",
    ]


def _host_us(fn, calls: int) -> float:
    """Mean host microseconds of `calls` calls of fn(), after one warm-up call (Chapter 5)."""
    fn()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e6


def time_step_host(
    data: DigitSet,
    sizes: tuple[int, ...],
    *,
    batch: int,
    lr: float,
    steps: int,
    seed: int = 0,
    calls: int = 1000,
    repeats: int = 5,
    network: str = "fused",
) -> dict[str, Any]:
    """Where a step's time goes on the host: queueing, launches, slicing (Chapter 5).

    `network` is 'fused' (FusedMLP) or 'prepared' (PreparedMLP, its launches prepared once).

    `steps` steps are queued with no synchronisation until the end (the
    run of median length of `repeats` runs is kept):
    'queue_ms_per_step' is the host's time per step, 'step_ms' the time per
    step until the GPU has finished them all, 'drain_ms' what the GPU still
    had to do after the host had queued the last step (near 0: the GPU was
    waiting for the host). Then the host cost of single calls:
    'launch_us_empty' (the empty kernel, one array), 'launch_us_forward'
    (`linear_forward` with its four arrays and a flag, on a one-block
    problem), 'prepared_us_forward' (the same launch prepared once,
    `launch.prepared`), 'slice_us' (slicing a batch out of the epoch
    buffers: two new array views).
    """
    from cudalearn.chapters.ch05 import data as epoch_data
    from cudalearn.chapters.ch05 import model as mlp
    from cudalearn.chapters.ch05 import training_loop
    from cudalearn.chapters.ch05.kernels import elementwise as ew
    from cudalearn.runtime import launch
    from cudalearn.runtime.numba_backend import cuda

    params = mlp.init_params(sizes, seed)
    dd = epoch_data.NumbaData(data)
    dd.shuffle(training_loop.permutations(dd.n_train, 1, seed)[0])
    net = getattr(mlp, IMPLEMENTATIONS[network])(params, batch, lr)
    losses = dd.losses(steps + 2)
    per_epoch = dd.n_train // batch
    out: dict[str, Any] = {"sizes": list(sizes), "batch": batch, "steps": steps, "calls": calls}
    out["network"] = network
    with quiet_grids():
        for s in range(steps):  # warm-up: compiles, and a PreparedMLP prepares each step's launches
            net.step(*dd.batch(s % per_epoch, batch), losses, s + 2)
        runs = []
        for _ in range(repeats):
            cuda.synchronize()
            t0 = time.perf_counter()
            for s in range(steps):
                net.step(*dd.batch(s % per_epoch, batch), losses, s + 2)
            t1 = time.perf_counter()
            cuda.synchronize()
            t2 = time.perf_counter()
            runs.append((t2 - t0, t1 - t0, t2 - t1))
        whole, queued, drain = sorted(runs)[len(runs) // 2]  # the run of median length
        out["queue_ms_per_step"] = queued / steps * 1e3
        out["step_ms"] = whole / steps * 1e3
        out["drain_ms"] = drain * 1e3
        with count_launches() as seen:
            net.step(*dd.batch(0, batch), losses, 0)
        out["launches_per_step"] = seen.count
        d = cuda.device_array(1, dtype=np.float32)
        out["launch_us_empty"] = _host_us(lambda: ew.empty_kernel[1, 32](d), calls)
        tiles = net.tiles
        X = cuda.to_device(np.zeros((tiles.bm, tiles.bk), np.float32))
        W = cuda.to_device(np.zeros((tiles.bk, tiles.bn), np.float32))
        b = cuda.to_device(np.zeros(tiles.bn, np.float32))
        Y = cuda.device_array((tiles.bm, tiles.bn), np.float32)
        forward = net.k["linear_forward"]
        one_block = tiles.launch(tiles.bm, tiles.bn)
        out["launch_us_forward"] = _host_us(lambda: forward[one_block](X, W, b, Y, 1), calls)
        out["prepared_us_forward"] = _host_us(launch.prepared(forward, *one_block, X, W, b, Y, 1), calls)
        rows = slice(batch, 2 * batch)
        out["slice_us"] = _host_us(lambda: (dd.X_epoch[rows], dd.y_epoch[rows]), calls)
        cuda.synchronize()
    return out
