"""Chapter 5's measurements in one run, printed with ratios and one verdict line per goal (Chapter 5).

`main` is `scripts/bench_fusion.py`: the networks end to end (`shallow_net.time_training`), the
kernels of one hidden layer (`fused_layer`), the memory-bound chain (`dropout_chain`) and the goals
(`goals.goal_lines`); `ratios` prints one timing's rows against its baseline and PyTorch.
"""

from __future__ import annotations

from cudalearn.chapters.ch05.bench.goals import goal_lines
from cudalearn.chapters.ch05.bench.shallow_net import time_training, training_lines
from cudalearn.chapters.ch05.grid_warnings import quiet_small_grids
from cudalearn.runtime import device, precision
from cudalearn.runtime.sizes import size


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
    quiet_small_grids()  # small grids on purpose: the 10-logit layer, one-block host timings
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
