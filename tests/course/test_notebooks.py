"""Notebook conventions: one first cell, outputs only in compared cells, a lab per chapter, summaries."""

import re
from pathlib import Path

import nbformat
import pytest

import cudalearn
from cudalearn.course import labs

ROOT = Path(__file__).resolve().parents[2]
ALL = (
    sorted(ROOT.glob("book/*.ipynb"))
    + sorted(ROOT.glob("solutions/*.ipynb"))
    + sorted(ROOT.glob("labs/*.ipynb"))
)


def test_there_are_notebooks():
    assert len(list(ROOT.glob("book/*.ipynb"))) >= 3


@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_first_code_cell_is_the_setup_cell(path):
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert first.source == cudalearn.SETUP_CELL, f"{path}: the first code cell must be cudalearn.SETUP_CELL"
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")


MIN_COMPARED = 1  # compared cells (first line `# NBVAL_CHECK_OUTPUT`) in every book chapter, at least
# (a lab's outputs are mostly its checks, whose first line must be their docstring: solutions need none)
FILL = "run `cudalearn outputs {path}` (it runs the notebook under the simulator, as CI does)"


def _code(path):
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_clean_but_compared_cells(path):
    nb = nbformat.read(path, as_version=4)
    rel = path.relative_to(ROOT)
    assert labs.marker_problems(nb) == [], f"{rel}: nbval markers outside the protocol"
    for n, cell in enumerate(_code(path)):
        if labs.is_compared(cell) and rel.parts[0] != "labs":
            continue
        assert not cell.outputs and cell.execution_count is None, (
            f"{rel} Cell {n}: outputs or a count in a cell nbval does not compare: run `cudalearn clean`"
        )
    assert "colab" not in nb.metadata and "widgets" not in nb.metadata


@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_compared_cells_hold_filled_text_outputs(path):
    rel = path.relative_to(ROOT)
    for n, cell in enumerate(_code(path)):
        if not labs.is_compared(cell):
            continue
        assert rel.parts[0] != "labs", f"{rel} Cell {n}: a lab keeps no marker; run `cudalearn labs build`"
        assert cell.execution_count is not None and cell.outputs, (
            f"{rel} Cell {n}: a compared cell with no committed output (nbval skips a cell whose count is "
            f"None, so it checks nothing): {FILL.format(path=rel)}"
        )
        for out in cell.outputs:
            kinds = set(out.get("data", {})) | {out.get("name", out.output_type)}
            bad = sorted(k for k in kinds if k.startswith("image/") or k in ("stderr", "error"))
            assert not bad, (
                f"{rel} Cell {n}: a compared cell's output holds {bad}; nbval ignores images, and a warning "
                "or an error is no deterministic result: compare numbers, filter the warning at its source"
            )


@pytest.mark.parametrize("path", sorted(ROOT.glob("book/*.ipynb")), ids=lambda p: p.name)
def test_every_book_chapter_has_compared_cells(path):
    rel = path.relative_to(ROOT)
    compared = sum(labs.is_compared(c) for c in _code(path))
    assert compared >= MIN_COMPARED, (
        f"{rel}: {compared} compared cells, at least {MIN_COMPARED} expected; start each cell whose output "
        "is the same on any machine under the simulator (counts, shapes, FLOPs, bytes, tracer and "
        f"stored-reference tables, claims tables) with `# NBVAL_CHECK_OUTPUT`, then {FILL.format(path=rel)}"
    )


def test_every_chapter_has_book_solution_and_lab():
    """Each chapter's core notebook has its solution and lab; a deep dive (book/NN<letter>-slug.ipynb)
    belongs to the chapter NN that has a core notebook, and has no lab of its own."""
    deep = {p.name for p in ROOT.glob("book/*.ipynb") if re.match(r"\d\d[a-z]-", p.name)}
    books = {p.name for p in ROOT.glob("book/*.ipynb")} - deep
    sols = {p.name for p in ROOT.glob("solutions/*.ipynb")}
    lab_names = {p.name for p in ROOT.glob("labs/*.ipynb")}
    assert books == sols == lab_names
    cores = {name[:2] for name in books}
    assert all(name[:2] in cores for name in deep), sorted(deep)


@pytest.mark.parametrize("path", sorted(ROOT.glob("book/*.ipynb")), ids=lambda p: p.name)
def test_book_chapters_end_with_summary_and_exercises(path):
    md = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"]
    heads = [s.splitlines()[0].lower() for s in md[-3:]]
    assert any("summary" in h for h in heads) and any("exercise" in h for h in heads), path


@pytest.mark.parametrize("path", sorted(ROOT.glob("solutions/*.ipynb")), ids=lambda p: p.name)
def test_every_exercise_has_a_check_with_hidden_tests(path):
    cells = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    solutions = [i for i, s in enumerate(cells) if "### BEGIN SOLUTION" in s]
    assert 2 <= len(solutions) <= 4, f"{path}: a lab has 2-4 exercises"
    for i in solutions:
        nxt = cells[i + 1] if i + 1 < len(cells) else ""
        assert nxt.lstrip().startswith('"""'), (
            f"{path}: the cell after exercise cell {i} must be a documented check"
        )
        assert "### BEGIN HIDDEN TESTS" in nxt, (
            f"{path}: the check after exercise cell {i} has no hidden tests"
        )
