"""Size keys: every key a notebook or module asks for exists, and every key defined is asked for somewhere."""

import fnmatch
import re
from pathlib import Path

import nbformat
import pytest

from cudalearn.runtime.sizes import SIZES

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ("book", "solutions", "labs")
MODULES = ("src", "scripts")

# size("ch5.tile"), cudalearn.size(f"ch5.trace_{s}", "gpu") or SIZES["ch0.vector_n"]: the key, or its pattern
ASKED = re.compile(r"""(?:\bsize\(\s*|\bSIZES\[\s*)(f?)(["'])(ch\d+\..*?)\2""")


def _asked(text: str) -> set[str]:
    """The keys `text` asks for; an f-string's {...} becomes `*` (any part of a key)."""
    return {re.sub(r"\{[^}]*\}", "*", key) if f else key for f, _, key in ASKED.findall(text)}


def _sources(folders, suffix):
    for folder in folders:
        for path in sorted((ROOT / folder).rglob(f"*{suffix}")):
            if suffix == ".ipynb":
                nb = nbformat.read(path, as_version=4)
                yield path, "\n".join(c.source for c in nb.cells if c.cell_type == "code")
            elif "sizes" not in path.relative_to(ROOT).parts[:3] and path.name != "test_sizes.py":
                # not the tables (src/cudalearn/sizes/) nor the examples above
                yield path, path.read_text(encoding="utf-8")


def _asked_where(folders, suffix) -> dict[str, list[str]]:
    """{key or pattern: the files asking for it}."""
    where: dict[str, list[str]] = {}
    for path, text in _sources(folders, suffix):
        for key in _asked(text):
            where.setdefault(key, []).append(str(path.relative_to(ROOT)))
    return where


def _known(key: str) -> list[str]:
    return [k for k in SIZES if fnmatch.fnmatchcase(k, key)]


def test_the_scan_reads_every_way_of_asking():
    text = 'size("ch5.tile") + cudalearn.size(f"ch5.trace_{s}", "gpu") + SIZES["ch0.block"] + size(x)'
    assert _asked(text) == {"ch5.tile", "ch5.trace_*", "ch0.block"}


def test_keys_are_chapter_prefixed_with_both_modes():
    bad = [
        k for k, v in SIZES.items() if not re.fullmatch(r"ch\d+\.[a-z0-9_]+", k) or set(v) != {"gpu", "sim"}
    ]
    assert not bad, f"sizes named chN.name with a 'gpu' and a 'sim' value: {bad}"
    assert all(isinstance(x, int) for v in SIZES.values() for x in v.values())


@pytest.mark.parametrize(
    "folders,suffix", [(NOTEBOOKS, ".ipynb"), (MODULES, ".py")], ids=["notebooks", "modules"]
)
def test_every_size_asked_for_exists(folders, suffix):
    missing = {key: files for key, files in _asked_where(folders, suffix).items() if not _known(key)}
    assert not missing, f"sizes asked for but not in cudalearn.runtime.sizes.SIZES: {missing}"


def test_every_size_defined_is_asked_for():
    asked = set()
    for folders, suffix in ((NOTEBOOKS, ".ipynb"), ((*MODULES, "tests"), ".py")):
        for key in _asked_where(folders, suffix):
            asked.update(_known(key))
    unused = sorted(set(SIZES) - asked)
    assert not unused, (
        f"sizes in cudalearn.runtime.sizes.SIZES that no notebook, module, script or test asks for: {unused}"
    )


def test_a_size_key_of_another_chapter_is_refused(tmp_path, monkeypatch):
    """chapters/ch99/sizes.py may define ch99.* keys only: a ch4 key there is refused by name."""
    from cudalearn.runtime import sizes

    root = tmp_path / "fakepkg"
    for folder in ("", "chapters", "chapters/ch04", "chapters/ch99"):
        (root / folder).mkdir(exist_ok=True)
        (root / folder / "__init__.py").write_text("")
    (root / "chapters" / "ch04" / "sizes.py").write_text('SIZES = {"ch4.tile": {"gpu": 32, "sim": 8}}')
    (root / "chapters" / "ch99" / "sizes.py").write_text('SIZES = {"ch4.other": {"gpu": 32, "sim": 8}}')
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        ImportError, match=r"chapters/ch99/sizes.py defines 'ch4.other': .*must start with 'ch99.'"
    ):
        sizes._collect(root / "chapters", "fakepkg.chapters")
    (root / "chapters" / "ch99" / "sizes.py").write_text('SIZES = {"ch99.other": {"gpu": 32, "sim": 8}}')
    import sys

    monkeypatch.delitem(sys.modules, "fakepkg.chapters.ch99.sizes")
    assert sizes._collect(root / "chapters", "fakepkg.chapters") == {
        "ch4.tile": {"gpu": 32, "sim": 8},
        "ch99.other": {"gpu": 32, "sim": 8},
    }
