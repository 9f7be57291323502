"""Colab: every notebook's first cell and "Open in Colab" link, from one repository address (all notebooks).

`REPO` is the only place the course's address is written; the setup cell,
the badges and the install command are built from it and from the
package's version (the git tag `v<version>` is what Colab installs, so a
notebook and the package it installs always match).

On Colab the setup cell removes the preinstalled `cuda-python` (it breaks
numba-cuda), installs numba-cuda with the CUDA extra matching Colab's own
torch (`numba-cuda[cu12]` for its CUDA 12 build: the NVRTC wheels that the
package's base dependencies leave out) and this package at the pinned
versions, and only when they are not already installed: once per runtime,
and again only if something changed them. Elsewhere it only calls
`cudalearn.setup()`. It is plain Python, not `%pip` magics, so
tests/course/test_colab.py can run it against a simulated Colab.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from cudalearn.version import __version__

REPO = "https://github.com/cudalearn/cudalearn"
NUMBA_CUDA = "0.30.4"  # the numba-cuda of constraints.txt (a test checks they agree)
COLAB = "https://colab.research.google.com/github"
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
FOLDERS = ("book", "solutions", "labs")
_BADGE = re.compile(r"\[!\[Open In Colab\]\([^)\s]*\)\]\([^)\s]*\)")

_CELL = """\
# Course setup: the same first cell in every notebook (chapter 0 explains it).
import sys

if "google.colab" in sys.modules:  # on Colab: install the pinned course, once per runtime
    import subprocess
    from importlib.metadata import PackageNotFoundError, version

    def _installed(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    if (_installed("cudalearn"), _installed("numba-cuda")) != ("{version}", "{numba_cuda}"):
        import torch  # Colab's own, kept: numba-cuda's NVRTC wheels must match the CUDA it was built with

        cuda = "cu13" if (torch.version.cuda or "").startswith("13.") else "cu12"
        pip = [sys.executable, "-m", "pip", "-q"]
        course = "{course}"
        subprocess.check_call([*pip, "uninstall", "-y", "cuda-python"])
        subprocess.check_call([*pip, "install", f"numba-cuda[{{cuda}}]=={numba_cuda}", course])
import cudalearn

cudalearn.setup();"""


def version() -> str:
    """The package version; the course is installed on Colab from the git tag v<version>."""
    return __version__


def install_spec() -> str:
    """The pip requirement that installs this package at the course's pinned version."""
    return f"cudalearn @ git+{REPO}@v{version()}"


def setup_cell() -> str:
    """The text of the first code cell of every notebook (Chapter 0)."""
    return _CELL.format(version=version(), numba_cuda=NUMBA_CUDA, course=install_spec())


def colab_url(path: str | Path) -> str:
    """The Colab address that opens the notebook at `path` (relative to the repository root)."""
    slug = REPO.removeprefix("https://github.com/").rstrip("/")
    return f"{COLAB}/{slug}/blob/v{version()}/{Path(path).as_posix()}"


def badge(path: str | Path) -> str:
    """The markdown "Open in Colab" badge for the notebook at `path`."""
    return f"[![Open In Colab]({BADGE_IMAGE})]({colab_url(path)})"


def set_badge(markdown: str, path: str | Path) -> str:
    """`markdown` with its Colab badge pointing at `path`: replaced if present, else put under the title."""
    if _BADGE.search(markdown):
        return _BADGE.sub(lambda _: badge(path), markdown, count=1)
    title, sep, rest = markdown.partition("\n")
    return f"{title}\n\n{badge(path)}\n" + (f"\n{rest.lstrip(chr(10))}" if rest.strip() else "")


def problems(nb: Any, path: str | Path) -> list[str]:
    """What is wrong with a notebook's first cells: the setup cell and the badge for `path`."""
    found = []
    code = [c for c in nb.cells if c.cell_type == "code"]
    if not code or code[0].source != setup_cell():
        found.append("its first code cell is not colab.setup_cell()")
    md = [c for c in nb.cells if c.cell_type == "markdown"]
    if not md or badge(path) not in md[0].source:
        found.append(f"its first markdown cell has no Colab badge for {Path(path).as_posix()}")
    return found


def fix(nb: Any, path: str | Path) -> Any:
    """Put the setup cell and the badge for `path` into a notebook (an nbformat node), in place.

    An existing setup cell (the first code cell, calling `cudalearn.setup()`) is rewritten; any other
    first code cell is kept, and the setup cell is inserted before it."""
    import nbformat

    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    if code and "cudalearn.setup(" in nb.cells[code[0]].source:  # a setup cell, of another version
        nb.cells[code[0]].source = setup_cell()
    else:  # a new notebook: its first code cell is the chapter's own, so the setup cell goes before it
        at = code[0] if code else len(nb.cells)
        nb.cells.insert(at, nbformat.v4.new_code_cell(setup_cell()))
    md = [c for c in nb.cells if c.cell_type == "markdown"]
    if md:
        md[0].source = set_badge(md[0].source, path)
    return nb


def check_all(root: str | Path = ".", write: bool = False) -> dict[Path, list[str]]:
    """Problems of every course notebook (book/, solutions/, labs/); with `write`, fix book/ and solutions/.

    labs/ is generated: `cudalearn labs build` gives each lab the setup cell
    and a badge pointing at the lab itself.
    """
    import nbformat

    root = Path(root)
    report = {}
    for folder in FOLDERS:
        for p in sorted((root / folder).glob("*.ipynb")):
            rel = p.relative_to(root)
            nb = nbformat.read(p, as_version=4)
            found = problems(nb, rel)
            if found:
                report[rel] = found
                if write and folder != "labs":
                    p.write_text(nbformat.writes(fix(nb, rel)) + "\n")
    return report
