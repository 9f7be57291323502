"""Problem sizes per run mode, so no notebook writes a size twice (all chapters).

A notebook asks `cudalearn.size("ch2.matmul_n")` and gets the GPU size on a
GPU and the small simulator size elsewhere. Simulator sizes stay at 64 or
below: the simulator runs one Python thread per CUDA thread.

Each chapter keeps its sizes in its own folder, `chapters/chNN/sizes.py`
(`chapters/ch05/sizes.py` for Chapter 5), as
`SIZES = {"ch5.<name>": {"gpu": value, "sim": value}}`; this module finds
them by that name (pure data: nothing else of the chapter is imported), and
refuses a key that does not start with its folder's chapter (so no two
chapters can define one key). tests/runtime/test_sizes.py reads every
notebook, module and script and fails on a key asked for that no chapter
defines, or one defined that nothing asks for.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from cudalearn.runtime.device import mode as _mode

#: src/cudalearn/chapters: one folder per chapter, each with its sizes.py
CHAPTERS = Path(__file__).resolve().parents[1] / "chapters"


def _collect(chapters: Path = CHAPTERS, package: str = "cudalearn.chapters") -> dict[str, dict[str, int]]:
    """Every chapter's SIZES in one table, in chapter order; a key of another chapter's prefix raises."""
    table: dict[str, dict[str, int]] = {}
    for path in sorted(chapters.glob("ch[0-9][0-9]/sizes.py")):
        name = path.parent.name
        chapter = f"ch{int(name[2:])}."
        for key, value in importlib.import_module(f"{package}.{name}.sizes").SIZES.items():
            if not key.startswith(chapter):
                raise ImportError(
                    f"chapters/{name}/sizes.py defines {key!r}: its keys must start with {chapter!r}"
                )
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
