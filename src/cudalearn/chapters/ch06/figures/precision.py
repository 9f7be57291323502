"""Speed against error of one matrix product in each number format (Chapter 6)."""

from __future__ import annotations


def speed_vs_error(ax, formats, label=""):
    """Scatter TFLOP/s against relative error (log-log), one labelled point a format (Chapter 6).

    `formats` maps a format name to {'tflops', 'rel_error'} (a stored `ch6.precision` run); formats
    skipped on the GPU that ran it ({'skipped': why}) are listed under the axes instead.
    """
    colors = {"FP32": "tab:blue", "TF32": "tab:orange", "FP16": "tab:green", "BF16": "tab:red"}
    skipped = []
    for fmt, r in formats.items():
        if "skipped" in r:
            skipped.append(fmt)
            continue
        ax.scatter(r["rel_error"], r["tflops"], s=60, color=colors.get(fmt, "black"), zorder=3)
        ax.annotate(fmt, (r["rel_error"], r["tflops"]), xytext=(7, 4), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("relative error of C against an FP64 product (log scale)")
    ax.set_ylabel("TFLOP/s (log scale)")
    note = f"; skipped: {', '.join(skipped)}" if skipped else ""
    ax.set_title(f"One N x N product per number format{note}\n{label}", fontsize=9)
    ax.margins(x=0.25, y=0.15)
    ax.grid(alpha=0.3, which="both")
