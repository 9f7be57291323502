"""measure.sources: each chapter's claims table, rendered from stored or computed figures (all chapters)."""

import numpy as np
import pytest

from cudalearn.measure import reference, sources

HEADER = {"device": "NVIDIA H200", "compute_capability": [9, 0], "date": "2026-11-29"}
HEADER["versions"] = {"numba-cuda": "0.30.4"}


def _claim(**kw):
    args = {"claim": "Padding removes the conflict", "source": "CUDA C++ Best Practices Guide, sec. 9.2.3.3"}
    args["show"] = lambda f: f"{f['speedup']:.2f}x"
    return sources.Claim(**{**args, **kw})


@pytest.mark.parametrize("where", [{}, {"key": "ch4.transpose", "value": {"speedup": 2.0}}])
def test_a_claim_needs_exactly_one_of_key_and_value(where):
    with pytest.raises(ValueError, match="exactly one of key="):
        _claim(holds=lambda f: True, **where)


def test_a_claim_without_a_verdict_needs_a_note():
    with pytest.raises(ValueError, match="note= must say why"):
        _claim(value={"speedup": 2.0})
    assert sources.row(_claim(value={"speedup": 2.0}, note="one GPU only"))[4] == "see note: one GPU only"


def test_a_missing_stored_figure_reads_not_measured_and_untested():
    key = "test.no-run-ever-stored-this"
    assert reference.lookup(key)[0] is None
    row = sources.row(_claim(key=key, holds=lambda f: f["speedup"] > 1))
    assert row[2:] == ("not measured", "no stored run", "untested")


def test_a_stored_figure_is_labelled_with_its_device_and_date(monkeypatch):
    monkeypatch.setattr(reference, "lookup", lambda key: ({"speedup": 1.52}, HEADER) if key == "k" else None)
    row = sources.row(_claim(key="k", holds=lambda f: f["speedup"] >= 2))
    assert row == (
        "Padding removes the conflict",
        "CUDA C++ Best Practices Guide, sec. 9.2.3.3",
        "1.52x",
        "NVIDIA H200 (sm_90), 2026-11-29, numba-cuda 0.30.4",
        "does not hold",
    )


def test_a_real_stored_figure_is_found():
    name = reference.reference_files()[0]
    data = reference.load(name)
    key = sorted(data["figures"])[0]
    row = sources.row(sources.Claim("c", "s", show=lambda f: "shown", holds=lambda f: True, key=key))
    assert (
        row[2] == "shown" and row[4] == "holds" and row[3].startswith(str(reference.lookup(key)[1]["device"]))
    )


@pytest.mark.parametrize(
    "verdict, word",
    [
        (True, "holds"),
        (False, "does not hold"),
        (np.bool_(True), "holds"),
        (np.bool_(False), "does not hold"),
    ],
)
def test_verdict_words(verdict, word):
    row = sources.row(_claim(value={"speedup": 2.0}, holds=lambda f: verdict))
    assert row[2:] == ("2.00x", "this notebook", word)
    noted = sources.row(_claim(value={"speedup": 2.0}, holds=lambda f: verdict, note="on one size"))
    assert noted[4] == f"{word}: on one size"


def test_a_verdict_that_cannot_be_judged_says_see_note():
    row = sources.row(_claim(value={"speedup": 2.0}, holds=lambda f: None, note="no warp-state data"))
    assert row[4] == "see note: no warp-state data"


def test_the_table_escapes_pipes_and_newlines():
    claim = _claim(claim="|a| over |b|\nis small", value={"speedup": 2.0}, holds=lambda f: True, note="x | y")
    text = sources.markdown([claim])
    lines = text.split("\n")
    assert lines[:2] == ["| Claim | Source | Our measurement | On | Verdict |", "|---|---|---|---|---|"]
    assert lines[2] == (
        "| \\|a\\| over \\|b\\| is small | CUDA C++ Best Practices Guide, sec. 9.2.3.3 | 2.00x "
        "| this notebook | holds: x \\| y |"
    )
    assert len(lines) == 3


def test_claims_displays_markdown_in_a_notebook():
    from IPython.display import Markdown

    out = sources.claims([_claim(value={"speedup": 2.0}, holds=lambda f: True)])
    assert isinstance(out, Markdown) and "| 2.00x |" in out.data
