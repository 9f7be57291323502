"""`cudalearn progress`: a student's labs run in a fresh kernel; each exercise passes, fails or is not done"""

import argparse
import sys
from pathlib import Path

import nbformat

from cudalearn.course import progress

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "grading"))
import plants  # noqa: E402

SCALE_WITHOUT_ALPHA = plants.EX2_OK.replace("alpha * x[i]", "x[i]")


def _lab(folder, name, ex1=None, ex2=None):
    nb = plants.lab_notebook()
    if ex1 is not None:
        plants._set(nb, "ex1", ex1)
    if ex2 is not None:
        plants._set(nb, "ex2", ex2)
    nbformat.write(nb, folder / name)
    return folder / name


def test_progress_reports_pass_fail_and_not_done(tmp_path, capsys):
    labs = tmp_path / "labs"
    labs.mkdir()
    half = _lab(labs, "00-half.ipynb", ex1=plants.EX1_OK)
    _lab(labs, "01-wrong.ipynb", ex1="def blocks_for(n, threads)\n    return 1", ex2=SCALE_WITHOUT_ALPHA)
    before = half.read_text()
    parser = argparse.ArgumentParser()
    progress.add_arguments(parser)
    assert progress.command(parser.parse_args([str(labs), "--timeout", "60"])) == 1
    out = capsys.readouterr().out
    assert half.read_text() == before  # the student's notebook is not touched
    lines = [line.strip() for line in out.splitlines()]
    i = lines.index(f"{half}: 1 of 2 exercises pass")
    assert (
        lines[i + 1] == "pass          Check blocks_for: it rounds up, so the last partial block is covered."
    )
    assert lines[i + 2].startswith("not done yet  Check scale")
    j = next(k for k, line in enumerate(lines) if line.endswith("01-wrong.ipynb: 0 of 2 exercises pass"))
    assert lines[j + 1].startswith("fail          Check blocks_for")
    assert lines[j + 2].startswith("your exercise cell raised SyntaxError: expected ':'")
    assert lines[j + 3].startswith("fail          Check scale")
    # the first line of the check's own message
    assert lines[j + 4].startswith("`out` is wrong at 64 of 64 elements. First wrong element out[0]")
    assert lines[-1] == "1 of 4 exercises pass in 2 notebook(s)."


def test_a_notebook_whose_kernel_dies_says_so(tmp_path):
    path = _lab(tmp_path, "lab.ipynb", ex1="import os\n\nos._exit(1)")
    report = progress.run(path, timeout=60)
    assert [e.status for e in report.exercises] == ["not run", "not run"]
    assert "the kernel died while running cell 5" in report.exercises[0].message


def test_check_cells_are_found_by_their_docstring_and_check_call():
    nb = plants.lab_notebook()
    found = [progress.label(c.source) for c in nb.cells if progress.is_check(c)]
    assert found == [
        "Check blocks_for: it rounds up, so the last partial block is covered.",
        "Check scale: every element right, and no thread past the end of the arrays.",
    ]
    assert not progress.is_check(nbformat.v4.new_code_cell('"""A helper."""\nx = 1'))


def test_an_unreadable_notebook_is_reported(tmp_path):
    bad = tmp_path / "bad.ipynb"
    bad.write_text("{")
    assert "cannot read it as a notebook" in progress.show(progress.run(bad))


def test_a_failure_shows_the_whole_message_and_names_the_earlier_exercise_it_uses(tmp_path):
    ex1 = "def blocks_for(n, threads):\n    return n // threads"
    ex2 = SCALE_WITHOUT_ALPHA + "\n\nGRID = blocks_for(64, 32)  # uses exercise 1's answer\n"
    report = progress.run(_lab(tmp_path, "lab.ipynb", ex1=ex1, ex2=ex2), timeout=60)
    first, second = report.exercises
    assert first.status == second.status == "fail"
    assert "Hint: n // threads rounds down" in first.message  # the hint, not only the first line
    assert "`blocks_for` from exercise 1, which fails too: fix exercise 1 first." in second.message
    assert "exercise 1" not in first.message
    shown = progress.show(report).splitlines()
    assert all(f"{'':16}{line}" in shown for line in second.message.splitlines())  # every line, indented


def test_the_cudalearn_command_imports_nbformat_without_jsonschemas_iri_grammar():
    """rfc3987-syntax builds an Earley parser on import (about 1 s of CPU, several seconds under load),
    which every `cudalearn` command paid through nbformat for a format checker nothing there uses."""
    import subprocess

    code = (
        "import sys\n"
        "from cudalearn import cli\n"
        "try:\n"
        "    cli.main(['progress', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('nbformat' in sys.modules, sys.modules.get('rfc3987_syntax', 'absent'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "True None", out.stdout[-2000:]


def test_python_dash_m_cudalearn_is_the_cudalearn_command():
    """`python -m cudalearn doctor` works where only the interpreter is on PATH (a Colab cell, a venv)."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "cudalearn", "progress", "--help"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "usage: cudalearn progress" in out.stdout
