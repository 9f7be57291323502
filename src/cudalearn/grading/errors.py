"""How a student's process failing, or the student's code raising, reaches the judge's verdict (grading).

The interrupts are BaseExceptions, so no check can swallow them; an exception
the student's code raised is rebuilt from its description as a builtin type
or `SubmissionError`, never as the student's own class.
"""

from __future__ import annotations

import builtins


class GradingInterrupt(BaseException):
    """The student's process timed out or died; a BaseException so no check can swallow it."""

    status = "crashed"


class TimeLimit(GradingInterrupt):
    """The student's code ran past the time limit."""

    status = "timeout"


class JudgeTimeLimit(TimeLimit):
    """The judge's own work on a cell (a trace of the student's kernel) ran past the notebook's time limit."""


class ProcessDied(GradingInterrupt):
    """The student's process died (exit, signal, crash) or broke the channel."""

    status = "crashed"


class ThreadsLeft(GradingInterrupt):
    """The student's code left a thread running when a cell or call returned: its process was ended."""

    status = "error"


class GraderFailure(BaseException):
    """The grader itself could not work (a student process that cannot start): never blamed on a student."""


class SubmissionError(Exception):
    """The student's code failed in a way no builtin exception carries (a Numba typing error, sys.exit())."""


def rebuilt_exception(err: dict) -> BaseException:
    """Rebuild a student's exception from its description: a builtin type or SubmissionError, never theirs."""
    name, message = str(err.get("type", "Exception")), str(err.get("message", ""))
    cls = getattr(builtins, name, None)
    exc: BaseException
    if (
        err.get("module") == "builtins"
        and isinstance(cls, type)
        and issubclass(cls, Exception)
        and not issubclass(cls, (SystemExit, KeyboardInterrupt, GeneratorExit))
    ):
        try:
            exc = cls(message)
        except Exception:
            exc = SubmissionError(f"{name}: {message}")
    elif name == "KeyboardInterrupt":
        exc = SubmissionError(
            f"KeyboardInterrupt: the process running your code received SIGINT (at {err.get('at', '?')})"
        )
    elif name == "SystemExit":
        exc = SubmissionError(f"your code called sys.exit() ({message or 'no code'})")
    else:
        exc = SubmissionError(f"{name}: {message}")
    exc.student_where = str(err.get("where", ""))  # type: ignore[attr-defined]
    return exc


def student_message(e: BaseException) -> str:
    """An exception's feedback words: 'Type: message', or a SubmissionError's own text."""
    return str(e) if isinstance(e, SubmissionError) else f"{type(e).__name__}: {e}"


def where_suffix(e: BaseException, form: str) -> str:
    """`form` filled with where in the student's cells `e` was raised (e.g. ' (raised in your {})'), or ''."""
    where = getattr(e, "student_where", "")
    return form.format(where) if where else ""
