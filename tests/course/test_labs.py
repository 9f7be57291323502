"""Lab generation from solutions (stubs, hidden tests, markers, sync check); compared cells, clean, nbval."""

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from cudalearn.course import labs

KERNEL = """from numba import cuda


@cuda.jit
def vector_add(a, b, out):
    i = cuda.grid(1)
    ### BEGIN SOLUTION
    if i < out.shape[0]:
        out[i] = a[i] + b[i]
    ### END SOLUTION"""

HOST = '''def blocks_for(n, threads):
    """How many blocks."""
    ### BEGIN SOLUTION
    return (n + threads - 1) // threads
    ### END SOLUTION'''

TEST = '''"""Checks vector_add."""
check(vector_add)
### BEGIN HIDDEN TESTS
check(vector_add, sizes=[1, 33])
### END HIDDEN TESTS'''


def test_kernel_stub_is_pass_not_raise():
    out = labs.strip_code(KERNEL)
    assert "out[i] = a[i] + b[i]" not in out
    assert out.endswith("    # YOUR CODE HERE\n    pass")
    assert "raise" not in out


def test_host_stub_raises_not_implemented():
    out = labs.strip_code(HOST)
    assert out.endswith("    # YOUR CODE HERE\n    raise NotImplementedError()")
    assert "return" not in out


def test_hidden_tests_are_removed_and_visible_ones_kept():
    out = labs.strip_code(TEST)
    assert out == '"""Checks vector_add."""\ncheck(vector_add)'


def test_kernel_stub_compiles_and_runs_to_a_not_done_message():
    from cudalearn import exercises

    ns = {}
    exec(labs.strip_code(KERNEL), ns)
    with pytest.raises(AssertionError, match="not done yet"):
        exercises.check_vector_add(ns["vector_add"])


@pytest.mark.parametrize(
    "bad, message",
    [
        ("### BEGIN SOLUTION\nx = 1", "has no"),
        ("x = 1\n### END SOLUTION", "without its BEGIN"),
        ("### BEGIN SOLUTION\n### BEGIN HIDDEN TESTS\n### END HIDDEN TESTS\n### END SOLUTION", "nested"),
    ],
)
def test_unbalanced_markers_are_refused(bad, message):
    with pytest.raises(labs.MarkerError, match=message):
        labs.strip_code(bad)


def test_markdown_answers_are_removed():
    md = "Why?\n\n### BEGIN SOLUTION\nBecause.\n### END SOLUTION\n"
    assert labs.strip_markdown(md) == "Why?\n\nYOUR ANSWER HERE\n"


def _write(path, cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nb.metadata["colab"] = {"provenance": []}
    nbformat.write(nb, path)


def test_build_and_check_round_trip(tmp_path):
    (tmp_path / "solutions").mkdir()
    code = nbformat.v4.new_code_cell(KERNEL)
    code.outputs = [nbformat.v4.new_output("stream", text="hi")]
    code.execution_count = 3
    _write(tmp_path / "solutions" / "02-x.ipynb", [code, nbformat.v4.new_code_cell(TEST)])
    assert [s.up_to_date for s in labs.check(tmp_path)] == [False]
    labs.build(tmp_path)
    assert all(s.up_to_date for s in labs.check(tmp_path))
    lab = nbformat.read(tmp_path / "labs" / "02-x.ipynb", as_version=4)
    assert lab.cells[0].outputs == [] and lab.cells[0].execution_count is None
    assert (
        "colab" not in lab.metadata and lab.metadata["cudalearn"]["generated_from"] == "solutions/02-x.ipynb"
    )
    assert not labs.has_markers(lab)
    # editing the lab by hand, or leaving an orphan lab, is caught
    (tmp_path / "labs" / "02-x.ipynb").write_text((tmp_path / "labs" / "02-x.ipynb").read_text() + " ")
    (tmp_path / "labs" / "09-orphan.ipynb").write_text("{}")
    reasons = sorted(s.reason for s in labs.check(tmp_path) if not s.up_to_date)
    assert reasons == ["differs from its solution notebook", "has no solution notebook"]
    labs.build(tmp_path)
    assert all(s.up_to_date for s in labs.check(tmp_path))


def test_a_solution_without_exercise_is_refused(tmp_path):
    (tmp_path / "solutions").mkdir()
    _write(tmp_path / "solutions" / "00-x.ipynb", [nbformat.v4.new_code_cell("x = 1")])
    [status] = labs.check(tmp_path)
    assert not status.up_to_date and "no '### BEGIN SOLUTION'" in status.reason


# Compared cells (first line `# NBVAL_CHECK_OUTPUT`): clean keeps them, labs drop them, nbval checks them.

MARKED = "# NBVAL_CHECK_OUTPUT\nprint(6 * 7)"


def _stdout(text, count):
    cell = nbformat.v4.new_code_cell(MARKED)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    cell.execution_count = count
    return cell


def _with_outputs(source, count=5):
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [
        nbformat.v4.new_output(
            "execute_result", data={"text/plain": "1"}, execution_count=count, metadata={"a": 1}
        )
    ]
    cell.execution_count = count
    return cell


def test_clean_keeps_exactly_the_filled_compared_cells():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# t"),
        _with_outputs("x = 1\nx"),  # not compared
        _with_outputs("# NBVAL_CHECK_OUTPUT\nx", count=17),  # compared: kept, count renumbered to place 2
        _with_outputs("x\n# NBVAL_CHECK_OUTPUT"),  # marker not on line 1: not compared, and reported
        _with_outputs(" # NBVAL_CHECK_OUTPUT\nx"),  # indented: not line 1 exactly, reported
        _stdout("42\n", None),  # marked but never filled (no count): nbval would refuse it, clean strips it
    ]
    labs.clean(nb)
    kept = [n for n, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert kept == [2]
    out = nb.cells[2].outputs[0]
    assert nb.cells[2].execution_count == 2 and out.execution_count == 2 and out.metadata == {}
    assert out.data == {"text/plain": "1"}
    assert [labs.is_compared(c) for c in nb.cells] == [False, False, True, False, False, True]
    problems = labs.marker_problems(nb)
    assert len(problems) == 2 and problems[0].startswith("Cell 2:") and problems[1].startswith("Cell 3:")
    text = labs.committed_text(nb)
    assert labs.committed_text(nbformat.reads(text, as_version=4)) == text  # cleaning is idempotent


def test_nbval_tags_and_other_markers_are_reported():
    nb = nbformat.v4.new_notebook()
    tagged = nbformat.v4.new_code_cell("x = 1")
    tagged.metadata["tags"] = ["nbval-check-output"]
    nb.cells = [
        tagged,
        nbformat.v4.new_code_cell("# NBVAL_IGNORE_OUTPUT\nx"),
        nbformat.v4.new_code_cell("#x"),
    ]
    problems = labs.marker_problems(nb)
    assert [p.split(":")[0] for p in problems] == ["Cell 0", "Cell 1"]


def test_a_lab_keeps_no_output_and_no_marker(tmp_path):
    (tmp_path / "solutions").mkdir()
    _write(tmp_path / "solutions" / "02-x.ipynb", [_stdout("42\n", 3), nbformat.v4.new_code_cell(KERNEL)])
    labs.build(tmp_path)
    lab = nbformat.read(tmp_path / "labs" / "02-x.ipynb", as_version=4)
    assert lab.cells[0].source == "print(6 * 7)" == labs.strip_code(MARKED)  # the grader's student view too
    assert lab.cells[0].outputs == [] and lab.cells[0].execution_count is None
    sol = nbformat.read(tmp_path / "solutions" / "02-x.ipynb", as_version=4)
    assert labs.is_compared(sol.cells[0]) and sol.cells[0].outputs  # the source keeps them


def test_fill_outputs_refuses_a_compared_cell_that_clears_its_output(tmp_path):
    path = tmp_path / "t.ipynb"
    clears = (
        "# NBVAL_CHECK_OUTPUT\nfrom IPython.display import clear_output\nprint(1)\nclear_output()\nprint(2)"
    )
    _write(path, [nbformat.v4.new_code_cell(clears)])
    before = path.read_text()
    with pytest.raises(RuntimeError, match=r"compared cells \[0\] clear or update"):
        labs.fill_outputs(path, timeout=60)
    assert path.read_text() == before


def test_nbval_fails_when_a_committed_compared_output_changes(tmp_path):
    """End to end: fill with fill_outputs, then nbval as run.py runs it; a changed output must fail."""
    root = Path(__file__).resolve().parents[2]
    cells = [
        nbformat.v4.new_markdown_cell("# t"),
        nbformat.v4.new_code_cell(
            "# NBVAL_CHECK_OUTPUT\nimport os\nprint(6 * 7, os.environ['CUDALEARN_MODE'])"
        ),
        nbformat.v4.new_code_cell("import random\nprint(random.random())"),  # not compared
        nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nobject()"),  # an address: the sanitize file's job
        nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nimport cudalearn\nprint(cudalearn.__file__)"),
    ]
    filled = tmp_path / "filled.ipynb"
    _write(filled, cells)
    (tmp_path / "tests").mkdir()  # the course layout: fill_outputs finds the sanitize file above the notebook
    (tmp_path / "tests" / "nbval-sanitize.cfg").write_text(
        (root / "tests" / "nbval-sanitize.cfg").read_text()
    )
    status = labs.fill_outputs(filled, timeout=120)
    assert status == [(0, "filled"), (2, "filled"), (3, "filled")]
    text = filled.read_text()
    assert labs.committed_text(nbformat.reads(text, as_version=4)) == text  # clean --check accepts it
    nb = nbformat.reads(text, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[0].outputs[0].text == "42 sim\n" and code[1].outputs == []
    assert "at 0x" in code[2].outputs[0].data["text/plain"]

    def variant(name, edit):
        other = nbformat.reads(text, as_version=4)
        edit([c for c in other.cells if c.cell_type == "code"])
        nbformat.write(other, tmp_path / name)

    def change(code):
        code[0].outputs[0].text = "41 sim\n"

    def elsewhere(code):  # the same file seen from another checkout
        out = code[3].outputs[0]
        out.text = "/somewhere/else" + out.text[out.text.index("/src/cudalearn/") :]

    def change_uncounted(code):  # what nbval does with a compared cell whose count was cleared
        change(code)
        code[0].execution_count = None
        code[0].outputs = []

    variant("changed.ipynb", change)
    variant("moved.ipynb", elsewhere)
    variant("uncounted.ipynb", change_uncounted)
    cmd = [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-sanitize-with"]
    cmd += [str(tmp_path / "tests" / "nbval-sanitize.cfg"), "-p", "no:cacheprovider", "-rA", "--color=no"]
    cmd += [f"--rootdir={tmp_path}"]
    cmd += ["filled.ipynb", "changed.ipynb", "moved.ipynb", "uncounted.ipynb"]
    run = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    outcome = {}
    for line in run.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR"):
            outcome[rest.split(" - ")[0]] = word
    assert len(outcome) == 16, (
        f"nbval ran {len(outcome)} cells, expected 4 notebooks x 4:\n{run.stdout[-3000:]}"
    )
    failed = sorted(k for k, v in outcome.items() if v != "PASSED")
    # a changed compared output fails; the address and the checkout's path are sanitized; a compared cell
    # with no committed count is not compared at all (why `clean` keeps the count of compared cells)
    assert failed == ["changed.ipynb::Cell 0"], run.stdout[-3000:]
    # filled again: the same text, up to what the sanitize file masks (the address)
    assert labs.fill_outputs(tmp_path / "changed.ipynb", timeout=120) == [
        (0, "changed"),
        (2, "unchanged"),
        (3, "unchanged"),
    ]
