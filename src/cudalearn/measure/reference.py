"""Reference results measured on a real GPU, stored as data in the package (all chapters).

`scripts/gpu_run.py` runs every book and solution notebook in `gpu` mode
with `CUDALEARN_RECORD` pointing at a JSON file; each `timing.measure()` or
`record()` call appends its figures there. The script then stores the file
under `src/cudalearn/data/reference/` with the device, date and versions.
Under `sim`, notebooks show these stored figures, labelled with their
device and date, instead of simulator times. Nothing here is typed in.

Every stored file has one format: a header (`device`, `compute_capability`,
`date`, `created`, `mode`, `versions`, `source`, ...) and `figures`, a dict
from key (`ch4.transpose`) to the figures of that key; an optional
`superseded` header maps a key to a note when the code it measured has
changed since (the figure is then labelled as of the earlier code, until
the next GPU run replaces the file). Nsight Compute
profiles are figures too (`from_ncu` turns a profiler script's result into
this format). `index()` lists every stored file, `merge()` joins runs of one
machine and writes `merged_from` itself, `adopt()` stores a rerun whose keys
leave the older files (each of which notes under `replaced` where they went);
`cudalearn reference` prints the index, `cudalearn reference merge A B -o C`
merges and `cudalearn reference adopt NEW` adopts.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

RECORD_ENV = "CUDALEARN_RECORD"
#: a folder of stored runs read instead of the package's: a rerun checked against the book before it is
#: adopted (`CUDALEARN_REFERENCE=/tmp/run pytest --nbval-lax book/`), and tests/measure/test_stated.py
FOLDER_ENV = "CUDALEARN_REFERENCE"
DATA_PACKAGE = "cudalearn.data.reference"
#: where the stored files live in this checkout (`cudalearn reference adopt` writes here)
STORED = Path(__file__).resolve().parents[1] / "data" / "reference"
# What a run's figures depend on: runs that differ in one of these are not merged into one file.
SAME_RUN = ("device", "compute_capability", "device_count", "sms", "memory_bytes", "mode", "versions")
RECORDED = ("numba", "numba-cuda", "numpy", "llvmlite", "torch")  # the packages a stored run names

DATE = r"\d{4}-\d\d-\d\d"  # a stored run's date, YYYY-MM-DD (its label carries it)
MEASURED_NOW = "measured now"  # how `figures` names figures just measured on this GPU (stated.check reads it)


class StoredFiguresError(ValueError):
    """A stored file not in the reference format, or a merge that would mix runs (all chapters)."""


def run_header() -> dict[str, Any]:
    """Device, date and versions of this process, as stored with every reference file (Chapter 0)."""
    from cudalearn.runtime import device, numba_backend, versions
    from cudalearn.version import __version__

    info = device.info()
    head: dict[str, Any] = {
        "device": info.device,
        "compute_capability": list(info.compute_capability or ()),
        "sms": info.sms,
        "memory_bytes": info.memory_bytes,
        "device_count": device.device_count(),
        "mode": info.mode,
        "date": _dt.date.today().isoformat(),
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "versions": {
            **versions.versions(RECORDED, missing="not installed"),
            "cudalearn": __version__,
        },
    }
    if info.mode == "gpu":
        head["versions"]["cuda_driver"] = versions.driver_version() or "unknown"
    chosen = numba_backend.current()
    if chosen is not None and chosen.package == numba_backend.NUMBA_CUDA_MLIR:  # not merged with numba-cuda's
        head["versions"]["numba-cuda-mlir"] = versions.package_version("numba-cuda-mlir") or "unknown"
    return head


def dumps(data: dict[str, Any], sort_figures: bool = True) -> str:
    """A stored figures file's text: JSON, indent 1, sorted keys, a final newline (all chapters).

    With `sort_figures=False` the header and the figure keys are sorted but each figure keeps its
    own order (a profile's patterns in the order its script ran them, which Chapter 4 prints).
    """
    if sort_figures:
        return json.dumps(data, indent=1, sort_keys=True) + "\n"
    ordered = {k: json.loads(json.dumps(v, sort_keys=True)) for k, v in data.items() if k != "figures"}
    if "figures" in data:
        ordered["figures"] = {k: data["figures"][k] for k in sorted(data["figures"])}
    return json.dumps(dict(sorted(ordered.items())), indent=1) + "\n"


def recording() -> Path | None:
    """The file figures are being recorded to, or None (set by scripts/gpu_run.py)."""
    path = os.environ.get(RECORD_ENV)
    return Path(path) if path else None


def record(key: str, figures: dict[str, Any]) -> dict[str, Any]:
    """Store `figures` under `key` when recording on a GPU; return them unchanged (all chapters)."""
    from cudalearn.runtime import device

    path = recording()
    if path is None or device.mode() != "gpu":
        return figures
    data = json.loads(path.read_text()) if path.exists() else {**run_header(), "figures": {}}
    data["figures"][key] = figures
    path.write_text(dumps(data))
    return figures


def _folder() -> Any:
    """Where the stored runs are read from: the package's data, or the folder `CUDALEARN_REFERENCE` names."""
    other = os.environ.get(FOLDER_ENV)
    return Path(other) if other else resources.files(DATA_PACKAGE)


def reference_files() -> list[str]:
    """Names of the stored reference result files, e.g. ['h200.json'] (all chapters)."""
    root = _folder()
    return sorted(p.name for p in root.iterdir() if p.name.endswith(".json"))


def load(name: str | None = None) -> dict[str, Any]:
    """One stored reference result file (default: the first, `h200.json` if present)."""
    files = reference_files()
    if not files:
        return {"device": None, "figures": {}}
    if name is None:
        name = "h200.json" if "h200.json" in files else files[0]
    return json.loads(_folder().joinpath(name).read_text())


def lookup(key: str, name: str | None = None) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(figures for `key` or None, the header of the file that has them) from the stored results.

    Without `name`, every stored file is searched, `h200.json` first.
    """
    names = [name] if name else sorted(reference_files(), key=lambda n: (n != "h200.json", n))
    for n in names:
        data = load(n)
        if key in data.get("figures", {}):
            return data["figures"][key], data
    return None, load(name) if name else {"device": None, "figures": {}}


def label(data: dict[str, Any], key: str | None = None) -> str:
    """'NVIDIA H200 (sm_90), 2026-11-29, numba-cuda 0.30.4': how a stored figure is labelled.

    With `key`, a figure that the file's `superseded` header marks (code that changed after the run
    measured it) gets that note: the figure is shown, and said to be of the earlier code.
    """
    if not data.get("device"):
        return "no reference GPU run stored"
    cc = data.get("compute_capability") or []
    sm = f" (sm_{cc[0]}{cc[1]})" if len(cc) == 2 else ""
    nc = data.get("versions", {}).get("numba-cuda", "?")
    text = f"{data['device']}{sm}, {data.get('date', '?')}, numba-cuda {nc}"
    note = data.get("superseded", {}).get(key) if key else None
    return f"{text}; SUPERSEDED: {note}" if note else text


def measured_now() -> str:
    """How figures just measured on this process's GPU are labelled (all chapters; stated.check reads it)."""
    from cudalearn.runtime import device

    return f"{MEASURED_NOW} on {device.info().device}"


def figures(key: str, measure: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any] | None, str]:
    """(figures, where they come from): `measure()` on a GPU (recorded), the stored reference otherwise.

    For figures that `timing.measure` does not cover (Chapter 0's launch
    without synchronisation, say). Under the simulator `measure` is not
    called and the figures are None when no reference run stored them.
    """
    from cudalearn.runtime import device

    if device.mode() == "gpu":
        values = record(key, measure())
        return values, measured_now()
    stored, data = lookup(key)
    if stored is None:
        return None, "no reference GPU run is stored for this figure yet (this machine has no GPU)"
    return stored, f"reference run on {label(data, key)} (this machine has no GPU)"


def problems(data: Any) -> list[str]:
    """What keeps `data` from being a stored GPU run in the reference format; [] when it is one."""
    if not isinstance(data, dict):
        return ["not a JSON object"]
    found = []
    if not isinstance(data.get("device"), str) or not data["device"]:
        found.append("no device")
    if not re.fullmatch(DATE, str(data.get("date", ""))):
        found.append(f"date {data.get('date')!r} is not YYYY-MM-DD")
    if data.get("mode") != "gpu":
        found.append(f"mode {data.get('mode')!r}, not 'gpu': only GPU runs are stored")
    if not isinstance(data.get("versions"), dict) or not data["versions"].get("numba-cuda"):
        found.append("no versions (numba-cuda at least)")
    if not isinstance(data.get("figures"), dict) or not data["figures"]:
        found.append("no figures")
    elif unknown := set(data.get("superseded", {})) - set(data["figures"]):
        found.append(f"superseded names figures the file does not have: {sorted(unknown)}")
    return found


@dataclass(frozen=True)
class StoredRun:
    """One stored file in the index: its name, label, source, versions and figure keys (all chapters)."""

    name: str
    label: str
    source: str
    versions: dict[str, str]
    keys: tuple[str, ...]
    gpus: int = 1  # the devices the run saw (Chapter 7's split needs two)
    merged: int = 0  # the runs `merged_from` lists


def index() -> list[StoredRun]:
    """Every stored file, parsed and checked, by name; raises StoredFiguresError naming a bad one."""
    runs = []
    for name in reference_files():
        try:
            data = load(name)
        except json.JSONDecodeError as e:
            raise StoredFiguresError(f"{name}: not JSON ({e})") from None
        if found := problems(data):
            raise StoredFiguresError(f"{name}: {'; '.join(found)}")
        source = str(data.get("source", "?"))
        keys = tuple(sorted(data["figures"]))
        gpus, merged = int(data.get("device_count") or 1), len(data.get("merged_from", []))
        runs.append(StoredRun(name, label(data), source, data["versions"], keys, gpus, merged))
    return runs


def duplicate_keys(runs: Sequence[StoredRun]) -> dict[str, list[str]]:
    """{key: the files that store it} for every key stored in more than one file (lookup would guess)."""
    where: dict[str, list[str]] = {}
    for run in runs:
        for key in run.keys:
            where.setdefault(key, []).append(run.name)
    return {key: names for key, names in where.items() if len(names) > 1}


def write_ncu_run(
    out_path: str | Path, info: Any, versions: dict, stdout: str, metrics: dict, key: str, source: str
) -> None:
    """Store a Nsight Compute script's profile as a run at `out_path` (scripts/ncu_chain.py, ncu_rows.py).

    `info` is the device's (`device`, `compute_capability`); the launch child's last JSON line in
    `stdout` is the profile's `size`; `metrics` are the kernels' counters.
    """
    size = json.loads([line for line in stdout.splitlines() if line.startswith("{")][-1])
    now = _dt.datetime.now(_dt.UTC)
    result = {
        "device": info.device,
        "compute_capability": list(info.compute_capability or ()),
        "date": now.date().isoformat(),
        "created": now.isoformat(timespec="seconds"),
        "versions": versions,
        "size": size,
        "metrics": metrics,
    }
    Path(out_path).write_text(dumps(from_ncu(result, key, source), sort_figures=False))


def from_ncu(result: dict[str, Any], key: str, source: str) -> dict[str, Any]:
    """A Nsight Compute script's result as a stored run: its header lifted, the rest the figures of `key`.

    `result` has `device` (a name, or 'NVIDIA H200 (cc 9.0)' as `scripts/ncu_compare.py` writes
    it), `compute_capability` when the device name has none, `date` (a date or an ISO time),
    `created` (optional), `versions`, and the profile itself (`metrics`, `size`, `patterns`,
    ...), which becomes `figures[key]` unchanged (Chapters 4 and 5).
    """
    profile = {
        k: v for k, v in result.items() if k not in ("device", "compute_capability", "date", "created")
    }
    versions = profile.pop("versions", {})
    name, cc = str(result.get("device", "")), list(result.get("compute_capability") or ())
    if m := re.fullmatch(r"(.+) \(cc (\d+)\.(\d+)\)", name):
        name, cc = m.group(1), [int(m.group(2)), int(m.group(3))]
    if len(cc) != 2:
        raise StoredFiguresError(f"{source}: device {name!r} has no compute capability: not a GPU profile")
    stamp = str(result.get("date", ""))
    data = {
        "device": name,
        "compute_capability": cc,
        "date": stamp[:10],
        "created": result.get("created") or stamp,
        "mode": "gpu",
        "source": source,
        "versions": versions,
        "figures": {key: profile},
    }
    if found := problems(data):
        raise StoredFiguresError(f"{source}: {'; '.join(found)}")
    return data


def _what(data: dict[str, Any]) -> str:
    """A run's own description for `merged_from`: its source and the notebooks it ran."""
    ran = [Path(n["notebook"]).stem for n in data.get("notebooks", []) if "notebook" in n]
    return f"{data.get('source', '?')} on {', '.join(ran)}" if ran else str(data.get("source", "?"))


def merge(runs: Sequence[tuple[str, dict[str, Any]]], what: Sequence[str] = ()) -> dict[str, Any]:
    """One stored run from `runs` [(file name, data)] of one machine, `merged_from` written (all chapters).

    Refuses (StoredFiguresError) a run not in the reference format, runs whose device or
    versions differ (one header must be true of every figure), and a key two runs store with
    different figures. The header is the newest run's; `what[i]` describes run i in
    `merged_from` (default: its source and notebooks); a run merged before brings its entries.
    """
    if len(runs) < 2:
        raise StoredFiguresError("merge needs at least two runs")
    for name, data in runs:
        if found := problems(data):
            raise StoredFiguresError(f"{name}: {'; '.join(found)}")
    first_name, first = runs[0]
    for name, data in runs[1:]:
        for field in SAME_RUN:
            mine, theirs = first.get(field), data.get(field)
            if mine != theirs:
                if field == "versions" and isinstance(mine, dict) and isinstance(theirs, dict):
                    differ = sorted(k for k in {*mine, *theirs} if mine.get(k) != theirs.get(k))
                    mine, theirs = ({k: v.get(k) for k in differ} for v in (mine, theirs))
                raise StoredFiguresError(
                    f"{first_name} and {name} are not runs of one machine and software: {field} "
                    f"{mine!r} against {theirs!r}; store them as separate files"
                )
    figures: dict[str, Any] = {}
    owner: dict[str, str] = {}
    clashes = []
    for name, data in runs:
        for key, value in data["figures"].items():
            if key in figures and figures[key] != value:
                clashes.append(f"{key} ({owner[key]} and {name})")
            figures.setdefault(key, value)
            owner.setdefault(key, name)
    if clashes:
        raise StoredFiguresError(
            f"{len(clashes)} key(s) stored with different figures: {', '.join(clashes)}; keep one of "
            "each (a rerun that replaces figures goes in its own file, and the old keys leave theirs)"
        )
    merged_from = []
    for i, (name, data) in enumerate(runs):
        if data.get("merged_from"):
            merged_from += data["merged_from"]
        else:
            text = what[i] if i < len(what) else _what(data)
            merged_from.append({"created": data.get("created", data["date"]), "file": name, "what": text})
    newest = max((data for _, data in runs), key=lambda d: str(d.get("created", d["date"])))
    skip = ("figures", "merged_from", "notebooks", "source", "superseded")
    header = {k: v for k, v in newest.items() if k not in skip}
    sources = list(dict.fromkeys(str(d.get("source", "?")) for _, d in runs))
    out = {**header, "source": "; ".join(sources), "merged_from": merged_from, "figures": figures}
    superseded = {k: v for n, d in runs for k, v in d.get("superseded", {}).items() if owner.get(k) == n}
    if superseded:  # each note stays with the figure it describes
        out["superseded"] = superseded
    notebooks = [n for _, d in runs for n in d.get("notebooks", [])]
    if notebooks:
        out["notebooks"] = notebooks
    return out


def merge_files(paths: Sequence[Path], out: Path, what: Sequence[str] = ()) -> dict[str, Any]:
    """`merge` of the files at `paths`, written to `out` (may be one of them): `cudalearn reference merge`."""
    data = merge([(Path(path).name, _read_json(Path(path))) for path in paths], what)
    Path(out).write_text(dumps(data, sort_figures=False))
    return data


def adopt(new: Path, folder: Path, replace_device: bool = False) -> dict[str, list[str]]:
    """Store the run `new` in `folder`; its keys leave the older files there (`cudalearn reference adopt`).

    A rerun replaces figures: each older file that stored one of its keys loses that figure and
    its `superseded` note, and records under `replaced` {key: the new file's name and date}, so
    the history stays readable; a file left with no figures is deleted. The new file is written
    first, so a failure part-way loses no figure. Refuses (StoredFiguresError, nothing changed) a
    `new` not in the reference format, a name already taken by another file, and a run that would
    replace figures of a later date, or of another device unless `replace_device` (a whole chapter
    rerun on another GPU: its `replaced` notes then name the new device, and every figure still
    carries its own). Returns {older file: the keys it gave up}.
    """
    data = _read_run(Path(new))
    folder, target = Path(folder), Path(folder) / Path(new).name
    if target.exists() and target.resolve() != Path(new).resolve():
        raise StoredFiguresError(f"{target.name} is already stored: give the new run another name")
    olds = {}
    for path in sorted(folder.glob("*.json")):
        if path.name == target.name:
            continue
        old = _read_run(path)
        gone = sorted(set(old["figures"]) & set(data["figures"]))
        if not gone:
            continue
        if old["device"] != data["device"] and not replace_device:
            raise StoredFiguresError(
                f"{path.name} holds {len(gone)} of these keys from {old['device']}, not {data['device']}: "
                "a chapter's figures come from one device; not adopted (--replace-device replaces them all)"
            )
        if str(old.get("created", old["date"])) > str(data.get("created", data["date"])):
            raise StoredFiguresError(f"{path.name} is newer than {target.name}: it would lose newer figures")
        olds[path] = (old, gone)
    if Path(new).resolve() != target.resolve():
        target.write_text(dumps(data, sort_figures=False))
    moved: dict[str, list[str]] = {}
    for path, (old, gone) in olds.items():
        moved[path.name] = gone
        for key in gone:
            del old["figures"][key]
            old.get("superseded", {}).pop(key, None)
            other = f", {data['device']}" if old["device"] != data["device"] else ""
            old.setdefault("replaced", {})[key] = f"{target.name} ({data['date']}{other})"
        if "superseded" in old and not old["superseded"]:
            del old["superseded"]
        if old["figures"]:
            path.write_text(dumps(old, sort_figures=False))
        else:
            path.unlink()
    return moved


def _read_json(path: Path) -> Any:
    """The JSON in `path`; StoredFiguresError naming the file when it cannot be read or parsed."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise StoredFiguresError(f"{path}: cannot read it ({e})") from None


def _read_run(path: Path) -> dict[str, Any]:
    """A stored run read from `path`, checked; StoredFiguresError naming the file otherwise."""
    data = _read_json(path)
    if found := problems(data):
        raise StoredFiguresError(f"{path.name}: {'; '.join(found)}")
    return data
