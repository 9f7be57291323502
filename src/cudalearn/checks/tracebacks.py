"""A failing check in a notebook shows its message and the student's line, not 30 lines of frames (all labs).

A check raises `AssertionError` with a message that says everything (the cause, expected vs got,
a hint). IPython would show it under the course's internal frames, often below the fold. Once the
checks are imported in an IPython kernel (JupyterLab, classic Notebook, Colab, nbval), `install()`
registers a handler for `AssertionError` that shows, for one raised inside the cudalearn package with
a message, only:

    AssertionError: <the check's message>
      in Cell In[5], line 3: check_vector_add(vector_add)
      (cudalearn shows a failing check's message only: %xmode Verbose shows the whole traceback)

Every other exception, an empty `assert` inside the package, and every exception under `%xmode
Verbose` or with CUDALEARN_TRACEBACK=full in the environment get IPython's own traceback. The error's
name and value are unchanged, so `cudalearn progress`, nbval and the grader (which reads `str(e)`)
see the same error as before.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import TracebackType

PACKAGE = Path(__file__).resolve().parents[1]  # src/cudalearn
FULL_ENV = "CUDALEARN_TRACEBACK"
HINT = "(cudalearn shows a failing check's message only: %xmode Verbose shows the whole traceback)"
_RED, _CYAN, _DIM, _RESET = "\x1b[0;31m", "\x1b[0;36m", "\x1b[2m", "\x1b[0m"


def _in_package(filename: str) -> bool:
    """Whether `filename` is a file of the cudalearn package."""
    try:
        return Path(filename).resolve().is_relative_to(PACKAGE)
    except (OSError, ValueError):
        return False


def _frames(tb: TracebackType | None) -> list[tuple[str, int, str]]:
    """(filename, line number, function) of each frame of `tb`, outermost first."""
    out = []
    while tb is not None:
        code = tb.tb_frame.f_code
        out.append((code.co_filename, tb.tb_lineno, code.co_name))
        tb = tb.tb_next
    return out


def from_a_check(value: BaseException, tb: TracebackType | None) -> bool:
    """Whether `value` is an AssertionError with a message, raised inside the cudalearn package."""
    frames = _frames(tb)
    return (
        isinstance(value, AssertionError) and bool(str(value).strip()) and bool(frames)
        and _in_package(frames[-1][0])
    )  # fmt: skip


def full_wanted(shell) -> bool:
    """Whether the whole traceback is asked for: `%xmode Verbose`, or CUDALEARN_TRACEBACK=full."""
    mode = getattr(getattr(shell, "InteractiveTB", None), "mode", "")
    return os.environ.get(FULL_ENV, "").lower() == "full" or mode == "Verbose"


def _student_line(shell, tb: TracebackType | None) -> str | None:
    """'Cell In[5], line 3: <its text>' of the innermost notebook frame of `tb`, or None."""
    import linecache

    fmt = getattr(getattr(shell, "compile", None), "format_code_name", lambda name: None)
    where = None
    for filename, lineno, _ in _frames(tb):
        named = fmt(filename)
        if named is not None:
            where = (f"{named[0]} {named[1]}", filename, lineno)
        elif not _in_package(filename) and "site-packages" not in filename and "<" not in filename[:1]:
            where = (filename, filename, lineno)  # a module of the student's own
    if where is None:
        return None
    text = linecache.getline(where[1], where[2]).strip()
    return f"{where[0]}, line {where[2]}" + (f": {text}" if text else "")


def short_traceback(shell, etype: type, value: BaseException, tb: TracebackType | None) -> list[str]:
    """The lines a failing check shows: its message, the student's line, how to see the rest."""
    lines = [f"{_RED}{etype.__name__}{_RESET}: {value}"]
    where = _student_line(shell, tb)
    if where:
        lines.append(f"  in {_CYAN}{where}{_RESET}")
    lines.append(f"  {_DIM}{HINT}{_RESET}")
    return lines


def handler(shell, etype, value, tb, tb_offset=None) -> list[str] | None:
    """IPython's custom exception handler for AssertionError: a check's message alone, else the usual.

    IPython calls it instead of showing the error, so it shows the error itself (through the shell's own
    `_showtraceback`: ipykernel sends it to the front end as the cell's error output)."""
    if full_wanted(shell) or not from_a_check(value, tb):
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        return None
    shell._get_exc_info((etype, value, tb))  # sys.last_* for %debug and %tb, as showtraceback does
    stb = short_traceback(shell, etype, value, tb)
    shell._showtraceback(etype, value, stb)
    return stb


def install() -> bool:
    """Register `handler` in the running IPython shell; False outside IPython (plain Python, pytest)."""
    ipython = sys.modules.get("IPython")  # never import IPython here: a plain script does not need it
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return False
    shell.set_custom_exc((AssertionError,), handler)  # IPython keeps one handler: setting it again is a no-op
    return True


install()  # on import: every lab and chapter imports the checks before its first check runs
