"""Where each thread's outputs lie in a block tile of Chapter 6's steps, and what a warp reads for them.

`make_layout` is the rule the last three steps' kernels build on (their thread grid, plain or warp by
warp); `thread_outputs` and `warp_read_runs` apply it, and `regblock_2d_simple`'s, in Python for the
chapter's figures and counts (`figures/microtile.py`), so the pictures follow the kernels' own rule.
"""

from cudalearn.chapters.ch05.kernels.tile_steps import VEC, vec_offset
from cudalearn.chapters.ch06.kernels.regblock_launch import threads_per_block
from cudalearn.chapters.ch06.kernels.regblock_tiles import ASYNC


def make_layout(BM, BN, TM, TN, warp=None):
    """(RX, RY, first): where each thread's outputs lie in the (BM, BN) block tile (Chapter 6).

    `first(t)` is (c0, r0), thread t's first column and row; its TM rows and TN columns come in
    groups of four from there, RY and RX threads' groups interleaving along each (`vec_offset`).
    Without `warp`, the threads of the block form one (BM / TM) x (BN / TN) grid (`regblock_2d_vec`
    and `_prefetch`). With `warp` = (WM, WN), each warp owns a WM x WN sub-tile of the block tile
    and its 32 lanes form a (WM / TM) x (WN / TN) grid inside it (`regblock_2d_warptile`).
    """
    if warp is None:
        RX, RY = BN // TN, BM // TM

        def first(t):
            """(c0, r0) of thread t: its place in the block's grid of threads, 4 outputs a place."""
            return (t % RX) * VEC, (t // RX) * VEC

        return RX, RY, first
    WM, WN = warp
    if BM % WM or BN % WN or WM % TM or WN % TN or (WM // TM) * (WN // TN) != 32:
        shape = f"warp tile {WM}x{WN} must divide the block tile {BM}x{BN}"
        raise ValueError(f"{shape} and hold 32 lanes of {TM}x{TN} outputs")
    # lanes along a warp tile's row and column, warps along a row of the block tile
    LX, LY, WX = WN // TN, WM // TM, BN // WN

    def first(t):
        """(c0, r0) of thread t: its warp's sub-tile, then its lane's place inside it."""
        w, lane = t // 32, t % 32
        return (w % WX) * WN + (lane % LX) * VEC, (w // WX) * WM + (lane // LX) * VEC

    return LX, LY, first


def thread_outputs(kernel_name, cfg, t):
    """(rows, cols) of the block tile whose C elements thread t computes, for the 2-D kernels (Chapter 6).

    regblock_2d_simple: a contiguous TM x TN block; the last three kernels: groups of four rows and
    four columns spread by `vec_offset` from `make_layout`'s first output (their Python functions,
    so the picture follows the kernel's rule).
    """
    if kernel_name == "regblock_2d_simple":
        tx, ty = t % (cfg["BN"] // cfg["TN"]), t // (cfg["BN"] // cfg["TN"])
        rows = [ty * cfg["TM"] + i for i in range(cfg["TM"])]
        return rows, [tx * cfg["TN"] + j for j in range(cfg["TN"])]
    warp = (cfg["WM"], cfg["WN"]) if kernel_name == "regblock_2d_warptile" else None
    RX, RY, first = make_layout(cfg["BM"], cfg["BN"], cfg["TM"], cfg["TN"], warp)
    c0, r0 = first(t)
    offset = vec_offset.py_func
    return [offset(i, r0, RY) for i in range(cfg["TM"])], [offset(j, c0, RX) for j in range(cfg["TN"])]


def warp_read_runs(kernel_name, cfg, warp=0):
    """(A, B): distinct 16-byte runs of sAt and of sB that warp `warp` reads at one step along k (Chapter 6).

    For the last three kernels, whose threads read their rows and columns four at a time: each group
    of four is one aligned run, read with one 128-bit shared load, and a warp's shared traffic per
    step along k is 16 * (A + B) bytes. Counted from `thread_outputs`, the kernels' own rule.
    """
    if kernel_name not in ("regblock_2d_vec", "regblock_2d_prefetch", "regblock_2d_warptile", ASYNC):
        raise ValueError(f"{kernel_name} does not read its rows and columns in 16-byte runs")
    first = 32 * warp
    threads = threads_per_block(kernel_name, cfg)
    if not 0 <= first < threads:
        raise ValueError(f"warp {warp} is not in a block of {threads} threads")
    runs_a, runs_b = set(), set()
    for t in range(first, min(first + 32, threads)):
        rows, cols = thread_outputs(kernel_name, cfg, t)
        runs_a.update(r // VEC for r in rows)
        runs_b.update(c // VEC for c in cols)
    return len(runs_a), len(runs_b)
