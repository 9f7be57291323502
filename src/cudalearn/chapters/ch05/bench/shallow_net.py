"""What Chapter 5 measures on its shallow network: training runs, kernel candidates, the goals (Chapter 5).

- `time_training` times whole trainings of the naive, fused, prepared, tuned
  and PyTorch networks (`cudalearn.chapters.ch05.model`) from the same weights on the same batches;
  `training_lines` prints them as a table.
- `time_batch_sizes` and `time_step_host` time single steps: against the
  batch size, and where a step's host time goes; `sweep_lines` prints the
  sweep.
- the kernels of one hidden layer are `cudalearn.chapters.ch05.bench.fused_layer`.
- `GOALS` and `goal_lines` judge the chapter's goals from one run's figures.
- `main` is `scripts/bench_fusion.py`: all of it in one run, with ratios
  and one verdict line per goal.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from cudalearn.nn.datasets import DigitSet
from cudalearn.runtime import device, precision
from cudalearn.runtime.sizes import size

#: The networks `time_training` can time, by the names of its figures (classes of ch05.model).
IMPLEMENTATIONS = {
    "naive": "NaiveMLP",
    "fused": "FusedMLP",
    "prepared": "PreparedMLP",
    "tuned": "TunedMLP",
    "torch": "TorchMLP",
}
#: Repeats of the optimised network's timed training must agree within this share of their median for a
#: verdict (issue 17), and there must be at least MIN_REPEATS of them.
AGREEMENT = 0.10
MIN_REPEATS = 3


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
        mlp.train(net, dd, 1, seed=seed + 1, evaluate=False, progress=False)  # warm-up: compile, caches
        if name != "torch":
            X, y = dd.batch(0, batch)
            with mlp.count_launches() as launches, mlp.quiet_grids():
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
            hist = mlp.train(net, dd, epochs, seed=seed, evaluate=False, progress=False)
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


def sweep_lines(sweep: dict[str, Any]) -> list[str]:
    """The batch sweep as a table: ms per step and us per sample of both networks (Chapter 5)."""
    lines = [f"{'batch':>6s} {'fused ms/step':>14s} {'PyTorch ms/step':>16s} {'fused us/sample':>16s}"]
    for b, f_ms, t_ms in zip(
        sweep["batches"], sweep["fused_ms_per_step"], sweep["torch_ms_per_step"], strict=True
    ):
        lines.append(f"{b:6d} {f_ms:14.3f} {t_ms:16.3f} {1e3 * f_ms / b:16.2f}")
    return lines


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
    """Milliseconds per training step of FusedMLP and TorchMLP at each batch size, and per launch (Chapter 5).

    Each point: after two warm-up steps, `repeats` runs of `steps` steps,
    each between two synchronisations; the median run's time per step (a
    host that is briefly busy elsewhere spoils one run, not the point).
    `launch_us` is the host time of one launch of an empty kernel (the mean
    of `launches`, queued without waiting): the floor under every step.
    """
    from cudalearn.chapters.ch05 import model as mlp
    from cudalearn.chapters.ch05.kernels import elementwise as ew
    from cudalearn.runtime.numba_backend import cuda

    params = mlp.init_params(sizes, seed)
    out: dict[str, Any] = {"sizes": list(sizes), "batches": list(batches), "steps": steps}
    for cls in (mlp.FusedMLP, mlp.TorchMLP):
        dd = cls.data_class(data)
        dd.shuffle(mlp.permutations(dd.n_train, 1, seed)[0])
        per_epoch = dd.n_train
        per_step = []
        for batch in batches:
            net = cls(params, batch, lr)
            losses = dd.losses(steps + 2)
            runs = []
            with mlp.quiet_grids(), mlp.computing(net):
                for s in range(2):
                    net.step(*dd.batch(s, batch), losses, s)
                for _ in range(repeats):
                    dd.synchronize()
                    t0 = time.perf_counter()
                    for s in range(steps):
                        net.step(*dd.batch(s % (per_epoch // batch), batch), losses, s + 2)
                    dd.synchronize()
                    runs.append((time.perf_counter() - t0) / steps * 1e3)
            per_step.append(float(np.median(runs)))
        out[f"{cls.name}_ms_per_step"] = per_step
    d = cuda.device_array(1, dtype=np.float32)
    with mlp.quiet_grids():
        ew.empty_kernel[1, 32](d)
        cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(launches):
            ew.empty_kernel[1, 32](d)
        out["launch_us"] = (time.perf_counter() - t0) / launches * 1e6
        cuda.synchronize()
    return out


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
    from cudalearn.chapters.ch05.kernels import elementwise as ew
    from cudalearn.runtime import launch
    from cudalearn.runtime.numba_backend import cuda

    params = mlp.init_params(sizes, seed)
    dd = epoch_data.NumbaData(data)
    dd.shuffle(mlp.permutations(dd.n_train, 1, seed)[0])
    net = getattr(mlp, IMPLEMENTATIONS[network])(params, batch, lr)
    losses = dd.losses(steps + 2)
    per_epoch = dd.n_train // batch
    out: dict[str, Any] = {"sizes": list(sizes), "batch": batch, "steps": steps, "calls": calls}
    out["network"] = network
    with mlp.quiet_grids():
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
        with mlp.count_launches() as seen:
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


# The goals -------------------------------------------------------------------------------------

GOALS = {
    "fused_vs_naive": 3.0,  # the optimised network at least 3x faster than the naive one, end to end
    "fused_vs_torch": 0.8,  # and at most 0.8x PyTorch's time (issue 17: faster than PyTorch)
    "chain_vs_copy": 0.90,  # the fused elementwise chain at 90% of the copy bandwidth or more (issue 17)
}


def goal_lines(
    training: dict[str, Any] | None,
    chain_gbps: float | None,
    copy_gbps: float | None,
    source: str = "",
    chain_name: str = "",
) -> list[str]:
    """One verdict line per goal of the chapter, computed from one run's figures (Chapter 5).

    `training` is what `time_training` returns; the bandwidths are the
    fused chain's (the kernel named `chain_name`) and the copy's GB/s from
    the same run. A goal without figures says so; a missed goal says
    MISSED with its numbers.
    """
    lines = []
    sec = (training or {}).get("seconds", {})
    spread = (training or {}).get("spread", {})
    # Chapter 5's network at its fastest: the quickest of the optimised networks this run timed
    best = min((name for name in ("tuned", "prepared", "fused") if name in sec), key=sec.get, default="fused")
    if {"naive", "fused"} <= sec.keys():
        r = sec["naive"] / sec["fused"]
        ok = r >= GOALS["fused_vs_naive"]
        lines.append(
            f"{'MET   ' if ok else 'MISSED'} optimised (fused) >= {GOALS['fused_vs_naive']:g}x faster than "
            f"naive end to end: {r:.2f}x ({sec['naive']:.2f} s vs {sec['fused']:.2f} s)"
        )
    else:
        lines.append("NO DATA optimised vs naive end to end: no GPU training times in this run")
    if {best, "torch"} <= sec.keys():
        # Against PyTorch's fastest run, not its median: PyTorch's eager step is paced by the host CPU,
        # whose other work only ever slows a run down (the reason `timeit` reports minimums), so its
        # fastest run is the stable yardstick, and the one least flattering to ours.
        torch_s = min((training or {}).get("runs", {}).get("torch") or [sec["torch"]])
        r = sec[best] / torch_s
        repeats = (training or {}).get("repeats", 1)
        if {best, "torch"} <= spread.keys() and repeats >= MIN_REPEATS:
            agree = spread[best] <= AGREEMENT
            how = (
                f"{repeats} repeats of {best} within {spread[best]:.0%} of their median (<= {AGREEMENT:.0%} "
                f"needed), PyTorch's spread {spread['torch']:.1%} (not required)"
            )
        else:
            agree = False
            how = f"fewer than {MIN_REPEATS} repeats in this run, so they cannot show the ratio is stable"
        ok = r <= GOALS["fused_vs_torch"] and agree
        lines.append(
            f"{'MET   ' if ok else 'MISSED'} optimised ({best}) in <= {GOALS['fused_vs_torch']:g}x PyTorch's "
            f"time: {r:.2f}x ({sec[best]:.2f} s, median, vs {torch_s:.2f} s, PyTorch's fastest run), {how}"
        )
    else:
        lines.append("NO DATA optimised vs PyTorch: no GPU training times in this run")
    if chain_gbps and copy_gbps:
        r = chain_gbps / copy_gbps
        ok = r >= GOALS["chain_vs_copy"]
        lines.append(
            f"{'MET   ' if ok else 'MISSED'} fused elementwise chain >= {GOALS['chain_vs_copy']:.0%} of the "
            f"copy bandwidth: {r:.0%} ({chain_gbps:,.0f} GB/s vs {copy_gbps:,.0f} GB/s"
            f"{', ' + chain_name if chain_name else ''})"
        )
    else:
        lines.append("NO DATA fused chain vs copy bandwidth: no GPU bandwidths in this run")
    if source:
        lines = [f"{line} [{source}]" for line in lines]
    return lines


# The command line (scripts/bench_fusion.py) --------------------------------------------------


def ratios(results, naive: str, torch_name: str, versus: str = "naive") -> list[str]:
    """'name: x.xx ms, a.aax vs naive, b.bbx PyTorch's time' for each row of a timing.Results.

    `naive` names the row the speed-ups are relative to (printed as `versus`).
    """
    rows = {r["name"]: r for r in results.rows if r.get("median_ms")}
    if not rows:
        return [f"  {results.key}: {results.label}"]
    out = [
        f"  {results.key} ({'measured on' if results.source == 'measured' else 'reference'} {results.label})"
    ]
    for name, r in rows.items():
        vs_naive = rows[naive]["median_ms"] / r["median_ms"] if naive in rows else float("nan")
        vs_torch = r["median_ms"] / rows[torch_name]["median_ms"] if torch_name in rows else float("nan")
        rate = f"{r['gflops']:9,.0f} GFLOP/s" if r.get("gflops") else f"{r.get('gbps') or 0:9,.0f} GB/s"
        out.append(
            f"    {name:40s} {r['median_ms']:9.4f} ms {rate}  {vs_naive:6.2f}x vs {versus}  "
            f"{vs_torch:6.2f}x PyTorch's time"
        )
    return out


def main() -> int:
    """Chapter 5's measurements, ratios and one verdict line per goal, printed: scripts/bench_fusion.py."""
    info = device.setup()
    from cudalearn import checks
    from cudalearn.chapters.ch05 import model as mlp
    from cudalearn.chapters.ch05.bench import dropout_chain, fused_layer
    from cudalearn.chapters.ch05.kernels import elementwise as ew
    from cudalearn.measure import reference, timing
    from cudalearn.nn import datasets

    precision.set_fp32()  # the script's whole process: true FP32 in PyTorch, as the Numba networks
    mlp.quiet_small_grids()  # small grids on purpose: the 10-logit layer, one-block host timings
    data = datasets.load_digits_augmented(
        size("ch5.copies"), side=size("ch5.side"), originals_used=size("ch5.originals")
    )
    sizes = mlp.layer_sizes(data.features, size("ch5.hidden"))
    batch = size("ch5.batch")
    epochs = size("ch5.timed_epochs")
    print(f"data: {data}\nnetwork {sizes}, batch {batch}, lr {mlp.LR}, {epochs} timed epochs")

    # End to end ---------------------------------------------------------------------------------
    training, source = reference.figures(
        "bench5.training", lambda: time_training(data, sizes, batch=batch, lr=mlp.LR, epochs=epochs)
    )
    if info.mode == "sim":  # exercise the timing code on a tiny set; its wall time is not a GPU time
        tiny = datasets.load_digits_augmented(2, side=size("ch5.side"), originals_used=20)
        smoke = time_training(tiny, mlp.layer_sizes(tiny.features, 8), batch=16, lr=mlp.LR, epochs=1)
        print(f"simulator smoke run of time_training: launches per step {smoke['launches_per_step']}")
    print(f"\nend-to-end training ({source}):")
    if training is not None:
        sec = training["seconds"]
        print("\n".join("  " + line for line in training_lines(training)))
        print(
            f"  (the Q2BSTUDIO post's T4 figure: 21 s -> under 15 s, about 1.4x; "
            f"here {sec['naive'] / sec['fused']:.2f}x)"
        )

    # Per kernel -----------------------------------------------------------------------------------
    m, k, n = size("ch5.kernel_m"), size("ch5.kernel_k"), size("ch5.kernel_n")
    layer = fused_layer.layer_candidates(m, k, n)
    layer["check"]()
    print(
        f"\nper kernel, one hidden layer at m, k, n = {m}, {k}, {n} (all candidates checked against NumPy):"
    )
    for part, naive in (
        ("forward", "naive: matmul, bias, ReLU (3 kernels)"),
        ("backward_input", "naive, W as stored (2 kernels)"),
        ("backward_weight", "naive: X.T @ dZ, then db (2 kernels)"),
    ):
        res = timing.measure(
            f"bench5.{part}",
            layer[part],
            baseline=naive,
            flops=layer["flops"][part],
            size={"m": m, "k": k, "n": n, "dtype": "float32", "tf32": False},
        )
        torch_name = next(name for name in layer[part] if name.startswith("PyTorch"))
        print("\n".join(ratios(res, naive, torch_name)))

    # The memory-bound chain -------------------------------------------------------------------------
    outs, expected = dropout_chain.chain_candidates(size("ch5.odd_rows"), size("ch5.odd_cols"), seed=2)[2]()
    for name, got in outs.items():
        checks.check_close(got, expected["copy" if name.startswith("copy") else "chain"], name=name)
    rows, cols = size("ch5.chain_rows"), size("ch5.chain_cols")
    copies, chain, _ = dropout_chain.chain_candidates(rows, cols)
    copy_res = timing.measure(
        "bench5.copy", copies, nbytes=2 * 4 * rows * cols, size={"rows": rows, "cols": cols}
    )
    chain_res = timing.measure(
        "bench5.chain",
        chain,
        baseline="unfused: 4 kernels",
        nbytes=ew.chain_bytes(rows, cols)["dram_min"],
        size={"rows": rows, "cols": cols, "p": 0.1},
    )
    shown = chain_res.size or {"rows": rows, "cols": cols}  # a stored run's own size under the simulator
    print(
        f"\nelementwise chain on {shown['rows']} x {shown['cols']} float32 "
        "(GB/s of the least bytes the chain must move):"
    )
    print("\n".join(ratios(copy_res, "copy (torch)", "copy (torch)", versus="torch copy")))
    print("\n".join(ratios(chain_res, "unfused: 4 kernels", "PyTorch eager")))

    def gbps(results, name):
        row = next((r for r in results.rows if r["name"] == name), {})
        return row.get("gbps")

    copy_gbps = gbps(copy_res, "copy (torch)")
    best_name, fused_gbps = dropout_chain.best_fused(chain_res.rows)  # the goal judges the fastest
    if copy_gbps and fused_gbps:
        rates = {name: gbps(chain_res, name) for name in dropout_chain.FUSED}
        shares = [f"{name}: {rate / copy_gbps:.1%}" for name, rate in rates.items() if rate]
        print("  share of the copy's bandwidth: " + "; ".join(shares))
        if unmeasured := [name for name, rate in rates.items() if not rate]:
            print(f"  not in these figures (added after the run that stored them): {'; '.join(unmeasured)}")

    # Verdicts -------------------------------------------------------------------------------------
    where = f"measured now on {info.device}" if info.mode == "gpu" else source
    verdicts = goal_lines(training, fused_gbps, copy_gbps, source=where, chain_name=best_name or "")
    print("\ngoals:")
    print("\n".join(f"  {v}" for v in verdicts))
    met = sum(v.startswith("MET") for v in verdicts)
    missed = sum(v.startswith("MISSED") for v in verdicts)
    print(f"  {met} met, {missed} missed, {len(verdicts) - met - missed} without figures")
    return 0
