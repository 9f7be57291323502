"""Test setup: every test process runs the course in simulator mode unless told otherwise."""

import os

import pytest

os.environ.setdefault("CUDALEARN_MODE", "sim")
os.environ.setdefault("MPLBACKEND", "Agg")

import cudalearn  # noqa: E402

cudalearn.setup(quiet=True)


@pytest.fixture
def one_torch_thread():
    """PyTorch on one CPU thread for the test (Chapters 8-9's small models run faster, and reproducibly)."""
    with cudalearn.runtime.device.one_torch_thread():
        yield
