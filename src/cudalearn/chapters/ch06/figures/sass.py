"""The machine-instruction (SASS) mix of each register-blocking step's hot loop (Chapter 6)."""

from __future__ import annotations

import numpy as np

PARTS = (  # (label, colour, count from a `toolchain.instruction_mix` loop)
    ("FFMA", "tab:green", lambda loop: loop["FFMA"]),
    ("LDS.128", "tab:blue", lambda loop: loop["lds128"]),
    ("LDS, 32-bit", "tab:cyan", lambda loop: loop["LDS"] - loop["lds128"]),
    ("other", "tab:grey", lambda loop: loop["instructions"] - loop["FFMA"] - loop["LDS"]),
)


def instruction_mix(ax, resources):
    """Stacked bars, one a kernel, of its hot loop's instructions by kind, as shares (Chapter 6).

    `resources` maps a kernel name to a `toolchain.compile_report`-style entry with `sass.loop`.
    """
    names = [n for n, r in resources.items() if (r.get("sass") or {}).get("loop")]
    left = np.zeros(len(names))
    for label, color, count in PARTS:
        shares = np.array(
            [
                count(resources[n]["sass"]["loop"]) / resources[n]["sass"]["loop"]["instructions"]
                for n in names
            ]
        )
        ax.barh(range(len(names)), shares, left=left, color=color, label=label)
        for i, s in enumerate(shares):
            if s >= 0.06:
                ax.text(left[i] + s / 2, i, f"{s:.0%}", ha="center", va="center", fontsize=8, color="white")
        left += shares
    totals = [resources[n]["sass"]["loop"]["instructions"] for n in names]
    ax.set_yticks(range(len(names)), [f"{n}\n({t} instructions)" for n, t in zip(names, totals, strict=True)])
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the hot loop's instructions (one pass of the loop)")
    ax.legend(fontsize=8, ncols=4, loc="lower center", bbox_to_anchor=(0.5, 1.0))
