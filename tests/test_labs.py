"""Lab generation from solutions: stubs, hidden tests removed, markers validated, sync check."""

import nbformat
import pytest

from cudalearn import labs

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
