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

Committed notebooks carry no outputs, except the compared cells: a code cell
whose first line is `# NBVAL_CHECK_OUTPUT` keeps the outputs that
`fill_outputs()` (CLI: `cudalearn outputs`) wrote from a run under the
simulator, and CI's `pytest --nbval-lax` compares them. nbval compares a
cell only when its committed execution count is set, so `clean()` keeps the
count of those cells (renumbered to the cell's place) and clears every
other. Labs carry no outputs and no marker: CI does not run them under
nbval, so text kept there would be checked by nothing.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from cudalearn.course import colab

BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
BEGIN_HIDDEN = "### BEGIN HIDDEN TESTS"
END_HIDDEN = "### END HIDDEN TESTS"
STUB_COMMENT = "# YOUR CODE HERE"
MARKDOWN_STUB = "YOUR ANSWER HERE"
KEEP_METADATA = ("kernelspec", "language_info", "cudalearn")
CHECK_MARKER = "# NBVAL_CHECK_OUTPUT"
KERNEL_ENV = {"CUDALEARN_MODE": "sim", "MPLBACKEND": "Agg"}  # what `run.py test` gives nbval's kernels


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
    """A solution code cell's student version: stubs, no hidden tests, no compared-cell marker (all labs)."""
    lines = source.split("\n")
    out: list[str] = []
    i = 1 if lines[0].rstrip() == CHECK_MARKER else 0  # labs are not compared (the module's docstring)
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


def is_compared(cell: nbformat.NotebookNode) -> bool:
    """True for a code cell whose first line is CHECK_MARKER: nbval compares its outputs (all notebooks)."""
    return cell.cell_type == "code" and cell.source.split("\n", 1)[0].rstrip() == CHECK_MARKER


def marker_problems(nb: nbformat.NotebookNode) -> list[str]:
    """nbval markers outside the protocol: any NBVAL comment but a first-line CHECK_OUTPUT, any nbval tag."""
    problems = []
    code = [c for c in nb.cells if c.cell_type == "code"]
    for n, cell in enumerate(code):
        lines = cell.source.split("\n")
        for k, line in enumerate(lines):
            text = line.strip()
            comment = text.lstrip("#").strip()
            if not text.startswith("#") or not comment.startswith(("NBVAL_", "PYTEST_VALIDATE_")):
                continue
            if k == 0 and line.rstrip() == CHECK_MARKER:
                continue
            where = "line 1 must read exactly" if k == 0 else f"line {k + 1}: the marker goes on line 1 as"
            problems.append(f"Cell {n}: {text!r} ({where} {CHECK_MARKER!r}; no other nbval marker)")
        tags = [t for t in cell.metadata.get("tags", []) if str(t).startswith(("nbval", "raises-exception"))]
        if tags:
            problems.append(f"Cell {n}: nbval tags {tags} (use a first-line {CHECK_MARKER!r} instead)")
    return problems


def clean(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Strip outputs, counts, editor metadata in place, but a filled compared cell's outputs (all notebooks).

    A compared cell keeps its outputs only with its execution count (nbval
    skips a cell whose count is None): the count becomes the cell's place
    among the code cells, 1-based, and output metadata (never compared) goes,
    so that re-running and cleaning gives the same file.
    """
    nb.metadata = {k: v for k, v in nb.metadata.items() if k in KEEP_METADATA}
    place = 0
    for cell in nb.cells:
        cell.metadata = {k: v for k, v in cell.metadata.items() if k in ("tags", "nbgrader")}
        if cell.cell_type != "code":
            continue
        place += 1
        if is_compared(cell) and cell.execution_count is not None:
            cell.execution_count = place
            for out in cell.outputs:
                if "execution_count" in out:
                    out.execution_count = place
                if "metadata" in out:
                    out.metadata = {}
        else:
            cell.outputs = []
            cell.execution_count = None
    return nb


def strip_all_outputs(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Every output and execution count removed, the compared cells' too, in place (a generated lab)."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return nb


def committed_text(nb: nbformat.NotebookNode) -> str:
    """The exact text a cleaned notebook is committed as (clean, outputs, labs build all write it)."""
    return nbformat.writes(clean(nb)) + "\n"


SANITIZE_FILE = Path("tests") / "nbval-sanitize.cfg"  # under the course's root; run.py passes it to nbval


def _comparable(outputs: list, patterns: list[tuple[str, str]]) -> list:
    """A cell's outputs as nbval compares them: no metadata, no counts, strings through the sanitize file."""

    def sanitize(v):
        if isinstance(v, dict):
            return {k: sanitize(x) for k, x in v.items()}
        for regex, replace in patterns if isinstance(v, str) else ():
            v = re.sub(regex, replace, v)
        return v

    return [
        sanitize({k: v for k, v in o.items() if k not in ("metadata", "execution_count")}) for o in outputs
    ]


def _sanitize_patterns(notebook: Path) -> list[tuple[str, str]]:
    """The (regex, replace) pairs of the sanitize file of the course holding `notebook` (nbval's reader)."""
    from nbval.plugin import get_sanitize_patterns

    for folder in notebook.resolve().parents:
        if (folder / SANITIZE_FILE).is_file():
            return get_sanitize_patterns((folder / SANITIZE_FILE).read_text())
    return []


def fill_outputs(path: Path | str, timeout: float = 600.0) -> list[tuple[int, str]]:
    """Run a notebook under the simulator as CI's nbval does; write its compared cells' outputs only.

    The kernel is the notebook's own (its kernelspec, as nbval starts it), in
    the notebook's folder, with `KERNEL_ENV` over this process's
    environment; streams are merged with nbval's own `coalesce_streams`.
    Returns (nbval cell number, "filled" | "changed" | "unchanged") for each
    compared cell, compared through the course's sanitize file as nbval
    compares them; raises RuntimeError when a cell fails or a compared cell
    clears or updates its output (nbval keeps what Jupyter would replace).
    """
    import os

    from nbclient import NotebookClient
    from nbval.plugin import coalesce_streams

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    metadata = copy.deepcopy(nb.metadata)
    code = [c for c in nb.cells if c.cell_type == "code"]
    compared = [n for n, c in enumerate(code) if is_compared(c)]
    if not compared:
        return []
    patterns = _sanitize_patterns(path)
    before = {n: (code[n].execution_count, _comparable(code[n].outputs, patterns)) for n in compared}
    unstable: set[int] = set()

    class _Client(NotebookClient):
        def process_message(self, msg, cell, cell_index):
            if is_compared(cell) and msg["msg_type"] in ("clear_output", "update_display_data"):
                unstable.add(cell_index)
            return super().process_message(msg, cell, cell_index)

    client = _Client(
        nb,
        timeout=timeout,
        resources={"metadata": {"path": str(path.parent.resolve())}},
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
    )
    try:
        client.execute(env={**os.environ, **KERNEL_ENV})
    except Exception as e:
        raise RuntimeError(f"{path}: the notebook does not run clean under the simulator:\n{e}") from None
    client.nb.metadata = metadata  # the kernel's language_info (its Python version) is not ours to commit
    places = [i for i, c in enumerate(client.nb.cells) if c.cell_type == "code"]
    code = [client.nb.cells[i] for i in places]
    if unstable:
        cells = sorted(places.index(i) for i in unstable)
        raise RuntimeError(
            f"{path}: compared cells {cells} clear or update their output (a progress bar, a display "
            "handle); nbval keeps every message, Jupyter shows the last: print the final text once instead"
        )
    status = []
    for n in compared:
        cell = code[n]
        cell.outputs = coalesce_streams(cell.outputs)
        count, old = before[n]
        same = old == _comparable(cell.outputs, patterns)
        word = "filled" if count is None else "unchanged" if same else "changed"
        status.append((n, word))
    text = committed_text(client.nb)
    if path.read_text() != text:
        path.write_text(text)
    return status


def has_markers(nb: nbformat.NotebookNode) -> bool:
    """True when a notebook holds any solution or hidden-test marker."""
    return any(m in c.source for c in nb.cells for m in (BEGIN_SOLUTION, BEGIN_HIDDEN))


def make_lab(solution: Path) -> str:
    """The text of the lab notebook generated from one solution notebook."""
    nb = nbformat.read(solution, as_version=4)
    if not has_markers(nb):
        raise MarkerError(f"{solution}: no '{BEGIN_SOLUTION}' marker, so the lab would have no exercise")
    strip_all_outputs(clean(nb))
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
