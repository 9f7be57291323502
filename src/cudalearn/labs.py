"""Student labs generated from the solution notebooks, and the check that they are up to date (all labs).

`solutions/NN-name.ipynb` is the single source of a lab. Solution code sits
between `### BEGIN SOLUTION` / `### END SOLUTION` and hidden tests between
`### BEGIN HIDDEN TESTS` / `### END HIDDEN TESTS` (nbgrader's markers, in
cell text). `build()` writes `labs/NN-name.ipynb`: solution regions become
a `# YOUR CODE HERE` stub, hidden tests disappear, outputs are cleared.

A stub inside a `@cuda.jit` kernel is `pass`, never `raise` (a real kernel
cannot raise), so the unfinished kernel runs, writes nothing, and the check
that follows says the exercise is not done yet. A stub elsewhere raises
`NotImplementedError`, which the checks turn into the same message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from cudalearn import colab

BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
BEGIN_HIDDEN = "### BEGIN HIDDEN TESTS"
END_HIDDEN = "### END HIDDEN TESTS"
STUB_COMMENT = "# YOUR CODE HERE"
MARKDOWN_STUB = "YOUR ANSWER HERE"
KEEP_METADATA = ("kernelspec", "language_info", "cudalearn")


class MarkerError(ValueError):
    """A solution notebook's markers are unbalanced or misplaced (all labs)."""


@dataclass(frozen=True)
class LabStatus:
    """Whether one generated lab matches its solution notebook."""

    solution: Path
    lab: Path
    up_to_date: bool
    reason: str = ""


def _in_cuda_kernel(lines: list[str], index: int, indent: int) -> bool:
    """True when line `index` (indented by `indent`) is inside a function decorated with cuda.jit."""
    for j in range(index - 1, -1, -1):
        line = lines[j]
        stripped = line.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        line_indent = len(line) - len(stripped)
        if line_indent < indent and stripped.startswith("def "):
            k = j - 1
            while k >= 0 and lines[k].lstrip().startswith("@"):
                if "cuda.jit" in lines[k]:
                    return True
                k -= 1
            return False
    return False


def strip_code(source: str, where: str = "cell") -> str:
    """A solution code cell's student version: stubs for solutions, no hidden tests (all labs)."""
    lines = source.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        marker = line.strip()
        if marker in (END_SOLUTION, END_HIDDEN):
            raise MarkerError(f"{where}: '{marker}' without its BEGIN marker at line {i + 1}")
        if marker in (BEGIN_SOLUTION, BEGIN_HIDDEN):
            end = END_SOLUTION if marker == BEGIN_SOLUTION else END_HIDDEN
            try:
                j = next(k for k in range(i + 1, len(lines)) if lines[k].strip() == end)
            except StopIteration:
                raise MarkerError(f"{where}: '{marker}' at line {i + 1} has no '{end}'") from None
            inner = [ln.strip() for ln in lines[i + 1 : j]]
            if any(m in inner for m in (BEGIN_SOLUTION, BEGIN_HIDDEN)):
                raise MarkerError(f"{where}: nested markers inside the region at line {i + 1}")
            if marker == BEGIN_SOLUTION:
                pad = line[: len(line) - len(line.lstrip())]
                stub = "pass" if _in_cuda_kernel(lines, i, len(pad)) else "raise NotImplementedError()"
                out += [pad + STUB_COMMENT, pad + stub]
            i = j + 1
            continue
        out.append(line)
        i += 1
    return "\n".join(out).rstrip("\n")


def strip_markdown(source: str) -> str:
    """A solution markdown cell's student version: answers between solution markers removed."""
    pattern = re.compile(
        rf"^[ \t]*{re.escape(BEGIN_SOLUTION)}[ \t]*\n.*?^[ \t]*{re.escape(END_SOLUTION)}[ \t]*$",
        re.S | re.M,
    )
    return pattern.sub(MARKDOWN_STUB, source)


def clean(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Remove outputs, execution counts, cell ids' noise and editor metadata, in place (all notebooks)."""
    nb.metadata = {k: v for k, v in nb.metadata.items() if k in KEEP_METADATA}
    for cell in nb.cells:
        cell.metadata = {k: v for k, v in cell.metadata.items() if k in ("tags", "nbgrader")}
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return nb


def has_markers(nb: nbformat.NotebookNode) -> bool:
    """True when a notebook holds any solution or hidden-test marker."""
    return any(m in c.source for c in nb.cells for m in (BEGIN_SOLUTION, BEGIN_HIDDEN))


def make_lab(solution: Path) -> str:
    """The text of the lab notebook generated from one solution notebook."""
    nb = nbformat.read(solution, as_version=4)
    if not has_markers(nb):
        raise MarkerError(f"{solution}: no '{BEGIN_SOLUTION}' marker, so the lab would have no exercise")
    clean(nb)
    for n, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            cell.source = strip_code(cell.source, f"{solution.name} cell {n}")
        elif cell.cell_type == "markdown":
            cell.source = strip_markdown(cell.source)
    first_md = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    if first_md is not None:
        first_md.source = colab.set_badge(first_md.source, f"labs/{solution.name}")
    nb.metadata["cudalearn"] = {"generated_from": f"solutions/{solution.name}"}
    return nbformat.writes(nb) + "\n"


def _pairs(root: Path) -> list[tuple[Path, Path]]:
    sols = sorted((root / "solutions").glob("*.ipynb"))
    return [(s, root / "labs" / s.name) for s in sols]


def build(root: Path | str = ".") -> list[Path]:
    """Write labs/ from solutions/; remove labs with no solution; return the labs written."""
    root = Path(root)
    (root / "labs").mkdir(exist_ok=True)
    written = []
    pairs = _pairs(root)
    for sol, lab in pairs:
        text = make_lab(sol)
        if not lab.exists() or lab.read_text() != text:
            lab.write_text(text)
        written.append(lab)
    wanted = {lab.name for _, lab in pairs}
    for stale in (root / "labs").glob("*.ipynb"):
        if stale.name not in wanted:
            stale.unlink()
    return written


def check(root: Path | str = ".") -> list[LabStatus]:
    """Compare labs/ with what build() would write; one status per solution and per orphan lab."""
    root = Path(root)
    statuses = []
    pairs = _pairs(root)
    for sol, lab in pairs:
        try:
            text = make_lab(sol)
        except MarkerError as e:
            statuses.append(LabStatus(sol, lab, False, str(e)))
            continue
        if not lab.exists():
            statuses.append(LabStatus(sol, lab, False, "missing"))
        elif lab.read_text() != text:
            statuses.append(LabStatus(sol, lab, False, "differs from its solution notebook"))
        else:
            statuses.append(LabStatus(sol, lab, True))
    wanted = {lab.name for _, lab in pairs}
    for orphan in sorted((root / "labs").glob("*.ipynb")):
        if orphan.name not in wanted:
            statuses.append(
                LabStatus(root / "solutions" / orphan.name, orphan, False, "has no solution notebook")
            )
    return statuses
