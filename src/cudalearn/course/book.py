"""The book's notebooks by name (chapters and their deep dives) and the limits each keeps (every chapter).

A chapter is a core notebook, `book/NN-slug.ipynb`, which every student reads and whose lab is
`solutions/NN-slug.ipynb`, plus optional deep dives, `book/NN<letter>-slug.ipynb`
(`book/05a-tuned-network.ipynb`): each one idea, short, linked from its core and linking back.
File-name order is reading order (`05-...` sorts before `05a-...`). The site, the tests, the GPU
run and the Colab badges read `book/*.ipynb`, so a deep dive is found the way a chapter is; what
needs to tell them apart (the labs, the README's rows, the site's titles) asks this module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

NAME = re.compile(r"(?P<number>\d\d)(?P<letter>[a-z]?)-(?P<slug>[a-z0-9]+(?:-[a-z0-9]+)*)\.ipynb")

# The limits of issue 30, for every book notebook, core or deep dive.
MAX_CELLS = 45
MAX_WORDS = 3500  # words of Markdown prose (counted both common ways, code fences left out)
MAX_CODE_LINES = 40
MAX_OUTPUT_COLUMNS = 100
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)


@dataclass(frozen=True)
class Part:
    """One book notebook's place: chapter number, deep-dive letter ('' for the core) and slug."""

    path: Path
    number: int
    letter: str
    slug: str

    @property
    def is_core(self) -> bool:
        """Whether this is the chapter's core notebook (the one with a lab)."""
        return not self.letter


def part(path: Path | str) -> Part:
    """Where the notebook at `path` sits in the book; ValueError for a name outside the convention."""
    path = Path(path)
    m = NAME.fullmatch(path.name)
    if not m:
        raise ValueError(
            f"{path.name}: a book notebook is named NN-slug.ipynb (a chapter) or NNx-slug.ipynb "
            "(a deep dive of chapter NN, x a lowercase letter), the slug in lowercase words joined by '-'"
        )
    return Part(path, int(m["number"]), m["letter"], m["slug"])


def notebooks(root: Path | str) -> list[Part]:
    """Every book notebook under `root`/book, in reading order."""
    return [part(p) for p in sorted(Path(root, "book").glob("*.ipynb"))]


def chapters(root: Path | str) -> list[Path]:
    """The core notebooks (one per chapter, each with a lab), in order."""
    return [p.path for p in notebooks(root) if p.is_core]


def deep_dives(core: Path | str) -> list[Path]:
    """The deep dives of the chapter whose core notebook is `core`, in order."""
    number = part(core).number
    return [p.path for p in notebooks(Path(core).parent.parent) if p.number == number and not p.is_core]


_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")  # letters and digits, "don't" one word


def words(markdown: str) -> int:
    """Words of prose in a Markdown cell's text, fenced code left out: the larger of two common counts.

    One counter splits at whitespace, another at every mark between letters ("GPU-to-GPU" is three words
    to it, "x/y" two); the book keeps its limit by either.
    """
    prose = _FENCE.sub(" ", markdown)
    return max(len(prose.split()), len(_WORD.findall(prose)))


def limit_problems(nb) -> list[str]:
    """Where a notebook (an nbformat node) breaks the book's limits; [] when it keeps them all."""
    found = []
    if len(nb.cells) > MAX_CELLS:
        found.append(f"{len(nb.cells)} cells, at most {MAX_CELLS}: move an idea into a deep dive")
    prose = sum(words(c.source) for c in nb.cells if c.cell_type == "markdown")
    if prose > MAX_WORDS:
        found.append(f"{prose:,} words of prose, at most {MAX_WORDS:,}: move an idea into a deep dive")
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if "show_source(" in cell.source and "NBVAL_CHECK_OUTPUT" not in cell.source:
            found.append(
                f"cell {i} shows a kernel's source without `# NBVAL_CHECK_OUTPUT`: compare it, so a reader "
                "on GitHub sees the code and CI fails when the source changes without the notebook"
            )
        lines = len(cell.source.splitlines())
        if lines > MAX_CODE_LINES:
            first = cell.source.splitlines()[0][:60]
            found.append(
                f"cell {i} (`{first}`) has {lines} lines, at most {MAX_CODE_LINES}: "
                "move the code into the chapter's package folder"
            )
        for out in cell.get("outputs", []):
            text = out.get("text") or out.get("data", {}).get("text/plain", "")
            wide = [line for line in str(text).splitlines() if len(line) > MAX_OUTPUT_COLUMNS]
            if wide:
                found.append(
                    f"cell {i}: an output line of {len(wide[0])} columns, at most {MAX_OUTPUT_COLUMNS}: "
                    f"wrap what prints it (`{wide[0][:50]}...`)"
                )
    return found
