"""Fragment layouts of mma.sync and ldmatrix, drawn from `mma.FRAGMENTS` (Chapter 6, deep dive 06d).

Every cell of a drawn operand is labelled with the lane that holds it and the register element, read
from `mma.fragment`, the table the emulation and the tracer use: a wrong table draws a wrong picture.
"""

from __future__ import annotations

import numpy as np

from cudalearn.chapters.ch06.kernels import mma


def lane_grid(shape, operand) -> tuple[np.ndarray, np.ndarray]:
    """(lane, element) arrays of the operand's shape: who holds each element, as which a_i / b_i / c_i."""
    rows, cols = mma.operand_shape(shape, operand)
    lane, elem = np.full((rows, cols), -1), np.full((rows, cols), -1)
    for ln, places in enumerate(mma.fragment(shape, operand)):
        for i, (r, c) in enumerate(places):
            lane[r, c], elem[r, c] = ln, i
    return lane, elem


def draw(shape="m16n8k16", operands=("A", "B", "C"), highlight=(0, 5)):
    """A figure of each operand of mma `shape`: cells coloured by register, labelled 'lane:element'."""
    import matplotlib.pyplot as plt

    sizes = [mma.operand_shape(shape, op) for op in operands]
    fig, axes = plt.subplots(
        1, len(operands), figsize=(4 + 0.42 * sum(c for _, c in sizes), 5.2),
        gridspec_kw={"width_ratios": [c for _, c in sizes]},
    )  # fmt: skip
    for ax, op, (rows, cols) in zip(np.atleast_1d(axes), operands, sizes, strict=True):
        lane, elem = lane_grid(shape, op)
        reg = elem // 2 if op in ("A", "B") else elem  # a register holds two float16 of A and B
        ax.imshow(reg, cmap="Pastel1", vmin=0, vmax=8)
        for r in range(rows):
            for c in range(cols):
                bold = lane[r, c] in highlight
                weight, colour = ("bold", "black") if bold else ("normal", "#444444")
                label = f"{lane[r, c]}:{elem[r, c]}"
                ax.text(c, r, label, ha="center", va="center", fontsize=5.5, fontweight=weight, color=colour)
        ax.set_title(f"{op} ({rows} x {cols})", fontsize=10)
        ax.set_xticks(range(cols))
        ax.set_yticks(range(rows))
        ax.tick_params(labelsize=6)
    fig.suptitle(f"mma.sync {shape}: lane:element (colour: register; bold: lanes {highlight})", fontsize=10)
    fig.tight_layout()
    return fig


def ldmatrix_text(num=4) -> list[str]:
    """One line per matrix of ldmatrix .x{num}, from the emulation: which lanes give its 8 row addresses
    and which lanes receive each row (its 4 words), in register j of each lane."""
    rows = np.arange(8 * num * 4, dtype=np.uint32).reshape(8 * num, 4)  # word w of row r holds 4r + w
    regs = mma.emulate_ldmatrix(rows)
    out = []
    for j in range(num):
        takers = []
        for r in range(8):
            lanes = [lane for lane in range(32) if int(regs[lane, j]) // 4 == 8 * j + r]
            takers.append(f"{lanes[0]}-{lanes[-1]}")
        out.append(f"matrix {j}: rows from lanes {8 * j}-{8 * j + 7}; row r to lanes " + " ".join(takers))
    return out
