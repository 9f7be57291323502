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
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / ("python.exe" if os.name == "nt" else "python")
STAMP = VENV / ".cudalearn-installed"
#: what each command installs, in steps (a line per step with its time): (title, pyproject extra); the course
#: step also gets the CUDA extra (cu12 or cu13) that `plan()` picks for this machine
COURSE = ("the course: numba, numba-cuda with its CUDA NVRTC/NVVM, torch, JupyterLab, Triton", "course")
CI_TOOLS = ("CI's and instructors' tools: pytest, nbval, ruff, nbgrader, Playwright, Sphinx", "test,site")
STEPS = {"course": [COURSE], "test": [COURSE, CI_TOOLS]}
#: the Jupyter configuration `run.py course` starts JupyterLab with (no news toast, no nbgrader UI)
JUPYTER_CONFIG = ROOT / "jupyter-config"
#: PyTorch's own index of CPU-only wheels: without an NVIDIA GPU, torch comes from here (about 200 MB)
#: instead of the package registry's Linux wheel, which is the CUDA 13 build and pulls GBs of CUDA libraries
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: PyTorch's index of its CUDA 12.6 builds: torch for a Linux driver that runs CUDA 12 but not CUDA 13
TORCH_CU12_INDEX = "https://download.pytorch.org/whl/cu126"
#: the oldest Linux driver each CUDA major runs on (NVIDIA, CUDA Toolkit Release Notes and CUDA
#: Compatibility, "Minor Version Compatibility": CUDA 13.x needs >= 580, CUDA 12.x >= 525)
MIN_DRIVER = {13: 580, 12: 525}
#: constraints.txt's pins that belong to its CUDA 12 set (and triton, which torch's CUDA builds pin
#: themselves): a GPU's torch replaces them, with constraints-cu13.txt's pins for CUDA 13
CUDA_PINS = ("cuda-bindings", "cuda-toolkit", "nvidia-", "triton")
#: how to choose by hand: CUDALEARN_CUDA=cpu (CPU torch, CUDA 12 NVRTC), cu12 or cu13
CHOICE_ENV = "CUDALEARN_CUDA"


def _say(msg: str) -> None:
    print(f"[run.py] {msg}", flush=True)


def _run(cmd: list[str], **kw) -> int:
    _say("$ " + " ".join(str(c) for c in cmd))
    return subprocess.call([str(c) for c in cmd], cwd=ROOT, **kw)


def has_nvidia_gpu() -> bool:
    """Whether this machine has an NVIDIA driver (its /proc entry on Linux, nvidia-smi elsewhere)."""
    import shutil

    return Path("/proc/driver/nvidia").exists() or shutil.which("nvidia-smi") is not None


def driver_version(proc: Path = Path("/proc/driver/nvidia/version")) -> str | None:
    """The NVIDIA driver's version, e.g. '580.65.06' (/proc/driver/nvidia/version, else nvidia-smi)."""
    import re

    try:
        found = re.search(
            r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)",
            proc.read_text(),
        )
        if found:
            return found.group(1)
    except OSError:
        pass
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[0] if out and out[0][:1].isdigit() else None


class Plan(NamedTuple):
    """What the course step installs for this machine's CUDA, and the line that says why."""

    extra: str  #: cudalearn's CUDA extra: "cu12" or "cu13" (numba-cuda's NVRTC/NVVM of that CUDA major)
    torch_index: str | None  #: PyTorch's index that torch comes from first, or None: the package registry
    torch_build: str | None  #: the local version of that build, e.g. "cpu" or "cu126"
    why: str


def plan(
    platform: str | None = None, gpu: bool | None = None, driver: str | None = None, choice: str | None = None
) -> Plan:
    """Which torch build and CUDA extra fit this machine: no NVIDIA GPU: the CPU build and cu12; a Linux
    driver >= 580: the registry's torch (CUDA 13) and cu13; 525-579: PyTorch's CUDA 12 build and cu12.

    `choice` (default: $CUDALEARN_CUDA) overrides: cpu, cu12 or cu13. Exits with what to do when the
    driver's version cannot be read or is older than CUDA 12 needs."""
    platform = platform or sys.platform
    gpu = has_nvidia_gpu() if gpu is None else gpu
    choice = os.environ.get(CHOICE_ENV, "") if choice is None else choice
    cpu = Plan("cu12", TORCH_CPU_INDEX, "cpu", "")
    cu12 = Plan("cu12", TORCH_CU12_INDEX, "cu126", "")
    cu13 = Plan("cu13", None, None, "")
    if choice:
        chosen = {"cpu": cpu, "cu12": cu12, "cu13": cu13}.get(choice)
        if chosen is None:
            sys.exit(f"{CHOICE_ENV}={choice!r}: use cpu, cu12 or cu13")
        return chosen._replace(why=f"{CHOICE_ENV}={choice}: {_describe(chosen)}")
    if platform == "darwin":  # the registry's macOS torch has no CUDA; numba-cuda runs its simulator
        return Plan("cu12", None, None, "macOS: torch from the package registry (no CUDA build exists)")
    if not gpu:
        return cpu._replace(why=f"no NVIDIA GPU found: {_describe(cpu)}")
    if not platform.startswith("linux"):  # Windows: the registry's torch is its CPU build
        return Plan("cu12", None, None, f"{platform} with an NVIDIA GPU: torch from the package registry")
    driver = driver_version() if driver is None else driver
    try:
        major = int(driver.split(".")[0])
    except (AttributeError, ValueError):
        sys.exit(
            f"an NVIDIA GPU is here but its driver's version cannot be read ({driver!r}: neither "
            f"/proc/driver/nvidia/version nor nvidia-smi). Set {CHOICE_ENV}=cu13 (driver 580 or newer), "
            f"cu12 (driver 525 to 579) or cpu, and run again"
        )
    if major >= MIN_DRIVER[13]:
        return cu13._replace(why=f"NVIDIA driver {driver} (>= {MIN_DRIVER[13]}, CUDA 13): {_describe(cu13)}")
    if major >= MIN_DRIVER[12]:
        return cu12._replace(
            why=f"NVIDIA driver {driver} (CUDA 12: {MIN_DRIVER[12]}-{MIN_DRIVER[13] - 1}): {_describe(cu12)}"
        )
    return cpu._replace(
        why=f"NVIDIA driver {driver} is older than CUDA 12 needs ({MIN_DRIVER[12]}): {_describe(cpu)}; the "
        "course runs in sim mode (update the driver to use the GPU)"
    )


def _describe(p: Plan) -> str:
    """One plan in words, for the line setup prints."""
    torch = (
        f"torch's {p.torch_build} build from {p.torch_index}"
        if p.torch_index
        else ("torch from the package registry (its CUDA 13 build on Linux)")
    )
    return f"{torch}, with numba-cuda's CUDA {p.extra[2:]} NVRTC/NVVM (cudalearn[{p.extra}])"


def pinned(name: str, constraints: Path = ROOT / "constraints.txt") -> str | None:
    """The version constraints.txt pins `name` to, or None."""
    for line in constraints.read_text().splitlines():
        if line.split("==")[0].strip().lower() == name:
            return line.split("==", 1)[1].strip()
    return None


def constraints_for(p: Plan, into: Path) -> Path:
    """The constraints file for plan `p`: constraints.txt itself with a CPU torch (the set verified here);
    for a GPU's torch, written into `into`: constraints.txt without its CUDA 12 pins, plus
    constraints-cu13.txt's for cu13 (PyTorch's CUDA 12 build pins its own CUDA 12 wheels)."""
    if p.torch_build == "cpu" or p.torch_index is None and p.extra == "cu12":
        return ROOT / "constraints.txt"
    keep = [
        line
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if not line.lower().startswith(CUDA_PINS)
    ]
    if p.extra == "cu13":
        keep += (ROOT / "constraints-cu13.txt").read_text().splitlines()
    path = into / f"constraints-{p.torch_build or p.extra}.txt"
    path.write_text("\n".join(keep) + "\n")
    return path


def reachable(url: str, timeout: float = 10.0) -> bool:
    """Whether `url` answers within `timeout` seconds (pip would retry for minutes before failing)."""
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def torch_first(pip: list, p: Plan, constraints: Path) -> list | None:
    """The pip command that installs plan `p`'s build of the pinned torch first, by its local version
    (2.13.0+cpu), or None: torch comes with the course from the registry. When PyTorch's index cannot be
    reached, one line says so and the command looks in pip's configured sources only (a mirror)."""
    version = pinned("torch")
    if version is None or p.torch_index is None:
        return None
    # named by its local version, so the registry's 2.13.0 (the CUDA 13 build) is never taken instead;
    # an extra index: torch's dependencies still come from the registry, at their pinned versions
    want = f"torch=={version}+{p.torch_build}"
    if reachable(p.torch_index + "/torch/"):
        return [*pip, "-c", constraints, "--extra-index-url", p.torch_index, want]
    _say(
        f"PyTorch's wheel index {p.torch_index} cannot be reached: looking for {want} in pip's configured "
        "sources only"
        + (
            ", else the package registry's torch (on Linux its CUDA 13 build)"
            if p.torch_build == "cpu"
            else ""
        )
    )
    return [*pip, "-c", constraints, want]


def torch_failed(p: Plan) -> Plan:
    """What to do when plan `p`'s torch did not install: the CPU build's plan falls back to the registry's
    torch with cu13 (one line); PyTorch's CUDA 12 build has no fallback here: exits with what to do."""
    if p.torch_build == "cpu":
        _say(
            "torch's CPU build did not install: installing torch from the package registry instead (on Linux "
            "its CUDA 13 build, a larger download) with numba-cuda's CUDA 13 NVRTC/NVVM (cudalearn[cu13])"
        )
        return Plan("cu13", None, None, "the package registry's torch")
    sys.exit(
        f"torch's {p.torch_build} build did not install from {p.torch_index} (see pip's message above). This "
        f"NVIDIA driver runs CUDA 12, not the registry's torch (a CUDA 13 build: driver {MIN_DRIVER[13]} or "
        f"newer). Do one of: update the NVIDIA driver to {MIN_DRIVER[13]} or newer; run again where "
        f"{p.torch_index} can be reached; or set {CHOICE_ENV}=cpu (torch's CPU build, the course in sim mode)"
    )


def _step(n: int, total: int, title: str, cmd: list) -> bool:
    """Run one install step with pip's own output, between a line that names it and one with its time."""
    _say(f"step {n}/{total}: {title}")
    t = time.time()
    ok = _run(cmd) == 0
    _say(f"step {n}/{total} {'done' if ok else 'FAILED'} in {time.time() - t:.0f} s")
    return ok


def installed(want: str) -> tuple[set[str], Plan | None]:
    """The extras .venv holds for the pinned set whose hash is `want`, and the plan it was installed with
    (empty and None when stale or missing): adding CI's tools later keeps that torch and its constraints."""
    try:
        stamp = json.loads(STAMP.read_text())
    except (OSError, ValueError):
        return set(), None
    if stamp.get("hash") != want or not PY.exists():
        return set(), None
    cuda = stamp.get("cuda")
    return set(stamp.get("extras", [])), Plan(*cuda, "as .venv was installed") if cuda else None


def setup(command: str = "course") -> None:
    """Create .venv and install what `command` needs with the pinned versions, unless already done."""
    want = hashlib.sha256(
        b"".join(
            (ROOT / f).read_bytes() for f in ("constraints.txt", "constraints-cu13.txt", "pyproject.toml")
        )
    ).hexdigest()
    have, cuda = installed(want)
    cuda = cuda or plan()
    _say(f"CUDA: {cuda.why}")
    wanted = [
        (title, f"{extra},{cuda.extra}" if extra == "course" else extra) for title, extra in STEPS[command]
    ]
    steps = [(title, extra) for title, extra in wanted if not set(extra.split(",")) <= have]
    if not steps:
        _say(".venv is up to date")
        return
    t0 = time.time()
    if not PY.exists():
        if _run([sys.executable, "-m", "venv", VENV]) != 0:
            sys.exit("could not create .venv (on Debian/Ubuntu: apt install python3-venv)")
    pip = [PY, "-m", "pip", "install", "--disable-pip-version-check"]
    first = torch_first(pip, cuda, constraints_for(cuda, VENV)) if not have else None
    total = len(steps) + (first is not None)
    n = 0
    if first is not None:
        n += 1
        if not _step(n, total, f"torch, its {cuda.torch_build} build", first):
            cuda = torch_failed(cuda)
            steps = [(t, e.replace(",cu12", ",cu13") if e.startswith("course,") else e) for t, e in steps]
    for title, extra in steps:
        n += 1
        cmd = pip + ["-c", constraints_for(cuda, VENV), "-e", f".[{extra}]"]
        if cuda.extra == "cu13" and extra.startswith("course,"):
            # `===`: the registry's build itself (CUDA 13), never a local build a mirror may hold (+cpu)
            cmd.append(f"torch==={pinned('torch')}")
        if not _step(n, total, title, cmd):
            sys.exit("pip install failed; see the messages above")
        have |= set(extra.split(","))
        STAMP.write_text(json.dumps({"hash": want, "extras": sorted(have), "cuda": list(cuda[:3])}))
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
