"""The course site (issue 8): `cudalearn site build` renders the book offline; its pages checked as HTML and
in headless Chromium.

The site is built once per session into a temporary folder (the book's notebooks run under the simulator,
two at a time, then Sphinx renders them); the browser tests load every page from a local HTTP server.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import nbformat
import pytest

from cudalearn import cli
from cudalearn.course import colab, labs, site
from cudalearn.measure import reference

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parents[2]
BOOKS = sorted(ROOT.glob("book/*.ipynb"))
LABS = sorted(ROOT.glob("labs/*.ipynb"))
FIGURE_KEY = re.compile(r"(ch\d+|bench\d*)\.\w+(\.\w+)*")
SITE_MODULES = ("sphinx", "myst_nb", "sphinx_book_theme", "mathjax", "nbclient")
KERNEL = "matmul_tiled"  # defined in Chapter 3 (cudalearn.chapters.ch03.kernels, shown on the page)
EXTERNAL = re.compile(r"^(https?:)?//", re.I)


def _require_site_packages() -> None:
    """Skip (fail under CI) when the `site` extra is not installed; the site fixture calls it."""
    for name in SITE_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            msg = f"{name} is missing: pip install -c constraints.txt -e '.[site]'"
            if os.environ.get("CI"):
                pytest.fail(msg)
            pytest.skip(msg)


@pytest.fixture(scope="session")
def site_dir(tmp_path_factory) -> Path:
    """The course's site, built once for the whole session."""
    _require_site_packages()
    out = tmp_path_factory.mktemp("site") / "html"
    site.build(ROOT, out, jobs=2)
    return out


class _Page(HTMLParser):
    """The tags (with their attributes), ids, visible text and cell outputs' text of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.ids: set[str] = set()
        self.text: list[str] = []
        self.printed: list[str] = []  # the text of the cells' outputs
        self._skip = 0
        self._divs: list[str] = []  # the classes of the open <div>s

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        self.tags.append((tag, a))
        if a.get("id"):
            self.ids.add(a["id"])
        if tag in ("script", "style"):
            self._skip += 1
        if tag == "div":
            self._divs.append(a.get("class", ""))

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip -= 1
        if tag == "div" and self._divs:
            self._divs.pop()

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)
            if any("cell_output" in c for c in self._divs):
                self.printed.append(data)

    def urls(self) -> list[tuple[str, str]]:
        """(tag, url) of every link, image, script and stylesheet."""
        found = []
        for tag, a in self.tags:
            for key in ("href", "src"):
                if a.get(key) and tag in ("a", "img", "script", "link", "iframe", "source"):
                    found.append((tag, a[key]))
        return found


@functools.cache
def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def _html_pages(site_dir: Path) -> list[Path]:
    return sorted(p for p in site_dir.rglob("*.html") if not p.relative_to(site_dir).parts[0].startswith("_"))


def _chapter_page(site_dir: Path, nb: Path) -> Path:
    return site_dir / "book" / f"{nb.stem}.html"


# Without a build ------------------------------------------------------------------------------


def test_tidy_drops_widgets_and_profiler_noise():
    nb = nbformat.v4.new_notebook(metadata={"widgets": {"state": {}}})
    cell = nbformat.v4.new_code_cell("train()")
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={site.WIDGET: {"model_id": "x"}, "text/plain": "0%"}),
        nbformat.v4.new_output("stream", name="stderr", text="USDT:2026 profiler_start\nUSDT:2026 stop\n"),
        nbformat.v4.new_output("stream", name="stdout", text="loss 0.1\n"),
    ]
    nb.cells.append(cell)
    site.tidy(nb)
    assert "widgets" not in nb.metadata
    assert [o.get("text") for o in nb.cells[0].outputs] == ["loss 0.1\n"]


def test_a_failing_notebook_fails_the_build_naming_notebook_and_cell(tmp_path):
    _require_site_packages()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Broken"),
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("y = x / 0  # the broken cell"),
        nbformat.v4.new_code_cell("print('never')"),
    ]
    path = tmp_path / "book" / "99-broken.ipynb"
    path.parent.mkdir()
    nbformat.write(nb, path)
    with pytest.raises(site.SiteBuildError) as err:
        site.execute([path], jobs=1, timeout=60)
    msg = str(err.value)
    assert "book/99-broken.ipynb, cell 2" in msg and "ZeroDivisionError" in msg and "the broken cell" in msg


def test_site_build_refuses_a_folder_that_holds_something_else(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert cli.main(["site", "build", str(tmp_path), "--root", str(ROOT)]) == 1
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert "holds no earlier site" in capsys.readouterr().err


def test_colab_button_host_is_colab_py_address():
    """sphinx-book-theme builds HOST/github/ORG/REPO/blob/BRANCH/PATH: with this host it is colab_url."""
    theme = "{host}/github/{slug}/blob/v{version}/book/00-setup.ipynb".format(
        host=site.COLAB_HOST, slug=colab.REPO.removeprefix("https://github.com/"), version=colab.version()
    )
    assert theme == colab.colab_url("book/00-setup.ipynb")


# The built site, as HTML --------------------------------------------------------------------------


def test_build_writes_only_the_site_folder(site_dir):
    assert [p.name for p in site_dir.parent.iterdir()] == [site_dir.name]  # no jupyter_execute/ beside it
    assert not list(site_dir.rglob("*.ipynb_checkpoints")) and (site_dir / ".buildinfo").is_file()


def test_index_lists_every_chapter_in_order_and_the_labs(site_dir):
    index = _parse(site_dir / "index.html")
    links = [a["href"] for tag, a in index.tags if tag == "a" and a.get("href", "").startswith("book/")]
    chapters = list(dict.fromkeys(h.split("#")[0] for h in links))
    assert chapters == [f"book/{p.stem}.html" for p in BOOKS]
    assert any(tag == "a" and a.get("href") == "labs.html" for tag, a in index.tags)
    for nb in BOOKS:
        assert _chapter_page(site_dir, nb).is_file(), nb


@pytest.mark.parametrize("nb", BOOKS, ids=lambda p: p.stem)
def test_chapter_page_has_colab_button_badge_and_download(site_dir, nb):
    page = _parse(_chapter_page(site_dir, nb))
    hrefs = [a.get("href", "") for tag, a in page.tags if tag == "a"]
    want = colab.colab_url(f"book/{nb.name}")
    colab_links = [h for h in hrefs if "colab.research.google.com" in h]
    assert colab_links.count(want) >= 2, f"badge and launch button should both open {want}: {colab_links}"
    assert set(colab_links) == {want}
    download = f"../_sources/book/{nb.name}"
    assert download in hrefs, f"{nb.name}: no download link {download}"
    got = (site_dir / "_sources" / "book" / nb.name).read_bytes()
    assert got == nb.read_bytes(), "the download should be the notebook as committed (no outputs)"


def test_labs_page_links_every_lab_to_colab_and_to_its_notebook(site_dir):
    page = _parse(site_dir / "labs.html")
    hrefs = [a.get("href", "") for tag, a in page.tags if tag == "a"]
    assert {h for h in hrefs if "colab.research.google.com" in h} == {
        colab.colab_url(f"labs/{p.name}") for p in LABS
    }
    downloads = {Path(h).name: site_dir / h for h in hrefs if h.startswith("_downloads/")}
    assert sorted(downloads) == [p.name for p in LABS]
    for lab in LABS:  # what `cudalearn labs build` writes, whatever the working copy of labs/ holds
        assert downloads[lab.name].read_text() == labs.make_lab(ROOT / "solutions" / lab.name), lab.name


def test_a_lab_saved_with_answers_is_not_published_and_the_build_says_so(tmp_path):
    """A lab and a chapter saved in JupyterLab (answers, outputs): the site takes neither as it is."""
    for folder in ("book", "solutions", "labs"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "00-setup.ipynb").write_bytes((ROOT / folder / "00-setup.ipynb").read_bytes())
    lab = nbformat.read(tmp_path / "labs" / "00-setup.ipynb", as_version=4)
    answer = next(c for c in lab.cells if "raise NotImplementedError()" in c.source)
    answer.source = answer.source.replace("raise NotImplementedError()", "return -(-n // threads)")
    answer.outputs = [nbformat.v4.new_output("stream", text="a student's output\n")]
    nbformat.write(lab, tmp_path / "labs" / "00-setup.ipynb")
    book = nbformat.read(tmp_path / "book" / "00-setup.ipynb", as_version=4)
    code = next(c for c in book.cells if c.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", text="run in JupyterLab\n")]
    nbformat.write(book, tmp_path / "book" / "00-setup.ipynb")

    warnings = site.published_warnings(tmp_path)
    assert len(warnings) == 2, warnings
    assert "labs/00-setup.ipynb differs from its solution notebook" in warnings[0]
    assert "book/00-setup.ipynb holds outputs" in warnings[1]
    site.write_sources(tmp_path, tmp_path / "src")
    published = (tmp_path / "src" / "_labs" / "00-setup.ipynb").read_text()
    assert published == labs.make_lab(ROOT / "solutions" / "00-setup.ipynb")
    assert "a student's output" not in published and "-(-n // threads)" not in published
    assert site.published_warnings(ROOT) == [], "the repository's labs/ or book/ would not be published as is"


def test_no_page_loads_anything_from_another_host(site_dir):
    for path in _html_pages(site_dir):
        page = _parse(path)
        for tag, url in page.urls():
            if tag != "a":
                assert not EXTERNAL.match(url), f"{path.name} loads {url} from the network"
        scripts = [a["src"] for tag, a in page.tags if tag == "script" and a.get("src")]
        mathjax = [s for s in scripts if "mathjax" in s.lower()]
        assert all(s.split("?")[0].endswith(f"_static/{site.MATHJAX_JS}") for s in mathjax), path
        has_math = any("math" in a.get("class", "").split() for _, a in page.tags)
        assert bool(mathjax) == has_math, f"{path.name}: math on the page but no MathJax, or the reverse"
    assert (site_dir / "_static" / site.MATHJAX_JS).is_file()
    assert (site_dir / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").is_dir()


def test_internal_links_and_images_resolve(site_dir):
    broken = []
    for path in _html_pages(site_dir):
        for tag, url in _parse(path).urls():
            parts = urlsplit(url)
            if parts.scheme or parts.netloc or url.startswith(("mailto:", "javascript:", "data:")):
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{path.relative_to(site_dir)}: {tag} {url}")
            elif parts.fragment and target.suffix == ".html" and parts.fragment not in _parse(target).ids:
                broken.append(f"{path.relative_to(site_dir)}: {tag} {url} (no such anchor)")
    assert not broken, "\n".join(broken[:20])


@pytest.mark.parametrize("nb", BOOKS, ids=lambda p: p.stem)
def test_chapter_page_shows_its_figures(site_dir, nb):
    code = " ".join(c.source for c in nbformat.read(nb, as_version=4).cells if c.cell_type == "code")
    # their one plot draws a stored multi-GPU run, and none is stored yet (chapter 11 says so)
    shows = 0 if nb.stem in ("11-beyond-two-gpus", "11b-bus-bandwidth") else code.count("plt.show()")
    tags = _parse(_chapter_page(site_dir, nb)).tags
    figures = [a["src"] for tag, a in tags if tag == "img" and re.search(r"_images/\w+\.png$", a["src"])]
    assert len(figures) >= min(shows, 1), f"{nb.name} calls plt.show() {shows} times; the page has {figures}"


def awaits_gpu_run(nb_path: Path, stored: set[str]) -> bool:
    """Whether a book notebook asks for a stored figure (a key written out in its code, not a size) that no
    GPU run has stored yet: then its page says so instead of showing one. Found, not listed."""
    import ast

    import nbformat

    from cudalearn.runtime.sizes import SIZES

    asked = set()
    for cell in nbformat.read(nb_path, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for n in ast.walk(tree):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in parts:
                if FIGURE_KEY.fullmatch(n.value) and n.value not in SIZES:
                    asked.add(n.value)
    return any(not any(k == key or k.startswith(key + ".") for k in stored) for key in asked)


def test_gpu_figures_are_labelled_with_a_stored_run_device_and_date(site_dir):
    runs = [reference.load(name) for name in reference.reference_files()]
    labels, devices = {reference.label(r) for r in runs}, tuple({r["device"] for r in runs})
    assert runs, "no stored reference run"
    stored = {key for r in runs for key in r["figures"]}
    labelled = set()  # the chapters (core and deep dives together) that show a labelled stored figure
    for nb in BOOKS:
        text = "".join(_parse(_chapter_page(site_dir, nb)).printed)
        awaits = awaits_gpu_run(nb, stored)
        assert ("no reference GPU run is stored" in text) == awaits, f"{nb.name}: awaits a GPU run: {awaits}"
        full = re.findall(r"reference run on (.+?, \d{4}-\d\d-\d\d, numba-cuda [\w.]+)", text)
        assert set(full) <= labels, f"{nb.name}: {set(full) - labels}"
        named = text.split("reference run on ")[1:]
        assert all(rest.startswith(devices) for rest in named), f"{nb.name}: a figure from an unknown run"
        assert bool(full) == bool(named), f"{nb.name}: reference figures, none labelled with device and date"
        if full:
            labelled.add(nb.name[:2])
    chapters = {nb.name[:2] for nb in BOOKS}
    assert len(labelled) >= len(chapters) - 2, "most chapters show GPU figures from the stored runs"


def test_a_chapter_awaits_a_gpu_run_when_a_key_it_asks_for_is_not_stored(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('f = reference.figures("ch12.scan", m)\nk = f"ch12.scan_{n}"')]
    path = tmp_path / "12-scan.ipynb"
    nbformat.write(nb, path)
    assert awaits_gpu_run(path, {"ch11.other"})
    assert not awaits_gpu_run(path, {"ch12.scan"}), "an f-string's parts are no keys"
    nb.cells = [nbformat.v4.new_code_cell('n = size("ch2.vector_n")')]
    nbformat.write(nb, path)
    assert not awaits_gpu_run(path, set()), "a size is no figure key"


def test_claims_tables_render_as_tables(site_dir):
    # A chapter's claims come out as a Markdown table (cudalearn.measure.sources): the page must show a table.
    for nb in BOOKS:
        code = " ".join(c.source for c in nbformat.read(nb, as_version=4).cells if c.cell_type == "code")
        if "claims(" in code:
            html = (site_dir / "book" / f"{nb.stem}.html").read_text()
            table = re.search(r"<table.*?<th[^>]*>(<p>)?Verdict", html, re.S)
            assert table, f"{nb.name}: its claims are not shown as a table"


def test_chapter_8_formula_is_math_markup_for_mathjax(site_dir):
    html = (site_dir / "book" / "08-resnet-skip-gradients.html").read_text()
    formula = r"\frac{\partial L}{\partial x} = \frac{\partial L}{\partial y}"
    assert re.search(r'<div class="math[^"]*">\s*\\\[' + re.escape(formula), html)


# The built site, in Chromium ----------------------------------------------------------------------

_PAGE_STATE = """async () => {
  if (window.MathJax && MathJax.startup) await MathJax.startup.promise;
  const math = [...document.querySelectorAll('span.math, div.math')];
  const prose = [...document.querySelectorAll('article p, article li')].map(e => e.innerText).join('\\n');
  return {
    math: math.length,
    typeset: math.filter(m => m.querySelector('mjx-container')).length,
    rawMath: (prose.match(/\\$[^$\\s][^$]*\\$|\\\\\\(|\\\\\\[/g) || []).slice(0, 3),
    badImages: [...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src),
    colab: [...new Set([...document.querySelectorAll('a[href*="colab.research.google"]')].map(a => a.href))],
    links: [...document.links].map(a => a.href).filter(h => h.startsWith(location.origin)),
  };
}"""


def test_every_page_in_chromium(site_dir):
    from browser import browser, collect_errors, serve

    pages = [p.relative_to(site_dir).as_posix() for p in _html_pages(site_dir)]
    with serve(site_dir) as base, browser() as ctx:
        requests: list[str] = []
        failed: list[str] = []
        ctx.on("request", lambda r: requests.append(r.url))
        # A load cut short by the next navigation (a favicon) is "aborted"; a 404 shows up as a response.
        ctx.on("requestfailed", lambda r: None if "ABORTED" in (r.failure or "") else failed.append(r.url))
        ctx.on("response", lambda r: failed.append(f"{r.url} ({r.status})") if r.status >= 400 else None)
        page = ctx.new_page()
        errors = collect_errors(page)
        links: set[str] = set()
        problems = []
        for rel in pages:
            page.goto(base + rel, wait_until="load")
            state = page.evaluate(_PAGE_STATE)
            links |= {h.split("#")[0].split("?")[0] for h in state["links"]}
            if state["typeset"] != state["math"] or state["rawMath"]:
                typeset = f"{state['typeset']}/{state['math']}"
                problems.append(f"{rel}: {typeset} formulas typeset, raw TeX {state['rawMath']}")
            if state["badImages"]:
                problems.append(f"{rel}: images that did not load: {state['badImages']}")
            if rel.startswith("book/"):
                want = [colab.colab_url(rel.removesuffix(".html") + ".ipynb")]
            elif rel == "labs.html":
                want = [colab.colab_url(f"labs/{p.name}") for p in LABS]
            else:
                want = []
            if sorted(state["colab"]) != sorted(want):
                problems.append(f"{rel}: Colab links {state['colab']}, expected {want}")
            if errors:
                problems.append(f"{rel}: {errors[:]}")
                errors.clear()
        page.goto(base + "book/08-resnet-skip-gradients.html", wait_until="load")
        page.evaluate(_PAGE_STATE)
        if page.locator("div.math mjx-container").count() < 2:
            problems.append("chapter 8: its displayed formulas (the ResNet gradient) are not typeset")
        for url in sorted(links):
            response = ctx.request.get(url)
            if not response.ok:
                problems.append(f"broken link {url} ({response.status})")
        external = [u for u in requests if not u.startswith((base, "data:", "blob:", "file://"))]
        problems += [f"requested from another host: {u}" for u in external[:10]]
        problems += [f"failed request: {f}" for f in failed[:10]]
        assert not problems, "\n".join(problems)
    assert "book/08-resnet-skip-gradients.html" in pages and "search.html" in pages


def test_search_finds_a_chapter_3_kernel(site_dir):
    from browser import browser, collect_errors, serve

    with serve(site_dir) as base, browser() as ctx:
        page = ctx.new_page()
        errors = collect_errors(page)
        page.goto(f"{base}search.html?q={KERNEL}", wait_until="load")
        page.wait_for_selector("ul.search li a", timeout=30_000)
        hits = page.eval_on_selector_all("ul.search li a", "els => els.map(a => a.href)")
        assert any(urlsplit(h).path.endswith("/book/03-tiling.html") for h in hits), hits
        assert not errors, errors
        hit = next(h for h in hits if "/book/03-tiling.html" in h)
        page.goto(urljoin(base, hit), wait_until="load")
        assert KERNEL in page.locator("article").inner_text()


def test_front_page_names_each_stored_run_once_with_its_device_and_date():
    """Every label of the index (Nsight Compute profiles included), once each; no site build needed."""
    page = site._index_page(BOOKS)
    labels = list(dict.fromkeys(run.label for run in reference.index()))
    assert f"({'; '.join(labels)})" in page
    assert all(page.count(label) == 1 for label in labels)
    assert all(f"book/{nb.stem}\n" in page for nb in BOOKS), "the table of contents is the notebooks folder"
