"""The checks each lab calls after an exercise, one module per chapter, found by name (all labs).

`cudalearn.exercises.check_...` is what a lab imports; visible checks use a
few sizes, and the hidden tests call the same functions with other sizes.
A check is every top-level `def check_...` of a module of this package
(one whose name does not start with `_`): a new chapter's module is found
without being listed anywhere. The modules' sources are read, not imported,
to find the names; a check's module is imported on first use, so a lab on
the first chapters never pays for importing PyTorch models or the tracer.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

_DEFINES_CHECK = re.compile(r"^def (check_\w+)\(", re.MULTILINE)


def find_checks() -> dict[str, tuple[str, ...]]:
    """{module under cudalearn.exercises: the checks it defines}, read from the sources (all labs)."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg or info.name.startswith("_"):
            continue
        text = (Path(__path__[0]) / f"{info.name}.py").read_text(encoding="utf-8")
        found[info.name] = tuple(sorted(set(_DEFINES_CHECK.findall(text))))
    return dict(sorted(found.items()))


def _index(checks: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """{check: its module}; raise when two modules define a check of the same name."""
    where: dict[str, str] = {}
    for module, names in checks.items():
        for name in names:
            if name in where:
                raise ImportError(
                    f"cudalearn.exercises.{where[name]} and cudalearn.exercises.{module} both define "
                    f"{name}: a check's name must say which one a lab means"
                )
            where[name] = module
    return where


#: module (under cudalearn.exercises) -> the checks it defines, found by `find_checks`
CHECKS = find_checks()
_WHERE = _index(CHECKS)
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    """Import the module that defines check `name` and return the check (or the module `name`)."""
    if name in CHECKS:
        return importlib.import_module(f"cudalearn.exercises.{name}")
    if name not in _WHERE:
        raise AttributeError(f"module 'cudalearn.exercises' has no check {name!r}")
    return getattr(importlib.import_module(f"cudalearn.exercises.{_WHERE[name]}"), name)


def __dir__():
    return __all__
