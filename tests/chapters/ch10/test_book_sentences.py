"""Chapter 10's sentences printed from stored figures: which PyTorch call a row is, passes, noise, profile.

Each helper of `attention_report`, `bench.twice_timed_gap` and `profile_rows.tested` picks its sentence
from what is stored; these tests give it each stored state (reference lookups replaced) and read it.
"""

import pytest

from cudalearn.chapters.ch10 import attention_report, bench, profile_rows
from cudalearn.measure import reference, stated


def _rows(ms):
    return [{"name": name, "median_ms": t} for name, t in ms.items()]


def test_nn_passes_count_the_softmax_sweeps_and_the_strips_of_p():
    assert attention_report.nn_passes(16) == 6  # S: 1 + 3, P: 1 + 1 (the tracer's counts at d = 16)
    assert attention_report.nn_passes(64) == 7  # P read once per 32 output columns


def test_pytorch_row_names_the_4d_calls_and_says_nothing_without_them(capsys):
    attention_report.pytorch_row(_rows({attention_report.FOUR_D: 0.4}), "run")
    assert "are the calls above" in capsys.readouterr().out
    attention_report.pytorch_row(_rows({attention_report.FUSED: 0.6}), "run")  # no PyTorch row stored
    assert capsys.readouterr().out == ""


def test_4d_rows_check_the_summarys_two_orderings(capsys):
    ms = {attention_report.FUSED: 0.6, attention_report.FOUR_D: 0.42, attention_report.MATH_4D: 0.3}
    attention_report.pytorch_row(_rows(ms), "run")
    out = " ".join(capsys.readouterr().out.split())
    assert "ran 2.0x as fast as our fused kernel and 1.4x as fast as PyTorch's own" in out
    for faster in (attention_report.FUSED, attention_report.FOUR_D):  # either fused one now ahead: stale
        with pytest.raises(stated.StaleProse):
            attention_report.pytorch_row(_rows(dict(ms, **{faster: 0.2})), "run")


def test_twice_timed_gap_only_within_one_stored_run(monkeypatch):
    files = {
        "a": ({"rows": _rows({"x": 1.0, "y": 2.0, "only a": 5.0})}, {"created": "one"}),
        "b": ({"rows": _rows({"x": 1.01, "y": 2.0})}, {"created": "one"}),
        "c": ({"rows": _rows({"x": 1.0})}, {"created": "two"}),
    }
    monkeypatch.setattr(reference, "lookup", lambda key: files.get(key, (None, {})))
    gap = bench.twice_timed_gap("a", "b")
    assert gap["rows"] == 2 and gap["gap"] == pytest.approx(1 - 1 / 1.01)
    assert bench.twice_timed_gap("a", "c") is None and bench.twice_timed_gap("a", "missing") is None


def test_tested_says_whether_a_profile_is_stored(monkeypatch):
    monkeypatch.setattr(stated, "stored", lambda key: (None, "none"))
    assert "nothing here tests the idea" in profile_rows.tested("the idea")
    monkeypatch.setattr(stated, "stored", lambda key: ({"metrics": {}}, "H200, 2026"))
    assert "(H200, 2026) is printed above" in profile_rows.tested("the idea")
