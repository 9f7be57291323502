"""A failing check in a notebook shows its message and the student's line, at most 10 lines (issue 31).

In an IPython shell of this process (the handler's choices) and in a real ipykernel run by nbclient
(what JupyterLab, classic Notebook, Colab and nbval read: the error output, its name and value).
"""

import os
import re

import nbformat
import pytest

from cudalearn.checks import tracebacks

IPython = pytest.importorskip("IPython")
FAIL = "c.check_close(np.zeros(3, np.float32), np.ones(3, np.float32), name='out')"
MESSAGE = "`out` is wrong at 3 of 3 elements"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _text(lines: list[str]) -> str:
    return _ANSI.sub("", "\n".join(lines))


@pytest.fixture
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    sh = InteractiveShell.instance()
    shown: list[list[str]] = []
    sh._showtraceback = lambda etype, value, stb: shown.append(stb)  # what a kernel would send
    assert tracebacks.install()
    sh.run_cell("import numpy as np\nfrom cudalearn import checks as c", store_history=True)
    try:
        yield sh, shown
    finally:
        del sh._showtraceback
        sh.set_custom_exc((), None)
        sh.run_line_magic("xmode", "Context")


def test_a_failing_check_shows_its_message_and_the_students_line(shell):
    sh, shown = shell
    result = sh.run_cell(f"x = 1\n{FAIL}", store_history=True)
    assert isinstance(result.error_in_exec, AssertionError)  # the cell still fails (nbval, progress)
    text = _text(shown[-1])
    assert len(text.splitlines()) <= 10, text
    assert text.startswith(f"AssertionError: {MESSAGE}") and "Hint:" in text
    assert re.search(r"in Cell In\[\d+\], line 2: c\.check_close\(", text), text
    assert "checks/__init__.py" not in text and "%xmode Verbose" in text


def test_the_whole_traceback_is_one_flag_away(shell, monkeypatch):
    sh, shown = shell
    sh.run_line_magic("xmode", "Verbose")
    sh.run_cell(FAIL)
    assert "checks/__init__.py" in _text(shown[-1]) and MESSAGE in _text(shown[-1])
    sh.run_line_magic("xmode", "Context")
    monkeypatch.setenv(tracebacks.FULL_ENV, "full")
    sh.run_cell(FAIL)
    assert "checks/__init__.py" in _text(shown[-1])


def test_other_errors_keep_their_traceback(shell):
    sh, shown = shell
    sh.run_cell("assert 1 == 2, 'my own assert'")  # raised in the student's cell, not in a check
    assert "Traceback" in _text(shown[-1]) and "my own assert" in _text(shown[-1])
    sh.run_cell("c.sentinel(np.dtype('U3'))")  # a TypeError inside the package: not a check's failure
    assert "Traceback" in _text(shown[-1]) and "checks/sentinels.py" in _text(shown[-1])


def test_outside_ipython_nothing_is_installed(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "IPython", None)
    assert tracebacks.install() is False


@pytest.mark.notebooks
def test_in_a_kernel_the_error_output_is_short_and_keeps_its_name_and_value(tmp_path):
    """What JupyterLab, classic Notebook, Colab and nbval show: the kernel's error output."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import numpy as np\nfrom cudalearn import checks as c"),
        nbformat.v4.new_code_cell(FAIL),
        nbformat.v4.new_code_cell(f"%xmode Verbose\n{FAIL}"),
    ]
    env = {**os.environ, "CUDALEARN_MODE": "sim"}
    env.pop(tracebacks.FULL_ENV, None)
    client = NotebookClient(nb, allow_errors=True, kernel_name="python3", timeout=120)
    client.execute(env=env, cwd=str(tmp_path))
    short, full = (next(o for o in cell.outputs if o.output_type == "error") for cell in nb.cells[1:])
    assert short.ename == full.ename == "AssertionError" and short.evalue == full.evalue
    assert short.evalue.startswith(MESSAGE)
    text = _text(short.traceback)
    assert len(text.splitlines()) <= 10 and MESSAGE in text and "line 1: c.check_close(" in text, text
    assert "checks/__init__.py" in _text(full.traceback)
