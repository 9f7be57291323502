"""Stored GPU figures: `reference/` holds every run, in one format, listed by `cudalearn reference`."""
