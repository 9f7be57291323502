"""The diagrams of Chapters 1-3: warps cut from blocks, tiles sliding along k, the roofline."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from cudalearn.chapters.ch02 import figures as warps  # noqa: E402
from cudalearn.chapters.ch03 import figures as tiles
from cudalearn.measure import plots  # noqa: E402


def test_48_thread_blocks_leave_half_of_the_second_warp_idle():
    lanes = warps.warp_lanes(64, 48)
    assert [(w.block, w.warp) for w in lanes] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    working, past_end, idle = (tuple(w.count(k) for w in lanes) for k in range(3))
    assert working == (32, 16, 16, 0)  # elements 0-31, 32-47, 48-63, none
    assert past_end == (0, 0, 16, 16)  # global indices 64-79, 80-95
    assert idle == (0, 16, 0, 16)  # lanes 16-31 of each second warp have no thread: half its lanes


def test_multiple_of_32_blocks_have_no_idle_lane():
    assert all(w.count(2) == 0 for w in warps.warp_lanes(1000, 256))
    assert sum(w.count(0) for w in warps.warp_lanes(1000, 256)) == 1000


@pytest.mark.parametrize("bad", [(0, 32), (64, 0), (64, 1025)])
def test_warp_lanes_rejects_impossible_launches(bad):
    with pytest.raises(ValueError):
        warps.warp_lanes(*bad)


def test_tiles_slide_along_k_and_the_last_one_sticks_out():
    steps = tiles.tile_steps(40, 45, 40, 16, block=(1, 0))
    assert [s["t"] for s in steps] == [0, 1, 2]  # ceil(45 / 16)
    assert [s["A"] for s in steps] == [(0, 0, 16, 16), (0, 16, 16, 16), (0, 32, 16, 16)]
    assert [s["B"] for s in steps] == [(0, 16, 16, 16), (16, 16, 16, 16), (32, 16, 16, 16)]
    assert {s["C"] for s in steps} == {(0, 16, 16, 16)}  # the block's C tile never moves
    assert steps[-1]["A"][1] + 16 > 45  # the last A tile reaches past column 44: zeros there


def test_tile_steps_rejects_a_block_outside_c():
    with pytest.raises(ValueError, match="outside C"):
        tiles.tile_steps(32, 32, 32, 16, block=(2, 0))


def test_the_figures_draw():
    for fig in (
        warps.warps_on_sm(64, 48),
        tiles.tiles_along_k(40, 45, 40, 16, (1, 0), max_steps=3),
        plots.roofline({"cpu": (100.0, 10.0)}, [("p", 1.0, 5.0)]),
    ):
        assert fig.axes
        plt.close(fig)
    assert len(tiles.tiles_along_k(64, 64, 64, 16, max_steps=2).axes) == 2
    plt.close("all")
