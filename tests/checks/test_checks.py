"""Student-facing checks, exercised with planted wrong kernels: each failure must say what to fix."""

import numpy as np
import pytest
from numba import cuda, float32

from cudalearn import checks, exercises


@cuda.jit
def add_ok(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] + b[i]


@cuda.jit
def add_no_guard(a, b, out):
    i = cuda.grid(1)
    out[i] = a[i] + b[i]


@cuda.jit
def add_unfinished(a, b, out):
    # YOUR CODE HERE
    pass


@cuda.jit
def add_off_by_one(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0] - 1:
        out[i + 1] = a[i] + b[i]


@cuda.jit
def add_first_block_only(a, b, out):
    i = cuda.threadIdx.x  # forgets blockIdx
    if i < out.shape[0]:
        out[i] = a[i] + b[i]


@cuda.jit
def matmul_swapped(A, B, C):
    row, col = cuda.grid(2)  # x picks the row: the result is transposed
    if row < C.shape[1] and col < C.shape[0]:
        acc = float32(0.0)
        for k in range(A.shape[1]):
            acc += A[col, k] * B[k, row]
        C[row, col] = acc


@cuda.jit
def matmul_wrong_guard(A, B, C):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1] - 1:  # drops the last column
        acc = float32(0.0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


def test_correct_kernel_passes():
    exercises.check_vector_add(add_ok)


def test_unfinished_kernel_says_not_done():
    with pytest.raises(AssertionError, match="not done yet"):
        exercises.check_vector_add(add_unfinished)


def test_missing_guard_names_the_fix():
    with pytest.raises(AssertionError, match=r"(?s)outside an array.*partial block.*if i < a.shape\[0\]"):
        exercises.check_vector_add(add_no_guard)


def test_shift_is_reported_with_element_and_values():
    with pytest.raises(AssertionError) as e:
        exercises.check_vector_add(add_off_by_one, sizes=[45])
    msg = str(e.value)
    assert "First wrong element out[0]" in msg and "expected" in msg and "got" in msg
    assert "shifted by one" in msg


def test_index_ignoring_blocks_is_reported_as_a_race_between_blocks():
    with pytest.raises(AssertionError, match="race.*block.*ignores the block"):
        exercises.check_vector_add(add_first_block_only)


def test_swapped_indices_hint_at_the_transpose():
    with pytest.raises(AssertionError, match="row and column swapped|transpose"):
        exercises.check_matmul(matmul_swapped, sizes=[(16, 16, 16)])


def test_partial_block_hint():
    with pytest.raises(AssertionError, match="last partial block"):
        exercises.check_matmul(matmul_wrong_guard, sizes=[(12, 9, 13)])


def test_shape_and_dtype_messages():
    expected = np.zeros((3, 4), np.float32)
    with pytest.raises(AssertionError, match=r"shape \(4, 3\).*swap rows and columns"):
        checks.check_close(np.zeros((4, 3), np.float32), expected)
    with pytest.raises(AssertionError, match="dtype float64, expected float32"):
        checks.check_close(np.zeros((3, 4)), expected)
    with pytest.raises(AssertionError, match="is None.*return"):
        checks.check_close(None, expected)


def test_max_error_and_count_are_reported():
    expected = np.arange(10, dtype=np.float32)
    got = expected.copy()
    got[[3, 7]] += 0.5
    with pytest.raises(AssertionError, match=r"wrong at 2 of 10 elements.*result\[3\].*Largest error: 0.5"):
        checks.check_close(got, expected)


def test_unwritten_and_nan_elements_are_counted_not_hidden_by_the_largest_error():
    """NaN has no error to measure: a result wrong only where it is NaN never reads "Largest error: 0"."""
    expected = np.arange(10, dtype=np.float32)
    unwritten = checks.empty_output(10)
    unwritten[:6] = expected[:6]  # 4 elements never written
    with pytest.raises(AssertionError) as e:
        checks.check_close(unwritten, expected)
    assert "Largest error" not in str(e.value) and "4 wrong element(s) were never written" in str(e.value)
    mixed = unwritten.copy()
    mixed[0] += 0.25
    mixed[1] = np.inf
    with pytest.raises(AssertionError) as e:
        checks.check_close(mixed, expected)
    msg = str(e.value)
    assert "Largest error: 0.25 (over the wrong elements that hold a number)" in msg, msg
    assert "4 wrong element(s) were never written: they still hold the marked NaN" in msg, msg
    assert "1 wrong element(s) hold NaN or inf" in msg, msg


def test_check_function_turns_not_implemented_into_not_done():
    def stub(n):
        raise NotImplementedError()

    with pytest.raises(AssertionError, match="not done yet"):
        checks.check_function(stub, [((3,), 3)], name="f")
    with pytest.raises(AssertionError, match=r"f\(3\)` is 4, expected 3"):
        checks.check_function(lambda n: n + 1, [((3,), 3)], name="f")
    checks.check_function(lambda n: n, [((3,), 3), ((5,), 5)], name="f")


def test_checks_are_found_by_name():
    """exercises.CHECKS lists each module's public check_* functions, read from its source, not a registry."""
    import importlib
    import inspect

    assert "chapters.ch05.checks.fusion" in exercises.CHECKS and "chapters.ch02.checks" in exercises.CHECKS
    assert not any(m.rpartition(".")[2].startswith("_") for m in exercises.CHECKS)
    for module, names in exercises.CHECKS.items():
        mod = importlib.import_module(f"cudalearn.{module}")
        defined = sorted(
            n
            for n, f in vars(mod).items()
            if n.startswith("check_") and inspect.isfunction(f) and f.__module__ == mod.__name__
        )
        assert defined == list(names), f"cudalearn.{module}"
        assert all(getattr(exercises, n) is getattr(mod, n) for n in names)


def test_no_two_modules_define_one_check():
    seen: dict = {}
    for module, names in exercises.CHECKS.items():
        for name in names:
            assert name not in seen, f"{name} is defined in exercises.{seen[name]} and exercises.{module}"
            seen[name] = module
    with pytest.raises(ImportError, match=r"cudalearn\.a and cudalearn\.b both define check_x"):
        exercises._index({"a": ("check_x",), "b": ("check_x", "check_y")})


def test_every_check_a_notebook_calls_exists():
    """A lab, solution or book notebook that calls exercises.check_... finds it in the package."""
    import re
    from pathlib import Path

    import nbformat

    root = Path(__file__).resolve().parents[2]
    missing = set()
    for folder in ("book", "solutions", "labs"):
        for path in sorted((root / folder).glob("*.ipynb")):
            for cell in nbformat.read(path, as_version=4).cells:
                for name in re.findall(r"\bexercises\.(check_\w+)", cell.source):
                    if name not in exercises.__all__:
                        missing.add(f"{path.name}: {name}")
    assert not missing, sorted(missing)


def test_a_first_chapter_check_imports_neither_torch_nor_the_tracer():
    """Finding the checks reads the modules' sources: labs 0-2 never pay for PyTorch or the tracer."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom cudalearn import exercises\n"
        "exercises.check_blocks_for, exercises.check_matmul_loops, exercises.check_vector_add\n"
        "print(sorted(m for m in ('torch', 'cudalearn.trace') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
