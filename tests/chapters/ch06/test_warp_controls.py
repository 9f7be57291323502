"""6a's controls: which kernels `warp_controls.build` makes per target, and how `read` words a run."""

import pytest

from cudalearn.chapters.ch06 import warp_controls
from cudalearn.chapters.ch06.kernels import regblock
from cudalearn.measure import timing
from cudalearn.measure.stated import StaleProse


def test_sm80_builds_both_controls_as_the_trial_run_did():
    built, notes = warp_controls.build(regblock.build("sm80+"))
    assert notes == []
    assert list(built) == ["step 4", warp_controls.TILES_ONLY, warp_controls.LAYOUT_ONLY, "step 5"]
    _, _, tiles = built[warp_controls.TILES_ONLY]  # step 5's tiles, no warp tile: step 4's layout
    assert tiles == {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 16}
    name, _, tiles = built[warp_controls.LAYOUT_ONLY]  # step 4's 8 x 8 tiles, lanes 4 x 8
    assert name == "regblock_2d_warptile"
    assert (tiles["TM"], tiles["TN"], tiles["WM"], tiles["WN"]) == (8, 8, 32, 64)


def test_t4_says_its_tiles_control_is_step_4_again():
    built, notes = warp_controls.build(regblock.build("sm75"))
    assert any("is step 4 again" in n for n in notes) and any("is step 5 again" in n for n in notes)


def test_simulator_tiles_leave_out_the_layout_control_and_say_why():
    built, notes = warp_controls.build(regblock.build("sim"))
    assert warp_controls.LAYOUT_ONLY not in built and any(
        "holds no 16 x 32 warp tile" in " ".join(n.split()) for n in notes
    )


def test_read_words_each_gain_from_the_one_run():
    rows = [
        {"name": "step 4", "median_ms": 3.76},
        {"name": warp_controls.TILES_ONLY, "median_ms": 3.46},
        {"name": warp_controls.LAYOUT_ONLY, "median_ms": 3.95},
        {"name": "step 5", "median_ms": 3.45},
    ]
    text = warp_controls.read(rows)
    words = " ".join(text.split())  # the lines are wrapped at 100 columns
    assert "tiles of 5, layout of 4 is 1.087x faster than step 4" in words
    assert "step 5 is level with tiles of 5, layout of 4 (1.003x, within 3%)" in words
    assert "tiles of 4, warp tiles is 1.051x slower than step 4" in words
    assert max(len(line) for line in text.splitlines()) <= 100
    assert warp_controls.read(rows[:1]).startswith("No GPU run of the controls is stored yet")


def test_level_is_the_same_test_either_way_round():
    for slow, fast in ((1.0, 1.029), (1.029, 1.0), (1.0, 1.0299), (1.0299, 1.0)):
        assert "level" in warp_controls._versus("a", "b", {"a": slow, "b": fast}), (slow, fast)
    assert "1.034x slower" in warp_controls._versus("a", "b", {"a": 1.034, "b": 1.0})
    assert "1.034x faster" in warp_controls._versus("a", "b", {"a": 1.0, "b": 1.034})


def test_check_holds_the_text_to_the_run_it_reads(capsys):
    """The stored H100 run (2026-12-07) reads as 6a says; a run where the layout pays does not."""
    run = {"step 4": 3.759, warp_controls.TILES_ONLY: 3.424, "step 5": 3.450}
    run[warp_controls.LAYOUT_ONLY] = 3.731

    def results(ms, target="sm80+"):
        rows = [{"name": name, "median_ms": t} for name, t in ms.items()]
        return timing.Results(
            "ch6.warp_control", rows, "step 4", "reference", "H100, 2026-12-07", {"target": target}
        )

    warp_controls.check(results(run))
    warp_controls.check(results({"step 4": 3.7}))  # no run of the controls: nothing stated
    t4 = {"step 4": 1.0, warp_controls.TILES_ONLY: 1.0, "step 5": 0.9, warp_controls.LAYOUT_ONLY: 0.9}
    warp_controls.check(results(t4, "sm75"))  # a T4's controls repeat the steps: said, not read
    assert "On a T4 the controls are steps 4 and 5 again" in capsys.readouterr().out
    without_layout = {k: v for k, v in run.items() if k != warp_controls.LAYOUT_ONLY}
    changes = [{"step 5": 3.2}, {warp_controls.LAYOUT_ONLY: 3.5}, {warp_controls.TILES_ONLY: 3.7}]
    for changed in [{**run, **c} for c in changes] + [without_layout]:
        with pytest.raises(StaleProse, match="the tiles alone"):
            warp_controls.check(results(changed))
