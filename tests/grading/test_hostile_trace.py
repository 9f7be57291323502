"""What the tracer sees is what runs, and a check that cannot trace or compile fails (issue 34).

Planted answers to labs 0 and 2, each graded with `cudalearn grade` beside the lab's solution:
a racy kernel whose racy path hides behind an intrinsic the tracer used to compute otherwise than the
simulator or a GPU (clz of an int32 thread index, ffs of an int64), a race made of slice stores (which
the tracer used to refuse, turning "could not trace" into "no race"), an honest slice store (traced and
passed), and a kernel whose `def` sits under `if True:` (which the judge cannot rebuild: its compile
check fails, it is not skipped). Then, without a grading run, the same fail-closed paths in the judge's
process: a compile worker that never answers, one that dies, a kernel with no Python function, and the
race check of a kernel the tracer cannot run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
from mutations import runner

from cudalearn.grading import Limits, grade
from cudalearn.grading import lab as lab_mod

LIMITS = Limits(timeout=300, cell_timeout=120, memory_mb=3072)

# Lab 0: every thread of the first warp writes the whole array, with the right values, when the clz of its
# int32 thread index is under 40: always on a GPU (and in the simulator); the tracer once took it as an
# int64 (clz >= 58) and saw only the clean path.
FILL_PARITY = '''\
@cuda.jit
def fill_index(out):
    """out[i] = i for every element, one thread per element; out (n,) int32."""
    i = cuda.grid(1)
    if cuda.clz(cuda.threadIdx.x) < 40:
        for j in range(out.shape[0]):
            out[j] = j
    elif i < out.shape[0]:
        out[i] = i
'''

# Lab 0: each thread also writes its neighbour's element (the right value, so any order gives the right
# result) through a slice store, which the tracer used to refuse.
FILL_SLICE_RACE = '''\
@cuda.jit
def fill_index(out):
    """out[i] = i for every element, one thread per element; out (n,) int32."""
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = i
        if i + 1 < out.shape[0]:
            out[i + 1 : i + 2] = i + 1
'''

# Lab 2: vector_add racy when ffs of an int64 is 41 (a GPU's and now the simulator's and tracer's value; the
# tracer once looked at the low 32 bits only and saw 0, the simulator 8).
ADD_PARITY = '''\
@cuda.jit
def vector_add(a, b, out):
    """Lab 2: out[i] = a[i] + b[i], one thread per element; a, b, out (n,) float32."""
    i = cuda.grid(1)
    if cuda.ffs(1 << 40) == 41:
        for j in range(out.shape[0]):
            out[j] = a[j] + b[j]
    elif i < out.shape[0]:
        out[i] = a[i] + b[i]
'''

NAIVE = """\
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = float32(0.0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, {store}] = acc
"""
# Lab 2: one element a thread, stored through a one-element slice: honest, traced, full marks.
MATMUL_SLICE = "@cuda.jit\ndef matmul_naive(A, B, C):\n" + NAIVE.format(store="col : col + 1")
# Lab 2: the `def` under `if True:`, which the judge cannot rebuild: on a GPU its compile check (float32
# only) and race check were skipped and a float64 accumulator got full marks.
MATMUL_IF_TRUE = "if True:\n\n    @cuda.jit\n    def matmul_naive(A, B, C):\n" + "".join(
    "    " + line + "\n" for line in NAIVE.format(store="col").replace("float32(0.0)", "0.0").splitlines()
)

RACE = "several threads wrote the same element of `out`"
UNREBUILT = (
    r"could not compile `matmul_naive` .*could not trace `matmul_naive`: .*not a function defined by a "
    r"`def` at the top"
)
# name -> (the answer cell, the exercise's name it defines, {test: what its message must say}: 0 points)
LAB0 = {
    "parity-clz": (FILL_PARITY, "fill_index", {"fill_index": RACE}),
    "slice-race": (FILL_SLICE_RACE, "fill_index", {"fill_index": r"write-write race on out\["}),
}
LAB2 = {
    "parity-ffs": (ADD_PARITY, "vector_add", {"vector_add": RACE}),
    "slice-honest": (MATMUL_SLICE, "matmul_naive", {}),
    "if-true": (MATMUL_IF_TRUE, "matmul_naive", {"matmul_naive": UNREBUILT}),
}


def _submission(lab: str, code: str | None, target: str) -> nbformat.NotebookNode:
    """The generated lab with the solution's answers, and `code` in the cell of the exercise of `target`."""
    plan = lab_mod.load(runner.solution_path(lab))
    nb = runner.submission(plan, None)
    for ex in plan.exercises:
        if code is not None and target in ex.names:
            nb.cells[ex.cell.index].source = code
    return nb


def _grade(lab: str, plants: dict, tmp: Path) -> dict:
    subs = tmp / "submissions"
    for name, (code, target, _) in {"solution": (None, "", {}), **plants}.items():
        (subs / name).mkdir(parents=True)
        nbformat.write(_submission(lab, code, target), subs / name / f"{lab}.ipynb")
    results = grade(runner.solution_path(lab), [subs], out=tmp / "grades", limits=LIMITS, jobs=2)
    return {r.student: r for r in results}


def _assert_graded(results: dict, plants: dict, name: str) -> None:
    import re

    assert results["solution"].total == results["solution"].max_total, results["solution"].tests
    failing = plants[name][2]
    for t in results[name].tests:
        test_name = next((n for n in failing if n in t.test_id), None)
        if test_name is None:
            assert t.status == "passed", (name, t.test_id, t.message)
        else:
            assert t.points == 0 and re.search(failing[test_name], t.message, re.S), (
                name,
                t.test_id,
                t.message,
            )


@pytest.fixture(scope="module")
def lab0(tmp_path_factory):
    return _grade("00", LAB0, tmp_path_factory.mktemp("hostile-trace00"))


@pytest.fixture(scope="module")
def lab2(tmp_path_factory):
    return _grade("02", LAB2, tmp_path_factory.mktemp("hostile-trace02"))


@pytest.mark.grader
@pytest.mark.parametrize("name", list(LAB0))
def test_lab0_races_behind_parity_or_slices_lose_the_race_checked_points(lab0, name):
    _assert_graded(lab0, LAB0, name)


@pytest.mark.grader
@pytest.mark.parametrize("name", list(LAB2))
def test_lab2_races_slices_and_unrebuildable_kernels_get_their_honest_grade(lab2, name):
    _assert_graded(lab2, LAB2, name)


# The same paths in the judge's process, without a grading run ----------------------------------------


class _Unrebuilt:
    """Like the grader's handle on a kernel the judge could not rebuild: no `py_func` to trace or compile."""

    __name__ = "matmul_naive"

    def __getattr__(self, name):
        raise AttributeError(name)


@pytest.fixture
def required(monkeypatch):
    """The judge's setting (`ptx.require()`), undone afterwards; a fresh compile cache."""
    from cudalearn.compile import ptx

    monkeypatch.setattr(ptx, "_REQUIRED", False)
    monkeypatch.setattr(ptx, "_CACHE", {})
    ptx.require()
    return ptx


def _kernel():
    from cudalearn.chapters.ch00 import kernels

    return kernels.scale, (np.ones(4, np.float32), np.float32(2.0))


def _stalled_worker(ptx, code: str):
    """A `ptx._Worker` around a process that runs `code` instead of compiling (never answers, or dies)."""
    worker = object.__new__(ptx._Worker)
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    worker.owner, worker.answered, worker.proc = os.getpid(), True, proc
    worker.writer, worker.fd, worker.worker_pid = proc.stdin, proc.stdout.fileno(), proc.pid
    return worker


def _close_workers(ptx, worker) -> None:
    """The stalled worker, and any real one the check started after it (else it outlives the test)."""
    worker.close()
    if ptx._WORKER is not None and ptx._WORKER is not worker:
        ptx._WORKER.close()


@pytest.mark.parametrize(
    "code, why",
    [("import time; time.sleep(60)", "did not answer in time"), ("import sys; sys.exit(3)", "exited")],
    ids=["timeout", "crash"],
)
def test_a_compile_worker_that_times_out_or_dies_fails_the_check_under_the_grader(
    required, monkeypatch, code, why
):
    ptx = required
    worker = _stalled_worker(ptx, code)
    monkeypatch.setattr(ptx, "TIMEOUT_S", 0.5)
    monkeypatch.setattr(ptx, "_WORKER", worker)
    kernel, args = _kernel()
    try:
        with pytest.raises(
            AssertionError, match=f"could not compile `scale` for a real GPU.*{why}.*fails rather"
        ):
            ptx.check_kernel(kernel, args)
    finally:
        _close_workers(ptx, worker)


def test_a_kernel_the_judge_could_not_rebuild_fails_its_compile_check(required):
    with pytest.raises(AssertionError, match="could not compile `matmul_naive`.*could not be rebuilt"):
        required.check_kernel(_Unrebuilt(), (np.ones((2, 2), np.float32),) * 3)


def test_outside_the_grader_a_compile_worker_that_times_out_only_warns(monkeypatch):
    """In a notebook a missing compiler must not fail a student: the same timeout warns (not `require`d)."""
    from cudalearn.compile import ptx

    monkeypatch.setattr(ptx, "_REQUIRED", False)
    monkeypatch.setattr(ptx, "_CACHE", {})
    monkeypatch.setattr(ptx, "_WARNED", set())
    monkeypatch.setattr(ptx, "TIMEOUT_S", 0.5)
    worker = _stalled_worker(ptx, "import time; time.sleep(60)")
    monkeypatch.setattr(ptx, "_WORKER", worker)
    kernel, args = _kernel()
    try:
        with pytest.warns(RuntimeWarning, match="did not answer in time"):
            assert ptx.check_kernel(kernel, args) is None
    finally:
        _close_workers(ptx, worker)


def test_the_race_check_fails_when_the_tracer_cannot_run_the_kernel():
    from cudalearn.checks import simple_kernels

    probe = (1, 4, np.zeros(4, np.int32))
    with pytest.raises(
        AssertionError, match="race check could not run your kernel on the tracer.*no Python function"
    ):
        simple_kernels._check_no_race(_Unrebuilt(), probe, "out")
    # an explanation of a wrong result may do without the tracer; the race check may not
    assert simple_kernels._trace_findings(_Unrebuilt(), probe, "out") is None


def test_a_kernel_cannot_tell_the_simulator_from_the_tracer_by_an_intrinsic():
    """The kernel below takes its racy path where popc(-1) is 1 (the simulator's own popc): nowhere now."""
    from cudalearn.trace import trace

    kernel = _compile_kernel(
        "@cuda.jit\n"
        "def probe(out):\n"
        "    t = cuda.threadIdx.x\n"
        "    out[t, 0] = cuda.popc(-1)\n"
        "    out[t, 1] = cuda.clz(t)\n"
        "    out[t, 2] = cuda.ffs(1 << 40)\n"
        "    out[t, 3] = cuda.brev(1)\n"
    )
    sim = np.zeros((4, 4), np.int64)
    kernel[1, 4](sim)
    traced = trace(kernel, 1, 4, np.zeros((4, 4), np.int64)).outputs[0]
    gpu = [[64, 32 - t.bit_length(), 41, 2**31] for t in range(4)]  # numba-cuda 0.30 on a GPU
    np.testing.assert_array_equal(sim, gpu)
    np.testing.assert_array_equal(traced, gpu)


def _compile_kernel(src: str):
    """A kernel defined from `src` in a file of its own (the tracer reads a kernel's source)."""
    import importlib.util
    import tempfile

    path = Path(tempfile.mkdtemp()) / "planted_kernel.py"
    path.write_text("from numba import cuda\n\n\n" + src)
    spec = importlib.util.spec_from_file_location("planted_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.probe
