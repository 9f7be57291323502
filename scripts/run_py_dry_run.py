"""run.py's own setup commands, each through `pip install --dry-run` (nothing installed; README "Which CUDA").

    CUDALEARN_CUDA=cu13 python scripts/run_py_dry_run.py course   # as on a Linux GPU with driver 580+

setup() runs as it would on this machine (its driver, or the choice CUDALEARN_CUDA names), with a throwaway
.venv and this Python's pip resolving each step against the configured package index; the last line of
each step's pip report is printed: how many packages, and the torch and CUDA wheels it chose.
"""

import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(command: str) -> None:
    """Drive run.setup(command) with pip in dry-run mode and print what each step resolved to."""
    spec = importlib.util.spec_from_file_location("cudalearn_run_py_dry", ROOT / "run.py")
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    tmp = Path(tempfile.mkdtemp(prefix="run_py_dry_"))
    run.VENV, run.PY, run.STAMP = tmp, Path(sys.executable), tmp / ".stamp"

    def dry(cmd, **kw):
        """run._run's stand-in: the same pip command with --dry-run and a report, then what it chose."""
        cmd, report = [str(c) for c in cmd], tmp / "report.json"
        at = cmd.index("install") + 1
        cmd[at:at] = ["--dry-run", "--ignore-installed", "-q", "--report", str(report)]
        run._say("$ " + " ".join(cmd[3:]))
        rc = subprocess.call(cmd, cwd=run.ROOT, stdout=subprocess.DEVNULL)
        if rc == 0:
            got = {
                i["metadata"]["name"].lower(): i["metadata"]["version"]
                for i in json.loads(report.read_text())["install"]
            }
            cuda = [
                f"{n}=={v}"
                for n, v in sorted(got.items())
                if n.startswith(("cuda-toolkit", "nvidia-cuda-nvrtc"))
            ]
            run._say(f"resolved {len(got)} packages: torch=={got.get('torch', '(kept)')} {' '.join(cuda)}")
        return rc

    run._run = dry
    try:
        run.setup(command)
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "course")
