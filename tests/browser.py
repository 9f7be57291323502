"""Headless Chromium for the browser tests (issue 8): the system's Debian `chromium`, driven by Playwright.

No browser is downloaded: Playwright launches /usr/bin/chromium (or $CUDALEARN_CHROMIUM). Where
Chromium is missing, the tests skip with the command that installs it, except under CI (CI=true),
where a missing browser is a failure: .ci/run installs it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

import pytest

# Flags for a closed network: without the background-networking ones Chromium keeps trying to
# reach Google's hosts and floods the log with refused connections.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def chromium_path() -> str | None:
    """Path of the system Chromium, or None."""
    env = os.environ.get("CUDALEARN_CHROMIUM")
    if env:
        return env
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def require_chromium() -> str:
    """The Chromium path; skip (fail under CI) with the install command when there is none."""
    path = chromium_path()
    if path is None:
        msg = "no Chromium found: install it with `sudo apt-get install chromium` (Debian/Ubuntu)"
        if os.environ.get("CI"):
            pytest.fail(msg + "; .ci/run should have installed it")
        pytest.skip(msg)
    return path


@contextlib.contextmanager
def browser():
    """A headless Chromium with an empty profile, closed on exit."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    path = require_chromium()
    with tempfile.TemporaryDirectory() as profile, sync_api.sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            profile, executable_path=path, headless=True, args=FLAGS, viewport={"width": 1280, "height": 900}
        )
        try:
            yield ctx
        finally:
            ctx.close()


def collect_errors(page) -> list[str]:
    """A list that fills with `page`'s console errors and uncaught exceptions, for failure messages."""
    errors: list[str] = []

    def on_console(msg) -> None:
        if msg.type == "error":
            url = (msg.location or {}).get("url")
            errors.append(f"console: {msg.text}" + (f" ({url})" if url else ""))

    page.on("console", on_console)
    page.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
    return errors


@contextlib.contextmanager
def serve(directory):
    """Serve `directory` on 127.0.0.1 at a free port, in threads; yield its URL (course/test_site.py)."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
