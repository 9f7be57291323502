"""The first cell on a simulated Colab: it installs the pinned course once per runtime; else only setup()."""

import importlib.metadata
import re
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import nbformat
import pytest

import cudalearn
from cudalearn.course import colab

ROOT = Path(__file__).resolve().parents[2]
PREINSTALLED = {"numba-cuda": "0.11.0", "cuda-python": "12.6.2.post1", "numpy": "2.0.2"}  # a Colab runtime


class FakeColab:
    """A Colab runtime: the google.colab module, an installed-packages table, and a pip that edits it."""

    def __init__(self, monkeypatch, installed, torch_cuda="12.6"):
        self.installed = dict(installed)
        self.commands = []
        self.setups = 0
        monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
        torch = types.ModuleType("torch")  # Colab's preinstalled torch: a CUDA 12 build
        torch.version = types.SimpleNamespace(cuda=torch_cuda)
        monkeypatch.setitem(sys.modules, "torch", torch)
        monkeypatch.setattr(importlib.metadata, "version", self.version)
        monkeypatch.setattr(subprocess, "check_call", self.pip)
        monkeypatch.setattr(cudalearn, "setup", self.setup)

    def version(self, name):
        if name not in self.installed:
            raise importlib.metadata.PackageNotFoundError(name)
        return self.installed[name]

    def pip(self, cmd):
        assert cmd[:4] == [sys.executable, "-m", "pip", "-q"], cmd
        self.commands.append(cmd[4:])
        if cmd[4] == "uninstall":
            for name in cmd[6:]:
                self.installed.pop(name, None)
        else:
            for req in cmd[5:]:
                if req.startswith("cudalearn @ "):
                    self.installed["cudalearn"] = req.rsplit("@v", 1)[1]
                else:
                    name, _, ver = req.partition("==")
                    self.installed[name.split("[")[0]] = ver
        return 0

    def setup(self, *a, **k):
        self.setups += 1

    def run_cell(self):
        exec(compile(colab.setup_cell(), "<setup cell>", "exec"), {"__name__": "__main__"})


def test_first_run_on_colab_installs_the_pinned_course_and_the_second_does_nothing(monkeypatch):
    rt = FakeColab(monkeypatch, PREINSTALLED)
    rt.run_cell()
    spec = f"cudalearn @ git+{colab.REPO}@v{cudalearn.__version__}"
    assert rt.commands == [
        ["uninstall", "-y", "cuda-python"],
        ["install", f"numba-cuda[cu12]=={colab.NUMBA_CUDA}", spec],
    ]
    assert "cuda-python" not in rt.installed and rt.setups == 1
    rt.run_cell()  # a second run in the same runtime, or after a kernel restart
    assert len(rt.commands) == 2 and rt.setups == 2


def test_on_colab_the_cuda_extra_follows_colabs_torch(monkeypatch):
    """cu12 beside a CUDA 12 torch (cu13 would pull cuda-toolkit 13 beside it), cu13 beside a CUDA 13 one."""
    for torch_cuda, extra in [("12.6", "cu12"), ("13.0", "cu13"), (None, "cu12")]:
        rt = FakeColab(monkeypatch, PREINSTALLED, torch_cuda=torch_cuda)
        rt.run_cell()
        assert rt.commands[-1][1] == f"numba-cuda[{extra}]=={colab.NUMBA_CUDA}", torch_cuda


def test_on_colab_a_changed_version_is_installed_again(monkeypatch):
    rt = FakeColab(monkeypatch, {**PREINSTALLED, "cudalearn": "0.0.9", "numba-cuda": colab.NUMBA_CUDA})
    rt.run_cell()
    assert [c[0] for c in rt.commands] == ["uninstall", "install"] and rt.installed[
        "cudalearn"
    ] == cudalearn.__version__


def test_elsewhere_the_cell_only_calls_setup(monkeypatch):
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    calls = []
    monkeypatch.setattr(subprocess, "check_call", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(cudalearn, "setup", lambda *a, **k: calls.append("setup"))
    exec(compile(colab.setup_cell(), "<setup cell>", "exec"), {})
    assert calls == ["setup"]


def test_the_cell_is_plain_python_that_fits_the_line_length():
    cell = colab.setup_cell()
    compile(cell, "<setup cell>", "exec")
    assert not any(line.lstrip().startswith(("%", "!")) for line in cell.splitlines())
    assert max(len(line) for line in cell.splitlines()) <= 110


def test_the_pins_agree_with_constraints_and_pyproject():
    pins = dict(
        line.split("==") for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line
    )
    assert pins["numba-cuda"] == colab.NUMBA_CUDA
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert version == cudalearn.__version__ == colab.version()


def test_the_readme_names_the_tag_and_pin_that_colab_installs():
    """README's "On Colab" section is written by hand: its link, tag and numba-cuda pin follow colab.py."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## On Colab\n", 1)[1].split("\n## ", 1)[0]
    assert colab.colab_url("book/00-setup.ipynb") in section
    assert f"`numba-cuda[cu12]=={colab.NUMBA_CUDA}`" in section
    assert f"the course's tag (`v{colab.version()}`)" in section
    tags = set(re.findall(r"\bv\d+(?:\.\d+)+\w*", readme))
    assert tags == {f"v{colab.version()}"}, f"README.md names {sorted(tags)}; Colab gets v{colab.version()}"


def test_badges_open_the_notebook_itself_at_the_pinned_version():
    url = f"https://colab.research.google.com/github/cudalearn/cudalearn/blob/v{cudalearn.__version__}/book/00-setup.ipynb"
    assert colab.colab_url("book/00-setup.ipynb") == url
    assert colab.badge("book/00-setup.ipynb") == f"[![Open In Colab]({colab.BADGE_IMAGE})]({url})"
    md = colab.set_badge("# Setup\n\nIntro.", "solutions/00-setup.ipynb")
    assert md == f"# Setup\n\n{colab.badge('solutions/00-setup.ipynb')}\n\nIntro."
    assert colab.set_badge(md, "labs/00-setup.ipynb") == md.replace("solutions/", "labs/")  # retargeted, once


def test_fix_gives_a_notebook_its_setup_cell_and_badge():
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell("# Title"), nbformat.v4.new_code_cell("import cudalearn")]
    )
    assert len(colab.problems(nb, "book/09-x.ipynb")) == 2
    colab.fix(nb, "book/09-x.ipynb")
    assert colab.problems(nb, "book/09-x.ipynb") == []


@pytest.mark.parametrize(
    "path",
    sorted(p for f in colab.FOLDERS for p in ROOT.glob(f"{f}/*.ipynb")),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_every_course_notebook_starts_with_the_setup_cell_and_its_badge(path):
    nb = nbformat.read(path, as_version=4)
    assert colab.problems(nb, path.relative_to(ROOT)) == [], (
        f"{path}: run `python -c 'from cudalearn import colab; colab.check_all(write=True)'`, "
        "then `cudalearn labs build`"
    )


def test_the_package_setup_cell_is_the_colab_one():
    assert cudalearn.SETUP_CELL == colab.setup_cell()


def test_fix_inserts_the_setup_cell_before_a_new_notebooks_own_first_cell():
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Chapter 12 · Scans"), nbformat.v4.new_code_cell("x = 1")]
    colab.fix(nb, "book/12-scans.ipynb")
    assert [c.source for c in nb.cells[1:]] == [colab.setup_cell(), "x = 1"], "the chapter's cell is kept"
    nb.cells[1].source = nb.cells[1].source.replace(colab.version(), "0.0.1")  # an older setup cell
    colab.fix(nb, "book/12-scans.ipynb")
    assert [c.source for c in nb.cells[1:]] == [colab.setup_cell(), "x = 1"], "rewritten, not inserted again"
