"""Lab 02's corpus (corpus.py beside this file) through its visible checks and `cudalearn grade`."""

from mutations import suite

suite.define(globals(), "02")
