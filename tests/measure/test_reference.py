"""measure.reference: the stored GPU figures, one format and one index, merged by code (all chapters)."""

import json
from importlib import resources

import pytest

from cudalearn import cli
from cudalearn.measure import reference

STORED = reference.STORED
NCU_PROFILES = {  # stored file: (key, the script that writes it)
    "h200-ncu-chain.json": ("ch5.ncu_chain", "scripts/ncu_chain.py"),
    "h200-ncu-compare.json": ("ch4.ncu_compare", "scripts/ncu_compare.py"),
}


def run(created, figures, **header):
    """A stored GPU run as gpu_run.py writes it, with `figures`."""
    data = {"device": "NVIDIA H200", "compute_capability": [9, 0], "device_count": 1, "sms": 132}
    data |= {"mode": "gpu", "date": created[:10], "created": created, "source": "scripts/gpu_run.py"}
    data |= {"versions": {"numba-cuda": "0.30.4", "numpy": "2.4.6"}, "figures": figures}
    return {**data, **header}


def test_every_stored_file_parses_and_is_indexed():
    on_disk = sorted(p.name for p in STORED.glob("*.json"))
    runs = reference.index()
    assert [r.name for r in runs] == on_disk == reference.reference_files()
    for r in runs:
        data = reference.load(r.name)
        assert reference.problems(data) == [], r.name
        assert r.keys == tuple(sorted(data["figures"])) and r.label == reference.label(data)


def test_no_key_is_stored_in_two_files():
    assert reference.duplicate_keys(reference.index()) == {}, "lookup would take whichever file sorts first"


@pytest.mark.parametrize("name", reference.reference_files())
def test_every_stored_file_is_as_the_code_writes_it(name):
    text = resources.files(reference.DATA_PACKAGE).joinpath(name).read_text()
    data = json.loads(text)
    assert text in (reference.dumps(data), reference.dumps(data, sort_figures=False)), (
        f"{name} edited by hand?"
    )


def test_the_nsight_compute_profiles_are_indexed_with_their_device_and_date():
    runs = {r.name: r for r in reference.index()}
    for stored, (key, source) in NCU_PROFILES.items():
        assert key in runs[stored].keys and runs[stored].source == source
        assert runs[stored].label.startswith("NVIDIA H200 (sm_90), 2026-")
        assert runs[stored].versions["ncu"].startswith("Version 2025.3.1.0")


def test_from_ncu_reads_the_compute_capability_from_the_device_name():
    result = {
        "device": "NVIDIA T4 (cc 7.5)",
        "date": "2026-11-29T19:12:05+00:00",
        "versions": {"numba-cuda": "0.30.4"},
    }
    data = reference.from_ncu({**result, "metrics": {"m": 1}}, "ch4.ncu_compare", "scripts/ncu_compare.py")
    assert (data["device"], data["compute_capability"], data["date"]) == ("NVIDIA T4", [7, 5], "2026-11-29")
    assert data["created"] == "2026-11-29T19:12:05+00:00" and data["figures"] == {
        "ch4.ncu_compare": {"metrics": {"m": 1}}
    }
    assert reference.label(data) == "NVIDIA T4 (sm_75), 2026-11-29, numba-cuda 0.30.4"


def test_from_ncu_refuses_a_tracer_only_result():
    cpu = {"device": "none (CPU tracer)", "date": "2026-11-29T19:12:05+00:00", "versions": {}, "metrics": {}}
    with pytest.raises(reference.StoredFiguresError, match="no compute capability: not a GPU profile"):
        reference.from_ncu(cpu, "ch4.ncu_compare", "scripts/ncu_compare.py")


def test_merge_joins_the_figures_and_writes_merged_from():
    a = run("2026-11-29T19:00:00+00:00", {"ch5.chain": {"ms": 1.0}, "ch5.copy": {"ms": 0.5}})
    a["notebooks"] = [{"notebook": "book/05-fusion-shallow-net.ipynb", "status": "ok", "seconds": 9.0}]
    b = run("2026-11-29T21:00:00+00:00", {"ch6.silu": {"ms": 2.0}, "ch5.copy": {"ms": 0.5}})
    out = reference.merge([("a.json", a), ("b.json", b)], what=["chapter 5"])
    assert out["figures"] == {"ch5.chain": {"ms": 1.0}, "ch5.copy": {"ms": 0.5}, "ch6.silu": {"ms": 2.0}}
    assert (
        out["created"] == b["created"]
        and out["date"] == "2026-11-29"
        and out["source"] == "scripts/gpu_run.py"
    )
    assert out["merged_from"] == [
        {"created": a["created"], "file": "a.json", "what": "chapter 5"},
        {"created": b["created"], "file": "b.json", "what": "scripts/gpu_run.py"},
    ]
    assert out["notebooks"] == a["notebooks"] and reference.problems(out) == []
    again = reference.merge([("ab.json", out), ("c.json", run("2026-11-30T08:00:00+00:00", {"ch9.x": {}}))])
    assert [e["file"] for e in again["merged_from"]] == ["a.json", "b.json", "c.json"]


def test_merge_refuses_a_key_stored_with_different_figures():
    a = run("2026-11-29T19:00:00+00:00", {"ch5.chain": {"ms": 1.0}, "ch5.copy": {"ms": 0.5}})
    b = run("2026-11-29T21:00:00+00:00", {"ch5.chain": {"ms": 0.9}})
    with pytest.raises(
        reference.StoredFiguresError,
        match=r"1 key\(s\) stored with different figures: ch5.chain \(a.json and b.json\)",
    ):
        reference.merge([("a.json", a), ("b.json", b)])


@pytest.mark.parametrize(
    "change, field",
    [({"device": "Tesla T4", "compute_capability": [7, 5]}, "device"), ({"device_count": 2}, "device_count")]
    + [({"versions": {"numba-cuda": "0.31.0", "numpy": "2.4.6"}}, "versions")],
)
def test_merge_refuses_runs_of_another_machine_or_software(change, field):
    a = run("2026-11-29T19:00:00+00:00", {"ch5.chain": {"ms": 1.0}})
    b = run("2026-11-29T21:00:00+00:00", {"ch6.silu": {"ms": 2.0}}, **change)
    with pytest.raises(reference.StoredFiguresError, match=f"not runs of one machine and software: {field} "):
        reference.merge([("a.json", a), ("b.json", b)])


def test_merge_names_only_the_versions_that_differ():
    a = run("2026-11-29T19:00:00+00:00", {"ch5.chain": {"ms": 1.0}})
    b = run(
        "2026-11-29T21:00:00+00:00", {"ch6.silu": {"ms": 2.0}}, versions={**a["versions"], "torch": "2.13.0"}
    )
    with pytest.raises(
        reference.StoredFiguresError, match=r"versions \{'torch': None\} against \{'torch': '2.13.0'\};"
    ):
        reference.merge([("a.json", a), ("b.json", b)])


def test_merge_refuses_a_file_that_is_not_a_stored_run_and_a_single_run():
    a = run("2026-11-29T19:00:00+00:00", {"ch5.chain": {"ms": 1.0}})
    with pytest.raises(reference.StoredFiguresError, match="b.json: mode 'sim', not 'gpu'"):
        reference.merge([("a.json", a), ("b.json", {**a, "mode": "sim"})])
    with pytest.raises(reference.StoredFiguresError, match="at least two runs"):
        reference.merge([("a.json", a)])


def test_the_merge_command_writes_the_file_or_says_why_not(tmp_path, capsys):
    a, b, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "ab.json"
    a.write_text(reference.dumps(run("2026-11-29T19:00:00+00:00", {"ch5.chain": {"ms": 1.0}})))
    b.write_text(reference.dumps(run("2026-11-29T21:00:00+00:00", {"ch6.silu": {"ms": 2.0}})))
    assert (
        cli.main(["reference", "merge", str(a), str(b), "-o", str(out), "--what", "ch5", "--what", "ch6"])
        == 0
    )
    assert f"wrote {out}: 2 figures" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert [e["what"] for e in data["merged_from"]] == ["ch5", "ch6"] and out.read_text() == reference.dumps(
        data
    )
    b.write_text(reference.dumps(run("2026-11-29T21:00:00+00:00", {"ch5.chain": {"ms": 2.0}})))
    assert cli.main(["reference", "merge", str(a), str(b), "-o", str(out)]) == 1
    assert (
        "not merged: 1 key(s) stored with different figures: ch5.chain (a.json and b.json)"
        in capsys.readouterr().err
    )


def test_the_reference_command_lists_every_stored_figure(capsys):
    assert cli.main(["reference"]) == 0
    text = capsys.readouterr().out
    for r in reference.index():
        assert f"{r.name}: {r.label}" in text and all(f"\n  {k}\n" in text for k in r.keys)
    assert "  ch4.ncu_compare\n" in text and "  ch5.ncu_chain\n" in text
    assert text.endswith(
        f"{sum(len(r.keys) for r in reference.index())} figures in {len(reference.index())} files\n"
    )


def test_run_header_names_the_versions_once_read():
    head = reference.run_header()
    assert head["mode"] == "sim" and head["versions"]["numba-cuda"] and head["versions"]["python"]
    assert set(reference.RECORDED) <= set(head["versions"]) and "cudalearn" in head["versions"]


def test_a_superseded_figure_is_labelled_as_of_the_earlier_code_and_keeps_its_note_in_a_merge():
    a = run("2026-11-29T19:00:00+00:00", {"ch5.chain": {"ms": 1.0}}, superseded={"ch5.chain": "old kernel"})
    assert reference.label(a, "ch5.chain").endswith("; SUPERSEDED: old kernel")
    assert "SUPERSEDED" not in reference.label(a) and reference.problems(a) == []
    assert reference.problems({**a, "superseded": {"ch9.x": "?"}}) == [
        "superseded names figures the file does not have: ['ch9.x']"
    ]
    b = run("2026-11-30T08:00:00+00:00", {"ch6.silu": {"ms": 2.0}})
    assert reference.merge([("a.json", a), ("b.json", b)])["superseded"] == {"ch5.chain": "old kernel"}


def test_adopt_moves_the_rerun_keys_out_of_the_older_files_and_notes_where(tmp_path, capsys):
    old = run(
        "2026-12-01T10:00:00+00:00",
        {"ch10.softmax": {"ms": 1.0}, "ch10.sum": {"ms": 2.0}},
        superseded={"ch10.softmax": "old kernel"},
    )
    only = run("2026-12-01T11:00:00+00:00", {"ch9.patchify": {"ms": 3.0}})
    (tmp_path / "h200-old.json").write_text(reference.dumps(old))
    (tmp_path / "h200-only.json").write_text(reference.dumps(only))
    new = run("2026-12-05T09:00:00+00:00", {"ch10.softmax": {"ms": 0.5}, "ch9.patchify": {"ms": 0.1}})
    src = tmp_path / "incoming"
    src.mkdir()
    (src / "h200-new.json").write_text(reference.dumps(new))
    moved = reference.adopt(src / "h200-new.json", tmp_path)
    assert moved == {"h200-old.json": ["ch10.softmax"], "h200-only.json": ["ch9.patchify"]}
    left = json.loads((tmp_path / "h200-old.json").read_text())
    assert left["figures"] == {"ch10.sum": {"ms": 2.0}}
    assert "superseded" not in left  # the note went with its figure
    assert left["replaced"] == {"ch10.softmax": "h200-new.json (2026-12-05)"}
    assert not (tmp_path / "h200-only.json").exists()  # nothing left in it
    assert json.loads((tmp_path / "h200-new.json").read_text())["figures"] == new["figures"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**new, "mode": "sim"}))
    with pytest.raises(reference.StoredFiguresError, match="only GPU runs are stored"):
        reference.adopt(bad, tmp_path)
    bad.unlink()
    with pytest.raises(reference.StoredFiguresError, match="already stored"):
        reference.adopt(src / "h200-new.json", tmp_path)  # the name is taken now
    other = run("2026-12-06T09:00:00+00:00", {"ch10.sum": {"ms": 9.0}}, device="NVIDIA T4")
    (src / "t4.json").write_text(reference.dumps(other))
    with pytest.raises(
        reference.StoredFiguresError, match="from NVIDIA H200, not NVIDIA T4.*--replace-device"
    ):
        reference.adopt(src / "t4.json", tmp_path)
    older = run("2026-11-01T09:00:00+00:00", {"ch10.sum": {"ms": 9.0}})
    (src / "older.json").write_text(reference.dumps(older))
    with pytest.raises(reference.StoredFiguresError, match="newer than older.json"):
        reference.adopt(src / "older.json", tmp_path)
    assert json.loads((tmp_path / "h200-old.json").read_text())["figures"] == {"ch10.sum": {"ms": 2.0}}
    # a chapter rerun on another GPU, asked for: the older file's note names the new device
    (tmp_path / "h200-two.json").write_text(
        reference.dumps(run("2026-12-01T12:00:00+00:00", {"ch6.x": {"ms": 1.0}}))
    )
    two = {"ch10.sum": {"ms": 2.0}, "ch6.y": {"ms": 4.0}}
    (tmp_path / "h200-old.json").write_text(reference.dumps(run("2026-12-01T10:00:00+00:00", two)))
    rerun = run(
        "2026-12-07T09:00:00+00:00", {"ch10.sum": {"ms": 9.0}, "ch6.x": {"ms": 3.0}}, device="NVIDIA H100"
    )
    (src / "h100.json").write_text(reference.dumps(rerun))
    moved = reference.adopt(src / "h100.json", tmp_path, replace_device=True)
    assert moved == {"h200-old.json": ["ch10.sum"], "h200-two.json": ["ch6.x"]}
    assert json.loads((tmp_path / "h200-old.json").read_text())["replaced"]["ch10.sum"] == (
        "h100.json (2026-12-07, NVIDIA H100)"
    )
    assert not (tmp_path / "h200-two.json").exists()  # its only figure went to the H100 run


def test_write_ncu_run_stores_the_profile_under_its_key_with_the_launch_size(tmp_path):
    """scripts/ncu_chain.py and ncu_rows.py: the device header lifted, the child's last JSON line the size."""

    class Info:
        device, compute_capability = "NVIDIA H100 80GB HBM3", (9, 0)

    out = tmp_path / "run.json"
    stdout = 'noise\n{"n": 1}\nmore\n{"rows": 8, "cols": 197}\n'
    metrics = {"softmax_warp": {"dram__bytes_read.sum": 1.0}}
    versions = {"numba-cuda": "0.30.4"}
    reference.write_ncu_run(out, Info(), versions, stdout, metrics, "ch10.ncu_rows", "scripts/x.py")
    data = json.loads(out.read_text())
    assert data["device"] == "NVIDIA H100 80GB HBM3" and data["compute_capability"] == [9, 0]
    assert data["source"] == "scripts/x.py" and data["versions"] == {"numba-cuda": "0.30.4"}
    assert data["figures"]["ch10.ncu_rows"] == {"size": {"rows": 8, "cols": 197}, "metrics": metrics}
