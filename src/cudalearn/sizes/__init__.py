"""Problem sizes per run mode, so no notebook writes a size twice (all chapters).

A notebook asks `cudalearn.size("ch2.matmul_n")` and gets the GPU size on a
GPU and the small simulator size elsewhere. Simulator sizes stay at 64 or
below: the simulator runs one Python thread per CUDA thread.

Each chapter keeps its sizes in its own module here, `chNN.py` (`ch05.py`
for Chapter 5), as `SIZES = {"ch5.<name>": {"gpu": value, "sim": value}}`;
this package finds them, and refuses a key that does not start with its
module's chapter or that two modules define. tests/test_sizes.py reads every
notebook, module and script and fails on a key asked for that no chapter
defines, or one defined that nothing asks for.
"""

from __future__ import annotations

import importlib
import pkgutil

from cudalearn.device import mode as _mode


def _collect() -> dict[str, dict[str, int]]:
    """Every chapter module's SIZES in one table, in chapter order; a misplaced or repeated key raises."""
    table: dict[str, dict[str, int]] = {}
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("ch"))
    for name in names:
        chapter = f"ch{int(name[2:])}."
        for key, value in importlib.import_module(f"{__name__}.{name}").SIZES.items():
            if not key.startswith(chapter):
                raise ImportError(f"sizes/{name}.py defines {key!r}: its keys must start with {chapter!r}")
            if key in table:
                raise ImportError(f"the size {key!r} is defined twice")
            table[key] = value
    return table


#: name -> {"gpu": value, "sim": value}, from every chapter's module.
SIZES: dict[str, dict[str, int]] = _collect()


def size(name: str, mode: str | None = None) -> int:
    """The size called `name` for this process's mode, or for `mode` if given (all chapters)."""
    try:
        entry = SIZES[name]
    except KeyError:
        known = ", ".join(sorted(SIZES))
        raise KeyError(f"no size called {name!r}; known sizes: {known}") from None
    mode = mode or _mode()
    return entry["gpu" if mode == "compile" else mode]
