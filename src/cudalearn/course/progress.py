"""`cudalearn progress`: which exercises of your labs pass their checks (students, all labs).

    cudalearn progress                        # every notebook in labs/
    cudalearn progress labs/02-first-kernels.ipynb

Each notebook runs from the top in a fresh Jupyter kernel (nbclient), in
its own folder, as "Restart Kernel and Run All" would; the notebook file is
not changed. Notebooks run side by side, one kernel per core (`--jobs`), and
a kernel is stopped at once when its notebook is done (a graceful shutdown
waited about 2.5 s per notebook for nothing), the cores shared out among the
kernels (`kernel_env`); reports print in order. An
exercise is the code cell above a check cell (a code cell that opens with a
docstring and calls a check), and it is:

- pass: its check cell ran without an error;
- not done yet: the check says so (the `# YOUR CODE HERE` stub is still there);
- fail: the check's whole message (or your cell's own error), and, when the
  exercise uses what an earlier failing exercise defines, a line saying so:
  fix that one first;
- not run: the kernel died, or a cell ran past the time limit, before it.

Only the visible checks run; the hidden tests are not in the labs.
"""

from __future__ import annotations

import argparse
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cudalearn.course import kernel_env

if TYPE_CHECKING:
    import nbformat

DOCSTRING = re.compile(r"^\s*[rRuU]?(\"\"\"|''')")
CALLS_CHECK = re.compile(r"\bcheck\w*\s*\(")
NOT_DONE = "not done yet"


@dataclass
class Exercise:
    """One exercise of a lab: its label (the check's docstring), status and message."""

    label: str
    status: str  # "pass" | "fail" | "not done yet" | "not run"
    message: str = ""


@dataclass
class Report:
    """One notebook's exercises, or why it could not run."""

    path: Path
    exercises: list[Exercise] = field(default_factory=list)
    error: str = ""

    @property
    def passed(self) -> int:
        return sum(e.status == "pass" for e in self.exercises)


def is_check(cell: nbformat.NotebookNode) -> bool:
    """True for a check cell: code that opens with a docstring and calls a check."""
    return (
        cell.cell_type == "code"
        and bool(DOCSTRING.match(cell.source))
        and bool(CALLS_CHECK.search(cell.source))
    )


def label(source: str) -> str:
    """The first line of a check cell's docstring."""
    body = DOCSTRING.sub("", source, count=1).strip()
    return body.split('"""')[0].split("'''")[0].strip().splitlines()[0] if body else "exercise"


def _first_line(text: str) -> str:
    text = _plain(text)
    return text.splitlines()[0] if text else ""


def _plain(text: str) -> str:
    """A message without terminal colours or surrounding blank lines."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text or "").strip()


def _names(source: str) -> tuple[set[str], set[str]]:
    """(names a cell binds at top level, names it uses anywhere); empty sets if it does not parse."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set(), set()
    bound = {
        n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }
    for n in tree.body:
        for t in n.targets if isinstance(n, ast.Assign) else []:
            bound |= {e.id for e in ast.walk(t) if isinstance(e, ast.Name)}
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return bound, used


def _classify(reply: dict | None, before: dict | None, stopped: str) -> tuple[str, str]:
    """Status and message of one check from its execute reply and the exercise cell's reply above it."""
    if reply is None:
        return "not run", stopped
    if reply.get("status") == "ok":
        return "pass", ""
    ename, evalue = reply.get("ename", "Error"), reply.get("evalue", "")
    if ename == "NotImplementedError" or NOT_DONE in evalue:
        return "not done yet", ""
    if before and before.get("status") == "error" and ename == "NameError":
        own = f"{before.get('ename', 'Error')}: {_first_line(before.get('evalue', ''))}"
        return "fail", f"your exercise cell raised {own}"
    if ename == "AssertionError":
        return "fail", _plain(evalue)
    return "fail", f"{ename}: {_plain(evalue)}"


def run(path: Path | str, timeout: float = 600, kernel_name: str = "python3", jobs: int = 1) -> Report:
    """Run one lab notebook in a fresh kernel (one of `jobs` at once) and report each exercise's check."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    path = Path(path)
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as e:  # not JSON, not a notebook
        return Report(path, error=f"cannot read it as a notebook: {e}")
    replies: dict[int, dict] = {}
    started: list[int] = []

    def on_start(cell, cell_index, **_):
        started.append(cell_index)

    def on_done(cell, cell_index, execute_reply, **_):
        replies[cell_index] = execute_reply.get("content", {})

    client = NotebookClient(
        nb,
        timeout=timeout,
        allow_errors=True,
        interrupt_on_timeout=True,
        error_on_timeout={"ename": "TimeoutError", "evalue": f"the cell ran for more than {timeout:g} s"},
        kernel_name=kernel_name,
        shutdown_kernel="immediate",  # the report is read from the replies: nothing to wait for
        # ipykernel 7 warns on every start that its local TCP sockets are unencrypted: not news to a student
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
        resources={"metadata": {"path": str(path.parent.resolve())}},
        on_cell_execute=on_start,
        on_cell_executed=on_done,
    )
    stopped = ""
    try:
        client.execute(env=kernel_env.side_by_side(jobs))
    except DeadKernelError:
        where = started[-1] + 1 if started else 0
        stopped = f"the kernel died while running cell {where}; run the notebook yourself to see why"
    except Exception as e:  # a kernel that cannot start, a broken notebook
        stopped = f"the notebook could not run: {type(e).__name__}: {_first_line(str(e))}"
    report = Report(path)
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    failing: list[tuple[int, set[str]]] = []  # (exercise number, names its cell defines) of failures so far
    for pos, i in enumerate(code):
        if not is_check(nb.cells[i]):
            continue
        before = replies.get(code[pos - 1]) if pos else None
        status, message = _classify(replies.get(i), before, stopped)
        if message.startswith("TimeoutError"):
            message = f"the cell ran past the time limit ({timeout:g} s): is there an endless loop?"
        bound, used = _names(nb.cells[code[pos - 1]].source) if pos else (set(), set())
        used |= _names(nb.cells[i].source)[1]
        if status in ("fail", "not done yet"):
            needs = [(n, sorted((names & used) - bound)) for n, names in failing]
            needs = [(n, names) for n, names in needs if names]
            if needs and status == "fail":
                n, names = needs[-1]
                message += (
                    f"\nThis exercise uses `{'`, `'.join(names)}` from exercise {n}, which fails too: "
                    f"fix exercise {n} first."
                )
            failing.append((len(report.exercises) + 1, bound))
        report.exercises.append(Exercise(label(nb.cells[i].source), status, message))
    if not report.exercises and not stopped:
        report.error = "no check cell found (a code cell that opens with a docstring and calls a check)"
    elif stopped and not report.exercises:
        report.error = stopped
    return report


def notebooks(paths: list[str | Path]) -> list[Path]:
    """The notebooks to run: files as given, folders' *.ipynb files in order."""
    found = []
    for p in map(Path, paths):
        found += sorted(p.glob("*.ipynb")) if p.is_dir() else [p]
    return found


def show(report: Report) -> str:
    """A notebook's report as text: one line per exercise, and why one failed."""
    if report.error:
        return f"{report.path}: {report.error}"
    lines = [f"{report.path}: {report.passed} of {len(report.exercises)} exercises pass"]
    for e in report.exercises:
        lines.append(f"  {e.status:<13} {e.label}")
        for line in e.message.splitlines():
            lines.append(f"  {'':<13} {line}")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The `cudalearn progress` options."""
    p.add_argument("paths", nargs="*", default=["labs"], help="lab notebooks or folders (default: labs/)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per cell (default 600)")
    p.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="notebooks run at once (default: one per core)"
    )


def command(args: argparse.Namespace) -> int:
    """Run `cudalearn progress`; 0 when every exercise of every notebook passes."""
    paths = notebooks(args.paths)
    if not paths:
        print(f"no notebooks in {', '.join(map(str, args.paths))}")
        return 1
    reports = []
    jobs = max(1, min(args.jobs, len(paths)))
    with ThreadPoolExecutor(jobs) as pool:  # each thread waits on its kernel
        for report in pool.map(lambda path: run(path, timeout=args.timeout, jobs=jobs), paths):
            reports.append(report)
            print(show(report), flush=True)
    done = sum(r.passed for r in reports)
    total = sum(len(r.exercises) for r in reports)
    print(f"{done} of {total} exercises pass in {len(reports)} notebook(s).")
    return 0 if done == total and not any(r.error for r in reports) else 1
