"""Issue 34's process-side attacks: each gets its grade, the class beside it is graded unaffected.

- a judge stuck in one long C call (a loop over a size the student's code returned): killed from outside
  at the notebook's deadline, its finished tests kept, nothing left behind;
- a thread that survives its cell or call and re-forks busy processes in new sessions, or keeps launching
  kernels: the process ends, and that exercise's tests fail saying why;
- busy processes while a cell runs: each notebook has its own CPU share, the honest neighbour at -j 2
  keeps its marks;
- the submission matcher on a 900,000-character cell and a 64 MiB notebook: seconds, and said;
- the report: folder names that are not UTF-8, a message with a lone surrogate, formulas behind a TAB;
- a broken helper of exercise 1 that makes exercise 2 fail: the feedback names it.
"""

import csv
import json
import os
import sys
import time
import uuid
from pathlib import Path

import nbformat
import pytest

from cudalearn.grading import Limits, grade, grader, match, watch
from cudalearn.grading import lab as lab_mod
from cudalearn.grading import results as outcomes
from cudalearn.grading.blame import Blame
from cudalearn.grading.limits import containment_notes, grader_cgroup
from cudalearn.grading.report import Report, printable
from cudalearn.grading.submissions import load_submission

pytestmark = pytest.mark.grader

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "grading"))
import plants  # noqa: E402

TAG = f"hproc{uuid.uuid4().hex[:10]}"  # the name of every process a case starts: found if it stays
LIMITS = Limits(timeout=40, cell_timeout=6, memory_mb=768)  # 40 s: a loaded 2-core CI
GRACE_S = 3.0  # the judge's grace past the notebook's deadline, small for the test
# A check that loops over a size the student's code returned: one C call the judge's alarm cannot stop.
C_CALL = (
    '"""Check blocks_for for one thread per block, by a loop over its blocks."""\n# POINTS: 1\n'
    "### BEGIN HIDDEN TESTS\nsum(range(blocks_for(7, 1)))\n### END HIDDEN TESTS"
)
TESTS = ["test_blocks_for", "test_scale", "test_scale_2"]


def _want(*got: tuple[str, float]) -> dict:
    return dict(zip(TESTS, got, strict=True))


OK = _want(("passed", 1.0), ("passed", 2.0), ("passed", 1.0))
CASES = {
    "honest": (None, None, OK),
    "c-call": (  # 10**13 for the one size the check loops over: hours of sum() in the judge
        "def blocks_for(n, threads):\n"
        "    return 10**13 if (n, threads) == (7, 1) else (n + threads - 1) // threads",
        None,
        _want(("passed", 1.0), ("passed", 2.0), ("timeout", 0.0)),
    ),
    "thread-reforks": (  # a thread that outlives the cell, re-forking busy processes in new sessions
        "import ctypes\nimport os\nimport threading\nimport time\n\n\ndef _spawn():\n"
        "    while True:\n"
        "        if os.fork() == 0:\n"
        "            os.setsid()\n"
        "            ctypes.CDLL(None).prctl(15, b'TAG'[:15])\n"
        "            while True:\n"
        "                pass\n"
        "        time.sleep(0.02)\n\n\n"
        "threading.Thread(target=_spawn, daemon=True).start()\n\n\n" + plants.EX1_OK,
        None,
        _want(("error", 0.0), ("passed", 2.0), ("error", 0.0)),
    ),
    "thread-in-call": (  # a _thread (not in threading.enumerate) started by each call
        "import _thread\nimport time\n\n\ndef blocks_for(n, threads):\n"
        "    _thread.start_new_thread(time.sleep, (600,))\n"
        "    return (n + threads - 1) // threads",
        None,
        _want(("error", 0.0), ("passed", 2.0), ("error", 0.0)),
    ),
    "thread-launches-kernels": (  # a thread left launching kernels (speed cheats' spins-beside, simulated)
        None,
        "import threading\n\nimport numpy as np\n\n\n@cuda.jit\ndef _spin(x):\n"
        "    x[cuda.grid(1)] += 1.0\n\n\ndef _busy():\n"
        "    x = cuda.device_array(64, dtype=np.float32)\n"
        "    while True:\n"
        "        _spin[2, 32](x)\n\n\n"
        "threading.Thread(target=_busy, daemon=True).start()\n\n\n" + plants.EX2_OK,
        _want(("passed", 1.0), ("error", 0.0), ("passed", 1.0)),
    ),
    "cpu-hog": (  # busy processes in new sessions, and a cell that spins to its time limit
        "import ctypes\nimport os\n\nfor _ in range(6):\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        ctypes.CDLL(None).prctl(15, b'TAG'[:15])\n"
        "        while True:\n"
        "            pass\n"
        "while True:\n"
        "    pass\n\n\n" + plants.EX1_OK,
        None,
        _want(("timeout", 0.0), ("passed", 2.0), ("timeout", 0.0)),
    ),
    "surrogates": (  # an exception message with lone surrogates
        "def blocks_for(n, threads):\n    raise ValueError('bad \\udcff and \\ud800')",
        None,
        _want(("error", 0.0), ("passed", 2.0), ("error", 0.0)),
    ),
    "broken-helper": (  # exercise 2's kernel scales by a constant exercise 1's (wrong) helper computes
        plants.EX1_FLOOR,
        "STRIDE = blocks_for(1, 2)\n\n\n@cuda.jit\ndef scale(x, alpha, out):\n    i = cuda.grid(1)\n"
        "    if i < out.shape[0]:\n        out[i] = alpha * x[i] * STRIDE",
        _want(("failed", 0.0), ("failed", 0.0), ("passed", 1.0)),
    ),
}
# Folders named as no spreadsheet or UTF-8 writer expects: a formula behind a TAB, bytes that are not UTF-8.
FOLDERS = {"c-call": "\t=HYPERLINK(1)", "surrogates": os.fsdecode(b"caf\xe9-\xff")}


def _solution(folder: Path) -> Path:
    """The fixture lab with one more test cell, test_scale_2: C_CALL, on the student's blocks_for."""
    nb = json.loads(plants.SOLUTION.read_text())
    at = next(i for i, cell in enumerate(nb["cells"]) if cell.get("id") == "ex2-check")
    nb["cells"].insert(at + 1, {**nb["cells"][at], "id": "ex2-c-call", "source": C_CALL})
    path = folder / plants.SOLUTION.name
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return path


def _write(folder: Path, name: str, ex1: str | None, ex2: str | None) -> None:
    nb = plants.lab_notebook()
    plants._set(nb, "ex1", (ex1 or plants.EX1_OK).replace("TAG", TAG))
    plants._set(nb, "ex2", ex2 or plants.EX2_OK)
    (folder / name).mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / name / "00-fixture.ipynb")


def _in_use(scratch: Path) -> list[str]:
    """Processes a case started (named TAG) or the grade run started (their environment names scratch)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                comm = Path(f"/proc/{entry}/comm").read_bytes()
                env = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:
                continue
            if TAG.encode()[:15] in comm or str(scratch).encode() in env:
                found.append(f"{entry}: {comm.strip().decode(errors='replace')}")
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Every case, two of them in folders with hostile names, graded in one run at -j 2."""
    root = tmp_path_factory.mktemp("hostile-process")
    subs, out, scratch = root / "submissions", root / "grades", root / "scratch"
    scratch.mkdir()
    for name, (ex1, ex2, _) in CASES.items():
        _write(subs, FOLDERS.get(name, name), ex1, ex2)
    solution = _solution(root)
    failed: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TMPDIR", str(scratch))  # the judges' and sandboxes' folders: this run's only
        mp.setattr(watch, "GRACE_S", GRACE_S)
        start = time.monotonic()
        results = grade(solution, [subs], out=out, limits=LIMITS, jobs=2, failed=failed)
        elapsed = time.monotonic() - start
    time.sleep(1)  # a process the kill missed would show up by now
    cgroups = [p for p in Path("/sys/fs/cgroup").glob(f"*/**/cudalearn-grade-{os.getpid()}") if p.exists()]
    return {
        "results": {r.student: r for r in results},
        "by_case": {name: {r.student: r for r in results}[FOLDERS.get(name, name)] for name in CASES},
        "out": out,
        "failed": failed,
        "elapsed": elapsed,
        "left": {"processes": _in_use(scratch), "files": os.listdir(scratch), "cgroups": cgroups},
    }


@pytest.mark.parametrize("name", list(CASES))
def test_a_process_attack_gets_its_grade(graded, name):
    r = graded["by_case"][name]
    got = {t.test_id: (t.status, t.points) for t in r.tests}
    assert got == CASES[name][2], (name, "\n".join(t.message for t in r.tests))
    assert not r.grader_error, r.grader_error


def test_the_class_beside_them_is_graded_unaffected_and_nothing_stays(graded):
    results = graded["results"]
    assert results["honest"].total == 4, [(t.test_id, t.status, t.message) for t in results["honest"].tests]
    assert graded["left"] == {"processes": [], "files": [], "cgroups": []}, graded["left"]
    # the stuck judge held to the notebook's limit: the old backstop alone took the limit + 120 s
    assert graded["elapsed"] < LIMITS.timeout + 120, graded["elapsed"]


def test_a_judge_stuck_in_c_is_stopped_from_outside_and_says_so(graded):
    message = graded["by_case"]["c-call"].tests[2].message
    assert "stopped from outside" in message and f"({LIMITS.timeout:g} s)" in message, message


def test_threads_left_running_end_with_their_process_and_the_feedback_says_so(graded):
    for name in ("thread-reforks", "thread-in-call"):
        message = graded["by_case"][name].tests[0].message
        assert "left 1 thread(s) running" in message and "join" in message.lower(), message


def test_a_thread_left_launching_kernels_ends_its_process_and_its_exercise_fails(graded):
    """A thread that keeps the GPU busy beside the timed kernel (under the simulator): caught as it starts."""
    message = graded["by_case"]["thread-launches-kernels"].tests[1].message
    assert "your exercise 2 cell did not run" in message and "thread(s) running" in message, message


def test_a_broken_helper_of_an_earlier_exercise_is_named(graded):
    message = graded["by_case"]["broken-helper"].tests[1].message
    assert "your exercise 2 code uses `blocks_for`, which your exercise 1 cell defines" in message, message
    assert "failed its own test test_blocks_for" in message, message


def test_the_report_holds_every_row_whatever_the_names_and_messages(graded):
    out, results = graded["out"], graded["results"]
    assert not graded["failed"]
    rows = list(csv.reader(open(out / "00-fixture.csv", encoding="utf-8")))
    assert len(rows) == 1 + len(results)
    names = {row[0] for row in rows[1:]}
    assert "'\t=HYPERLINK(1)" in names, names  # a TAB first: quoted like =
    assert printable(FOLDERS["surrogates"]) in names and "caf\\xe9-\\xff" in names, names
    feedback = list((out / "feedback" / "00-fixture").glob("*.md"))
    assert len(feedback) == len(results)
    text = "".join(p.read_text(encoding="utf-8") for p in feedback)
    assert "bad \\udcff and \\ud800" in text


# Without a grading run --------------------------------------------------------------------------------

FAKE_JUDGE = """import json, sys
job = json.loads(sys.stdin.read())
print(json.dumps({"clock": job["timeout"]}), flush=True)
test = {"id": "test_blocks_for", "exercise": 1, "max": 1, "points": 1.0, "status": "passed", "message": ""}
print(json.dumps({"test": test}), flush=True)
print(json.dumps({"step": {"name": "running test_scale", "test": "test_scale"}}), flush=True)
sum(range(10**13))  # one C call: no alarm of its own can stop it
"""


def test_the_notebook_deadline_holds_from_outside_the_judge(tmp_path, monkeypatch):
    (tmp_path / "fake_judge_stuck.py").write_text(FAKE_JUDGE)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setattr(grader, "JUDGE_MODULE", "fake_judge_stuck")
    monkeypatch.setattr(watch, "GRACE_S", 1.0)
    plan = lab_mod.load(plants.SOLUTION)
    limits = Limits(timeout=2, cell_timeout=2, memory_mb=768)
    start = time.monotonic()
    r = grader.grade_one(plan, "s", plants.SOLUTION, limits, nbformat.read(plants.SOLUTION, as_version=4))
    elapsed = time.monotonic() - start
    got = {t.test_id: (t.status, t.points) for t in r.tests}
    assert got == {"test_blocks_for": ("passed", 1.0), "test_scale": ("timeout", 0.0)}, r.tests
    assert not r.grader_error and "stopped from outside" in r.tests[1].message
    assert elapsed < 2 + 1 + 15, elapsed  # its start, the limit, the grace


def _notebook(cells: list[str]) -> nbformat.NotebookNode:
    """The lab with `cells` after it, without cell ids: answers are searched for by names and resemblance."""
    nb = plants.lab_notebook()
    nb.cells += [nbformat.v4.new_code_cell(c) for c in cells]
    for cell in nb.cells:
        cell.pop("id", None)
    return nb


def test_the_matcher_costs_seconds_on_a_huge_cell_and_says_so():
    plan = lab_mod.load(plants.SOLUTION)
    huge = "x = (" + "1 + " * 225_000 + "1)"  # 900,000 characters, one expression nested deep
    nb = _notebook([huge, "def blocks_for(a, b):\n    return 0\n" * 20])
    start = time.monotonic()
    answers = match.find_answers(plan, nb)
    assert time.monotonic() - start < 3
    assert "cell #11 longer than 100,000 characters (up to 900,007) was not searched" in answers[0].note


def test_the_matcher_costs_seconds_on_a_64_mib_notebook(tmp_path):
    plan = lab_mod.load(plants.SOLUTION)
    stub = plan.exercises[0].cell.student_source
    near = stub.replace("blocks_for", "block_for")  # like the stub, defining none of its names: compared
    sources = [near + f"\n# {i}" for i in range(20_000)] + ["y = 1\n" * 12_500] * 600
    cells = [{"cell_type": "code", "source": c, "metadata": {}, "outputs": []} for c in sources]
    path = tmp_path / "big.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    assert 40 << 20 < path.stat().st_size <= match.MAX_NOTEBOOK_BYTES
    start = time.process_time()  # CPU seconds of this process: the matcher, whatever else runs
    sub = load_submission("big", path, b"")
    answers = match.find_answers(plan, sub.notebook)
    assert time.process_time() - start < 10, time.process_time() - start
    assert "found by its resemblance" in answers[0].note
    assert "past the first 2,000,000 characters" in answers[1].note, answers[1].note


def test_a_report_row_is_on_disk_before_the_run_ends(tmp_path):
    plan = lab_mod.load(plants.SOLUTION)
    row = outcomes.TestResult
    tests = [row(t.test_id, t.exercise, 0.0, t.points, "error", "m\udcff") for t in plan.tests]
    report = Report(plan, ["a", "b"], tmp_path)
    report.add(outcomes.Result("a", plan.name, Path("a.ipynb"), tests, notes=["\ud800"]))
    rows = list(csv.reader(open(tmp_path / f"{plan.name}.csv", encoding="utf-8")))
    assert [r[0] for r in rows[1:]] == ["a"] and (tmp_path / "feedback" / plan.name / "a.md").exists()
    report.close()
    assert not report.failed


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_every_formula_start_gets_the_quote(tmp_path, start):
    from cudalearn.grading.report import _cell

    assert _cell(start + "cmd") == "'" + start + "cmd" and _cell("bob") == "bob"


def test_each_notebook_gets_a_cpu_share_or_the_feedback_says_it_did_not():
    top = grader_cgroup()
    if top is None or not top.cpu_share:
        assert "no CPU controller" in " ".join(containment_notes(LIMITS, cgroup=top is not None, cpu=False))
        pytest.skip("no cgroup with a cpu controller here: the fallback (RLIMIT_CPU and nice) is said")
    try:
        group = top.child("share", cpus=1.0)
        if "v2" in group.dirs:
            assert Path(group.dirs["v2"], "cpu.max").read_text().split() == ["100000", "100000"]
        else:
            assert Path(group.dirs["cpu"], "cpu.cfs_quota_us").read_text().strip() == "100000"
    finally:
        top.kill()
    assert not any(Path(p).exists() for p in top.dirs.values())


def test_the_blame_follows_helpers_of_helpers():
    blame = Blame(
        {1: "def a(x):\n    return x", 2: "def b(x):\n    return a(x)", 3: "def c(y):\n    return b(y)"}
    )
    assert blame.hint(3) == ""
    blame.failed(1, "failed its own test t1")
    assert "your exercise 2 code uses `a`, which your exercise 1 cell defines" in blame.hint(3)
    local = Blame({1: "a = 1", 2: "def f(a):\n    return a"})  # its own parameter, not exercise 1's `a`
    local.failed(1, "x")
    assert local.hint(2) == ""
