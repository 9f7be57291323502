"""JupyterLab in a real browser (issue 8): the README's `python3 run.py course` works end to end.

The server is started with the very argv `run.py course` builds (run.course_command), headless, on a
free local port, on a temporary copy of chapter 0 (so autosave can never write outputs into the
repository's notebooks), with empty Jupyter and IPython directories (so nothing in ~/.jupyter leaks
in) and with JupyterLab's news and update checks off (the network may be closed). Chromium opens the
notebook, runs its first cells with Shift+Enter, and the mode line `cudalearn.setup()` prints must
appear with `mode=sim`. The server is always shut down; a screenshot is kept in the test's tmp dir.
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


def _jupyter_env(tmp: Path) -> dict[str, str]:
    """The environment of the server: simulator mode, and Jupyter/IPython dirs of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER") and k != "MPLBACKEND"}
    names = ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR")
    dirs = {name: tmp / name.lower() for name in names}
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    # The front end's own news and update checks: never, and do not ask (a toast would cover the page).
    settings = dirs["JUPYTER_CONFIG_DIR"] / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    env.update({k: str(v) for k, v in dirs.items()})
    env["CUDALEARN_MODE"] = "sim"
    return env


def _get(url: str, token: str, timeout: float = 5) -> int:
    req = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status


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
    bindir = Path(sys.executable).parent  # .venv/bin under `python3 run.py test`, the env's bin otherwise
    if not (bindir / "jupyter").exists():
        pytest.skip(f"no jupyter in {bindir}: install the course extra (pip install -e '.[course]')")

    course = tmp_path / "course"
    (course / CHAPTER).parent.mkdir(parents=True)
    shutil.copy2(ROOT / CHAPTER, course / CHAPTER)
    repo_notebook = (ROOT / CHAPTER).read_bytes()

    port, token = _free_port(), secrets.token_hex(16)
    headless = [
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if os.name == "posix" and os.geteuid() == 0:  # CI containers run as root; Jupyter refuses without this
        headless.append("--allow-root")
    cmd = _run_py().course_command(headless, root=course, bindir=bindir)
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
            env=_jupyter_env(tmp_path),
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
            except playwright.Error as exc:  # a timeout names the locator it waited for
                pytest.fail(why(f"in the browser: {exc}"))
            finally:
                try:  # never let a failed screenshot hide the real failure
                    page.screenshot(path=str(shot))
                    print(f"screenshot: {shot}")
                except Exception as exc:
                    print(f"no screenshot: {exc}")
                print(f"browser console errors: {len(errors)}", *errors[-5:], sep="\n")

        assert "cudalearn: mode=sim" in text, why(f"unexpected mode line: {text!r}")
        argv0 = _kernel_argv0(proc.pid)
        assert argv0 is not None, why("found no ipykernel process under the server")
        assert Path(argv0).parent == bindir, why(f"the kernel runs {argv0}, not the Python in {bindir}")
    finally:
        _stop(proc)

    assert (ROOT / CHAPTER).read_bytes() == repo_notebook, "the repository's chapter 0 was modified"
    wall = time.monotonic() - t0
    print(f"server up after {t_server:.1f} s; whole test {wall:.1f} s")
    assert wall < 300, f"the JupyterLab test took {wall:.0f} s"
