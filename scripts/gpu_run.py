#!/usr/bin/env python3
"""Run every book and solution notebook, then every scripts/bench_*.py, in `gpu` mode; store the figures.

The book's notebooks are its chapters and their deep dives (`book/05a-tuned-network.ipynb`), in
file-name order (`cudalearn.course.book`).

    CUDALEARN_MODE=gpu python3 scripts/gpu_run.py --out src/cudalearn/data/reference/h200.json

Each notebook runs in its own process, its code cells executed in order in
one namespace (IPython magics, which only the Colab branch of the setup
cell uses, are skipped), so the script needs no Jupyter kernel: the GPU
machine only needs the course's runtime packages. Every
`timing.measure()` and `reference.figures()` call appends to the output
file through `CUDALEARN_RECORD`; the file gets the device, date and
versions once, and a list of the notebooks with their status and time.
Exits non-zero when a notebook fails.
"""

from __future__ import annotations

import argparse
import json
import linecache
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

try:
    from cudalearn.measure import reference
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, str(ROOT / "src"))
    from cudalearn.measure import reference


def cell_sources(path: Path) -> list[str]:
    """The code cells of a notebook, with IPython magic lines replaced by `pass`."""
    nb = json.loads(path.read_text())
    out = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        lines = []
        for line in src.splitlines():
            stripped = line.lstrip()
            if stripped.startswith(("%", "!")):
                line = line[: len(line) - len(stripped)] + "pass  # IPython magic skipped"
            lines.append(line)
        out.append("\n".join(lines))
    return out


def exec_notebook(path: Path) -> int:
    """Execute one notebook's code cells in this process (the child side of the run)."""
    import matplotlib

    matplotlib.use("Agg")
    ns = {"__name__": "__main__"}
    for i, src in enumerate(cell_sources(path)):
        t0 = time.time()
        name = f"{path.name}[cell {i}]"
        # register the cell's text, so inspect.getsource works on what it defines (show_source, the tracer)
        linecache.cache[name] = (len(src), None, src.splitlines(keepends=True), name)
        try:
            exec(compile(src, name, "exec"), ns)
        except Exception:
            traceback.print_exc()
            print(f"FAILED {path.name} cell {i}", file=sys.stderr)
            return 1
        finally:
            import matplotlib.pyplot as plt

            plt.close("all")
        print(f"  {path.name} cell {i}: {time.time() - t0:.2f} s", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="JSON file to store the figures in")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per notebook")
    parser.add_argument("--exec", type=Path, help=argparse.SUPPRESS)  # child process
    parser.add_argument(
        "notebooks",
        nargs="*",
        type=Path,
        help="notebooks and bench scripts (default: all of book/, solutions/, scripts/bench_*.py)",
    )
    args = parser.parse_args()
    if args.exec:
        return exec_notebook(args.exec)
    if args.out is None:
        parser.error("--out is required")
    if args.notebooks:
        notebooks = [p.resolve() for p in args.notebooks]  # in the order given
        benches = []
    else:
        notebooks = sorted(ROOT.glob("book/*.ipynb")) + sorted(ROOT.glob("solutions/*.ipynb"))
        benches = sorted(ROOT.glob("scripts/bench_*.py"))
    out = args.out.resolve()
    partial = out.with_suffix(".partial.json")
    partial.unlink(missing_ok=True)
    env = {
        **os.environ,
        "CUDALEARN_MODE": "gpu",
        "CUDALEARN_RECORD": str(partial),
        "CUDALEARN_STRICT_PROSE": "1",  # a sentence its fresh figures contradict fails the run (stated.check)
        "MPLBACKEND": "Agg",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])),
    }
    runs, failed = [], 0
    for nb in notebooks + benches:
        t0 = time.time()
        print(f"== {nb}", flush=True)
        cmd = (
            [sys.executable, __file__, "--exec", str(nb)]
            if nb.suffix == ".ipynb"
            else [sys.executable, str(nb)]
        )
        try:
            rc = subprocess.run(cmd, env=env, cwd=nb.parent, timeout=args.timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        status = "ok" if rc == 0 else f"failed ({rc})"
        failed += rc != 0
        runs.append(
            {
                "notebook": str(nb.resolve().relative_to(ROOT)),
                "status": status,
                "seconds": round(time.time() - t0, 1),
            }
        )
        print(f"== {nb}: {status} in {runs[-1]['seconds']} s", flush=True)
    data = json.loads(partial.read_text()) if partial.exists() else {"figures": {}}
    data["source"] = "scripts/gpu_run.py"
    data["notebooks"] = runs
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(reference.dumps(data))  # the stored files' one format
    partial.unlink(missing_ok=True)
    print(f"stored {len(data['figures'])} figures from {len(runs)} notebooks in {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
