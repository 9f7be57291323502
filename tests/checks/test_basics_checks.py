"""Labs 0-2's checks: the one int rule, the sentinel, the usual-mistake hints and lab 1's loops-only rule."""

import numpy as np
import pytest

from cudalearn import checks, exercises


def test_exact_types_follow_the_one_int_rule_and_want_a_tuple_of_ints():
    """An int answer is a Python int or a NumPy integer (`answer_types.is_int`); a float or a bool is not."""
    cases = [((3,), 3)]
    for answer in (3, np.int64(3), np.int32(3), np.uint8(3)):
        checks.check_function(lambda n, a=answer: a, cases, name="f", exact_types=True)
    for answer, why in [(3.0, "a float"), (np.float64(3), "numpy.float64")]:
        with pytest.raises(AssertionError, match=f"{why}, where an int is asked for"):
            checks.check_function(lambda n, a=answer: a, cases, name="f", exact_types=True)
    with pytest.raises(AssertionError, match="True, a bool, where an int.*comparison gives a bool"):
        checks.check_function(lambda n: True, [((1,), 1)], name="f", exact_types=True)
    checks.check_function(lambda n: 3.0, cases, name="f")  # without exact_types the value is enough
    pair = [((1,), (1, 2))]
    checks.check_function(lambda n: (np.int64(1), 2), pair, name="g", exact_types=True)
    with pytest.raises(AssertionError, match="a list, where a tuple.*return a tuple"):
        checks.check_function(lambda n: [1, 2], pair, name="g", exact_types=True)
    with pytest.raises(AssertionError, match="item 1 that is 2.0, a float"):
        checks.check_function(lambda n: (1, 2.0), pair, name="g", exact_types=True)


def test_a_nan_the_kernel_computed_is_not_an_unwritten_element():
    """The sentinel is a NaN of marked bits: a computed 0/0 is named as computed, never as unwritten."""
    expected = np.ones(4, np.float32)
    got = checks.empty_output(4)
    with pytest.raises(AssertionError, match="wrote nothing"):
        checks.check_close(got, expected)
    with np.errstate(invalid="ignore"):
        got[:] = np.float32(0) / np.float32(0)  # every element written, as NaN
    with pytest.raises(AssertionError) as e:
        checks.check_close(got, expected)
    assert "never written" not in str(e.value) and "not done" not in str(e.value)
    assert "4 wrong element(s) hold NaN or inf that your kernel computed" in str(e.value)
    assert "0/0" in str(e.value)
    got[2:] = checks.sentinel(np.float32)  # two left as the check filled them
    with pytest.raises(AssertionError, match="2 wrong element.*never written.*2 wrong element.*computed"):
        checks.check_close(got, expected)
    for dtype in (np.float16, np.float32, np.float64):
        assert checks.sentinels.is_sentinel(checks.empty_output(3, dtype)).all()
        assert not checks.sentinels.is_sentinel(np.full(3, np.nan, dtype)).any()


def test_a_type_is_named_bare_if_builtin_or_the_students_else_by_the_package_that_exports_it():
    """One rule for every check's message (`checks.answer_types`): what a student can write or import."""
    import types

    import torch

    mine = type("Block", (), {"__module__": "__main__"})  # a class of the notebook
    stand_in = type("Block", (), {"__module__": "student"})  # the grader's stand-in for it
    expected = [
        (3.0, "float"),
        (None, "NoneType"),
        (np.int64(3), "numpy.int64"),
        (np.zeros(2), "numpy.ndarray"),
        (torch.zeros(1), "torch.Tensor"),
        (torch.nn.Parameter(torch.zeros(1)), "torch.nn.Parameter"),  # defined in torch.nn.parameter
        (mine(), "Block"),
        (stand_in(), "Block"),
        (types.SimpleNamespace(), "types.SimpleNamespace"),
    ]
    for value, name in expected:
        assert checks.type_name(value) == name, (value, checks.type_name(value))
    hidden = type("Hidden", (), {"__module__": "cudalearn.checks.answer_types"})  # exported nowhere
    assert checks.type_name(hidden()) == "cudalearn.checks.answer_types.Hidden"


def test_a_mistake_hint_needs_the_formula_on_every_case_first():
    cases = [((1,), 2), ((2,), 4)]
    mistakes = [(lambda n: 1, "a constant"), (lambda n: n, "forgot the factor 2")]
    with pytest.raises(AssertionError, match="forgot the factor 2"):
        checks.check_function(lambda n: n, cases, name="f", mistakes=mistakes)
    with pytest.raises(AssertionError, match="Hint: generic"):
        checks.check_function(lambda n: 7, cases, name="f", hint="generic", mistakes=mistakes)


def test_blocks_for_rejects_float_division():
    with pytest.raises(AssertionError, match="float division, which rounds"):
        exercises.check_blocks_for(lambda n, t: int(np.ceil(n / t)))
    exercises.check_blocks_for(lambda n, t: -(-n // t))


def test_matmul_loops_refuses_every_whole_array_operation_but_not_loops():
    """Lab 1's rule holds against what a student can write: a product, a broadcast, a row times a column."""
    for f, what in [
        (lambda A, B: A @ B, "@"),
        (lambda A, B: np.dot(A, B), "np.dot"),
        (np.matmul, "np.matmul"),
        (lambda A, B: np.matmul(A, B), "np.matmul"),
        (lambda A, B: (A[:, :, None] * B[None, :, :]).sum(axis=1), r"\.sum"),
    ]:
        with pytest.raises(AssertionError, match=f"uses {what}"):
            exercises.check_matmul_loops(f)

    def row_times_column(A, B):
        C = np.zeros((A.shape[0], B.shape[1]))
        for i in range(A.shape[0]):
            for j in range(B.shape[1]):
                C[i, j] = sum(A[i, :] * B[:, j])  # the loop over k done by NumPy
        return C

    with pytest.raises(AssertionError, match="right values but uses np.multiply.*single elements"):
        exercises.check_matmul_loops(row_times_column)

    def loops(A, B):
        C = np.zeros((A.shape[0], B.shape[1]))
        for i, row in enumerate(A):
            for j in range(B.shape[1]):
                C[i, j] = sum(a * B[p][j] for p, a in enumerate(row))
        return C

    exercises.check_matmul_loops(loops)


def test_attainable_catches_the_t4_figures_typed_in():
    with pytest.raises(AssertionError, match="T4's figures"):
        exercises.check_attainable(lambda ai, p, bw: min(8100.0, ai * 320.0))
    exercises.check_attainable(lambda ai, p, bw: float(np.minimum(p, ai * bw)))


def test_grid_2d_rejects_np_ceil():
    with pytest.raises(AssertionError, match="numpy.float64"):
        exercises.check_grid_2d(lambda r, c, b: (np.ceil(c / b[0]), np.ceil(r / b[1])))


def test_a_block_size_typed_in_is_named_with_the_gpus_larger_blocks():
    """blockIdx.x * 32 with blocks of 256 (a GPU launch): the blocks overlap, a prefix is written."""
    from cudalearn.chapters.ch02.checks import _matmul_hint
    from cudalearn.checks.simple_kernels import _stride_hint

    n, grid, threads = 1 << 20, 4096, 256
    expected = np.ones(n, np.float32)
    got = expected.copy()
    got[(grid - 1) * 32 + threads :] = np.nan
    assert "blockIdx.x * 32" in _stride_hint(got, expected, grid, threads)
    got[: (grid - 1) * 32 + threads + 1] = 1  # one more element: no step explains it
    assert _stride_hint(got, expected, grid, threads) is None
    a = np.random.default_rng(0).random((64, 64), dtype=np.float32)
    c = checks.empty_output((64, 64))  # the sentinel where nothing was written
    edge = 3 * 8 + 16  # blocks (16, 16) of a (4, 4) grid placed 8 apart
    c[:edge, :edge] = (a @ a)[:edge, :edge]
    assert "blockIdx.x * 8" in _matmul_hint(c, a, a, (4, 4), (16, 16))
