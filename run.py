#!/usr/bin/env python3
"""The course's two commands: set up and open the course, or set up and run the tests.

    python3 run.py course   # creates .venv, installs a student's pinned set, opens JupyterLab on the course
    python3 run.py test     # creates .venv, installs the pinned set with CI's tools, runs every check CI runs

Only the standard library is used here, so it works on a fresh clone.
Setup is skipped when .venv already holds the set that constraints.txt and
pyproject.toml describe (`test` adds CI's tools to a student's .venv).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / ("python.exe" if os.name == "nt" else "python")
STAMP = VENV / ".cudalearn-installed"
#: what each command installs, in steps (a line per step with its time): (title, pyproject extra)
COURSE = ("the course: numba, numba-cuda with CUDA 12 NVRTC/NVVM, torch, JupyterLab, Triton", "course")
CI_TOOLS = ("CI's and instructors' tools: pytest, nbval, ruff, nbgrader, Playwright, Sphinx", "test,site")
STEPS = {"course": [COURSE], "test": [COURSE, CI_TOOLS]}
#: the Jupyter configuration `run.py course` starts JupyterLab with (no news toast, no nbgrader UI)
JUPYTER_CONFIG = ROOT / "jupyter-config"
#: PyTorch's own index of CPU-only wheels: without an NVIDIA GPU, torch comes from here (about 200 MB)
#: instead of the package registry's Linux wheel, which is the CUDA build and pulls GBs of CUDA libraries
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _say(msg: str) -> None:
    print(f"[run.py] {msg}", flush=True)


def _run(cmd: list[str], **kw) -> int:
    _say("$ " + " ".join(str(c) for c in cmd))
    return subprocess.call([str(c) for c in cmd], cwd=ROOT, **kw)


def has_nvidia_gpu() -> bool:
    """Whether this machine has an NVIDIA driver (its /proc entry on Linux, nvidia-smi elsewhere)."""
    import shutil

    return Path("/proc/driver/nvidia").exists() or shutil.which("nvidia-smi") is not None


def pinned(name: str, constraints: Path = ROOT / "constraints.txt") -> str | None:
    """The version constraints.txt pins `name` to, or None."""
    for line in constraints.read_text().splitlines():
        if line.split("==")[0].strip().lower() == name:
            return line.split("==", 1)[1].strip()
    return None


def reachable(url: str, timeout: float = 10.0) -> bool:
    """Whether `url` answers within `timeout` seconds (pip would retry for minutes before failing)."""
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def torch_cpu_first(pip: list, gpu: bool | None = None, index: str = TORCH_CPU_INDEX) -> list | None:
    """The pip command that installs the pinned torch's CPU build first, or None (with a GPU, on macOS, or
    when PyTorch's CPU index cannot be reached: then the registry's build is used, and one line says so)."""
    version = pinned("torch")
    if version is None or sys.platform == "darwin":  # macOS wheels on the registry have no CUDA already
        return None
    if has_nvidia_gpu() if gpu is None else gpu:
        return None
    if not reachable(index + "/torch/"):
        _say(
            f"PyTorch's CPU wheel index ({index}) cannot be reached: installing torch from the package "
            "registry instead (on Linux that is the CUDA build, a larger download)"
        )
        return None
    # an extra index: torch's dependencies still come from the registry, at their pinned versions, and
    # 2.13.0+cpu is preferred to the registry's 2.13.0 (a local version sorts after its public one)
    return [*pip, "-c", "constraints.txt", "--extra-index-url", index, f"torch=={version}"]


def _step(n: int, total: int, title: str, cmd: list) -> bool:
    """Run one install step with pip's own output, between a line that names it and one with its time."""
    _say(f"step {n}/{total}: {title}")
    t = time.time()
    ok = _run(cmd) == 0
    _say(f"step {n}/{total} {'done' if ok else 'FAILED'} in {time.time() - t:.0f} s")
    return ok


def installed_extras(want: str) -> set[str]:
    """The extras .venv holds for the pinned set whose hash is `want` (empty when stale or missing)."""
    try:
        stamp = json.loads(STAMP.read_text())
    except (OSError, ValueError):
        return set()
    return set(stamp.get("extras", [])) if stamp.get("hash") == want and PY.exists() else set()


def setup(command: str = "course") -> None:
    """Create .venv and install what `command` needs with the pinned versions, unless already done."""
    want = hashlib.sha256(
        (ROOT / "constraints.txt").read_bytes() + (ROOT / "pyproject.toml").read_bytes()
    ).hexdigest()
    have = installed_extras(want)
    steps = [(title, extra) for title, extra in STEPS[command] if not set(extra.split(",")) <= have]
    if not steps:
        _say(".venv is up to date")
        return
    t0 = time.time()
    if not PY.exists():
        if _run([sys.executable, "-m", "venv", VENV]) != 0:
            sys.exit("could not create .venv (on Debian/Ubuntu: apt install python3-venv)")
    pip = [PY, "-m", "pip", "install", "--disable-pip-version-check"]
    cpu_torch = torch_cpu_first(pip) if not have else None
    total = len(steps) + (cpu_torch is not None)
    n = 0
    if cpu_torch is not None:
        n += 1
        if not _step(n, total, "torch, its CPU build (no NVIDIA GPU here)", cpu_torch):
            _say("the CPU build of torch did not install: installing torch from the package registry instead")
    for title, extra in steps:
        n += 1
        if not _step(n, total, title, pip + ["-c", "constraints.txt", "-e", f".[{extra}]"]):
            sys.exit("pip install failed; see the messages above")
        have |= set(extra.split(","))
        STAMP.write_text(json.dumps({"hash": want, "extras": sorted(have)}))
    _say(f"setup took {time.time() - t0:.0f} s")


def test() -> int:
    """Every check CI runs: labs in sync, notebooks clean, lint, unit tests, notebooks under nbval."""
    env = {**os.environ, "CUDALEARN_MODE": os.environ.get("CUDALEARN_MODE", "sim"), "MPLBACKEND": "Agg"}
    steps = [
        [BIN / "cudalearn", "labs", "check"],
        [BIN / "cudalearn", "clean", "--check"],
        [BIN / "ruff", "check", "src", "tests", "scripts", "book", "solutions", "labs", "run.py"],
        [BIN / "ruff", "format", "--check", "src", "tests", "scripts", "run.py"],
        [
            PY,
            "-m",
            "pytest",
            "tests",
            "book",
            "solutions",
            "-n",  # every core (pytest-xdist): a test file, a notebook or a lab's corpus per worker at a time
            "auto",
            "--dist",
            "loadfile",
            "--nbval-lax",  # compares the cells whose first line is `# NBVAL_CHECK_OUTPUT`
            "--nbval-sanitize-with",
            "tests/nbval-sanitize.cfg",
            "--nbval-cell-timeout=600",
            "-p",
            "no:cacheprovider",
        ],
    ]
    failed, spent = [], []
    t0 = time.time()
    for step in steps:
        name = " ".join(str(s.name if isinstance(s, Path) else s) for s in step[:3])
        t = time.time()
        if _run(step, env=env) != 0:
            failed.append(name)
        spent.append((name, time.time() - t))
    _say(f"tests took {time.time() - t0:.0f} s:")
    for name, seconds in spent:
        _say(f"  {seconds:6.0f} s  {name}")
    if failed:
        _say("FAILED: " + "; ".join(failed))
        return 1
    _say("all checks passed")
    return 0


def course_command(extra: list[str], root: Path = ROOT, bindir: Path = BIN) -> list[str]:
    """The argv that opens JupyterLab on the course in `root`, at chapter 0; the browser test runs it too.

    As root (containers, cloud notebooks) JupyterLab refuses to start without --allow-root: it is passed
    then, and only then."""
    as_root = os.name == "posix" and os.geteuid() == 0
    return [
        str(bindir / "jupyter"),
        "lab",
        f"--ServerApp.root_dir={root}",
        *(["--allow-root"] if as_root else []),
        str(root / "book" / "00-setup.ipynb"),
        *extra,
    ]


def course_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment JupyterLab starts in: `environ` with jupyter-config/ first on JUPYTER_CONFIG_PATH.

    jupyter-config/ turns off JupyterLab's news toast and update check and nbgrader's server and lab
    extensions (an instructor's .venv has nbgrader; a student's has not), so students see the same lab."""
    env = dict(os.environ if environ is None else environ)
    rest = env.get("JUPYTER_CONFIG_PATH")
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join([str(JUPYTER_CONFIG), *([rest] if rest else [])])
    return env


def course(extra: list[str]) -> int:
    """Open JupyterLab on the course, at chapter 0."""
    return _run(course_command(extra), env=course_env())


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("course", "test"):
        print(__doc__)
        return 2
    setup(argv[0])
    return test() if argv[0] == "test" else course(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
