"""Keeps jsonschema's IRI grammar out of the `cudalearn` command (all its subcommands: progress, grade, site).

jsonschema registers an "iri" format checker when rfc3987-syntax is installed (JupyterLab's jupyter-events
brings it), and that module builds a Lark Earley parser of RFC 3987's grammar on import: 4.5 to 6.6 s of
one core on this course's machine of 2 shared cores (`python -X importtime -c "import nbformat"`,
2026-12-06), paid by every `cudalearn` command through `import nbformat`. nbformat's notebook schemas use
no "format" keyword and nbformat validates without a format checker, so a process that reads, validates
and runs notebooks never calls that parser; the Jupyter server, a process of its own, keeps it.
"""

from __future__ import annotations

import sys

MODULE = "rfc3987_syntax"


def skip() -> None:
    """Make `import rfc3987_syntax` fail in this process, unless it is imported already: jsonschema then
    registers no "iri" format checker (notebook validation uses none)."""
    sys.modules.setdefault(MODULE, None)
