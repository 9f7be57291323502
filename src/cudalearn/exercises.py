"""The checks each lab calls after an exercise, found by name in the chapters' `checks` (all labs).

`cudalearn.exercises.check_...` is what a lab imports; visible checks use a
few sizes, and the hidden tests call the same functions with other sizes.
A check is every top-level `def check_...` of a chapter's `checks.py`, or of
a module of its `checks/` package whose name does not start with `_`
(`chapters/ch05/checks/fusion.py`): a new chapter's checks are found without
being listed anywhere. The modules' sources are read, not imported, to find
the names; a check's module is imported on first use, so a lab on the first
chapters never pays for importing PyTorch models or the tracer.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

_DEFINES_CHECK = re.compile(r"^def (check_\w+)\(", re.MULTILINE)
_CHAPTERS = Path(__file__).resolve().parent / "chapters"


def _check_files(chapters: Path = _CHAPTERS) -> list[Path]:
    """Every chapters/chNN/checks.py and chapters/chNN/checks/NAME.py (NAME not starting with _)."""
    files = sorted(chapters.glob("ch[0-9][0-9]/checks.py"))
    files += sorted(p for p in chapters.glob("ch[0-9][0-9]/checks/*.py") if not p.name.startswith("_"))
    return sorted(files)


def find_checks(chapters: Path = _CHAPTERS) -> dict[str, tuple[str, ...]]:
    """{module under cudalearn (chapters.ch02.checks): the checks it defines}, read from the sources."""
    found = {}
    for path in _check_files(chapters):
        dotted = ".".join(path.relative_to(chapters.parent).with_suffix("").parts)
        found[dotted] = tuple(sorted(set(_DEFINES_CHECK.findall(path.read_text(encoding="utf-8")))))
    return dict(sorted(found.items()))


def _index(checks: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """{check: its module}; raise when two modules define a check of the same name."""
    where: dict[str, str] = {}
    for module, names in checks.items():
        for name in names:
            if name in where:
                raise ImportError(
                    f"cudalearn.{where[name]} and cudalearn.{module} both define "
                    f"{name}: a check's name must say which one a lab means"
                )
            where[name] = module
    return where


#: module (under cudalearn) -> the checks it defines, found by `find_checks`
CHECKS = find_checks()
_WHERE = _index(CHECKS)
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    """Import the module that defines check `name` and return the check."""
    if name not in _WHERE:
        raise AttributeError(f"module 'cudalearn.exercises' has no check {name!r}")
    return getattr(importlib.import_module(f"cudalearn.{_WHERE[name]}"), name)


def __dir__():
    return __all__
