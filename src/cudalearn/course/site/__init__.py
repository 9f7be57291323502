"""`cudalearn site build DIR`: the book as a static HTML site that builds and reads offline (all chapters).

The book's notebooks are copied into a work folder and executed there under the simulator, two at a
time (nbclient); the committed notebooks are never written. Sphinx then renders the executed copies
with MyST-NB (`nb_execution_mode = "off"`: it only renders) and sphinx-book-theme. Every chapter page
has the book's navigation, math typeset by a MathJax copied into the site (from the pinned
`django-static-mathjax` package, so nothing is fetched from a CDN), the figures, an "Open in Colab"
badge and button (the addresses of `cudalearn.course.colab`) and a download link to the notebook as
committed (cleaned of outputs). `labs.html` lists the labs with their Colab and download links, each
lab as `labs build` generates it from solutions/, whatever labs/ holds; the build warns when the
working copy of labs/ or book/ is not what it publishes (a notebook saved in JupyterLab). On the
pages the setup cell is folded (its one-line report stays), and tqdm's widget bars and PyTorch's
profiler chatter are left out: a static page has no kernel to drive a widget.

Kernels get `MPLBACKEND=module://matplotlib_inline.backend_inline`, not `Agg`: under `Agg`,
`plt.show()` displays nothing and the pages would have no figures. The inline backend draws with Agg
too, with no display.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from importlib import resources
from pathlib import Path

import nbformat

from cudalearn.course import book, colab, kernel_env, labs
from cudalearn.measure import reference

CONF_DIR = Path(__file__).resolve().parent
KERNEL_ENV = {"CUDALEARN_MODE": "sim", "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
COLAB_HOST = colab.COLAB.removesuffix("/github")  # sphinx-book-theme appends /github/ORG/REPO/blob/...
MATHJAX_JS = "mathjax/tex-mml-chtml.js"  # under _static/; the MathJax 3 component Sphinx loads
# What of MathJax's es5/ folder the site needs (7 MB of its 24): the component, its fonts, the TeX
# extensions it loads on demand, and its menu's accessibility tools; not the other bundles.
MATHJAX_PARTS = ("tex-mml-chtml.js", "input/tex", "input/mml", "output/chtml", "ui", "a11y", "sre")
BADGE = "colab-badge.svg"  # a local stand-in for Colab's badge image, which lives on Google's server
WIDGET = "application/vnd.jupyter.widget-view+json"
_NOISE = re.compile(r"^USDT:.*\n?", re.M)  # PyTorch profiler chatter on stderr (Chapter 9)
_BUILT_MARK = ".buildinfo"  # Sphinx writes it into every HTML build


class SiteBuildError(RuntimeError):
    """A notebook failed to execute, or Sphinx failed, during `cudalearn site build`."""


def title(path: Path) -> str:
    """A notebook's title, the first line of its first cell without the '# ' (index and labs pages)."""
    first = nbformat.read(path, as_version=4).cells[0].source
    return first.splitlines()[0].lstrip("#").strip()


def _index_page(books: list[Path]) -> str:
    """The site's front page: what the course is, where its GPU figures come from, the table of contents."""
    runs = list(dict.fromkeys(run.label for run in reference.index()))  # each device and date once
    runs_text = "; ".join(runs) if runs else "none stored yet"
    toc = "\n".join(f"book/{p.stem}" for p in books)  # a deep dive (05a-...) right after its chapter
    return f"""# cudalearn: how CUDA powers deep learning

An open course, as Jupyter notebooks with GPU labs, for readers who know Python and a little deep
learning and want to know what happens on the GPU: you write the kernels yourself in Numba CUDA,
check them and measure them, from a CPU matmul to tiling, bank conflicts, fused layers and the
architectures (AlexNet, ResNet, ViT) whose design follows from the hardware.

These pages were executed on a machine **without a GPU**, under Numba's CUDA simulator
(`mode=sim`): sizes are small, and every GPU figure shown comes from a stored reference run on a
real GPU, labelled with its device and date ({runs_text}). To run a chapter on a GPU, open it in
Colab with the badge at its top, or download it.

Each chapter is one notebook to read in one sitting. Some are followed by short deep dives (5a, 5b,
...), each on one idea the chapter links to; the labs follow the chapters, not the deep dives.

```{{toctree}}
:caption: Chapters
:maxdepth: 1

{toc}
```

```{{toctree}}
:caption: Practice
:maxdepth: 1

labs
```
"""


def _labs_page(lab_paths: list[Path]) -> str:
    """The labs index: each lab with its Colab link and its notebook to download."""
    rows = [
        f"| {book.part(p).number} | {title(p).split('·', 1)[-1].strip()} "
        f"| [![Open In Colab]({BADGE})]({colab.colab_url(f'labs/{p.name}')}) "
        f"| {{download}}`{p.name} <_labs/{p.name}>` |"
        for p in lab_paths
    ]
    table = "\n".join(rows)
    return f"""# Labs

Each chapter has a lab: a notebook in which you write the chapter's key kernel or model piece, with
checks that say exactly what is wrong. Open a lab in Colab (choose Runtime > Change runtime type >
T4 GPU, then run the first cell), or download it and open it in JupyterLab. `cudalearn progress`
tells you which of your exercises pass.

| chapter | lab | Colab | notebook |
|---:|---|---|---|
{table}
"""


def tidy(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """An executed notebook made fit for a static page, in place: no widget outputs, no profiler noise."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        kept = []
        for out in cell.outputs:
            if WIDGET in out.get("data", {}):
                continue  # a tqdm bar: a live widget, meaningless without a kernel
            if out.output_type == "stream":
                out.text = _NOISE.sub("", out.text)
                if not out.text:
                    continue
            kept.append(out)
        cell.outputs = kept
    return nb


def for_site(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A book notebook made ready for its page, in place: the local Colab badge, the setup cell folded."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = cell.source.replace(colab.BADGE_IMAGE, BADGE)
        elif cell.source == colab.setup_cell():  # Colab's install code: folded, its one-line report shown
            cell.metadata["tags"] = sorted({*cell.metadata.get("tags", []), "hide-input"})
            cell.metadata["mystnb"] = {
                "code_prompt_show": "Show the setup cell (on Colab it installs the course)",
                "code_prompt_hide": "Hide the setup cell",
            }
    return nb


def write_sources(root: Path, src: Path) -> list[Path]:
    """Sphinx's source folder for the course at `root`: pages, the book's notebooks to execute, the labs.

    The labs are generated from solutions/ (`cudalearn labs build`'s text), never copied from labs/: a
    lab saved in JupyterLab holds a student's answers and outputs (`published_warnings` says so)."""
    books = [p.path for p in book.notebooks(root)]  # chapters and their deep dives, in reading order
    if not books:
        raise SiteBuildError(f"no notebooks in {root / 'book'}: is {root} the course's root?")
    for sub in ("book", "_labs"):
        (src / sub).mkdir(parents=True, exist_ok=True)
    shutil.copy(CONF_DIR / "static" / BADGE, src / BADGE)
    shutil.copy(CONF_DIR / "static" / BADGE, src / "book" / BADGE)
    copies = []
    for path in books:
        copy = src / "book" / path.name
        nbformat.write(for_site(labs.clean(nbformat.read(path, as_version=4))), copy)
        copies.append(copy)
    lab_paths = []
    for solution in sorted((root / "solutions").glob("*.ipynb")):
        lab_paths.append(src / "_labs" / solution.name)
        lab_paths[-1].write_text(labs.make_lab(solution))
    (src / "index.md").write_text(_index_page(books))
    (src / "labs.md").write_text(_labs_page(lab_paths))
    return copies


def published_warnings(root: Path) -> list[str]:
    """What of the working copy the site does not publish as it is: labs/ edited or stale, book/ with outputs.

    The site publishes each lab as `labs build` generates it and each chapter's download cleaned of its
    outputs (`cudalearn clean`'s text), so a notebook saved in JupyterLab never reaches the site."""
    found = [
        f"labs/{status.lab.name} {status.reason}: the site publishes the lab generated from "
        f"solutions/{status.lab.name} (run `cudalearn labs build`, or `git checkout labs/{status.lab.name}`)"
        for status in labs.check(root)
        if not status.up_to_date and status.lab.exists()
    ]
    for path in sorted((root / "book").glob("*.ipynb")):
        if path.read_text() != labs.committed_text(nbformat.read(path, as_version=4)):
            found.append(
                f"book/{path.name} holds outputs or editor metadata (saved in JupyterLab?): the site "
                "publishes it cleaned of them (`cudalearn clean` does the same to the file)"
            )
    return found


def _execute_one(path: Path, timeout: int, jobs: int = 2) -> float:
    """Execute one notebook copy in place, in its folder; raise SiteBuildError naming the failing cell."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    current: dict = {}

    def on_cell_start(cell, cell_index, **_):
        current.update(cell=cell, index=cell_index)

    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        shutdown_kernel="immediate",  # the outputs are in `nb`: a graceful shutdown waited ~2.5 s for nothing
        resources={"metadata": {"path": str(path.parent)}},
        on_cell_start=on_cell_start,
        # ipykernel 7 warns on every start that its local TCP sockets are unencrypted: not news here.
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
    )
    t0 = time.perf_counter()
    try:
        client.execute(env={**kernel_env.side_by_side(jobs), **KERNEL_ENV})
    except Exception as e:
        where = f"book/{path.name}"
        if "index" in current:
            first = current["cell"].source.strip().splitlines()[:1] or [""]
            where += f", cell {current['index']} (`{first[0][:80]}`)"
        kind = type(e).__name__
        detail = f"{e.ename}: {e.evalue}" if getattr(e, "ename", None) else str(e).strip().splitlines()[-1]
        raise SiteBuildError(f"{where} failed to execute ({kind}): {detail}") from e
    nbformat.write(tidy(nb), path)
    return time.perf_counter() - t0


def execute(paths: list[Path], jobs: int = 2, timeout: int = 600) -> dict[str, float]:
    """Execute notebook copies in place, `jobs` at a time; seconds per notebook; stop at the first failure."""
    # Largest first, so that the long chapters do not end up last on one worker.
    order = sorted(paths, key=lambda p: p.stat().st_size, reverse=True)
    seconds: dict[str, float] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(_execute_one, p, timeout, jobs): p for p in order}
        done, pending = wait(futures, return_when=FIRST_EXCEPTION)
        for f in pending:
            f.cancel()
        for f in done:
            if f.exception() is not None:
                raise f.exception()
            seconds[futures[f].name] = f.result()
    return dict(sorted(seconds.items()))


def copy_mathjax(out: Path) -> Path:
    """Copy the parts of MathJax the site uses into `out`/_static/mathjax (Sphinx's build-finished hook)."""
    es5 = resources.files("mathjax") / "static" / "mathjax" / "es5"
    dest = Path(out) / "_static" / "mathjax"
    with resources.as_file(es5) as es5_dir:
        for part in MATHJAX_PARTS:
            src = es5_dir / part
            if src.is_dir():
                shutil.copytree(src, dest / part, dirs_exist_ok=True)
            else:
                dest.mkdir(parents=True, exist_ok=True)
                shutil.copy(src, dest / part)
        shutil.copy(es5_dir.parent / "LICENSE", dest / "LICENSE")
    return dest


def render(src: Path, out: Path) -> None:
    """Run Sphinx (HTML, warnings are errors) on an executed source folder; SiteBuildError if it fails."""
    # A child process: Sphinx and docutils keep global state that a test session should not inherit.
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going", "-c", str(CONF_DIR)]
    cmd += ["-d", str(src / ".doctrees"), str(src), str(out)]
    if subprocess.run(cmd).returncode != 0:
        raise SiteBuildError(f"Sphinx failed on {src}; its warnings and errors are printed above")


def _prepare_out(out: Path) -> None:
    """Empty `out` if it holds an earlier site; refuse a folder with anything else in it."""
    if out.exists() and any(out.iterdir()):
        if not (out / _BUILT_MARK).exists():
            raise SiteBuildError(f"{out} is not empty and holds no earlier site: choose an empty folder")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


def build(root: Path | str, out: Path | str, jobs: int = 2, log=print) -> dict[str, float]:
    """The whole site of the course at `root` into `out` (CLI `cudalearn site build`); seconds per step."""
    root, out = Path(root).resolve(), Path(out).resolve()
    _prepare_out(out)
    times: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="cudalearn-site-") as tmp:
        # Sphinx writes into the work folder, then the site is copied out: MyST-NB puts a jupyter_execute/
        # folder beside its output folder, which must not land beside `out`.
        src, html = Path(tmp, "src"), Path(tmp, "html")
        for warning in published_warnings(root):
            log(f"warning: {warning}")
        t0 = time.perf_counter()
        copies = write_sources(root, src)
        log(f"executing {len(copies)} notebooks under the simulator, {jobs} at a time")
        for name, s in execute(copies, jobs=jobs).items():
            log(f"  {name}: {s:.0f} s")
        times["execute"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        render(src, html)
        for path in sorted((root / "book").glob("*.ipynb")):  # downloads: the notebooks as committed
            text = labs.committed_text(nbformat.read(path, as_version=4))
            (html / "_sources" / "book" / path.name).write_text(text)
        shutil.copytree(html, out, dirs_exist_ok=True)
        times["render"] = time.perf_counter() - t0
    log(f"site written to {out} (execute {times['execute']:.0f} s, render {times['render']:.0f} s)")
    return times
