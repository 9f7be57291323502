"""An answer cell's imports for a traced kernel: the judge's own modules and objects, never theirs (labs 3-5).

`rebuild.Rebuilder` records each import of the answer cells as an
`ImportBinding`; a kernel's name bound by one resolves to the object the
judge imported itself when the import names a module of IMPORTABLE (and a
name of it a kernel may use), and is refused naming the import line
otherwise.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from cudalearn.grading.kernel_subset import IMPORTABLE, Unsafe, judge_module


class ImportBinding:
    """One name an answer cell's import binds (`import numpy as np`, `from numba import float32`)."""

    def __init__(self, ex: int, node: ast.Import | ast.ImportFrom, alias: ast.alias):
        self.node, self.alias = node, alias
        self.text = ast.unparse(node)
        self.place = f"exercise {ex}, line {node.lineno}"

    def followed_star(self) -> str | None:
        """The module of `from module import *` when the judge resolves names through it (numpy, math,
        numba); None for a relative import, another module, or numba.cuda (its calls go through `cuda.`)."""
        module = self.node.module or ""
        if self.node.level or module not in IMPORTABLE or module == "numba.cuda":
            return None
        return module

    def value(self, name: str, where: str, already: Callable[[str], str]) -> Any:
        """The judge's object this import binds to `name`; Unsafe, naming the import line, if not allowed.

        `already(name)` says that the notebook's first cells import `name` already ('' if not).
        """
        node, alias = self.node, self.alias
        what = f"{where}: `{name}` comes from `{self.text}` ({self.place})"
        refuse = (
            f"{what}, which the grader cannot accept: a kernel it traces uses only numpy, math, numba and "
            f"numba.cuda (and names from them, such as float32). Remove this import from the exercise cell"
            + (already(name) or f", and `{name}` from the kernel")
        )
        if isinstance(node, ast.Import):
            if alias.name not in IMPORTABLE:
                raise Unsafe(refuse)
            return judge_module(alias.name if alias.asname else alias.name.split(".")[0])
        module = node.module or ""
        if node.level or module not in IMPORTABLE:
            raise Unsafe(refuse)
        names = IMPORTABLE[module]
        if module == "numba.cuda":
            raise Unsafe(
                f"{what}; the grader traces a kernel's CUDA calls through the module, so write "
                f"`cuda.{alias.name}`. Remove this import from the exercise cell{already('cuda')}"
            )
        if alias.name.startswith("_") or (names is not None and alias.name not in names):
            raise Unsafe(refuse)
        try:
            return getattr(judge_module(module), alias.name)
        except AttributeError:
            raise Unsafe(f"{where}: `{self.text}` ({self.place}): `{module}` has no `{alias.name}`") from None
