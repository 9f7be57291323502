"""The book's shape (issue 30): chapters and their deep dives by name, linked both ways, within limits."""

from pathlib import Path

import nbformat
import pytest

from cudalearn.course import book

ROOT = Path(__file__).resolve().parents[2]
PARTS = book.notebooks(ROOT)


def _md(path: Path) -> str:
    return "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")


def test_names_order_and_parts():
    assert [p.path for p in PARTS] == sorted(ROOT.glob("book/*.ipynb")), "every notebook is NN[x]-slug"
    five = book.part("book/05a-tuned-network.ipynb")
    assert (five.number, five.letter, five.slug, five.is_core) == (5, "a", "tuned-network", False)
    assert book.part("book/05-fusion-shallow-net.ipynb").is_core
    assert sorted(["05b-x.ipynb", "06-y.ipynb", "05-z.ipynb", "05a-w.ipynb"])[:3] == [
        "05-z.ipynb",
        "05a-w.ipynb",
        "05b-x.ipynb",
    ], "file-name order is reading order: a chapter, then its deep dives"
    for bad in ("5-x.ipynb", "05A-x.ipynb", "05-X.ipynb", "05ab-x.ipynb", "05-x_y.ipynb"):
        with pytest.raises(ValueError, match="NN-slug.ipynb"):
            book.part(bad)


@pytest.mark.parametrize("p", PARTS, ids=lambda p: p.path.name)
def test_title_names_the_chapter_and_deep_dives_link_both_ways(p):
    title = nbformat.read(p.path, as_version=4).cells[0].source.splitlines()[0]
    assert title.startswith(f"# Chapter {p.number}{p.letter} · "), f"{p.path.name}: title {title!r}"
    if p.is_core:
        text = _md(p.path)
        for dive in book.deep_dives(p.path):
            assert f"]({dive.name})" in text, f"{p.path.name} does not link its deep dive {dive.name}"
    else:
        cores = [c for c in book.chapters(ROOT) if book.part(c).number == p.number]
        assert cores, f"{p.path.name}: a deep dive of chapter {p.number}, which has no core notebook"
        assert f"]({cores[0].name})" in _md(p.path), f"{p.path.name} does not link back to {cores[0].name}"


@pytest.mark.parametrize("p", PARTS, ids=lambda p: p.path.name)
def test_book_notebook_keeps_the_limits(p):
    """At most 45 cells, 3,500 words, 40 lines a code cell, 100 columns an output line; sources compared."""
    problems = book.limit_problems(nbformat.read(p.path, as_version=4))
    assert not problems, f"{p.path.name}: " + "; ".join(problems)


def test_limit_problems_finds_each_limit():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("word " * 3000 + "\n```\n" + "code " * 900 + "\n```")]
    nb.cells += [nbformat.v4.new_code_cell("x = 1\n" * 40)]
    assert book.limit_problems(nb) == [], "3,000 words of prose (fenced code is not prose), 40 lines"
    nb.cells[0].source += " word" * 501
    nb.cells[1].source += "y = 2\n"
    out = nbformat.v4.new_output("stream", name="stdout", text="ok\n" + "x" * 101 + "\n")
    nb.cells[1].outputs = [out]
    nb.cells += [nbformat.v4.new_code_cell("") for _ in range(44)]
    found = book.limit_problems(nb)
    assert any("3,501 words" in f for f in found) and any("41 lines" in f for f in found)
    assert any("101 columns" in f for f in found) and any("46 cells" in f for f in found)
    nb.cells[2].source = "cudalearn.show_source(kernel)"
    assert any("cell 2 shows a kernel's source" in f for f in book.limit_problems(nb))
    nb.cells[2].source = "# NBVAL_CHECK_OUTPUT\ncudalearn.show_source(kernel)"
    assert not any("cell 2" in f for f in book.limit_problems(nb))


def test_words_counts_the_way_that_finds_more():
    """A hyphenated or slashed term is several words to one common counter: the limit holds for both."""
    assert book.words("GPU-to-GPU copies, x/y: don't") == 7  # GPU to GPU copies x y, and don't is one
    assert book.words("a — b = c") == 5  # marks alone are words to a whitespace counter
    assert book.words("prose\n```python\nnot = prose\n```\nmore") == 2
