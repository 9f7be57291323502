"""Chapter 5's figures: the augmented digits, a thread's register patch, kernel rates, training and bytes.

Every function draws only what it is given (a data set, a tile
configuration, stored or measured figures) and returns a matplotlib Figure:

* `digit_copies`: augmented copies of a few original digits;
* `register_patch`: which outputs of a block's tile a few threads own;
* `kernel_rates`: GFLOP/s of each layer kernel, one panel per part;
* `training_times`: end-to-end seconds and the loss curves of every implementation timed;
* `batch_sweep`: time per step and per sample against the batch, with the launch floor;
* `bytes_on_diagonal`: counted against predicted bytes, on the line y = x;
* `plot_history`: loss per step and accuracy per epoch of trainings (`training_loop.train`'s Histories).
"""

from __future__ import annotations

from typing import Any

from cudalearn.nn.training import History

NAIVE, FUSED, PREPARED, TUNED, TORCH = "#bbbbbb", "#3182bd", "#08519c", "#31a354", "#e6550d"


def digit_copies(data, originals: int = 5, per_row: int = 8):
    """Rows of augmented training copies, one row per original digit (Chapter 5)."""
    import matplotlib.pyplot as plt
    import numpy as np

    shown = list(dict.fromkeys(data.origin_train))[:originals]
    fig, axes = plt.subplots(len(shown), per_row, figsize=(1.2 * per_row, 1.25 * len(shown)), squeeze=False)
    for row, original in zip(axes, shown, strict=True):
        rows = np.flatnonzero(data.origin_train == original)[:per_row]
        for ax, i in zip(row, rows, strict=False):
            ax.imshow(data.X_train[i].reshape(data.side, data.side), cmap="gray_r", vmin=0, vmax=1)
            ax.set_title(str(data.y_train[i]), fontsize=8)
        for ax in row:
            ax.axis("off")
    fig.suptitle(f"augmented copies of {len(shown)} original digits (one row each)", fontsize=9)
    return fig


def register_patch(cfg, threads=((0, 0), (1, 0), (0, 1))):
    """The (BM, BN) output tile of one block, with the (TM, TN) outputs each given thread owns (Chapter 5).

    `cfg` is a `cudalearn.chapters.ch05.kernels.tiles.Tiles`; thread (tx, ty) owns rows
    ty + i * TY and columns tx + j * TX (`Tiles.thread_outputs`). Outlined: the output each thread of
    the first warp computes for i = j = 0 (with TX = 16, two rows of 16
    neighbouring columns: its stores are coalesced).
    """
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Rectangle

    tx_n, ty_n = cfg.threads
    owner = np.zeros((cfg.bm, cfg.bn))
    colors = ["#ffffff", "#3182bd", "#e6550d", "#31a354", "#756bb1"]
    fig, ax = plt.subplots(figsize=(5.6, 5.6))
    for n, (tx, ty) in enumerate(threads, start=1):
        rows, cols = cfg.thread_outputs(tx, ty)
        owner[np.ix_(rows, cols)] = n
    ax.imshow(owner, cmap=ListedColormap(colors[: len(threads) + 1]), vmin=0, vmax=len(threads))
    lanes = min(32, tx_n * ty_n)
    for lane in range(lanes):  # lane -> thread (lane % TX, lane // TX); its i = j = 0 output
        ax.add_patch(Rectangle((lane % tx_n - 0.5, lane // tx_n - 0.5), 1, 1, fill=False, lw=0.6, ec="black"))
    ax.set_xticks(np.arange(-0.5, cfg.bn, tx_n), minor=False)
    ax.set_yticks(np.arange(-0.5, cfg.bm, ty_n), minor=False)
    ax.set_xticklabels([])
    ax.set_yticklabels([])
    ax.grid(True, color="grey", lw=0.4)
    names = ", ".join(f"thread ({tx}, {ty})" for tx, ty in threads)
    ax.set_title(
        f"a ({cfg.bm}, {cfg.bn}) output tile: {names} own {cfg.tm}x{cfg.tn} outputs each,\n"
        f"{ty_n} rows and {tx_n} columns apart; outlined: the first warp's output for i = j = 0",
        fontsize=8,
    )
    fig.tight_layout()
    return fig


def kernel_rates(results: list[Any]):
    """GFLOP/s of every candidate, one panel per `timing.Results` that holds GPU rates (Chapter 5)."""
    import matplotlib.pyplot as plt

    timed = [r for r in results if any(row.get("gflops") for row in r.rows)]
    if not timed:
        return None
    fig, axes = plt.subplots(1, len(timed), figsize=(5.2 * len(timed), 3.2), squeeze=False)
    for ax, res in zip(axes[0], timed, strict=True):
        names = [row["name"] for row in res.rows]
        ax.barh(names, [row["gflops"] or 0 for row in res.rows], color=FUSED)
        ax.invert_yaxis()
        ax.set_xlabel("GFLOP/s")
        ax.set_title(f"{res.key}\n({res.label})", fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    return fig


def training_times(training: dict[str, Any], source: str):
    """Seconds of the timed epochs per network, and their per-epoch losses (Chapter 5)."""
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_l) = plt.subplots(1, 2, figsize=(11, 3.4))
    colours = {"naive": NAIVE, "fused": FUSED, "prepared": PREPARED, "tuned": TUNED, "torch": TORCH}
    names = [n for n in colours if n in training["seconds"]]  # a run stored earlier has no 'prepared'
    ax_t.bar(names, [training["seconds"][n] for n in names], color=[colours[n] for n in names])
    for i, n in enumerate(names):  # every repeat, where the run has them: how much they agree
        runs = training.get("runs", {}).get(n, [])
        ax_t.plot([i] * len(runs), runs, "k.", markersize=4)
    ax_t.set_ylabel(f"seconds for {training['epochs']} epochs")
    ax_t.set_title(source, fontsize=8)
    for n in names:
        losses = training["epoch_loss"][n]
        ax_l.plot(range(1, len(losses) + 1), losses, "o-", color=colours[n], label=n)
    ax_l.set_xlabel("timed epoch")
    ax_l.set_ylabel("mean training loss")
    ax_l.legend()
    fig.tight_layout()
    return fig


def batch_sweep(sweep: dict[str, Any], floor_ms: float, launches: int, source: str):
    """Time per step and per sample against the batch, with the launch floor (Chapter 5)."""
    import matplotlib.pyplot as plt
    import numpy as np

    b = np.asarray(sweep["batches"])
    fused, torch = np.asarray(sweep["fused_ms_per_step"]), np.asarray(sweep["torch_ms_per_step"])
    fig, (ax_s, ax_p) = plt.subplots(1, 2, figsize=(11, 3.6))
    ax_s.semilogx(b, fused, "o-", color=FUSED, label="optimised (Numba)")
    ax_s.semilogx(b, torch, "s-", color=TORCH, label="PyTorch")
    ax_s.axhline(floor_ms, color="grey", ls=":", label=f"{launches} empty-kernel launches")
    ax_s.set_ylim(0, 1.15 * max(fused.max(), torch.max()))
    ax_s.set_ylabel("ms per training step")
    ax_p.loglog(b, 1e3 * fused / b, "o-", color=FUSED, label="optimised (Numba)")
    ax_p.loglog(b, 1e3 * torch / b, "s-", color=TORCH, label="PyTorch")
    ax_p.set_ylabel("us per training sample")
    for ax in (ax_s, ax_p):
        ax.set_xlabel("batch size")
        ax.legend(fontsize=8)
        ax.grid(True, lw=0.3)
    fig.suptitle(source, fontsize=8)
    fig.tight_layout()
    return fig


def bytes_on_diagonal(panels: dict[str, dict[str, tuple[float, float]]], unit: str = "bytes"):
    """One scatter per panel of {label: (predicted, counted)}, with the line y = x (Chapter 5).

    A point on the line is a count that matches its prediction exactly.
    """
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(5.4 * len(panels), 4.2), squeeze=False)
    for ax, (title, points) in zip(axes[0], panels.items(), strict=True):
        xs = [p for p, _ in points.values()]
        ys = [c for _, c in points.values()]
        top = 1.1 * max(xs + ys)
        ax.plot([0, top], [0, top], color="grey", lw=0.8, ls="--", label="y = x")
        ax.scatter(xs, ys, color=FUSED, zorder=3)
        groups: dict[tuple[int, int], list[str]] = {}  # points closer than 2% of the axis share a label
        for label, (x, y) in points.items():
            groups.setdefault((round(50 * x / top), round(50 * y / top)), []).append(label)
        for labels in groups.values():
            x, y = points[labels[0]]
            ax.annotate(", ".join(labels), (x, y), textcoords="offset points", xytext=(6, -10), fontsize=7)
        ax.set_xlim(0, top)
        ax.set_ylim(0, top)
        ax.set_aspect("equal")
        ax.set_xlabel(f"predicted ({unit})")
        ax.set_ylabel(f"counted ({unit})")
        ax.set_title(title, fontsize=8)
        ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def plot_history(histories: list[History], title: str = ""):
    """Loss per step and accuracy per epoch of one or more trainings, side by side (Chapter 5)."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 3.8))
    for h in histories:
        ax_loss.plot(np.arange(1, len(h.step_loss) + 1), h.step_loss, lw=1, label=h.name)
        epochs = np.arange(1, len(h.test_accuracy) + 1)
        if len(epochs):
            ax_acc.plot(epochs, h.test_accuracy, "o-", label=f"{h.name}: test")
        if h.train_accuracy:
            ax_acc.plot(epochs, h.train_accuracy, "s--", alpha=0.6, label=f"{h.name}: train")
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("training loss (batch mean)")
    ax_loss.set_yscale("log")
    ax_loss.legend()
    ax_acc.set_xlabel("epoch")
    ax_acc.set_ylabel("accuracy")
    ax_acc.legend()
    for ax in (ax_loss, ax_acc):
        ax.grid(True, lw=0.3)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def pace_timeline(cases: dict[str, tuple[float, float]], steps: int = 4):
    """Who sets a step's pace: per case {title: (host ms, GPU ms) a step}, the host's and GPU's lanes.

    The host queues step k's launches in `host` ms, one step after the other; the GPU runs step k for
    `gpu` ms once it is queued and the GPU is done with step k-1. Grey gaps on the GPU lane are
    time it waits for the host; when there are none, the GPU sets the pace and the host waits at the
    synchronisation instead (Chapter 5).
    """
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(cases), 1, figsize=(9, 1.9 * len(cases)), squeeze=False)
    for ax, (title, (host, gpu)) in zip(axes[:, 0], cases.items(), strict=True):
        gpu_end = 0.0
        for k in range(steps):
            # the step ends once the GPU has run it and its last launch (queued at (k + 1) * host) is in
            end = max(gpu_end + gpu, (k + 1) * host + 0.05 * gpu)
            start = end - gpu
            if start > gpu_end:  # the GPU waits for the host
                ax.broken_barh([(gpu_end, start - gpu_end)], (-0.3, 0.6), facecolors="#dddddd")
            ax.broken_barh([(k * host, host)], (0.7, 0.6), facecolors=PREPARED, edgecolor="white")
            ax.broken_barh([(start, gpu)], (-0.3, 0.6), facecolors=TORCH, edgecolor="white")
            label = {"ha": "center", "va": "center", "fontsize": 7, "color": "white"}
            ax.text(k * host + host / 2, 1.0, f"queue {k + 1}", **label)
            ax.text(start + gpu / 2, 0.0, f"step {k + 1}", **label)
            gpu_end = end
        ax.set_yticks([1, 0], ["host", "GPU"])
        ax.set_xlim(0, 1.02 * max(steps * host, gpu_end))
        ax.set_xlabel("ms")
        ax.set_title(title, fontsize=8)
        ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig
