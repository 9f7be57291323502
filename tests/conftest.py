"""Test setup: every test process runs the course in simulator mode unless told otherwise.

Also: the test areas' markers (registered in pyproject.toml, `--strict-markers`), `--lab NN` to run one
lab's mutation corpus and nothing else, and the time each area took, printed at the end of the run.
`run.py test` runs pytest on every core with `--dist loadfile`: a test file (a module's fixtures, a lab's
corpus, a notebook's cells) runs in one worker, in order, and each worker's processes share its cores.
"""

import os
import sys
from collections import defaultdict
from pathlib import Path

import pytest

os.environ.setdefault("CUDALEARN_MODE", "sim")
os.environ.setdefault("MPLBACKEND", "Agg")
sys.path.insert(0, str(Path(__file__).resolve().parent))  # `mutations` and `browser`, from any test folder

import cudalearn  # noqa: E402
from cudalearn.course import kernel_env  # noqa: E402

cudalearn.setup(quiet=True)
# pytest-xdist runs a worker per core, and each worker's notebook kernels (nbval), judges and subprocesses
# inherit this environment: one CPU thread each for PyTorch and the BLAS, as side by side kernels need
# (course/kernel_env.py says why: threads spinning on barriers of parked threads cost several-fold).
os.environ.update(kernel_env.side_by_side(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))

#: marker -> what it marks; an area's time is printed under its marker (`other` for the rest)
AREAS = ("corpus", "grader", "notebooks", "site", "compile")


def pytest_addoption(parser):
    parser.addoption(
        "--lab",
        metavar="NN",
        help="run only lab NN's mutation corpus (its visible checks, its grading, its solution's grade)",
    )


def _lab_of(item) -> str | None:
    """The lab ('05') a corpus test is about (its module's LAB: tests/chapters/chNN/test_corpus_labNN.py)."""
    return getattr(getattr(item, "module", None), "LAB", None) if item.get_closest_marker("corpus") else None


def pytest_collection_modifyitems(config, items):
    for item in items:  # a session hook: it sees book/ and solutions/ too, where no hook of this folder runs
        if type(item).__name__ == "IPyNbCell":  # nbval's cells of book/ and solutions/
            item.add_marker(pytest.mark.notebooks)
        area = next((m for m in AREAS if item.get_closest_marker(m)), "other")
        item.user_properties.append(("area", area))  # user_properties cross pytest-xdist's wire
    lab = config.getoption("--lab")
    if lab is None:
        return
    lab = f"{int(lab):02d}"
    keep = [i for i in items if i.get_closest_marker("corpus") and _lab_of(i) == lab]
    if not keep:
        raise pytest.UsageError(f"--lab {lab}: no corpus test of lab {lab} was collected (is tests/ given?)")
    config.hook.pytest_deselected(items=[i for i in items if i not in keep])
    items[:] = keep


_SPENT: dict = defaultdict(float)
_COUNT: dict = defaultdict(int)


def pytest_runtest_logreport(report):
    """Add up each test's time by area (in the main process, under pytest-xdist too)."""
    area = dict(report.user_properties).get("area", "other")
    _SPENT[area] += report.duration
    _COUNT[area] += report.when == "call"


def pytest_terminal_summary(terminalreporter, config):
    if not _SPENT or hasattr(config, "workerinput"):
        return
    workers = getattr(config.option, "numprocesses", None)
    terminalreporter.section("time by area" + (f" (summed over {workers} workers)" if workers else ""))
    for area in sorted(_SPENT, key=_SPENT.get, reverse=True):
        terminalreporter.write_line(f"{area:>10}: {_SPENT[area]:7.0f} s  ({_COUNT[area]} tests)")


@pytest.fixture
def one_torch_thread():
    """PyTorch on one CPU thread for the test (Chapters 8-9's small models run faster, and reproducibly)."""
    with cudalearn.runtime.device.one_torch_thread():
        yield
