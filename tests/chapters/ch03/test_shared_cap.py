"""Chapter 3's shared-memory cap: read from the stored profile, and the check the prose relies on fails."""

from dataclasses import replace

import pytest

from cudalearn.chapters.ch03 import shared_cap
from cudalearn.measure import stated, timing


def test_the_stored_profile_gives_one_and_a_half_wavefronts_per_ffma():
    per_ffma, run = shared_cap.wavefronts_per_ffma()
    assert per_ffma == 1.5 and "H200" in run
    assert shared_cap.cap_gflops("NVIDIA H200") == pytest.approx(67e3 / 6)
    assert shared_cap.cap_gflops("an unknown GPU") is None


def test_a_rerun_that_breaks_the_stated_reading_raises(capsys):
    stored = timing.stored_results("ch3.matmul")
    cut = {"matmul_tiled16": 7.2, "matmul_tiled32": 13.0}
    shared_cap.report(stored, cut)  # the stored run reads as the prose says
    assert "of the cap" in capsys.readouterr().out
    faster = [r | {"gflops": 12e3} if r["name"] == "matmul_tiled32" else r for r in stored.rows]
    with pytest.raises(stated.StaleProse, match="shared memory's cap"):
        shared_cap.report(replace(stored, rows=faster), cut)  # a rerun above the cap: reread the text
