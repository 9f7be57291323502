"""Every matrix product of the course as a fraction of its number format's datasheet peak (Chapter 6)."""

from __future__ import annotations

from cudalearn.measure import reference

COLORS = {"FP32": "tab:blue", "TF32": "tab:orange", "FP16": "tab:green", "BF16": "tab:red"}


def number_format(name):
    """The number format a stored row's name says it computes in: TF32, FP16, BF16, else FP32 (Chapter 6)."""
    return next((f for f in ("TF32", "FP16", "BF16") if f in name), "FP32")


def stored_matmuls(keys):
    """([{name, tflops, key, device, spread}] of every matmul the benchmarks `keys` stored, [missing
    keys], the header of the last stored one) (Chapter 6: its first table and its last plot). `spread`
    is the median time over the fastest repeat's, less 1: how far the median's rate may sit below."""
    rows, missing, header = [], [], None
    for key in keys:
        figures, data = reference.lookup(key)
        if figures is None:
            missing.append(key)
            continue
        header = data
        rows += [
            {
                "name": r["name"],
                "tflops": r["gflops"] / 1e3,
                "key": key,
                "device": data["device"],
                "spread": r["median_ms"] / r["min_ms"] - 1 if r.get("min_ms") else 0.0,
            }
            for r in figures["rows"]
            if r.get("gflops")
        ]
    return rows, missing, header


def fraction_of_peak(rows, peak, title):
    """Horizontal bars of TFLOP/s (log scale), one per {name, tflops} row, each labelled with its share of
    `peak[format]` (TFLOP/s per format); dashed lines at the peaks. Raises if a row beats its peak."""
    import matplotlib.pyplot as plt

    rows = sorted(rows, key=lambda r: r["tflops"])
    fig, ax = plt.subplots(figsize=(10, 1.0 + 0.38 * len(rows)))
    for fmt, p in peak.items():
        if fmt != "BF16":  # the same peak as FP16's
            name = "FP16 and BF16" if fmt == "FP16" else fmt
            ax.axvline(p, color=COLORS[fmt], ls="--", lw=1, label=f"{name} datasheet peak, {p:.0f} TFLOP/s")
    for i, r in enumerate(rows):
        fmt = number_format(r["name"])
        share = r["tflops"] / peak[fmt]
        if not 0 < share <= 1:
            raise AssertionError(
                f"{r['name']}: {r['tflops']:.3g} TFLOP/s is above the {fmt} peak: a timing bug"
            )
        ax.barh(i, r["tflops"], color=COLORS[fmt])
        text = f"{r['tflops']:.3g} TFLOP/s, {share:.0%} of the {fmt} peak"
        bbox = {"facecolor": "white", "edgecolor": "none", "pad": 1}
        ax.text(r["tflops"] * 1.05, i, text, va="center", fontsize=8, bbox=bbox)
    ax.set_yticks(range(len(rows)), [r["name"] for r in rows], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlim(right=max(peak.values()) * 20)
    ax.set_xlabel("TFLOP/s (log scale); colour: number format")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


NOISY = 0.05  # a row whose median is over 5% slower than its fastest repeat: the takeaway says so


def takeaway(rows, peak, device, step4="regblock_2d_prefetch"):
    """What the closing plot shows, as one sentence from the same rows: each cuBLAS format's share of
    its datasheet peak (with its fastest repeat's where the repeats spread over NOISY), and our
    kernels' share of the FP32 peak (Chapter 6's last cell).

    Raises AssertionError if another FP32 product came closer to the FP32 peak than cuBLAS FP32 (the
    sentence says cuBLAS comes closest)."""
    share = {r["name"]: r["tflops"] / peak[number_format(r["name"])] for r in rows}
    spread = {r["name"]: r.get("spread", 0.0) for r in rows}
    cublas = [
        f"{name} {s:.0%}"
        + (
            f" (its fastest repeat {s * (1 + spread[name]):.0%}: a noisy median)"
            if spread[name] > NOISY
            else ""
        )
        for name, s in share.items()
        if name.startswith("cuBLAS")
    ]
    numba = {name: s for name, s in share.items() if name.startswith("regblock")}
    if not numba or "cuBLAS FP32" not in share:
        return f"On the {device}, as a share of its format's datasheet peak: {', '.join(cublas)}."
    best = max(numba, key=numba.get)
    fp32 = {name: s for name, s in share.items() if number_format(name) == "FP32"}
    closest = max(fp32, key=fp32.get)
    assert closest == "cuBLAS FP32", f"{closest} came closer to the FP32 peak than cuBLAS FP32"
    ours = [f"6a's best Numba kernel ({best}) {numba[best]:.0%}"]
    ours += [f"{name} {share[name]:.0%}" for name in (step4, "tiled T=32 (Ch. 3)") if name in share]
    return (
        f"On the {device}, as a share of its format's datasheet peak: {', '.join(cublas)}. Of the FP32 "
        f"peak: {', '.join(ours)}. In FP32, cuBLAS comes closest; no product reaches its peak."
    )
