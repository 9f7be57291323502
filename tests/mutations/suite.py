"""One lab's corpus as pytest tests: each tests/chapters/chNN/test_corpus.py calls `define(globals(), "NN")`.

For the lab: each wrong answer fails its exercise's visible check with an AssertionError naming its
cause, and loses that exercise's points in `cudalearn grade` with the same cause in its feedback; each
valid answer passes both; the lab's own solution gets full marks; every exercise has its corpus. An
entry whose `known` names a hole still open ("visible: ...", "graded: ..." or both) is a strict xfail
there: the run says how many remain, and passes no more once the hole is closed. One file a lab, so
that `run.py test` (pytest-xdist, `--dist loadfile`) grades a lab once, in one worker.
"""

from __future__ import annotations

import pytest

from mutations import runner


def _params(lab: str, where: str) -> list:
    """One parameter per entry; an entry with a known hole at `where` is a strict xfail saying which."""
    out = []
    for m in runner.corpus(lab):
        marks = []
        if m.known and (m.known.startswith(where) or ":" not in m.known.split()[0]):
            marks = [pytest.mark.xfail(strict=True, reason=f"known hole: {m.known}")]
        out.append(pytest.param(m, id=f"lab{lab}-{m.name}", marks=marks))
    return out


def define(ns: dict, lab: str) -> None:
    """Put lab `lab`'s corpus tests and its `graded` fixture into a test module's namespace `ns`."""
    runs: dict = {}

    def visible_run() -> runner.VisibleRun:
        if "run" not in runs:
            runs["run"] = runner.VisibleRun(lab)
        return runs["run"]

    @pytest.fixture(scope="module")
    def graded(tmp_path_factory):
        """The lab's solution and corpus, graded by `cudalearn grade` (one call, two notebooks at a time)."""
        return runner.grade_all(lab, runner.corpus(lab), tmp_path_factory.mktemp(f"grade{lab}"))

    @pytest.mark.parametrize("m", _params(lab, "visible:"))
    def test_visible_check(m):
        problem = runner.visible_verdict(m, visible_run().run(m))
        assert problem is None, f"lab {lab}, {m.name} ({m.why}): {problem}"

    def test_solution_gets_full_marks(graded):
        r = graded["solution"]
        assert r.total == r.max_total, (
            f"lab {lab}'s own solution: {[(t.test_id, t.status, t.message) for t in r.tests]}"
        )

    @pytest.mark.parametrize("m", _params(lab, "graded:"))
    def test_graded(graded, m):
        problem = runner.verdict(visible_run().plan, m, graded[m.name])
        assert problem is None, f"lab {lab}, {m.name} ({m.why}): {problem}"

    def test_every_exercise_has_its_corpus():
        """At least 8 wrong answers per kernel exercise, 3 per other exercise, 2 valid alternatives each."""
        plan = visible_run().plan
        entries = runner.corpus(lab)
        short = []
        for ex in plan.exercises:
            mine = [m for m in entries if runner.exercise_of(plan, m.exercise).number == ex.number]
            n_wrong = sum(not m.is_valid for m in mine)
            n_valid = sum(m.is_valid for m in mine)
            kernel = "@cuda.jit" in ex.cell.source
            if n_wrong < (8 if kernel else 3) or n_valid < 2:
                short.append(
                    f"{ex.names}: {n_wrong} wrong, {n_valid} valid ({'kernel' if kernel else 'other'})"
                )
        assert not short, f"lab {lab}: " + "; ".join(short)

    ns.update(
        LAB=lab,
        pytestmark=pytest.mark.corpus,
        graded=graded,
        test_visible_check=test_visible_check,
        test_solution_gets_full_marks=test_solution_gets_full_marks,
        test_graded=test_graded,
        test_every_exercise_has_its_corpus=test_every_exercise_has_its_corpus,
    )
