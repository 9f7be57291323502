"""`cudalearn grade`: planted submissions (honest, broken, hostile) each get their grade; nbgrader agrees."""

import copy
import csv
import os
import re
import shutil
import sys
import time
from pathlib import Path

import nbformat
import numpy as np
import pytest

from cudalearn import checks
from cudalearn.grading import Limits, add_arguments, errors, grade, judge, match, remote, wire
from cudalearn.grading import lab as lab_mod
from cudalearn.grading.grader import command, job_for
from cudalearn.grading.landlock import landlock_abi

pytestmark = pytest.mark.grader

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "grading"))
import plants  # noqa: E402

LIMITS = Limits(timeout=120, cell_timeout=10, memory_mb=768)  # generous: CI machines can be slow
LANDLOCK = landlock_abi()
TESTS = ["test_blocks_for", "test_scale"]


def expected(name):
    """The statuses and total a planted submission must get (kill-parent: on Landlock's signal scope)."""
    _, statuses, total = plants.PLANTS[name]
    if name == "kill-parent" and LANDLOCK < 6:
        return None  # the judge dies: checked by test_a_submission_that_kills_the_judge_is_reported
    return statuses, total


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Every planted submission, graded once, in one folder with one subfolder per student."""
    root = tmp_path_factory.mktemp("grading")
    subs, out = root / "submissions", root / "grades"
    Path("/tmp/cudalearn-planted.txt").unlink(missing_ok=True)
    for name in plants.PLANTS:
        plants.build(name, subs, out)
    scratch = root / "scratch"  # the judges' and sandboxes' folders (TMPDIR): this run's only
    scratch.mkdir()
    saved = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(scratch)
    try:
        results = grade(plants.SOLUTION, [subs], out=out, limits=LIMITS, jobs=2)
    finally:
        if saved is None:
            os.environ.pop("TMPDIR")
        else:
            os.environ["TMPDIR"] = saved
    return {r.student: r for r in results}, subs, out, set(os.listdir(scratch))


@pytest.mark.parametrize("name", list(plants.PLANTS))
def test_planted_submission_gets_its_grade(graded, name):
    results, *_ = graded
    want = expected(name)
    if want is None:
        pytest.skip("this kernel's Landlock cannot stop a signal to the judge (ABI < 6)")
    r = results[name]
    got = {t.test_id: t.status for t in r.tests}
    assert (got, r.total) == want, (
        f"{name} ({plants.PLANTS[name][0]}): {got}, {r.total}; feedback:\n"
        + "\n".join(t.message for t in r.tests)
    )
    assert r.max_total == 3


def test_a_submission_that_kills_the_judge_is_reported(graded):
    results, *_ = graded
    r = results["kill-parent"]
    if LANDLOCK >= 6:
        assert not r.grader_error and "PermissionError" in " ".join(r.notes)
    else:
        assert r.grader_error and {t.status for t in r.tests} == {"error"}
    assert results["perfect"].total == 3  # the others were graded all the same


def test_grade_table(graded):
    results, _, out, _ = graded
    rows = list(csv.reader(open(out / "00-fixture.csv")))
    head = ["student", "lab", "test_blocks_for points", "test_blocks_for status", "test_scale points"]
    assert rows[0][:5] == head and rows[0][-5:] == ["total", "max", "notebook", "identical to", "feedback"]
    table = {row[0]: row for row in rows[1:]}
    assert set(table) == set(plants.PLANTS)
    assert table["unguarded"][1:7] == ["00-fixture", "1", "passed", "0", "failed", "1"]
    assert table["perfect"][-5:-3] == ["3", "3"] and table["perfect"][-1] == "perfect.md"
    assert table["loop-in-function"][2:6] == ["0", "timeout", "2", "passed"]


def test_feedback_says_why_in_the_checks_own_words(graded):
    _, _, out, _ = graded
    fb = {p.stem: p.read_text() for p in (out / "feedback" / "00-fixture").glob("*.md")}
    assert set(fb) == set(plants.PLANTS)
    assert "Total: 1 of 3 points." in fb["unguarded"]
    # the message of checks.run_kernel, word for word, for a kernel without its guard: the tracer's memcheck
    assert "your kernel indexed outside an array (found by the tracer)" in fb["unguarded"]
    assert "surplus threads of the last, partial block" in fb["unguarded"]
    assert "Did you guard the last partial block (if i < x.shape[0]: ...)?" in fb["unguarded"]
    assert fb["untouched"].count(checks.NOT_DONE) == 2
    assert "n // threads rounds down" in fb["monkeypatch"]  # exercises.check_blocks_for names the mistake
    assert "time limit" in fb["loop-in-function"] and "endless loop" in fb["loop-at-top"]
    assert "SIGKILL" in fb["kill-self"] and "SIGSEGV" in fb["segfault"] and "exited with code 0" in fb["exit"]
    assert "out of memory" in fb["memory-hog"] and "768 MiB" in fb["memory-hog"]
    assert "SyntaxError" in fb["syntax-error"] and "expected ':'" in fb["syntax-error"]
    assert "the last one you edited" in fb["rearranged"]
    assert "not a notebook" in fb["not-a-notebook"]


def test_hidden_tests_and_solutions_never_reach_a_submission(graded):
    results, _, out, _ = graded
    for p in out.rglob("*"):
        if p.is_file():
            assert plants.CANARY not in p.read_text(), p
    spy = results["spy"].tests[0].message
    assert spy.startswith("SPY REPORT")
    if LANDLOCK:
        assert "'solution': 'DENIED" in spy and "'root': 'DENIED" in spy
        assert "'parent environ': 'DENIED" in spy and "'parent memory': 'DENIED" in spy


def test_the_student_process_gets_no_hidden_test_and_no_solution():
    lab = lab_mod.load(plants.SOLUTION)
    job = job_for(lab, match.find_answers(lab, plants.lab_notebook()), LIMITS)
    to_sandbox = [c["student"] for c in job["cells"] if c["role"] == "context"] + list(
        job["answers"].values()
    )
    assert all("HIDDEN" not in s and "SOLUTION" not in s and plants.CANARY not in s for s in to_sandbox)
    assert all("source" not in c for c in job["cells"] if c["role"] == "answer")  # no solution code at all


def test_files_written_by_a_submission_stay_in_its_sandbox(graded):
    results, subs, out, leftovers = graded
    assert results["writer"].total == 3
    assert sorted(p.name for p in (subs / "writer").iterdir()) == ["00-fixture.ipynb"]
    assert not list(subs.rglob("written-*")) and not list(out.rglob("written-*"))
    assert "planted" not in (out / "00-fixture.csv").read_text()
    assert not [d for d in leftovers if d.startswith("cudalearn-")], leftovers  # sandboxes were removed
    if LANDLOCK:
        assert not Path("/tmp/cudalearn-planted.txt").exists()


def test_student_code_is_confined(graded):
    results, *_ = graded
    iso = results["perfect"].isolation
    if LANDLOCK:
        assert iso["landlock"] == LANDLOCK
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        assert iso["capabilities_dropped"] is True


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="--user needs root")
def test_student_code_can_run_as_another_user(tmp_path):
    """Without Landlock, --user is what keeps a submission out of the instructor's files."""
    from cudalearn.grading.limits import check_user

    try:
        check_user("nobody")
    except ValueError as e:
        pytest.skip(str(e))  # e.g. this Python lives under /root, closed to other users
    private = tmp_path / "private" / "00-fixture.ipynb"
    private.parent.mkdir()
    shutil.copy(plants.SOLUTION, private)
    private.chmod(0o600)
    nb = plants.lab_notebook()
    plants._set(nb, "ex1", plants.SPY.format(solution=str(private)))
    plants._set(nb, "ex2", plants.EX2_OK)
    nbformat.write(nb, tmp_path / "eve.ipynb")
    limits = Limits(timeout=60, cell_timeout=5, memory_mb=768, landlock=False, user="nobody")
    [r] = grade(private, [tmp_path / "eve.ipynb"], out=None, limits=limits)
    assert [t.status for t in r.tests] == ["failed", "passed"], r.tests
    # PermissionError, or FileNotFoundError where the sandbox's mount namespace has a /tmp of its own
    assert "'solution': 'DENIED" in r.tests[0].message
    assert plants.CANARY not in r.tests[0].message


def test_an_unusable_user_is_refused_before_grading():
    from cudalearn.grading.limits import check_user

    with pytest.raises(ValueError, match="no user"):
        check_user("no-such-user-3f9a")


# The pieces, without processes --------------------------------------------------------


def test_the_solution_notebook_is_read_as_a_plan():
    lab = lab_mod.load(plants.SOLUTION)
    assert [(e.number, e.names) for e in lab.exercises] == [(1, ("blocks_for",)), (2, ("scale",))]
    assert [(t.test_id, t.exercise, t.points) for t in lab.tests] == [
        ("test_blocks_for", 1, 1.0),
        ("test_scale", 2, 2.0),
    ]
    assert lab.max_points == 3


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda s: s.replace("# POINTS: 2\\n", ""), "must declare its points once"),
        (lambda s: s.replace("# POINTS: 2", "# POINTS: 2\\n# POINTS: 3"), "must declare its points once"),
    ],
)
def test_points_are_declared_once_in_the_test_cell(tmp_path, change, message):
    bad = tmp_path / "bad.ipynb"
    bad.write_text(change(plants.SOLUTION.read_text()))
    with pytest.raises(lab_mod.LabError, match=message):
        lab_mod.load(bad)


def test_answers_are_found_by_id_by_names_or_by_resemblance():
    lab = lab_mod.load(plants.SOLUTION)
    nb = plants.lab_notebook()
    assert [a.cell_index for a in match.find_answers(lab, nb)] == [4, 7]  # by cell id
    for c in nb.cells:
        c.pop("id", None)
    nb.cells = nb.cells[::-1]  # reversed and without ids: by the names they define
    assert [a.code.splitlines()[0] for a in match.find_answers(lab, nb)] == [
        "def blocks_for(n, threads):",
        "@cuda.jit",
    ]
    renamed = plants.lab_notebook()
    plants._set(renamed, "ex1", plants.lab_notebook().cells[4].source.replace("blocks_for", "blocks"))
    renamed.cells[4].id = "other"
    [a1, _] = match.find_answers(lab, renamed)
    assert a1.cell_index == 4 and "resemblance" in a1.note  # graded, and the name error will say why
    empty = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    assert [a.code for a in match.find_answers(lab, empty)] == [None, None]


def test_the_channel_carries_data_only():
    refs = []
    enc = wire.Encoder(lambda obj: refs.append(obj) or {"$": "r", "id": len(refs)})
    value = [1, 2.5, "s", None, True, (np.arange(3, dtype=np.float32), np.float32(2.5)), {"k": b"xy"}, 1j]
    value += [np.dtype("float16"), np.float32, float]  # types are data too (labs return dtypes)
    tree = enc.encode(value)
    payload = memoryview(b"".join(enc.buffers))
    spans, pos = [], 0
    for b in enc.buffers:
        spans.append((pos, len(b)))
        pos += len(b)
    back = wire.Decoder(payload, spans, lambda node: ("handle", node["id"])).decode(tree)
    assert back[:5] == value[:5] and back[6:] == value[6:] and back[-2] is np.float32 and back[-1] is float
    assert back[5][0].tolist() == [0, 1, 2] and back[5][1] == np.float32(2.5) and back[5][1].shape == ()

    class Liar(int):
        def __eq__(self, other):
            return True

    assert type(wire.Encoder(None).encode(Liar(3))) is int  # a lying int crosses as a plain int
    enc.encode(object())
    assert len(refs) == 1  # anything that is not data stays behind as a handle
    with pytest.raises(TypeError, match="dtype object"):
        wire.Encoder(None).encode(np.array([object()]))
    bad = wire.Decoder(memoryview(b"\0" * 8), [(0, 8)], None)
    for node in (
        {"$": "a", "dt": "O", "sh": [1], "i": 0},
        {"$": "a", "dt": "<f8", "sh": [2], "i": 0},
        {"$": "?"},
    ):
        with pytest.raises(wire.ProtocolError):
            bad.decode(node)


def test_a_frame_over_the_limit_is_refused():
    r, w = os.pipe()
    os.write(w, (1 << 40).to_bytes(8, "little"))
    with pytest.raises(wire.ProtocolError, match="over the limit"):
        wire.recv(r, limit=1 << 20)
    os.close(r)
    os.close(w)


def test_a_process_that_stops_reading_cannot_hold_the_judge_past_its_deadline(monkeypatch):
    """A request larger than a pipe holds, to a process that never reads: a cell's time limit, in time."""
    from cudalearn.grading.channel import Channel

    monkeypatch.setattr(wire, "STALL_SECONDS", 5.0)  # what the send waited without a deadline
    r, w = os.pipe()
    os.set_blocking(w, False)  # as the judge's end of a sandbox's pipe

    class Box:  # the student's process: it never reads its end of the pipe
        seq, to_child, killed = 0, w, False

        def kill(self):
            self.killed = True

        def receive(self, deadline):
            raise AssertionError("the request cannot have been sent whole")

    channel = Channel({"limits": {}, "cell_timeout": 0.5, "timeout": 60, "names": {}}, {})
    channel._start_cell_clock()
    box, start = Box(), time.monotonic()
    try:
        with pytest.raises(errors.TimeLimit, match=r"a cell's time limit was reached \(0.5 s\)"):
            channel._exchange(box, {"op": "exec", "name": "ex1", "code": ""}, [bytes(1 << 22)])
    finally:
        os.close(r)
        os.close(w)
    assert time.monotonic() - start < 2.5 and box.killed


def test_student_exceptions_come_back_as_builtin_types_only():
    rebuilt, theirs = errors.rebuilt_exception, errors.SubmissionError
    assert type(rebuilt({"type": "IndexError", "module": "builtins", "message": "m"})) is IndexError
    assert type(rebuilt({"type": "AlwaysPass", "module": "__main__"})) is theirs
    assert type(rebuilt({"type": "SystemExit", "module": "builtins"})) is theirs
    assert type(rebuilt({"type": "KeyboardInterrupt", "module": "builtins"})) is theirs


def test_the_command_line(tmp_path, capsys):
    import argparse

    p = argparse.ArgumentParser()
    add_arguments(p)
    course = tmp_path / "course"
    assert command(p.parse_args([str(plants.SOLUTION), "--nbgrader-source", str(course)])) == 0
    nb = nbformat.read(course / "source" / "00-fixture" / "00-fixture.ipynb", as_version=4)
    grades = [c.metadata["nbgrader"] for c in nb.cells if c.metadata["nbgrader"]["grade"]]
    assert [(g["grade_id"], g["points"]) for g in grades] == [("test_blocks_for", 1.0), ("test_scale", 2.0)]
    junk = tmp_path / "alice.ipynb"
    junk.write_text("not json")
    assert command(p.parse_args([str(plants.SOLUTION), str(junk), "--out", str(tmp_path / "g")])) == 0
    assert re.search(r"^alice +0/3 +test_blocks_for=error test_scale=error$", capsys.readouterr().out, re.M)
    assert (tmp_path / "g" / "feedback" / "00-fixture" / "alice.md").exists()


# Kernels for the memory tracer: rebuilt in the judge from checked source ------------------

TRACED_CHECK = """
from cudalearn.trace import trace
from numba.cuda.simulator import kernel as simulated

x = np.linspace(-1, 1, 40, dtype=np.float32)
report = trace(scale, 2, 32, x, np.float32(2.5), np.zeros(40, np.float32))
assert report.race_count == 0, "a race"
assert np.allclose(report.outputs[2], 2.5 * x), "the traced kernel computes something else"
launched, call = [], simulated.FakeCUDAKernel.__call__  # counted in the judge, as chapter 5's checks do
simulated.FakeCUDAKernel.__call__ = lambda k, *a: launched.append(k.fn.__name__) or call(k, *a)
try:
    check_scale(scale, 33)
finally:
    simulated.FakeCUDAKernel.__call__ = call
assert launched == ["scale"], f"launches: {launched}"
"""
COPY_CHECK = """
from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

copies, copy = [], FakeCUDAArray.copy_to_host
FakeCUDAArray.copy_to_host = lambda a, *args, **kw: copies.append(1) or copy(a, *args, **kw)
try:
    blocks_for(10, 4)
finally:
    FakeCUDAArray.copy_to_host = copy
assert not copies, f"blocks_for copied {len(copies)} array(s) to the host"
"""
COPYING_BLOCKS_FOR = """\
from numba import cuda


def blocks_for(n, threads):
    cuda.to_device(np.zeros(3)).copy_to_host()
    return (n + threads - 1) // threads
"""


def _rebuilder(answers):
    from cudalearn.grading import rebuild

    ns = {}
    exec("import numpy as np\nfrom numba import cuda, float32", ns)
    handle = remote.Remote.__new__(remote.Remote)  # what the student's process returns for a module
    return rebuild.Rebuilder(answers, ns, lambda name: ns.get(name, handle), remote.Remote)


def test_a_kernel_is_rebuilt_from_its_source_for_the_tracer_and_traced_like_the_original():
    from cudalearn.trace import trace

    fn = _rebuilder({2: plants.EX2_OK}).function("scale")
    x = np.linspace(-1, 1, 40, dtype=np.float32)
    report = trace(fn, 2, 32, x, np.float32(2.5), np.zeros(40, np.float32))
    assert np.allclose(report.outputs[2], 2.5 * x) and report.race_count == 0


@pytest.mark.parametrize(
    "body, why",
    [
        ("    open('/etc/passwd')", "`open` is not defined"),
        ("    x.__class__.__bases__", "is not an attribute the grader can trace"),
        ("    np.load('secrets.npy')", "`np.load` is not allowed"),
        ("    [v for v in x]", "`ListComp` is not allowed"),
        ("    getattr(x, 'shape')", "`getattr` is not defined"),
        ("    os.system('id')", "line 6: `os` comes from `import os` (exercise 2, line 1), which the grader"),
        ("    cuda.syncthread()", "`cuda.syncthread` is no CUDA name: did you mean `cuda.syncthreads`?"),
    ],
)
def test_a_kernel_outside_the_cuda_subset_is_never_rebuilt(body, why):
    from cudalearn.grading import rebuild

    code = f"import os\n\n\n@cuda.jit\ndef scale(x, alpha, out):\n{body}\n"
    with pytest.raises(rebuild.Unsafe, match=re.escape(why)):
        _rebuilder({2: code}).function("scale")
    with pytest.raises(rebuild.Unsafe, match="bound more than once"):
        _rebuilder({2: plants.EX2_OK + "\n\n\nscale = print\n"}).function("scale")


SCALE_USING = (
    "@cuda.jit\ndef scale(x, alpha, out):\n    i = cuda.grid(1)\n    if i < out.shape[0]:\n        {}\n"
)


@pytest.mark.parametrize(
    "imports, line",
    [
        ("from numba import cuda, float32", "out[i] = float32(alpha) * x[i]"),
        ("import numpy as np", "out[i] = np.float32(alpha) * x[i]"),
        ("import numba", "out[i] = numba.float32(alpha) * x[i]"),
        ("import numba.cuda", "out[i] = numba.float32(alpha) * x[i]"),
        ("from numba import float32 as f32", "out[i] = f32(alpha) * x[i]"),
        ("import math", "out[i] = alpha * x[i] * math.sqrt(1.0)"),
        ("from math import sqrt", "out[i] = alpha * x[i] * sqrt(1.0)"),
        ("from numpy import float32", "out[i] = float32(alpha) * x[i]"),
        ("from numpy import *", "out[i] = float32(alpha) * x[i]"),
        ("from math import *\nfrom numba import *", "out[i] = float32(alpha) * x[i] * sqrt(1.0)"),
    ],
)
def test_names_an_answer_cell_imports_resolve_to_the_judge_s_own_modules(imports, line):
    """`import numpy as np` in an answer cell: the kernel's `np` is the judge's numpy, never a handle."""
    from cudalearn.trace import trace

    rebuilder = _rebuilder({2: f"{imports}\n\n\n" + SCALE_USING.format(line)})
    fn = rebuilder.function("scale")
    judge: dict = {}
    exec(imports, judge)  # the test's own import: what the judge's name must be
    assert rebuilder.imported, "no imported name was resolved"
    for name in rebuilder.imported:
        assert fn.__globals__[name] is judge[name]
    x = np.linspace(-1, 1, 40, dtype=np.float32)
    report = trace(fn, 2, 32, x, np.float32(2.5), np.zeros(40, np.float32))
    assert np.allclose(report.outputs[2], 2.5 * x)


def test_an_import_in_another_answer_cell_resolves_too():
    """Lab 04: `from numba import cuda, float32` in exercise 2 does not cost exercise 3 its trace."""
    fn = _rebuilder({2: "from numba import cuda, float32\n", 3: SCALE_USING.format("out[i] = float32(x[i])")})
    assert fn.function("scale") is not None


@pytest.mark.parametrize(
    "imports, line, why",
    [
        (
            "import os",
            "os.getcwd()",
            "`os` comes from `import os` (exercise 2, line 1), which the grader cannot",
        ),
        ("import numpy.linalg as np", "out[i] = np.float32(x[i])", "comes from `import numpy.linalg as np`"),
        ("from os import path as np", "out[i] = np.float32(x[i])", "comes from `from os import path as np`"),
        ("from numpy import load", "load('x.npy')", "`load` comes from `from numpy import load`"),
        ("from math import __loader__ as m", "m.load_module('x')", "`m` comes from `from math import __lo"),
        ("from . import float32", "out[i] = float32(x[i])", "comes from `from . import float32`"),
        ("from numba.cuda import syncthreads", "syncthreads()", "so write `cuda.syncthreads`"),
        ("from numba.cuda import *", "syncthreads()", "unless `from numba.cuda import *` (exercise 2, line"),
        ("from os import *", "getcwd()", "`getcwd` is not defined, unless `from os import *` (exercise 2"),
        ("from numpy import *", "load('x.npy')", "`load` comes from `from numpy import *` (exercise 2, line"),
        ("import numpy as np\nnp = 3", "out[i] = np", "`np` is imported by `import numpy as np`"),
        ("import numpy as np\nimport math as np", "out[i] = np.pi", "imported as different things"),
    ],
)
def test_an_import_the_grader_cannot_accept_is_refused_naming_the_line(imports, line, why):
    from cudalearn.grading import rebuild

    code = f"{imports}\n\n\n" + SCALE_USING.format(line)
    with pytest.raises(rebuild.Unsafe, match=re.escape(why)) as e:
        _rebuilder({2: code}).function("scale")
    assert re.search("remove (this import|these imports) from the exercise cell", str(e.value), re.I)


@pytest.mark.parametrize(
    "imports, already",
    [
        ("from numpy import load as float32", "import `float32` already"),
        ("from numba.cuda import syncthreads as float32", "import `cuda` already"),
    ],
)
def test_a_refused_import_says_when_the_first_cells_import_the_name_already(imports, already):
    from cudalearn.grading import rebuild

    code = f"{imports}\n\n\n" + SCALE_USING.format("out[i] = float32(1)")
    with pytest.raises(
        rebuild.Unsafe,
        match=f"Remove this import from the exercise cell; the notebook's first cells {already}",
    ):
        _rebuilder({2: code}).function("scale")


def test_checks_that_trace_or_count_launches_and_copies_see_the_students_code(tmp_path):
    """The tracer gets the kernel rebuilt from checked source; launches and host copies are replayed."""
    sol = nbformat.read(plants.SOLUTION, as_version=4)
    for cell_id, extra in (("ex1-check", COPY_CHECK), ("ex2-check", TRACED_CHECK)):
        check = next(c for c in sol.cells if c.get("id") == cell_id)
        check.source = check.source.replace("### END HIDDEN TESTS", extra.strip() + "\n### END HIDDEN TESTS")
    nbformat.write(sol, tmp_path / "00-traced.ipynb")
    sneaky_scale = "import os\n\n\n" + plants.EX2_OK.replace("    i =", "    os.getcwd()\n    i =")
    for name, ex1, ex2 in [
        ("honest", plants.EX1_OK, plants.EX2_OK),
        ("sneaky", COPYING_BLOCKS_FOR, sneaky_scale),
    ]:
        nb = plants.lab_notebook()
        plants._set(nb, "ex1", ex1)
        plants._set(nb, "ex2", ex2)
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
    subs = [tmp_path / "honest.ipynb", tmp_path / "sneaky.ipynb"]
    results = {
        r.student: r for r in grade(tmp_path / "00-traced.ipynb", subs, out=None, limits=LIMITS, jobs=2)
    }
    assert [t.status for t in results["honest"].tests] == ["passed", "passed"], results["honest"].tests
    copies, traced = results["sneaky"].tests
    assert copies.points == 0 and copies.message == "blocks_for copied 1 array(s) to the host"
    # the sneaky kernel runs (the simulator allows os.getcwd()) but is not CUDA code: it is never traced
    assert (
        traced.points == 0
        and "could not trace `scale`: line 6: `os` comes from `import os`" in traced.message
    )


# nbgrader's own generate and autograde steps ------------------------------------------


@pytest.mark.filterwarnings("ignore:Object of type:Warning")  # nbgrader 0.9.6 with SQLAlchemy 2.1: harmless
def test_nbgrader_autograde_gives_the_points_cudalearn_grade_gives(tmp_path, monkeypatch):
    """The solution notebook, with metadata generated from its markers, is an nbgrader source notebook."""
    from nbgrader.api import Gradebook
    from nbgrader.apps import NbGraderAPI
    from nbgrader.nbgraderformat import MetadataValidator
    from traitlets.config import Config

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # alembic
    course = tmp_path / "course"
    source = course / "source" / "00-fixture" / "00-fixture.ipynb"
    source.parent.mkdir(parents=True)
    nb = lab_mod.nbgrader_source(plants.SOLUTION)
    MetadataValidator().validate_nb(nb)
    nbformat.write(nb, source)
    config = Config()
    config.CourseDirectory.root = str(course)
    config.CourseDirectory.course_id = "cudalearn"
    config.Exchange.root = str(tmp_path / "exchange")
    api = NbGraderAPI(config=config)
    result = api.generate_assignment("00-fixture")
    assert result["success"], result.get("log")
    release = nbformat.read(course / "release" / "00-fixture" / "00-fixture.ipynb", as_version=4)
    assert plants.CANARY not in nbformat.writes(release)  # nbgrader removed the hidden tests too
    students = {
        "unguarded": (plants.EX1_OK, plants.EX2_UNGUARDED),
        "monkeypatch": (plants.MONKEYPATCH, plants.EX2_UNGUARDED),
    }
    for student, (ex1, ex2) in students.items():
        sub = copy.deepcopy(release)
        for cell in sub.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            cell.source = {"answer_blocks_for": ex1, "answer_scale": ex2}.get(gid, cell.source)
        path = course / "submitted" / student / "00-fixture" / "00-fixture.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(sub, path)
        result = api.autograde("00-fixture", student)
        assert result["success"], result.get("log")
    ours = {r.student: r for r in grade(source, [course / "submitted"], out=None, limits=LIMITS, jobs=2)}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        theirs = {s: gb.find_submission_notebook("00-fixture", "00-fixture", s) for s in students}
        nbgrader_points = {s: {g.name: g.score for g in theirs[s].grades} for s in students}
    ours_points = {s: {t.test_id: t.points for t in ours[s].tests} for s in students}
    # An honest submission: the same points, test by test.
    assert (
        nbgrader_points["unguarded"]
        == ours_points["unguarded"]
        == {"test_blocks_for": 1.0, "test_scale": 0.0}
    )
    # A hostile one: nbgrader runs the hidden tests in the student's own kernel, where the patched
    # checks pass everything; cudalearn grade runs them where no student code ran.
    assert nbgrader_points["monkeypatch"] == {"test_blocks_for": 1.0, "test_scale": 2.0}
    assert ours_points["monkeypatch"] == {"test_blocks_for": 0.0, "test_scale": 0.0}


def test_judge_and_sandbox_import_what_the_grader_imported(tmp_path, monkeypatch):
    """`python -I` drops PYTHONPATH: the judge's command puts the grader's entries and this cudalearn back."""
    import subprocess

    import cudalearn
    from cudalearn.grading import python_command

    (tmp_path / "probe_on_pythonpath.py").write_text("import cudalearn\nprint(cudalearn.__file__)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    out = subprocess.run(python_command("probe_on_pythonpath"), capture_output=True, text=True, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == cudalearn.__file__


def test_objects_the_instructor_built_reach_the_student_s_code():
    """A judge object crosses to the sandbox pickled; the judge never unpickles what the sandbox sends."""
    import base64
    import pickle

    from cudalearn.grading.server import Server

    j = judge.Judge.__new__(judge.Judge)
    j.generation = 1
    node = j._to_ref(Limits(timeout=7))
    assert set(node) == {"$", "pickle"}
    assert Server().from_ref(node) == Limits(timeout=7)
    forged = {"$": "r", "pickle": base64.b64encode(pickle.dumps(Limits())).decode(), "id": 1, "type": "x"}
    assert isinstance(j._from_ref(forged), remote.Remote)  # the judge builds a handle, never the object
    with pytest.raises(TypeError, match="student_side"):
        j._to_ref(lambda: None)


FAKE_JUDGE = """import json, os, signal, sys
job = json.loads(sys.stdin.read())
test = {"id": "test_blocks_for", "exercise": 1, "max": 1, "points": 1.0, "status": "passed", "message": ""}
print(json.dumps({"test": test}), flush=True)
print('{"test": {"id": "test_sca', end="", flush=True)  # a line cut short by the kill
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_judge_that_dies_keeps_the_tests_it_finished(tmp_path, monkeypatch):
    """The judge streams each test's result: killed later (its memory limit), it loses only the rest."""
    from cudalearn.grading import grader

    (tmp_path / "fake_judge_dies.py").write_text(FAKE_JUDGE)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setattr(grader, "JUDGE_MODULE", "fake_judge_dies")
    plan = lab_mod.load(plants.SOLUTION)
    r = grader.grade_one(plan, "s", plants.SOLUTION, LIMITS, nbformat.read(plants.SOLUTION, as_version=4))
    got = {t.test_id: (t.status, t.points) for t in r.tests}
    assert got == {"test_blocks_for": ("passed", 1.0), "test_scale": ("error", 0.0)}
    assert "ended with code -9 without a result" in r.grader_error
    assert "the grader failed on this notebook" in r.tests[1].message


def test_an_endless_kernel_loses_only_its_own_points(tmp_path):
    """Lab 03: an endless `while` in matmul_tiled times out its test; the context cell that traces it
    stops at the tracer's budget in the judge; exercise 1 keeps its point, the solution gets full marks."""
    from mutations import runner, wrong

    endless = wrong(
        "endless-while",
        "matmul_tiled",
        "a while loop whose variable never advances",
        r"endless loop",
        ("    for t in range((K + TILE - 1) // TILE):", "    t = 0\n    while t < (K + TILE - 1) // TILE:"),
    )
    results = runner.grade_all("03", [endless], tmp_path, timeout=400, cell_timeout=10)
    sol, r = results["solution"], results["endless-while"]
    assert sol.total == sol.max_total and not sol.grader_error
    got = {t.test_id: (t.status, t.points) for t in r.tests}
    assert not r.grader_error, r.grader_error
    assert got == {"test_global_bytes_tiled": ("passed", 1.0), "test_matmul_tiled": ("timeout", 0.0)}
    assert "endless loop" in r.tests[1].message
    endless_notes = [n for n in r.notes if "`matmul_tiled` did not finish" in n]
    assert len(endless_notes) == 1, r.notes  # where the sandbox fails alike, one note says both
