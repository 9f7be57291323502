"""Deep dive 6a's controls: steps 4 and 5 with layout or tiles swapped, and what their timing says.

Step 5 changes step 4's layout (warp tiles) and its tiles (micro-tile 8 x 16, BK = 16, and with them
threads a block, register cap and warps an SM) at once. `build` makes the two kernels that change one
of the two: step 5's tiles in step 4's layout (one grid of threads over the block tile), and step 4's
tiles in warp tiles of lanes 4 x 8, as the H200 trial run that picked the tiles built it
(`data/gpu-runs/2026-12-05-h200`), where the block tile holds such a warp tile. `read` turns one
timed run of all four into sentences: each change's own gain, from that run alone.
"""

from __future__ import annotations

import textwrap
from typing import Any

from cudalearn.chapters.ch06.kernels import regblock
from cudalearn.measure import stated

STEP4, STEP5 = "regblock_2d_prefetch", "regblock_2d_warptile"  # the layouts' kernel names
TILES_ONLY = "tiles of 5, layout of 4"  # the control that changes only the tiles
LAYOUT_ONLY = "tiles of 4, warp tiles"  # the one that changes only the layout
LANES = (4, 8)  # the layout control's lanes: rows, columns of its warp tile (the trial run's)
SAME = 0.03  # two medians within 3% are called level (a threshold the text names, not a significance test)


def layout_tiles(tiles4: dict) -> dict:
    """The layout control's tiles: step 4's `tiles4` in warp tiles of LANES lanes (6a)."""
    return dict(tiles4, WM=LANES[0] * tiles4["TM"], WN=LANES[1] * tiles4["TN"])


def build(steps: dict[str, tuple[Any, dict]]) -> tuple[dict[str, tuple[str, Any, dict]], list[str]]:
    """({label: (layout's kernel name, kernel, tiles)} of step 4, the controls and step 5, in that
    order; notes on what is missing or repeated here) from `regblock.build`'s steps (6a)."""
    tiles4, tiles5 = steps[STEP4][1], steps[STEP5][1]
    shape = {k: tiles5[k] for k in ("BM", "BN", "BK", "TM", "TN")}
    out = {
        "step 4": (STEP4, *steps[STEP4]),
        TILES_ONLY: (STEP4, regblock.make_regblock_2d_prefetch(**shape, regs=tiles5["regs"]), shape),
    }
    notes = []
    if shape == {k: tiles4[k] for k in shape}:
        notes.append(f"{TILES_ONLY}: step 5's tiles are step 4's here, so this control is step 4 again")
    warp4 = layout_tiles(tiles4)
    if warp4 == {k: tiles5[k] for k in warp4}:
        notes.append(f"{LAYOUT_ONLY}: step 5's warp tiles are these here, so this control is step 5 again")
    try:
        out[LAYOUT_ONLY] = (STEP5, regblock.make_regblock_2d_warptile(**warp4), warp4)
    except ValueError:  # only the simulator's tiles are too small (regblock_tiles.CONFIGS)
        notes.append(
            f"{LAYOUT_ONLY}: not built, the simulator's {tiles4['BM']} x {tiles4['BN']} block tile of step 4 "
            f"holds no {warp4['WM']} x {warp4['WN']} warp tile (a GPU's tiles do)"
        )
    out["step 5"] = (STEP5, *steps[STEP5])
    return out, [textwrap.fill(n, 100) for n in notes]


def _level(a: float, b: float) -> bool:
    """Whether two medians are level: within SAME of each other, the same test either way round."""
    return max(a / b, b / a) <= 1 + SAME


def _versus(new: str, old: str, ms: dict[str, float]) -> str:
    """'NEW is 1.120x faster than OLD', 'NEW is level with OLD (1.010x, within 3%)' or '... slower ...'."""
    ratio = ms[old] / ms[new]
    factor = max(ratio, 1 / ratio)  # on the unrounded ratio
    if _level(ms[old], ms[new]):
        return f"{new} is level with {old} ({ratio:.3f}x, within {SAME:.0%})"
    return f"{new} is {factor:.3f}x {'faster' if ratio > 1 else 'slower'} than {old}"


def _medians(rows: list[dict]) -> dict[str, float] | None:
    """{label: median ms} of a timed run of `build`'s kernels, or None where it lacks the steps or the
    tiles control (no run yet: the simulator times nothing)."""
    ms = {r["name"]: r["median_ms"] for r in rows if r.get("median_ms")}
    return ms if {"step 4", TILES_ONLY, "step 5"} <= set(ms) else None


def read(rows: list[dict]) -> str:
    """What one timed run of `build`'s kernels says of the layout's and the tiles' own gains (6a)."""
    ms = _medians(rows)
    if ms is None:
        return "No GPU run of the controls is stored yet: on a GPU, this cell times them and reads them here."
    lines = [
        f"- the tiles alone: {_versus(TILES_ONLY, 'step 4', ms)};",
        f"- the layout alone, at step 5's tiles: {_versus('step 5', TILES_ONLY, ms)};",
    ]
    if LAYOUT_ONLY in ms:
        lines.append(f"- the layout alone, at step 4's tiles: {_versus(LAYOUT_ONLY, 'step 4', ms)}.")
    return "\n".join(textwrap.fill(line, 100, subsequent_indent="  ") for line in lines)


def check(results: Any) -> None:
    """Raise StaleProse unless a `timing.measure` run of `build`'s kernels shows what 6a's text reads in
    it: step 5's gain is the tiles', the layout alone level at either tiles. Nothing is read on a T4,
    whose controls repeat steps 4 and 5 (`build`'s notes), or where no run has times."""
    if results.size.get("target") == "sm75":
        print("On a T4 the controls are steps 4 and 5 again: the text's reading of them is not this run's.")
        return
    ms = _medians(results.rows)
    if ms is None:
        return
    stated.check(
        ms,
        results.label,
        lambda m: (
            m["step 4"] > (1 + SAME) * m[TILES_ONLY]
            and _level(m["step 5"], m[TILES_ONLY])
            and LAYOUT_ONLY in m
            and _level(m[LAYOUT_ONLY], m["step 4"])
        ),
        "the tiles alone make step 4 faster; the layout alone leaves the time level, at either tiles",
    )
