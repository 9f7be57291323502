"""The judge's side of `cudalearn grade` under attack: hostile answers to real labs, each with its grade.

The judge runs the instructor's checks unconfined, so no text of a submission may be compiled or run
there except the kernel syntax tree `grading.rebuild` verified. Each planted answer below tries to get
its own text run in the judge (through the tracer's source reading, through the tracer's index hints,
through a write to the judge's modules or arrays) or to fool a hidden test with a stand-in (an answer
that converts lab 1's product-refusing arrays, one that patches them in its own process, one that zeroes
its inputs). Each is graded with `cudalearn grade` beside the lab's solution and must get the grade its
real code earns, with nothing leaked: no marker file outside the sandbox, no hidden-test text in its
feedback, the solution still at full marks.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import nbformat
import pytest
from mutations import runner

from cudalearn.grading import Limits, grade
from cudalearn.grading import lab as lab_mod

pytestmark = pytest.mark.grader

LIMITS = Limits(timeout=300, cell_timeout=120, memory_mb=3072)
MARKERS = Path(tempfile.gettempdir()) / f"judge-pwned-{os.getpid()}"  # where an attack's code would write


def marker(what: str) -> Path:
    """The file a planted attack creates if its code runs in the judge."""
    return MARKERS.with_name(f"{MARKERS.name}-{what}")


# Code run in the judge would reach the real builtins through any class whose module has them.
ESCAPE = '[c for c in ().__class__.__base__.__subclasses__() if c.__name__ == "catch_warnings"][0]()'
TOUCH = ESCAPE + '._module.__builtins__["open"]("{marker}", "w").write("{what}")'
# ... and without a subscript (the tracer's index hint evaluated only subscript-free candidates)
TOUCH_FLAT = (
    '[c()._module.__builtins__.get("open")("{marker}", "w").write("{what}")'
    ' for c in ().__class__.__base__.__subclasses__() if c.__name__ == "catch_warnings"]'
)

NAIVE_BODY = """\
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = float32(0.0)
        for p in range(A.shape[1]):
            acc += A[row, p] * B[p, col]
        C[row, col] = acc
"""

TILED_BODY = """\
    sA = cuda.shared.array((16, 16), float32)
    sB = cuda.shared.array((16, 16), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * 16 + ty
    col = cuda.blockIdx.x * 16 + tx
    K = A.shape[1]
    acc = float32(0.0)
    for t in range((K + 15) // 16):
        k0 = t * 16
        a = float32(0.0)
        if row < A.shape[0] and k0 + tx < K:
            a = A[row, k0 + tx]
        b = float32(0.0)
        if k0 + ty < K and col < B.shape[1]:
            b = B[k0 + ty, col]
        sA[ty, tx] = a
        sB[ty, tx] = b
        cuda.syncthreads()
        for k in range(16):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc
"""


def _steer(fake_body: str) -> str:
    """Lab 3's answer: a naive kernel whose `def\\` line sends inspect's scan into its decorator's string.

    inspect.getsourcelines looks for the `def` from the code's first line upwards; `def\\` does not match
    its pattern, so it stops at the `def` inside the decorator's string: that text, never verified, is what
    a tracer reading the source would run.
    """
    return (
        "TILE = 16\n\n\n"
        '@cuda.jit(fastmath=not """\n'
        f"def matmul_tiled(A, B, C):\n{fake_body}"
        '""")\n'
        "def\\\n matmul_tiled(A, B, C):\n" + NAIVE_BODY
    )


STEER_MARKS = _steer(
    "    if cuda.threadIdx.x + cuda.threadIdx.y + cuda.blockIdx.x + cuda.blockIdx.y == 0:\n"
    f"        {TOUCH.format(marker=marker('steer'), what='steer')}\n" + TILED_BODY
)

STEER_LEAK = _steer(
    f"    b = {ESCAPE}._module.__builtins__\n"
    '    for o in b["__import__"]("gc").get_objects():\n'
    '        if b["type"](o) is b["dict"] and "cells" in o and "answers" in o:\n'
    '            raise b["AssertionError"]("LEAK " + b["repr"]([c.get("source") for c in o["cells"]]))\n'
)

# The tracer's out-of-bounds hint read the faulting line's text and, with several candidate indices,
# evaluated them: the line below holds, for a reader of that one line, two reads of C whose first index
# is code; for Python, that text is the end of a string and the statement is the store after the `;`.
INDEX_EVAL = runner._strip_markers(lab_mod.load(runner.solution_path("03")).exercises[1].cell.source).replace(
    "        C[row, col] = acc",
    '        """\n'
    f'C[{TOUCH_FLAT.format(marker=marker("index"), what="index")}, 0] + C[row, 0] #"""; '
    "C[row + 1000, col] = acc",
)

LAB3 = {
    "steer-marks": (STEER_MARKS, {"matmul_tiled": "does not use shared memory at all"}),
    "steer-leak": (STEER_LEAK, {"matmul_tiled": "does not use shared memory at all"}),
    "index-eval": (INDEX_EVAL, {"matmul_tiled": "outside"}),
}

LAB1_ANSWER = '''\
def matmul_loops(A, B):
    """C = A @ B with Python loops; A (m, k), B (k, n) float64 -> C (m, n) float64."""
'''
LAB1 = {
    # the check's arrays refuse @ in the student's process; a plain view of them does not
    "stand-in": (LAB1_ANSWER + "    return np.asarray(A) @ np.asarray(B)\n", {"matmul_loops": "@"}),
    "stand-in-patched": (
        "import cudalearn.chapters.ch01.checks as _b\n\n"
        "_b._LoopsOnly.__matmul__ = lambda a, b: np.asarray(a).dot(np.asarray(b))\n"
        "_b._LoopsOnly.__array_ufunc__ = None\n\n\n" + LAB1_ANSWER + "    return A @ B\n",
        {"matmul_loops": "uses (@|_LoopsOnly)"},
    ),
    "stand-in-getattr": (
        LAB1_ANSWER + '    return getattr(np, "mat" + "mul")(np.asarray(A), np.asarray(B))\n',
        {"matmul_loops": "getattr"},
    ),
    "zero-inputs": (
        LAB1_ANSWER
        + "    C = np.zeros((A.shape[0], B.shape[1]))\n    A[...] = 0\n    B[...] = 0\n    return C\n",
        {"matmul_loops": "is wrong at"},
    ),
}


def _submission(lab: str, code: str) -> nbformat.NotebookNode:
    """The generated lab with the solution's answers, and `code` for the exercise it defines."""
    plan = lab_mod.load(runner.solution_path(lab))
    nb = runner.submission(plan, None)
    names = lab_mod.bound_names(code)
    for ex in plan.exercises:
        if set(ex.names) & set(names):
            nb.cells[ex.cell.index].source = code
    return nb


def _grade(lab: str, plants: dict, tmp: Path) -> dict:
    subs = tmp / "submissions"
    for name, (code, _) in {"solution": (None, {}), **plants}.items():
        (subs / name).mkdir(parents=True)
        nb = runner.submission(lab_mod.load(runner.solution_path(lab)), None) if code is None else None
        nbformat.write(nb or _submission(lab, code), subs / name / f"{lab}.ipynb")
    for what in ("steer", "index"):
        marker(what).unlink(missing_ok=True)
    results = grade(runner.solution_path(lab), [subs], out=tmp / "grades", limits=LIMITS, jobs=2)
    fb = {p.stem: p.read_text() for p in (tmp / "grades" / "feedback").rglob("*.md")}
    written = {p.name for p in MARKERS.parent.glob(f"{MARKERS.name}-*")}
    return {"results": {r.student: r for r in results}, "feedback": fb, "written": written}


@pytest.fixture(autouse=True)
def _lab1_matrices_restored():
    """A planted lab-1 answer patches the check's element-only matrices where it runs: when a test of this
    module runs one in this process, the next module's checks still get the class as the course wrote it."""
    from cudalearn.chapters.ch01 import checks as lab1_checks

    saved = dict(vars(lab1_checks._LoopsOnly))
    yield
    for name in set(vars(lab1_checks._LoopsOnly)) - set(saved):
        delattr(lab1_checks._LoopsOnly, name)
    for name, value in saved.items():
        if name not in ("__dict__", "__weakref__") and vars(lab1_checks._LoopsOnly).get(name) is not value:
            setattr(lab1_checks._LoopsOnly, name, value)


@pytest.fixture(scope="module")
def lab3(tmp_path_factory):
    return _grade("03", LAB3, tmp_path_factory.mktemp("hostile03"))


@pytest.fixture(scope="module")
def lab1(tmp_path_factory):
    return _grade("01", LAB1, tmp_path_factory.mktemp("hostile01"))


def _hidden_texts(lab: str) -> list[str]:
    """Lines of the lab's hidden tests that a leak would show (long enough to be unmistakable)."""
    plan = lab_mod.load(runner.solution_path(lab))
    out = []
    for t in plan.tests:
        hidden = t.cell.source.split("### BEGIN HIDDEN TESTS")[1:]
        for block in hidden:
            out += [ln.strip() for ln in block.split("### END HIDDEN TESTS")[0].splitlines() if len(ln) > 30]
    return out


def _assert_graded(run: dict, lab: str, plants: dict, name: str) -> None:
    import re

    results, fb = run["results"], run["feedback"]
    assert not run["written"], f"code of a submission ran in the judge and wrote {run['written']}"
    assert results["solution"].total == results["solution"].max_total, results["solution"].tests
    r = results[name]
    failing = plants[name][1]
    for t in r.tests:
        test_name = next((n for n in failing if n in t.test_id), None)
        if test_name is None:
            assert t.status == "passed", (name, t.test_id, t.message)
        else:
            assert t.points == 0 and re.search(failing[test_name], t.message), (name, t.test_id, t.message)
    for text in _hidden_texts(lab):
        assert text not in fb[name], f"{name}: hidden test text in the feedback: {text}"
    assert "LEAK" not in fb[name]


@pytest.mark.parametrize("name", list(LAB3))
def test_lab3_attacks_on_the_tracer_get_the_grade_of_their_real_kernel(lab3, name):
    _assert_graded(lab3, "03", LAB3, name)


@pytest.mark.parametrize("name", list(LAB1))
def test_lab1_stand_ins_and_zeroed_inputs_lose_the_points(lab1, name):
    _assert_graded(lab1, "01", LAB1, name)


# The same paths, without a grading run -------------------------------------------------------------


def _rebuilder(answers, **ns):
    from cudalearn.grading import rebuild, remote

    namespace: dict = dict(ns)
    exec("import math\nimport numpy as np\nfrom numba import cuda, float32", namespace)
    return rebuild.Rebuilder(answers, namespace, lambda name: 16, remote.Remote)


def _matmul_args(m=17, k=20, n=13):
    import numpy as np

    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    return A, B, np.zeros((m, n), np.float32)


def test_the_tracer_instruments_the_verified_tree_not_a_source_it_reads_back():
    from cudalearn.trace import trace

    fn = _rebuilder({2: STEER_MARKS}).function("matmul_tiled")
    A, B, C = _matmul_args()
    report = trace(fn, (1, 2), (16, 16), A, B, C)
    assert report.shared_requests == 0  # the naive kernel that was verified, not the tiled one in the string
    assert abs(report.outputs[2] - A @ B).max() < 1e-4
    assert not marker("steer").exists()


def test_a_rebuilt_function_without_its_tree_is_never_traced_from_source():
    from cudalearn.compile import source
    from cudalearn.trace import TraceError, trace

    fn = _rebuilder({2: STEER_MARKS}).function("matmul_tiled")
    source._VERIFIED.pop(fn)
    with pytest.raises(TraceError, match="without its verified syntax tree"):
        trace(fn, (1, 2), (16, 16), *_matmul_args())
    assert not marker("steer").exists()


def test_the_line_cache_shows_only_verified_lines():
    import linecache

    _rebuilder({2: STEER_MARKS}).function("matmul_tiled")
    shown = "".join(linecache.getlines("<exercise 2 source>"))
    assert "matmul_tiled(A, B, C):" in shown and "sA = cuda.shared" not in shown and "fastmath" not in shown


def test_an_out_of_bounds_hint_names_the_index_without_evaluating_the_line():
    from cudalearn.trace import TraceOutOfBounds, trace

    fn = _rebuilder({2: INDEX_EVAL}).function("matmul_tiled")
    with pytest.raises(TraceOutOfBounds, match=r"the index `row \+ 1000` is 1000 on axis 0 of C"):
        trace(fn, (1, 2), (16, 16), *_matmul_args())
    assert not marker("index").exists()


KERNEL = "TILE = 16\n\n\n@cuda.jit\ndef matmul_tiled(A, B, C):\n{body}\n    C[0, 0] = A[0, 0]\n"


@pytest.mark.parametrize(
    "body, why",
    [
        ("    math.sqrt = math.exp", "assigns an attribute"),
        ("    np.pi = 3.0", "assigns an attribute"),
        ("    cuda.blockDim = cuda.gridDim", "assigns an attribute"),
        ("    GLOBAL[0] = 1.0", "writes into a global"),
        ("    GLOBAL[0, 1:2][0] += 1.0", "writes into a global"),
        ("    x = exercises", "`exercises` is not a number, array, Numba object or module"),
        ("    f = checker", "`checker` is not a number, array, Numba object or module"),
    ],
)
def test_a_traced_kernel_cannot_change_the_judge(body, why):
    import numpy as np

    from cudalearn import exercises
    from cudalearn.grading import rebuild

    ns = {"GLOBAL": np.zeros((2, 2), np.float32), "exercises": exercises, "checker": print}
    with pytest.raises(rebuild.Unsafe, match=why):
        _rebuilder({2: KERNEL.format(body=body)}, **ns).function("matmul_tiled")


def test_a_kernel_s_global_arrays_are_read_only_copies():
    import numpy as np

    from cudalearn.trace import trace

    table = np.ones(4, np.float32)
    body = "    x = cuda.const.array_like(TABLE)\n    x[0] = 5.0"
    fn = _rebuilder({2: KERNEL.format(body=body)}, TABLE=table).function("matmul_tiled")
    with pytest.raises(ValueError, match="read-only"):
        trace(fn, 1, 1, *_matmul_args(2, 2, 2))
    assert (table == 1).all()


def _in_notebook(code: str):
    """The lab 1 answer `code` defined as a notebook cell defines it (registered in the line cache)."""
    import linecache

    import numpy as np

    name = f"<hostile cell {abs(hash(code))}>"
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    ns = {"np": np}
    exec(compile(code, name, "exec"), ns)
    return ns["matmul_loops"]


@pytest.mark.parametrize("name", list(LAB1))
def test_lab1_stand_ins_fail_the_visible_check_too(name):
    from cudalearn import exercises

    code, why = LAB1[name]
    with pytest.raises(AssertionError, match=why["matmul_loops"]):
        exercises.check_matmul_loops(_in_notebook(code))


def test_a_source_that_cannot_be_read_fails_the_check_it_does_not_skip_it():
    import numpy as np

    from cudalearn import exercises

    class StandIn:  # a callable whose source inspect cannot read
        def __call__(self, A, B):
            return np.asarray(A) @ np.asarray(B)

    with pytest.raises(AssertionError, match="the source of `matmul_loops` could not be read"):
        exercises.check_matmul_loops(StandIn())


# A kernel that runs for ever only when traced holds the judge, not the student's process ------------

SPIN_IN_TRACE = runner._strip_markers(
    lab_mod.load(runner.solution_path("03")).exercises[1].cell.source
).replace(
    "    K = A.shape[1]\n",
    "    K = A.shape[1]\n    while A.shape[0] == 21:  # the traced size only\n        K = K\n",
)


def test_a_trace_that_never_ends_stops_at_the_notebook_limit_and_costs_only_its_test(tmp_path):
    subs = tmp_path / "submissions"
    (subs / "spin").mkdir(parents=True)
    nbformat.write(_submission("03", SPIN_IN_TRACE), subs / "spin" / "03.ipynb")
    limits = Limits(timeout=60, cell_timeout=30, memory_mb=3072)
    (r,) = grade(runner.solution_path("03"), [subs], out=None, limits=limits, jobs=1)
    assert not r.grader_error, r.notes
    got = {t.test_id: (t.status, t.message) for t in r.tests}
    assert got["test_global_bytes_tiled"][0] == "passed"
    status, message = got["test_matmul_tiled"]
    assert status == "timeout" and "tracing your kernel" in message, got
