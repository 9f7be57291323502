"""Chapter 2's pictures: blocks cut into warps of 32 lanes, and a warp's lanes mapped to 32-byte sectors.

`warps_on_sm` draws blocks cut into warps, each block on one SM, lanes coloured by what they do;
`lane_sectors` draws which 32-byte sectors a warp's 32 float32 loads touch at a few strides.

The picture is computed from the launch alone (elements, threads per
block): warp w of a block holds its threads 32 * w to 32 * w + 31, so a
block whose size is not a multiple of 32 leaves lanes of its last warp
without a thread, and the last block has threads past the end of the data.
"""

from __future__ import annotations

from dataclasses import dataclass

WARP = 32

#: What a lane of a warp does, in drawing order: (name, colour).
KINDS = (
    ("works on an element", "#4c9be8"),
    ("thread past the end (guarded by the if)", "#f2b134"),
    ("no thread: idle lane", "#e6e6e6"),
)


@dataclass(frozen=True)
class WarpLanes:
    """Lane use of one warp: its block, its warp index in the block, and a kind index for each lane."""

    block: int
    warp: int
    kinds: tuple[int, ...]

    def count(self, kind: int) -> int:
        """How many of the 32 lanes are of `kind` (an index into KINDS)."""
        return sum(k == kind for k in self.kinds)


def warp_lanes(n: int, threads_per_block: int) -> list[WarpLanes]:
    """Every warp of a 1-D launch covering n elements with blocks of threads_per_block (Chapter 2)."""
    if n < 1 or not 1 <= threads_per_block <= 1024:
        raise ValueError(f"need n >= 1 and 1 <= threads_per_block <= 1024, got {n}, {threads_per_block}")
    blocks = -(-n // threads_per_block)
    warps = -(-threads_per_block // WARP)
    out = []
    for b in range(blocks):
        for w in range(warps):
            kinds = []
            for lane in range(WARP):
                t = w * WARP + lane  # threadIdx.x of this lane
                i = b * threads_per_block + t  # its global index
                kinds.append(2 if t >= threads_per_block else (1 if i >= n else 0))
            out.append(WarpLanes(b, w, tuple(kinds)))
    return out


def warps_on_sm(n: int, threads_per_block: int, *, title: str | None = None):
    """Each block of a 1-D launch as a box (one SM runs it), its warps as rows of 32 lanes (Chapter 2)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    warps = warp_lanes(n, threads_per_block)
    blocks = warps[-1].block + 1
    per_block = len(warps) // blocks
    height = blocks * (per_block + 1.2)
    fig, ax = plt.subplots(figsize=(8, 0.9 + 0.42 * height))
    for wl in warps:
        y = wl.block * (per_block + 1.2) + wl.warp
        for lane, kind in enumerate(wl.kinds):
            ax.add_patch(Rectangle((lane, y), 0.86, 0.85, color=KINDS[kind][1], lw=0))
        ax.text(-0.6, y + 0.42, f"warp {wl.warp}", ha="right", va="center", fontsize=8)
        ax.text(WARP + 0.4, y + 0.42, f"{wl.count(0)} working", ha="left", va="center", fontsize=7)
    for b in range(blocks):
        y0 = b * (per_block + 1.2) - 0.25
        ax.add_patch(Rectangle((-0.3, y0), WARP + 0.5, per_block + 0.4, fill=False, lw=1.2))
        first = b * threads_per_block
        ax.text(
            -0.3,
            y0 - 0.1,
            f"block {b} (threads {first}-{first + threads_per_block - 1}), resident on one SM",
            fontsize=8,
            va="bottom",
        )
    ax.set_xlim(-6, WARP + 6)
    ax.set_ylim(height - 0.5, -1.2)
    ax.set_xticks([x + 0.43 for x in (0, 8, 16, 24, 31)], labels=["0", "8", "16", "24", "31"])
    ax.set_yticks([])
    ax.set_xlabel("lane in the warp (threadIdx.x % 32)")
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.legend(
        handles=[Patch(color=c, label=name) for name, c in KINDS],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.12 - 1.2 / height),
        ncol=3,
        fontsize=7,
        frameon=False,
    )
    ax.set_title(
        title or f"{n} elements, blocks of {threads_per_block} threads: warps of 32 cut from each block",
        fontsize=9,
    )
    fig.tight_layout()
    return fig


SECTOR = 32  # bytes: the unit in which global memory serves a warp's loads


def sectors_touched(stride: int, itemsize: int = 4) -> list[int]:
    """The 32-byte sectors (from 0) that lanes 0..31 touch, reading elements `stride` apart (Chapter 2)."""
    return [lane * stride * itemsize // SECTOR for lane in range(WARP)]


def lane_sectors(strides=(1, 2, 8)):
    """One panel per stride: each lane of a warp joined to the 32-byte sector its float32 load reads."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(strides), 1, figsize=(9, 1.7 * len(strides)), squeeze=False)
    for ax, stride in zip(axes[:, 0], strides, strict=True):
        hit = sectors_touched(stride)
        width = max(hit) + 1  # sectors drawn: every one up to the last touched
        lane_x = [(lane + 0.5) * width / WARP for lane in range(WARP)]
        for lane, sector in enumerate(hit):
            ax.plot([lane_x[lane], sector + 0.5], [1, 0.25], color="#4c9be8", lw=0.7)
        ax.scatter(lane_x, [1] * WARP, s=12, color="#4c9be8", zorder=3)
        for sector in range(width):
            used = sector in hit
            face = "#f2b134" if used else "#f4f4f4"
            ax.add_patch(
                plt.Rectangle((sector + 0.05, 0), 0.9, 0.25, facecolor=face, edgecolor="grey", lw=0.5)
            )
        useful = WARP * 4 / (SECTOR * len(set(hit)))
        ax.set_title(
            f"stride {stride}: {len(set(hit))} sectors for 32 floats ({100 * useful:g}% of their bytes used)",
            fontsize=8,
        )
        ax.set_xlim(-0.2, width + 0.2)
        ax.set_ylim(-0.1, 1.15)
        ax.set_yticks([1, 0.12], ["lanes", "sectors"])
        ax.set_xticks([])
        ax.spines[["top", "right", "bottom"]].set_visible(False)
    fig.tight_layout()
    return fig
