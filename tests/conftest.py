"""Test setup: every test process runs the course in simulator mode unless told otherwise."""

import os

os.environ.setdefault("CUDALEARN_MODE", "sim")
os.environ.setdefault("MPLBACKEND", "Agg")

import cudalearn  # noqa: E402

cudalearn.setup(quiet=True)
