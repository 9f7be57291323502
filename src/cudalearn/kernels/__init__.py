"""The reference kernels the book shows and the benchmarks time (Chapters 0-9).

Importing this package does nothing: no run mode is chosen and Numba is not
imported. A kernel module takes `cuda` and numba's scalar types from
`cudalearn.numba_backend` (`from cudalearn.numba_backend import cuda, float32`),
never from `numba`: that fixes the run mode (a quiet `cudalearn.setup()` if no
cell ran it) and the compiler, numba-cuda or numba-cuda-mlir, for the whole
process, the same for every kernel module.

A kernel module is found by convention, not listed anywhere
(`kernel_modules()`): every module of this package that defines a `@cuda.jit`
kernel, and any module of `cudalearn` that defines `SIGNATURES`, a dict from
each kernel it defines to a Numba signature. The test suite compiles every
one of them to real PTX for sm_75 and sm_90, and fails when a kernel of this
package has no signature.
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


def kernel_modules(root: Path = PACKAGE_ROOT) -> list[str]:
    """Dotted names, sorted, of the modules of root/kernels with kernels and of root's with SIGNATURES.

    Found from the source files, without importing any: what the PTX and drift tests cover (Chapters 0-9).
    """
    found = []
    for path in sorted(root.rglob("*.py")):
        signatures, jit = _signatures_or_kernels(path.read_text(encoding="utf-8"))
        if signatures or (jit and path.parent == root / "kernels"):
            parts = path.relative_to(root.parent).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found
