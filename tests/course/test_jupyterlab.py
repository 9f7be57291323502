"""JupyterLab in a real browser (issues 8, 31): the README's `python3 run.py course` works end to end.

The server is started with the very argv and environment `run.py course` builds (run.course_command,
run.course_env: `--allow-root` when, and only when, the test runs as root, as CI's container does;
jupyter-config/ first on JUPYTER_CONFIG_PATH), headless, on a free local port, on a temporary copy of
chapter 0 and lab 0 (so autosave can never write outputs into the repository's notebooks), with empty
Jupyter and IPython directories (so nothing in ~/.jupyter leaks in). Chromium opens chapter 0, runs its
first cells with Shift+Enter, and the mode line `cudalearn.setup()` prints must appear with
`mode=sim`; then lab 0, whose first check fails on the stub: its output must be the check's message in
at most 10 lines. A student's lab has no news toast and no nbgrader (its server extensions log
nothing, its Validate button is absent) even where nbgrader is installed, as it is in CI's .venv. The
server is always shut down; screenshots are kept in the test's tmp dir.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from browser import browser, collect_errors, require_chromium

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = Path("book") / "00-setup.ipynb"
LAB = Path("labs") / "00-setup.ipynb"
MAX_LINES = 10  # a failing check's output in the browser
START_S, RUN_S = 90, 120  # bounds: the server answering, the first cells' output appearing


def _run_py():
    """run.py as a module (it is standard-library only and does nothing on import)."""
    spec = importlib.util.spec_from_file_location("cudalearn_run_py", ROOT / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _jupyter_env(tmp: Path, run) -> dict[str, str]:
    """run.py's environment for JupyterLab, in simulator mode, with Jupyter/IPython dirs of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER") and k != "MPLBACKEND"}
    names = ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR")
    dirs = {name: tmp / name.lower() for name in names}
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    env.update({k: str(v) for k, v in dirs.items()})
    env["CUDALEARN_MODE"] = "sim"
    return run.course_env(env)


def _get(url: str, token: str, timeout: float = 5) -> int:
    req = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status


def _get_json(url: str, token: str, timeout: float = 10) -> dict:
    req = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def _stop(proc: subprocess.Popen) -> None:
    """Terminate the server (it shuts its kernels down), kill it and its process group after a timeout."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    if os.name == "posix":  # a kernel the server failed to stop; the group is this server's alone
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _kernel_argv0(server_pid: int) -> str | None:
    """argv[0] of the ipykernel the server started, or None when it cannot be seen."""
    psutil = pytest.importorskip("psutil")
    try:
        for child in psutil.Process(server_pid).children(recursive=True):
            cmd = child.cmdline()
            if any("ipykernel" in part for part in cmd):
                return cmd[0]
    except psutil.Error:
        pass
    return None


def test_run_py_course_opens_chapter0_in_jupyterlab_and_runs_it_under_the_simulator(tmp_path):
    t0 = time.monotonic()
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    require_chromium()
    # the environment under test: this Python's (.venv/bin under `run.py test`), or CUDALEARN_TEST_BIN,
    # e.g. the .venv/bin of a student's fresh `python3 run.py course`, which has no pytest or Playwright
    bindir = Path(os.environ.get("CUDALEARN_TEST_BIN") or Path(sys.executable).parent)
    if not (bindir / "jupyter").exists():
        pytest.skip(f"no jupyter in {bindir}: install the course extra (pip install -e '.[course]')")

    course = tmp_path / "course"
    repo_notebooks = {}
    for nb in (CHAPTER, LAB):
        (course / nb).parent.mkdir(parents=True)
        shutil.copy2(ROOT / nb, course / nb)
        repo_notebooks[nb] = (ROOT / nb).read_bytes()

    port, token = _free_port(), secrets.token_hex(16)
    headless = [
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
    ]
    run = _run_py()
    cmd = run.course_command(headless, root=course, bindir=bindir)
    as_root = os.name == "posix" and os.geteuid() == 0  # CI's container runs as root, as many others do
    assert ("--allow-root" in cmd) == as_root, f"run.py course as {'root' if as_root else 'a user'}: {cmd}"
    log_path, shot = tmp_path / "jupyterlab.log", tmp_path / "jupyterlab.png"
    base = f"http://127.0.0.1:{port}"
    errors: list[str] = []

    def why(msg: str) -> str:
        log = log_path.read_text(errors="replace")[-4000:] if log_path.exists() else "(no log)"
        console = "\n".join(errors[-20:]) or "(none)"
        return (
            f"{msg}\ncommand: {' '.join(cmd)}\nscreenshot: {shot}\n"
            f"browser console errors:\n{console}\nserver log (tail):\n{log}"
        )

    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=course,
            env=_jupyter_env(tmp_path, run),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=os.name == "posix",
        )
    try:
        deadline = time.monotonic() + START_S
        while True:
            if proc.poll() is not None:
                pytest.fail(why(f"JupyterLab exited with status {proc.returncode} before answering"))
            try:
                if _get(f"{base}/api/status", token) == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(why(f"JupyterLab did not answer /api/status within {START_S} s"))
            time.sleep(0.5)
        t_server = time.monotonic() - t0
        news = _get_json(f"{base}/lab/api/settings/@jupyterlab/apputils-extension:notification", token)
        fetch = news["schema"]["properties"]["fetchNews"]  # JupyterLab's default is "none": a toast asks
        assert fetch["default"] == "false", why(f"the news toast is not off: {fetch}")

        with browser() as ctx:
            page = ctx.new_page()
            errors = collect_errors(page)
            try:
                page.goto(f"{base}/lab/tree/{CHAPTER.as_posix()}?token={token}", timeout=60_000)
                prompt = page.locator(".jp-NotebookPanel .jp-CodeCell .jp-InputPrompt").first
                prompt.wait_for(timeout=60_000)
                # Keys pressed before the session has a connected kernel are dropped silently, and the
                # toolbar's execution indicator reads "idle" even then: wait for the status bar's
                # "Python 3 (ipykernel) | Idle" (it reads "Initializing", "Connecting", "Unknown" before).
                kernel_idle = page.locator(".jp-StatusBar-TextItem", has_text="(ipykernel) | Idle")
                kernel_idle.wait_for(timeout=START_S * 1000)
                # Command mode on the setup cell, then Shift+Enter three times: the setup cell, the
                # markdown after it, and the next code cell (cudalearn.info() and the sizes).
                prompt.click()
                for _ in range(3):
                    page.keyboard.press("Shift+Enter")
                mode_line = page.locator(".jp-OutputArea-output", has_text="mode=sim").first
                mode_line.wait_for(timeout=RUN_S * 1000)
                sizes = page.locator(".jp-OutputArea-output", has_text="ch0.vector_n here:").first
                sizes.wait_for(timeout=30_000)
                text = mode_line.inner_text()
                validate = page.locator(".jp-NotebookPanel-toolbar", has_text="Validate").count()
                page.screenshot(path=str(shot))

                # Lab 0: its setup and import cells, the first exercise's stub, then its check fails.
                page.goto(f"{base}/lab/tree/{LAB.as_posix()}?token={token}", timeout=60_000)
                # chapter 0's panel is restored too, behind the lab's, and its prompts can count as visible
                # (JupyterLab hides a background tab without display: none): take the lab's panel by its title
                lab_panel = page.locator(".jp-NotebookPanel", has_text="Lab 0 ·")
                prompt = lab_panel.locator(".jp-CodeCell .jp-InputPrompt").first
                prompt.wait_for(timeout=60_000)
                kernel_idle.wait_for(timeout=START_S * 1000)
                prompt.click()
                for _ in range(5):  # cells 1-5: setup, imports, a heading, the stub, the check
                    page.keyboard.press("Shift+Enter")
                failed = page.locator(
                    ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                    has_text="AssertionError",
                ).first
                failed.wait_for(timeout=RUN_S * 1000)
                check_output = failed.inner_text()
            except playwright.Error as exc:  # a timeout names the locator it waited for
                pytest.fail(why(f"in the browser: {exc}"))
            finally:
                try:  # never let a failed screenshot hide the real failure
                    page.screenshot(path=str(shot.with_name("lab.png")))
                    print(f"screenshot: {shot}")
                except Exception as exc:
                    print(f"no screenshot: {exc}")
                print(f"browser console errors: {len(errors)}", *errors[-5:], sep="\n")

        assert "cudalearn: mode=sim" in text, why(f"unexpected mode line: {text!r}")
        lines = check_output.strip().splitlines()
        assert len(lines) <= MAX_LINES, why(f"a failing check shows {len(lines)} lines:\n{check_output}")
        assert "not done yet" in check_output and "blocks_for" in check_output, why(check_output)
        assert "%xmode Verbose" in check_output, why(check_output)
        assert validate == 0, why("nbgrader's Validate button is in a student's notebook toolbar")
        log = log_path.read_text(errors="replace")
        assert "nbgrader" not in log.lower(), why("nbgrader's server extensions run in a student's lab")
        argv0 = _kernel_argv0(proc.pid)
        assert argv0 is not None, why("found no ipykernel process under the server")
        assert Path(argv0).parent == bindir, why(f"the kernel runs {argv0}, not the Python in {bindir}")
    finally:
        _stop(proc)

    for nb, before in repo_notebooks.items():
        assert (ROOT / nb).read_bytes() == before, f"the repository's {nb} was modified"
    wall = time.monotonic() - t0
    print(f"server up after {t_server:.1f} s; whole test {wall:.1f} s")
    assert wall < 300, f"the JupyterLab test took {wall:.0f} s"
