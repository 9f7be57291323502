"""Run the mutation corpus: through a lab's visible checks in this process, and through `cudalearn grade`."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import linecache
import re
import shutil
import sys
import traceback
import types
from dataclasses import dataclass
from pathlib import Path

import nbformat

from cudalearn.course import labs
from cudalearn.grading import lab as lab_mod
from mutations import Mutation

ROOT = Path(__file__).resolve().parents[2]


def solution_path(lab: str) -> Path:
    """solutions/NN-name.ipynb for lab 'NN'."""
    (path,) = sorted((ROOT / "solutions").glob(f"{lab}-*.ipynb"))
    return path


def corpus_path(lab: str) -> Path:
    """tests/chapters/chNN/corpus.py: lab NN's corpus, beside the chapter's tests."""
    return ROOT / "tests" / "chapters" / f"ch{lab}" / "corpus.py"


def corpus(lab: str) -> list[Mutation]:
    """The MUTATIONS of tests/chapters/chNN/corpus.py (empty when the lab has none yet)."""
    path = corpus_path(lab)
    if not path.exists():
        return []
    name = f"corpus_lab{lab}"
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    names = [m.name for m in mod.MUTATIONS]
    dupes = {n for n in names if names.count(n) > 1}
    assert not dupes, f"lab {lab}: mutation names used twice: {sorted(dupes)}"
    return list(mod.MUTATIONS)


def labs_with_corpus() -> list[str]:
    """'NN' of every lab with a solution notebook."""
    return sorted(p.name[:2] for p in (ROOT / "solutions").glob("[0-9][0-9]-*.ipynb"))


_CELLS = iter(range(1, 1 << 62))


def _exec(text: str, ns: dict, what: str) -> None:
    """Run one cell's text in ns, registered in linecache as IPython does (the tracer reads kernel source)."""
    from cudalearn.grading.cells import without_magics

    text = without_magics(text)
    name = f"<{what} {next(_CELLS)}>"
    linecache.cache[name] = (len(text), None, text.splitlines(keepends=True), name)
    exec(compile(text, name, "exec"), ns)


def _strip_markers(source: str) -> str:
    keep = [ln for ln in source.splitlines() if ln.strip() not in (labs.BEGIN_SOLUTION, labs.END_SOLUTION)]
    return "\n".join(keep)


def exercise_of(plan: lab_mod.Lab, name: str) -> lab_mod.Exercise:
    """The exercise whose cell defines `name`."""
    for ex in plan.exercises:
        if name in ex.names:
            return ex
    raise KeyError(
        f"{plan.name}: no exercise defines {name!r} (exercises define {[e.names for e in plan.exercises]})"
    )


def answer(plan: lab_mod.Lab, m: Mutation | None, ex: lab_mod.Exercise) -> str:
    """The student's answer cell for exercise `ex`: the solution's, or mutation m's if it targets ex."""
    text = _strip_markers(ex.cell.source)
    if m is None or exercise_of(plan, m.exercise).number != ex.number:
        return text
    if m.code is not None:
        return m.code
    for old, new in m.edits:
        assert old in text, f"{plan.name} {m.name}: {old!r} is not in the solution's answer:\n{text}"
        text = text.replace(old, new, 1)
    return text


def submission(plan: lab_mod.Lab, m: Mutation | None) -> nbformat.NotebookNode:
    """The generated lab notebook with every answer cell filled in (m's for its exercise)."""
    nb = nbformat.reads(labs.make_lab(plan.path), as_version=4)
    for ex in plan.exercises:
        nb.cells[ex.cell.index].source = answer(plan, m, ex)
    return nb


@dataclass
class Outcome:
    """What a student sees when running an exercise's visible check: None (passed) or the message."""

    error: str | None
    kind: str  # "passed" | "AssertionError" | another exception's type name


@contextlib.contextmanager
def _modules_restored(lab: str):
    """The course's modules, numpy and builtins as they were, after an answer that patched them ran here.

    A wrong answer may replace a check's helper (`setattr(lab_checks, "_loops_only", ...)`) or a numpy
    function; run in this process, the patch would outlive it and decide later tests of the same worker.
    The lab's check modules are imported first, so that one the answer imports is restored too.
    """
    from cudalearn import exercises

    for module in exercises.CHECKS:
        if module.startswith(f"chapters.ch{lab}."):
            importlib.import_module(f"cudalearn.{module}")
    course = [n for n in sys.modules if n == "cudalearn" or n.startswith("cudalearn.")]
    saved = {n: {k: v for k, v in vars(sys.modules[n]).items() if _restored(k, v)} for n in course}
    saved |= {n: dict(vars(sys.modules[n])) for n in ("numpy", "builtins")}
    try:
        yield
    finally:
        for n, before in saved.items():
            now = vars(sys.modules[n])  # names added since (a submodule imported, say) stay
            for key, value in before.items():
                if key not in now or now[key] is not value:
                    now[key] = value


def _restored(name: str, value: object) -> bool:
    """Whether a course module's name is put back after a run: its functions, classes, modules and public
    values; not its private state (`ptx._WORKER`, a live compile process the run started, would leak)."""
    return callable(value) or isinstance(value, types.ModuleType) or not name.startswith("_")


class VisibleRun:
    """One lab's cells run in this process up to each exercise; mutations re-run from a snapshot."""

    def __init__(self, lab: str) -> None:
        self.plan = lab_mod.load(solution_path(lab))
        self.lab = lab

    def _cells_until(self, number: int):
        """(role, text) of the cells before exercise `number`'s answer, and that exercise's visible check."""
        before, check = [], None
        for cell in self.plan.cells:
            if cell.role == "markdown":
                continue
            if cell.role == "answer" and cell.exercise == number:
                break
            text = _strip_markers(cell.source) if cell.role == "answer" else cell.student_source
            before.append(text)
        for t in self.plan.tests:
            if t.exercise == number:
                check = t.cell.student_source
                break
        return before, check

    def run(self, m: Mutation | None, number: int | None = None) -> Outcome:
        """Run the lab up to m's exercise (solution answers), m's answer, then its visible check."""
        ex = exercise_of(self.plan, m.exercise) if m is not None else self.plan.exercises[number - 1]
        before, check = self._cells_until(ex.number)
        ns: dict = {"__name__": "__main__"}
        out = io.StringIO()
        with _modules_restored(self.lab), contextlib.redirect_stdout(out):
            for text in before:
                _exec(text, ns, "lab cell")
            try:
                _exec(answer(self.plan, m, ex), ns, "answer cell")
                _exec(check, ns, "check cell")
            except AssertionError as e:
                return Outcome(str(e), "AssertionError")
            except Exception as e:  # noqa: BLE001 - what a student would see as a traceback
                return Outcome(f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=-3)}", type(e).__name__)
        return Outcome(None, "passed")


def grade_all(lab: str, mutations: list[Mutation], workdir: Path, jobs: int = 2, **limits):
    """Grade the solution ('solution') and every mutation as one student each; {student: Result}."""
    from cudalearn.grading import Limits, grade

    plan = lab_mod.load(solution_path(lab))
    subs = workdir / "submissions"
    shutil.rmtree(subs, ignore_errors=True)
    for name, m in [("solution", None)] + [(m.name, m) for m in mutations]:
        (subs / name).mkdir(parents=True)
        nbformat.write(submission(plan, m), subs / name / f"{plan.name}.ipynb")
    lim = Limits(**{"timeout": 600, "cell_timeout": 120, "memory_mb": 3072, **limits})
    results = grade(plan.path, [subs], out=workdir / "grades", limits=lim, jobs=jobs, root=ROOT)
    return {r.student: r for r in results}


def uses(plan: lab_mod.Lab, later: lab_mod.Exercise, earlier: lab_mod.Exercise) -> bool:
    """Whether exercise `later`'s answer calls what `earlier` defines (so a wrong `earlier` may fail it)."""
    import ast

    names = {n.id for n in ast.walk(ast.parse(_strip_markers(later.cell.source))) if isinstance(n, ast.Name)}
    return later.number > earlier.number and bool(names & set(earlier.names))


def verdict(plan: lab_mod.Lab, m: Mutation, result) -> str | None:
    """None when a graded result is what m must get, else what is wrong.

    Only m's exercise may lose points, and an exercise whose own answer uses what m's defines (the
    student's exercise 2 calling their exercise 1 genuinely fails with it).
    """
    ex = exercise_of(plan, m.exercise)
    number = ex.number
    mine = [t for t in result.tests if t.exercise == number]
    others = [t for t in result.tests if t.exercise != number]
    lost = [
        t for t in others if t.points < t.max_points and not uses(plan, plan.exercises[t.exercise - 1], ex)
    ]
    if lost:
        return f"other exercises lost points: {[(t.test_id, t.status, t.message[:300]) for t in lost]}"
    if m.is_valid:
        bad = [t for t in mine if t.points < t.max_points]
        return (
            f"a valid answer lost points: {[(t.test_id, t.status, t.message) for t in bad]}" if bad else None
        )
    kept = [t for t in mine if t.points > 0]
    if kept:
        return f"a wrong answer kept points: {[(t.test_id, t.points) for t in kept]}"
    unnamed = [t for t in mine if not re.search(m.cause, t.message, re.S)]
    if unnamed:
        return f"graded message does not match {m.cause!r}: {[t.message for t in unnamed]}"
    return None


def visible_verdict(m: Mutation, out: Outcome) -> str | None:
    """None when the visible check's outcome is what m must get, else what is wrong."""
    if m.is_valid:
        return None if out.error is None else f"a valid answer was rejected: {out.error}"
    if out.error is None:
        return "a wrong answer passed the visible check"
    if out.kind != "AssertionError":
        return f"the check raised {out.kind}, not an AssertionError with a message: {out.error}"
    if not re.search(m.cause, out.error, re.S):
        return f"the message does not match {m.cause!r}: {out.error}"
    return None
