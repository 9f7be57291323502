"""The chapters' own code, one folder a chapter (`chNN/`), and what finds it by convention.

Each chapter folder holds files with fixed role names, each a module or a
package of modules named for what they hold: `kernels` (the kernels the book
shows and the benchmarks time), `checks` (the lab's checks), `sizes` (problem
sizes per run mode), `bench` (what the chapter times), `figures` (what the
book draws), `model` (its network), and modules named for what else they do.
A chapter imports the lower layers of the package and earlier chapters only
(tests/test_layers.py).

Importing this package does nothing: no run mode is chosen and Numba is not
imported. A kernel module takes `cuda` and numba's scalar types from
`cudalearn.runtime.numba_backend` (`from cudalearn.runtime.numba_backend import cuda, float32`),
never from `numba`: that fixes the run mode (a quiet `cudalearn.setup()` if no
cell ran it) and the compiler, numba-cuda or numba-cuda-mlir, for the whole
process, the same for every kernel module.

A kernel module is found by convention, not listed anywhere
(`kernel_modules()`): every module of a chapter's `kernels` that defines a
`@cuda.jit` kernel, and any module of `cudalearn` that defines `SIGNATURES`, a dict from
each kernel it defines to a Numba signature. The test suite compiles every
one of them to real PTX for sm_75 and sm_90, and fails when a kernel of this
chapter's `kernels` has no signature.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # src/cudalearn


def _signatures_or_kernels(source: str) -> tuple[bool, bool]:
    """(assigns SIGNATURES at top level, decorates a function with cuda.jit) for a module's source."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False, False
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    jit = any(
        isinstance(node, ast.FunctionDef) and any("cuda.jit" in ast.unparse(d) for d in node.decorator_list)
        for node in ast.walk(tree)
    )
    return "SIGNATURES" in names, jit


def is_kernels_module(path: Path, root: Path = PACKAGE_ROOT) -> bool:
    """Whether `path` is a chapter's `kernels.py` or a module of its `kernels/` package (all chapters)."""
    rel = path.relative_to(root).parts
    if len(rel) < 3 or rel[0] != "chapters":
        return False
    return rel[2] == "kernels.py" or (rel[2] == "kernels" and len(rel) == 4)


def chapter_folders(root: Path = PACKAGE_ROOT) -> list[Path]:
    """root/chapters/chNN of every chapter, in chapter order (all chapters)."""
    return sorted(p for p in (root / "chapters").glob("ch[0-9][0-9]") if p.is_dir())


def kernel_modules(root: Path = PACKAGE_ROOT) -> list[str]:
    """Dotted names, sorted, of the chapters' kernel modules with kernels and of root's with SIGNATURES.

    Found from the source files, without importing any: what the PTX and drift tests cover (all chapters).
    """
    found = []
    for path in sorted(root.rglob("*.py")):
        signatures, jit = _signatures_or_kernels(path.read_text(encoding="utf-8"))
        if signatures or (jit and is_kernels_module(path, root)):
            parts = path.relative_to(root.parent).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found
