"""Notebook conventions: the same first cell, no outputs, a lab for each chapter, summary and exercises."""

from pathlib import Path

import nbformat
import pytest

import cudalearn

ROOT = Path(__file__).resolve().parents[1]
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


@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, f"{path}: run `cudalearn clean`"
    assert "colab" not in nb.metadata and "widgets" not in nb.metadata


def test_every_chapter_has_book_solution_and_lab():
    books = {p.name for p in ROOT.glob("book/*.ipynb")}
    sols = {p.name for p in ROOT.glob("solutions/*.ipynb")}
    lab_names = {p.name for p in ROOT.glob("labs/*.ipynb")}
    assert books == sols == lab_names


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
