"""Deep dive 6a's controls: steps 4 and 5 with layout or tiles swapped, and what their timing says.

Step 5 changes step 4's layout (warp tiles) and its tiles (micro-tile 8 x 16, BK = 16) at once.
`build` makes the two kernels that change one of them: step 5's tiles in step 4's layout, and step
4's tiles in step 5's layout (lanes in step 5's grid), where the block tile holds such a warp tile.
`read` turns one timed run of all four into sentences: each change's own gain, from that run alone.
"""

from __future__ import annotations

import textwrap
from typing import Any

from cudalearn.chapters.ch06.kernels import regblock

STEP4, STEP5 = "regblock_2d_prefetch", "regblock_2d_warptile"  # the layouts' kernel names
TILES_ONLY = "tiles of 5, layout of 4"  # the control that changes only the tiles
LAYOUT_ONLY = "tiles of 4, layout of 5"  # the one that changes only the layout
SAME = 0.03  # two medians within 3% are called level (a threshold the text names, not a significance test)


def build(steps: dict[str, tuple[Any, dict]]) -> tuple[dict[str, tuple[str, Any, dict]], str | None]:
    """({label: (layout's kernel name, kernel, tiles)} of step 4, the controls and step 5, in that
    order; why LAYOUT_ONLY is missing, or None) from `regblock.build`'s steps (6a)."""
    tiles4, tiles5 = steps[STEP4][1], steps[STEP5][1]
    shape = {k: tiles5[k] for k in ("BM", "BN", "BK", "TM", "TN")}
    out = {
        "step 4": (STEP4, *steps[STEP4]),
        TILES_ONLY: (STEP4, regblock.make_regblock_2d_prefetch(**shape, regs=tiles5["regs"]), shape),
    }
    lanes = (tiles5["WM"] // tiles5["TM"], tiles5["WN"] // tiles5["TN"])  # step 5's lane grid
    warp4 = dict(tiles4, WM=lanes[0] * tiles4["TM"], WN=lanes[1] * tiles4["TN"])
    missing = None
    try:
        out[LAYOUT_ONLY] = (STEP5, regblock.make_regblock_2d_warptile(**warp4), warp4)
    except ValueError as e:  # the simulator's 16 x 16 block tile holds no warp of 32 lanes
        missing = f"{LAYOUT_ONLY}: not built for these tiles ({e})"
    out["step 5"] = (STEP5, *steps[STEP5])
    return out, missing


def _versus(new: str, old: str, ms: dict[str, float]) -> str:
    """'NEW is 1.12x faster than OLD', '... level with OLD (1.01x, within 3%)' or '... 1.05x slower ...'."""
    ratio = ms[old] / ms[new]
    if abs(ratio - 1) <= SAME:
        return f"{new} is level with {old} ({ratio:.2f}x, within {SAME:.0%})"
    return (
        f"{new} is {ratio:.2f}x faster than {old}"
        if ratio > 1
        else f"{new} is {1 / ratio:.2f}x slower than {old}"
    )


def read(rows: list[dict]) -> str:
    """What one timed run of `build`'s kernels says of the layout's and the tiles' own gains (6a)."""
    ms = {r["name"]: r["median_ms"] for r in rows if r.get("median_ms")}
    if not {"step 4", TILES_ONLY, "step 5"} <= set(ms):
        return "No GPU run of the controls is stored yet: on a GPU, this cell times them and reads them here."
    lines = [
        f"- the tiles alone: {_versus(TILES_ONLY, 'step 4', ms)};",
        f"- the layout alone, at step 5's tiles: {_versus('step 5', TILES_ONLY, ms)};",
    ]
    if LAYOUT_ONLY in ms:
        lines.append(f"- the layout alone, at step 4's tiles: {_versus(LAYOUT_ONLY, 'step 4', ms)}.")
    return "\n".join(textwrap.fill(line, 100, subsequent_indent="  ") for line in lines)
