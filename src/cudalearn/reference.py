"""Reference results measured on a real GPU, stored as data in the package (all chapters).

`scripts/gpu_run.py` runs every book and solution notebook in `gpu` mode
with `CUDALEARN_RECORD` pointing at a JSON file; each `timing.measure()` or
`record()` call appends its figures there. The script then stores the file
under `src/cudalearn/data/reference/` with the device, date and versions.
Under `sim`, notebooks show these stored figures, labelled with their
device and date, instead of simulator times. Nothing here is typed in.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

RECORD_ENV = "CUDALEARN_RECORD"
DATA_PACKAGE = "cudalearn.data.reference"


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    import cudalearn

    out = {"python": platform.python_version(), "cudalearn": cudalearn.__version__}
    for dist in ("numba", "numba-cuda", "numpy", "llvmlite", "torch"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    return out


def run_header() -> dict[str, Any]:
    """Device, date and versions of this process, as stored with every reference file (Chapter 0)."""
    from cudalearn import device

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
        "versions": _versions(),
    }
    if info.mode == "gpu":
        from cudalearn.doctor import driver_version

        head["versions"]["cuda_driver"] = driver_version() or "unknown"
    return head


def recording() -> Path | None:
    """The file figures are being recorded to, or None (set by scripts/gpu_run.py)."""
    path = os.environ.get(RECORD_ENV)
    return Path(path) if path else None


def record(key: str, figures: dict[str, Any]) -> dict[str, Any]:
    """Store `figures` under `key` when recording on a GPU; return them unchanged (all chapters)."""
    from cudalearn import device

    path = recording()
    if path is None or device.mode() != "gpu":
        return figures
    data = json.loads(path.read_text()) if path.exists() else {**run_header(), "figures": {}}
    data["figures"][key] = figures
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return figures


def reference_files() -> list[str]:
    """Names of the stored reference result files, e.g. ['h200.json'] (all chapters)."""
    root = resources.files(DATA_PACKAGE)
    return sorted(p.name for p in root.iterdir() if p.name.endswith(".json"))


def load(name: str | None = None) -> dict[str, Any]:
    """One stored reference result file (default: the first, `h200.json` if present)."""
    files = reference_files()
    if not files:
        return {"device": None, "figures": {}}
    if name is None:
        name = "h200.json" if "h200.json" in files else files[0]
    return json.loads(resources.files(DATA_PACKAGE).joinpath(name).read_text())


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


def label(data: dict[str, Any]) -> str:
    """'NVIDIA H200 (sm_90), 2026-11-29, numba-cuda 0.30.4': how a stored figure is labelled."""
    if not data.get("device"):
        return "no reference GPU run stored"
    cc = data.get("compute_capability") or []
    sm = f" (sm_{cc[0]}{cc[1]})" if len(cc) == 2 else ""
    nc = data.get("versions", {}).get("numba-cuda", "?")
    return f"{data['device']}{sm}, {data.get('date', '?')}, numba-cuda {nc}"


def figures(key: str, measure: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any] | None, str]:
    """(figures, where they come from): `measure()` on a GPU (recorded), the stored reference otherwise.

    For figures that `timing.measure` does not cover (Chapter 0's launch
    without synchronisation, say). Under the simulator `measure` is not
    called and the figures are None when no reference run stored them.
    """
    from cudalearn import device

    if device.mode() == "gpu":
        values = record(key, measure())
        return values, f"measured now on {device.info().device}"
    stored, data = lookup(key)
    if stored is None:
        return None, "no reference GPU run is stored for this figure yet (this machine has no GPU)"
    return stored, f"reference run on {label(data)} (this machine has no GPU)"
