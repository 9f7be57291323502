"""Tile sizes of Chapter 5's register-blocked products, per run mode, and the constants they give.

`Tiles` is one configuration of the register-blocked kernels (`blocked.make_blocked`) and of the
tuned ones (`tuned.make_blocked_vec`): the block's output tile, the step along k, each thread's
patch of outputs and the SGD kernel's transposed tile. The configurations the chapter uses are
named here, one for a GPU and a smaller one for the simulator each: `GPU_TILES` and `SIM_TILES`
for the fused network, `VEC_TILES` and `SKINNY_TILES` (with their simulator values) for the tuned
one. `constants(cfg)` computes every constant the register-blocked kernels are built from.
"""

from __future__ import annotations

from dataclasses import dataclass

from cudalearn.runtime import device
from cudalearn.runtime import launch as grids


@dataclass(frozen=True)
class Tiles:
    """Tile sizes of the register-blocked kernels (Chapter 5).

    A block computes a (bm, bn) tile of the output with (bn // tn, bm // tm)
    threads, each thread a (tm, tn) patch held in registers; the k dimension
    advances bk at a time through shared memory. The SGD kernel transposes
    (tt, tt) tiles with (tt, tr) threads.
    """

    bm: int = 64
    bn: int = 64
    bk: int = 16
    tm: int = 4
    tn: int = 4
    tt: int = 32
    tr: int = 8

    @property
    def threads(self) -> tuple[int, int]:
        """blockdim (x, y) of the matrix-product kernels."""
        return (self.bn // self.tn, self.bm // self.tm)

    def thread_outputs(self, tx: int, ty: int) -> tuple[list[int], list[int]]:
        """(rows, columns) of the block's output tile that thread (tx, ty) computes: strided by TY, TX."""
        threads_x, threads_y = self.threads
        return [ty + i * threads_y for i in range(self.tm)], [tx + j * threads_x for j in range(self.tn)]

    def launch(self, m: int, n: int):
        """(griddim, blockdim) of a matrix-product kernel for an (m, n) output."""
        return grids.grid_2d(m, n, self.threads, per_thread=(self.tn, self.tm))

    def sgd_launch(self, k: int, n: int):
        """(griddim, blockdim) of `sgd_transpose` for a (k, n) weight matrix: TT / TR rows a thread."""
        return grids.grid_2d(k, n, (self.tt, self.tr), per_thread=(1, self.tt // self.tr))


#: The GPU configuration: 64 x 64 output tiles, 256 threads each computing 4 x 4 outputs.
GPU_TILES = Tiles()
#: The simulator's configuration: the same kernels on 8 x 8 tiles (16 threads, 2 x 2 outputs each).
SIM_TILES = Tiles(bm=8, bn=8, bk=4, tm=2, tn=2, tt=8, tr=2)

#: Tiles of the tuned products (`make_blocked_vec`): 64 x 64 outputs, BK = 32, 4 x 4 outputs a thread.
VEC_TILES = Tiles(bk=32)
VEC_SIM_TILES = Tiles(bm=8, bn=8, bk=4, tm=4, tn=4, tt=8, tr=2)
#: Results of at most SKINNY_COLS columns (the 10 logits, their weight gradient) use small tiles of one
#: output a thread instead: a 64-column tile would leave most of a block idle, and few blocks to spread.
#: Under the simulator the limit is 10, so that the tiny network's hidden layers take the main tiles.
SKINNY_COLS, SKINNY_SIM_COLS = 32, 10
SKINNY_TILES = Tiles(bm=16, bn=16, bk=64, tm=1, tn=1)
SKINNY_SIM_TILES = Tiles(bm=8, bn=4, bk=8, tm=1, tn=1, tt=8, tr=2)


def constants(cfg: Tiles = GPU_TILES, pad: int = 1) -> dict[str, tuple[int, str]]:
    """{name: (value, meaning)} of every constant the register-blocked kernels use (Chapter 5).

    The one place these are computed: `make_blocked` builds its kernels from
    them and Chapter 5 prints them as a table.
    """
    TX, TY = cfg.threads
    NT = TX * TY
    if cfg.bm * cfg.bk % NT or cfg.bk * cfg.bn % NT or cfg.tt % cfg.tr:
        raise ValueError(f"tile sizes {cfg} do not divide evenly among the threads")
    return {
        "BM": (cfg.bm, "rows of the output tile one block computes"),
        "BN": (cfg.bn, "columns of that output tile"),
        "BK": (cfg.bk, "step along k: the shared tiles are (BM, BK) of A and (BK, BN) of B"),
        "TM": (cfg.tm, "rows of the patch of outputs each thread keeps in registers"),
        "TN": (cfg.tn, "columns of that patch"),
        "TX": (TX, "threads of a block along x (columns): BN / TN"),
        "TY": (TY, "threads of a block along y (rows): BM / TM"),
        "NT": (NT, "threads of a block: TX * TY"),
        "A_LOADS": (cfg.bm * cfg.bk // NT, "elements of the A tile each thread copies to shared memory"),
        "B_LOADS": (cfg.bk * cfg.bn // NT, "elements of the B tile each thread copies"),
        "BKP": (cfg.bk + pad, "row length of the transposed tile in the weight gradient: BK + padding"),
        "TT": (cfg.tt, "side of the square tile that sgd_transpose transposes"),
        "TR": (cfg.tr, "rows of threads in sgd_transpose's block: each thread does TT / TR rows"),
        "TTP": (cfg.tt + 1, "row length of that tile: TT plus the padding column"),
    }


def tiles_for_mode(mode: str | None = None) -> Tiles:
    """GPU_TILES on a GPU (and for PTX), SIM_TILES under the simulator (Chapter 5)."""
    return SIM_TILES if (mode or device.mode()) == "sim" else GPU_TILES


def tuned_tiles_for_mode(mode: str | None = None) -> tuple[Tiles, Tiles, int]:
    """(VEC_TILES, SKINNY_TILES, SKINNY_COLS) on a GPU, their simulator values under the simulator (Ch. 5)."""
    if (mode or device.mode()) == "sim":
        return VEC_SIM_TILES, SKINNY_SIM_TILES, SKINNY_SIM_COLS
    return VEC_TILES, SKINNY_TILES, SKINNY_COLS
