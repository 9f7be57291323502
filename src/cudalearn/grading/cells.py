"""A lab's cell text run as a notebook kernel runs it: IPython's namespace and transforms (grading).

The judge runs the instructor's cells and the sandbox the student's, each in
one namespace like a notebook kernel's; without IPython, cells run as plain
Python with their magics skipped.
"""

from __future__ import annotations

from collections.abc import Callable


def without_magics(source: str) -> str:
    """A cell's text with IPython magics and shell lines (`%pip`, `!ls`) made `pass` (IPython is absent)."""
    lines = []
    for line in source.split("\n"):
        stripped = line.lstrip()
        lines.append(line[: len(line) - len(stripped)] + "pass" if stripped.startswith(("%", "!")) else line)
    return "\n".join(lines)


def notebook_namespace() -> tuple[dict, Callable[[str], str]]:
    """(namespace, transform): IPython's user namespace and cell transformer, else plain Python's."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        from IPython.core.interactiveshell import InteractiveShell
        from traitlets.config import Config
    except ImportError:  # no IPython: plain Python cells, magics skipped
        import builtins

        return {"__name__": "__main__", "__builtins__": builtins}, without_magics
    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
    return shell.user_ns, TransformerManager().transform_cell
