"""The labs' mutation corpus (tests/mutations/): wrong answers fail and lose their points, valid ones pass.

An entry whose `known` names a hole still open ("visible: ...", "graded: ..." or both) is a strict
xfail there: the run says how many remain, and passes no more once the hole is closed.

For every lab: each wrong answer fails its exercise's visible check with an
AssertionError naming its cause, and loses that exercise's points in
`cudalearn grade` with the same cause in its feedback; each valid answer
passes both; the lab's own solution gets full marks.
"""

import pytest
from mutations import runner

pytestmark = pytest.mark.corpus

LABS = runner.labs_with_corpus()
ENTRIES = [(lab, m) for lab in LABS for m in runner.corpus(lab)]
_RUNS: dict = {}


def _params(where: str):
    """One parameter per entry; an entry with a known hole at `where` is a strict xfail saying which."""
    out = []
    for lab, m in ENTRIES:
        marks = []
        if m.known and (m.known.startswith(where) or ":" not in m.known.split()[0]):
            marks = [pytest.mark.xfail(strict=True, reason=f"known hole: {m.known}")]
        out.append(pytest.param((lab, m), id=f"lab{lab}-{m.name}", marks=marks))
    return out


@pytest.mark.parametrize("entry", _params("visible:"))
def test_visible_check(entry):
    lab, m = entry
    run = _RUNS.setdefault(lab, runner.VisibleRun(lab))
    problem = runner.visible_verdict(m, run.run(m))
    assert problem is None, f"lab {lab}, {m.name} ({m.why}): {problem}"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Every lab's solution and corpus, graded by `cudalearn grade` (one call per lab, two at a time)."""
    cache: dict = {}

    def get(lab):
        if lab not in cache:
            cache[lab] = runner.grade_all(lab, runner.corpus(lab), tmp_path_factory.mktemp(f"grade{lab}"))
        return cache[lab]

    return get


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: f"lab{lab}")
def test_solution_gets_full_marks(graded, lab):
    r = graded(lab)["solution"]
    assert r.total == r.max_total, (
        f"lab {lab}'s own solution: {[(t.test_id, t.status, t.message) for t in r.tests]}"
    )


@pytest.mark.parametrize("entry", _params("graded:"))
def test_graded(graded, entry):
    lab, m = entry
    plan = runner.VisibleRun(lab).plan if lab not in _RUNS else _RUNS[lab].plan
    problem = runner.verdict(plan, m, graded(lab)[m.name])
    assert problem is None, f"lab {lab}, {m.name} ({m.why}): {problem}"


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: f"lab{lab}")
def test_every_exercise_has_its_corpus(lab):
    """At least 8 wrong answers per kernel exercise, 3 per other exercise, 2 valid alternatives each."""
    plan = runner.VisibleRun(lab).plan if lab not in _RUNS else _RUNS[lab].plan
    entries = runner.corpus(lab)
    short = []
    for ex in plan.exercises:
        mine = [m for m in entries if runner.exercise_of(plan, m.exercise).number == ex.number]
        n_wrong = sum(not m.is_valid for m in mine)
        n_valid = sum(m.is_valid for m in mine)
        kernel = "@cuda.jit" in ex.cell.source
        if n_wrong < (8 if kernel else 3) or n_valid < 2:
            short.append(f"{ex.names}: {n_wrong} wrong, {n_valid} valid ({'kernel' if kernel else 'other'})")
    assert not short, f"lab {lab}: " + "; ".join(short)
