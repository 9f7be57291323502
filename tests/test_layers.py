"""The package's layers import one way and no module imports itself back (CONTRIBUTING.md: the house).

An AST walk of every module of src/cudalearn, imports inside functions included (a lazy import is
still a dependency): a module may import its own layer's modules and lower layers only, a chapter
only lower layers and earlier chapters, and the graph of module imports has no cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "cudalearn"

#: each top-level name of the package and its layer, lowest first; a module imports only its own
#: layer and the ones below (chapters: earlier chapters only, by `_chapter_rank`)
LAYERS = {
    "version": 0,
    "runtime": 1,
    "compile": 2,
    "trace": 3,
    "measure": 4,
    "checks": 4,
    "nn": 5,
    "dist": 6,
    "chapters": 7,
    "exercises": 8,
    "course": 8,
    "grading": 9,
    "cli": 10,
    "__main__": 10,  # `python -m cudalearn`: the console command
    "data": 0,
}
#: the package's face (`cudalearn.setup()`, `size`, `SETUP_CELL`): it may import any layer's face
FACE = "cudalearn"
MAX_TOP_LEVEL = 15
MAX_LINES = 500


def modules() -> dict[str, Path]:
    """{dotted name: file} of every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, known: dict) -> str | None:
    """The longest module of the package that `name` (a module or a name in one) lies in."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(name: str, path: Path, known: dict) -> list[tuple[str, int]]:
    """(module of the package, line) for every import in the file, in functions too."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            if t == "cudalearn" or t.startswith("cudalearn."):
                found = _resolve(t, known)
                if found and found != name:
                    out.append((found, node.lineno))
    return out


def layer(module: str) -> tuple[int, int]:
    """(layer, chapter number or -1) of a module of the package."""
    parts = module.split(".")
    if len(parts) == 1:
        return (99, -1)  # the face
    top = parts[1]
    if top not in LAYERS:
        raise AssertionError(f"{module}: the top-level name {top!r} has no layer in tests/test_layers.py")
    chapter = int(parts[2][2:]) if top == "chapters" and len(parts) > 2 else -1
    return LAYERS[top], chapter


def test_every_import_goes_down_or_to_an_earlier_chapter():
    known = modules()
    wrong = []
    for name, path in known.items():
        mine = layer(name)
        for target, line in imports(name, path, known):
            theirs = layer(target)
            if name == FACE:
                continue
            if target == FACE:
                wrong.append(f"{path.relative_to(SRC)}:{line} imports the package's face (import its module)")
            elif theirs[0] > mine[0]:
                wrong.append(f"{path.relative_to(SRC)}:{line} imports {target}, a higher layer")
            elif mine[1] >= 0 and theirs[1] > mine[1]:
                wrong.append(f"{path.relative_to(SRC)}:{line} imports {target}, a later chapter")
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_no_import_cycle():
    known = modules()
    graph = {name: {t for t, _ in imports(name, path, known)} for name, path in known.items()}
    for name in graph:  # a package's __init__ does not count as importing its own modules' importers
        graph[name] = {t for t in graph[name] if t != FACE}
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                cycles.append(stack[stack.index(m) :] + [m])
            elif m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_top_of_the_package_is_small_and_every_name_has_a_layer():
    top = sorted(
        p.stem if p.is_file() else p.name
        for p in PACKAGE.iterdir()
        if p.suffix == ".py" or (p / "__init__.py").exists()
    )
    named = [t for t in top if not t.startswith("__")]  # __init__ and __main__: Python's hooks, no module
    assert len(named) <= MAX_TOP_LEVEL, f"{len(named)} modules at the top of the package: {named}"
    assert set(top) - {"__init__"} <= set(LAYERS), (
        f"no layer for {sorted(set(top) - {'__init__'} - set(LAYERS))}"
    )


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_over_500_lines(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(SRC)} has {lines} lines (at most {MAX_LINES})"


def test_a_chapter_folder_holds_only_its_roles_and_named_modules():
    """chapters/chNN/: sizes.py and at least one of kernels, checks or model; no stray package."""
    for folder in sorted((PACKAGE / "chapters").glob("ch[0-9][0-9]")):
        assert (folder / "sizes.py").exists(), f"{folder.name} has no sizes.py"
        assert (folder / "__init__.py").exists(), f"{folder.name} has no __init__.py"


def test_a_chapters_sizes_are_pure_data():
    """runtime.sizes reads every chapters/chNN/sizes.py by name (the walk above cannot see it): such a file
    may import nothing, so reading it never pulls a chapter's code into a lower layer."""
    for path in sorted((PACKAGE / "chapters").glob("ch[0-9][0-9]/sizes.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
        assert not imports, f"{path.relative_to(SRC)} imports something: sizes are data"
        assert (path.parent / "__init__.py").read_text().strip() == "", (
            f"{path.parent.name}/__init__.py is not empty"
        )
