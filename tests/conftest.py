"""Test setup: every test process runs the course in simulator mode unless told otherwise.

Also: the test areas' markers (registered in pyproject.toml, `--strict-markers`), `--lab NN` to run one
lab's mutation corpus and nothing else, and the time each area took, printed at the end of the run.
"""

import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

os.environ.setdefault("CUDALEARN_MODE", "sim")
os.environ.setdefault("MPLBACKEND", "Agg")
sys.path.insert(0, str(Path(__file__).resolve().parent))  # `mutations` and `browser`, from any test folder

import cudalearn  # noqa: E402

cudalearn.setup(quiet=True)

#: marker -> what it marks; an area's time is printed under its marker (`other` for the rest)
AREAS = ("corpus", "grader", "notebooks", "site", "compile")


def pytest_addoption(parser):
    parser.addoption(
        "--lab",
        metavar="NN",
        help="run only lab NN's mutation corpus (its visible checks, its grading, its solution's grade)",
    )


def _lab_of(item) -> str | None:
    """The lab ('05') a corpus item is about, or None for any other item."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "entry" in params:
        return params["entry"][0]
    return params.get("lab") if item.get_closest_marker("corpus") else None


def pytest_collection_modifyitems(config, items):
    for item in items:
        if type(item).__name__ == "IPyNbCell":  # nbval's cells of book/ and solutions/
            item.add_marker(pytest.mark.notebooks)
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


def _area(item) -> str:
    return next((m for m in AREAS if item.get_closest_marker(m)), "other")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    t0 = time.perf_counter()
    yield
    area = _area(item)
    _SPENT[area] += time.perf_counter() - t0
    _COUNT[area] += 1


def pytest_terminal_summary(terminalreporter):
    if not _SPENT:
        return
    terminalreporter.section("time by area")
    for area in sorted(_SPENT, key=_SPENT.get, reverse=True):
        terminalreporter.write_line(f"{area:>10}: {_SPENT[area]:7.0f} s  ({_COUNT[area]} tests)")


@pytest.fixture
def one_torch_thread():
    """PyTorch on one CPU thread for the test (Chapters 8-9's small models run faster, and reproducibly)."""
    with cudalearn.runtime.device.one_torch_thread():
        yield
