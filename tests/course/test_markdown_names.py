"""Every `module.name` a notebook's markdown cites exists, for the modules the notebook imports."""

import ast
import importlib
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(ROOT.glob("book/*.ipynb")) + sorted(ROOT.glob("solutions/*.ipynb"))

#: a backticked dotted name at the start of a code span, e.g. `step_memory.attempt` or `f.g(x, 2)`
DOTTED = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(\(|\[|`)")
FILE = re.compile(r"\.(py|json|md|ipynb|cfg|toml|txt|csv|yml)$")

#: names a notebook's markdown cites that do not resolve, known and left for another change:
#: {notebook: {name, ...}}; the test fails when one of them resolves (remove it here then)
KNOWN: dict[str, set[str]] = {}


def kernel_names() -> set[str]:
    """What `cuda.` names inside a kernel (cuda.grid, cuda.shfl_down_sync...): numba.cuda defines them for
    the GPU target only, so they are read from the simulator's and the tracer's stand-ins for the module."""
    from numba.cuda.simulator import kernelapi

    from cudalearn.trace.fake_cuda import FakeCuda

    names = set(dir(kernelapi.FakeCUDAModule)) | set(dir(FakeCuda))
    return {n for n in names if not n.startswith("_")} | {"threadIdx", "blockIdx", "blockDim", "gridDim"}


def imported_names(nb) -> dict[str, str]:
    """{name in the notebook: dotted path of the module or object it is bound to} for its imports."""
    names = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:  # IPython magics: such a cell imports nothing the book cites
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        names[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        names[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    path = f"{node.module}.{a.name}"
                    names[a.asname or a.name] = path
                    names.setdefault(a.name, path)  # the text may call a module by its own name
    return names


def resolve(path: str):
    """The object a dotted path names (a module, or an attribute of one), or raise AttributeError."""
    parts = path.split(".")
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=1):
        if getattr(obj, "__name__", None) == "numba.cuda" and part in kernel_names():
            return obj  # a kernel intrinsic (cuda.grid, cuda.atomic.add): what follows is the kernel API's
        try:
            obj = getattr(obj, part)
        except AttributeError:
            if not hasattr(obj, "__path__"):  # not a package: no submodule to import either
                raise
            try:
                obj = importlib.import_module(".".join(parts[: i + 1]))
            except ModuleNotFoundError:
                raise AttributeError(f"{'.'.join(parts[:i])} has no attribute {part!r}") from None
    return obj


def cited(nb) -> set[str]:
    """The dotted names in backticks in the notebook's markdown cells."""
    found = set()
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found |= {m.group(1) for m in DOTTED.finditer(cell.source) if not FILE.search(m.group(1))}
    return found


def figure_keys() -> set[str]:
    """Every key of the stored GPU figures (`bench.gemm.N4096`): the book cites them; they are no names."""
    import json

    stored = ROOT / "src" / "cudalearn" / "data" / "reference"
    return {key for f in stored.glob("*.json") for key in json.loads(f.read_text()).get("figures", {})}


def unresolved(path: Path) -> dict[str, str]:
    """{name cited in `path`'s markdown: why it does not resolve} for names whose first part it imports."""
    nb = nbformat.read(path, as_version=4)
    names = imported_names(nb)
    keys = figure_keys()
    bad = {}
    for name in sorted(cited(nb)):
        first, _, rest = name.partition(".")
        if first not in names or any(name == k or name.startswith(k + ".") for k in keys):
            continue
        try:
            resolve(f"{names[first]}.{rest}")
        except (AttributeError, ImportError) as e:
            bad[name] = f"{first} is {names[first]}: {e}"
    return bad


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_names_cited_in_markdown_exist(path):
    rel = str(path.relative_to(ROOT))
    bad = unresolved(path)
    known = KNOWN.get(rel, set())
    new = {k: v for k, v in bad.items() if k not in known}
    assert not new, f"{rel}: the markdown cites names the notebook's imports do not have: {new}"
    fixed = known - set(bad)
    assert not fixed, f"{rel}: {sorted(fixed)} resolve now: remove them from KNOWN in {Path(__file__).name}"


def test_the_resolver_finds_a_missing_name():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("from cudalearn.nn import alexnet, step_memory"),
        nbformat.v4.new_markdown_cell(
            "`step_memory.attempt` and `alexnet.TrainStep(cfg)` exist; `alexnet.loader_timeline` does not; "
            "`cfg.exchange` is no import, `alexnet.py` a file"
        ),
    ]
    names = imported_names(nb)
    bad = [n for n in sorted(cited(nb)) if n.split(".")[0] in names]
    assert bad == ["alexnet.TrainStep", "alexnet.loader_timeline", "step_memory.attempt"]
    with pytest.raises(AttributeError):
        resolve("cudalearn.nn.alexnet.loader_timeline")
    resolve("cudalearn.chapters.ch07.step_memory.attempt")
    resolve("torch.utils.checkpoint.checkpoint")  # a submodule the package has not imported yet
    resolve("numba.cuda.shfl_down_sync")  # a kernel intrinsic, under the simulator too
    with pytest.raises(AttributeError):
        resolve("numba.cuda.shfl_down")
