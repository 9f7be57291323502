"""measure.stated: a sentence about a stored figure is printed from it and checked, so it cannot drift."""

import io
import json
import shutil
from contextlib import redirect_stdout
from pathlib import Path

import nbformat
import pytest

from cudalearn.measure import reference, stated

ROOT = Path(__file__).resolve().parents[2]
CH0 = ROOT / "book" / "00-setup.ipynb"
# Chapter 0's cells up to the one that quotes `ch0.async` (b00-26), and what each needs: the setup, the
# kernels, the sizes, `busy`'s iterations, the stored figures.
CELLS = ("b00-01", "b00-12", "b00-14", "b00-23", "b00-25", "b00-26")


def test_say_prints_the_sentence_with_its_run_and_checks_the_shape(capsys):
    figures = {"fast_ms": 1.0, "slow_ms": 3.0}
    faster = dict(holds=lambda f: f["fast_ms"] < f["slow_ms"], states="fast is faster")
    stated.say(figures, "reference run on X, 2026-01-01", lambda f: f"{f['slow_ms']:.1f} ms", **faster)
    assert capsys.readouterr().out == "3.0 ms\n(reference run on X, 2026-01-01)\n"
    with pytest.raises(stated.StaleProse, match="the text says 'fast is faster'.*run on X.*Reread the prose"):
        stated.say({"fast_ms": 4.0, "slow_ms": 3.0}, "run on X", lambda f: "", **faster)
    stated.say(None, "no reference GPU run is stored for this figure yet", lambda f: f["x"], **faster)
    assert capsys.readouterr().out.startswith("Not measured yet: no reference GPU run is stored")
    assert max(len(line) for line in stated.wrap("word " * 60).splitlines()) <= stated.WIDTH


def _run_cells(monkeypatch, folder: Path) -> str:
    """Execute CELLS of Chapter 0 with the stored runs of `folder`; what the quoting cell printed."""
    monkeypatch.setenv(reference.FOLDER_ENV, str(folder))
    cells = {c.get("id"): c for c in nbformat.read(CH0, as_version=4).cells}
    ns: dict = {"__name__": "__main__"}
    for cid in CELLS[:-1]:
        exec(compile(cells[cid].source, f"{CH0.name}[{cid}]", "exec"), ns)
    out = io.StringIO()
    with redirect_stdout(out):
        exec(compile(cells[CELLS[-1]].source, f"{CH0.name}[{CELLS[-1]}]", "exec"), ns)
    return out.getvalue()


@pytest.mark.notebooks
def test_a_rerun_that_changes_a_quoted_figure_fails_the_cell_that_quotes_it(monkeypatch, tmp_path):
    cell = next(c for c in nbformat.read(CH0, as_version=4).cells if c.get("id") == CELLS[-1])
    assert cell.source.startswith("# NBVAL_CHECK_OUTPUT"), "nbval compares the quoting cell's output"
    committed = "".join(o["text"] for o in cell.outputs if o.get("name") == "stdout")
    assert _run_cells(monkeypatch, reference.STORED) == committed, "as stored: the committed output"

    copy = tmp_path / "reference"
    shutil.copytree(reference.STORED, copy, ignore=shutil.ignore_patterns("__*"))
    (name,) = [r.name for r in reference.index() if "ch0.async" in r.keys]
    data = json.loads((copy / name).read_text())
    figures = data["figures"]["ch0.async"]

    figures["events_ms"] *= 1.01  # a rerun a little slower: the quoted number changes, so does the output
    (copy / name).write_text(reference.dumps(data))
    printed = _run_cells(monkeypatch, copy)
    assert printed != committed and f"{figures['events_ms']:10.4f} ms" in printed, "nbval would fail here"

    figures["no_sync_ms"] = figures["events_ms"]  # a rerun where the stopwatch waited: the prose is wrong
    (copy / name).write_text(reference.dumps(data))
    with pytest.raises(stated.StaleProse, match="rate above every datasheet"):
        _run_cells(monkeypatch, copy)


def test_figures_measured_now_that_contradict_the_text_are_said_on_a_students_gpu_and_raise_in_a_course_run(
    monkeypatch, capsys
):
    holds, states = (lambda f: f["a"] > f["b"]), "a beats b"
    measured = f"{reference.MEASURED_NOW} on NVIDIA Tesla T4"
    monkeypatch.delenv(stated.STRICT, raising=False)
    stated.check({"a": 1, "b": 2}, measured, holds, states)  # a student's T4: said, not raised
    out = capsys.readouterr().out
    assert "'a beats b'" in out and "Tesla T4" in out and "not an error" in out
    with pytest.raises(stated.StaleProse, match="a beats b"):  # a stored run can only be stale prose
        stated.check({"a": 1, "b": 2}, "reference run on NVIDIA H100 80GB HBM3 (sm_90)", holds, states)
    monkeypatch.setenv(stated.STRICT, "1")  # the course's own GPU run (scripts/gpu_run.py)
    with pytest.raises(stated.StaleProse, match="a beats b"):
        stated.check({"a": 1, "b": 2}, measured, holds, states)
    stated.check({"a": 3, "b": 2}, measured, holds, states)  # holds: silent
    assert capsys.readouterr().out == ""


def test_check_each_names_the_first_claim_the_figures_no_longer_show(monkeypatch, capsys):
    said = {"a beats b": True, "b beats c": False, "c beats d": False}
    stated.check_each({"a": 1}, "reference run on X", {"a beats b": True})  # every claim holds: silent
    with pytest.raises(stated.StaleProse, match="the text says 'b beats c'"):
        stated.check_each({"a": 1}, "reference run on X", said)
    monkeypatch.delenv(stated.STRICT, raising=False)
    stated.check_each({"a": 1}, f"{reference.MEASURED_NOW} on NVIDIA Tesla T4", said)  # a student's GPU
    out = capsys.readouterr().out
    assert "'b beats c'" in out and "'c beats d'" in out and "'a beats b'" not in out


def test_live_names_this_gpu_only_in_gpu_mode(monkeypatch):
    from cudalearn.runtime import device

    monkeypatch.setattr(device, "mode", lambda: "sim")
    assert not stated.live().startswith(reference.MEASURED_NOW)  # the CPU's run is checked as stored prose
    monkeypatch.setattr(device, "mode", lambda: "gpu")
    monkeypatch.setattr(reference, "measured_now", lambda: f"{reference.MEASURED_NOW} on NVIDIA Tesla T4")
    assert stated.live() == f"{reference.MEASURED_NOW} on NVIDIA Tesla T4"


def test_on_a_students_gpu_a_failed_check_is_said_whatever_its_label(monkeypatch, capsys):
    """A timing table measured on the GPU is labelled with the GPU's name alone: said there, not raised."""
    from cudalearn.runtime import device

    holds, states = (lambda f: f["a"] > f["b"]), "a beats b"
    monkeypatch.delenv(stated.STRICT, raising=False)
    monkeypatch.setattr(device, "mode", lambda: "gpu")
    stated.check({"a": 1, "b": 2}, "Tesla T4", holds, states)  # `timing.Results.label` on a GPU
    out = capsys.readouterr().out
    assert "'a beats b'" in out and "Your machine differs" in out
    stored = "NVIDIA H100 80GB HBM3 (sm_90), 2026-12-06, numba-cuda 0.30.4"  # a stored run, dated
    stated.check({"a": 1, "b": 2}, stored, holds, states)
    assert "out of date here" in capsys.readouterr().out
    monkeypatch.setenv(stated.STRICT, "1")
    with pytest.raises(stated.StaleProse, match="a beats b"):  # the course's own GPU run
        stated.check({"a": 1, "b": 2}, "NVIDIA H100 80GB HBM3", holds, states)
    monkeypatch.delenv(stated.STRICT)
    monkeypatch.setattr(device, "mode", lambda: "sim")  # without a GPU (CI): a stored table raises
    with pytest.raises(stated.StaleProse, match="a beats b"):
        stated.check(
            {"a": 1, "b": 2}, "NVIDIA H100 80GB HBM3 (sm_90), 2026-12-06, numba-cuda 0.30.4", holds, states
        )
