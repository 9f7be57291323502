"""Lab 10's checks (cudalearn.chapters.ch10.checks): the lane emulation behind its hints, the combine rule."""

import math

import numpy as np
import pytest

from cudalearn import checks
from cudalearn.chapters.ch10 import mistakes
from cudalearn.chapters.ch10.checks import _harness, array_sum, online_combine, softmax_rows, warp_sums


def test_lanes_emulates_the_shuffle_trees():
    """shfl_down's tree leaves the sum in lane 0; the butterfly in every lane; shfl_up in lane 31."""
    v = np.arange(32.0) ** 2
    tree = (16, 8, 4, 2, 1)
    assert mistakes.lanes(v, "down", tree)[0] == v.sum()
    assert np.all(mistakes.lanes(v, "xor", tree) == v.sum())
    assert mistakes.lanes(v, "up", tree)[31] == v.sum() and mistakes.lanes(v, "up", tree)[0] == 32 * v[0]
    assert mistakes.lanes(v, "down", (1, 2, 4, 8, 16))[0] == v.sum()  # the order does not matter for lane 0
    assert np.all(mistakes.lanes(v, "xor", tree, np.maximum) == v.max())


def test_gamma_bounds_a_float32_sum():
    """A float32 recursive sum of n terms stays within gamma_(n-1) * sum|x| of the float64 sum."""
    x = np.random.default_rng(0).standard_normal(4096).astype(np.float32)
    acc = np.float32(0)
    for v in x:
        acc = np.float32(acc + v)
    assert abs(float(acc) - x.astype(np.float64).sum()) <= checks.gamma(4095) * np.abs(x).sum()
    assert checks.gamma(1) == checks.FLOAT32_ROUNDOFF / (1 - checks.FLOAT32_ROUNDOFF) and checks.gamma(0) == 0
    for module in (_harness, array_sum, online_combine, softmax_rows, warp_sums):
        assert not hasattr(module, "_gamma"), "one home for the bound: cudalearn.checks.gamma"


def _right(m_a, d_a, m_b, d_b):
    m = max(m_a, m_b)
    return m, d_a * math.exp(m_a - m) + d_b * math.exp(m_b - m)


def test_check_online_combine_passes_the_rule_and_names_a_missing_rescale():
    online_combine.check_online_combine(_right)
    with pytest.raises(AssertionError, match="without rescaling"):
        online_combine.check_online_combine(lambda m_a, d_a, m_b, d_b: (max(m_a, m_b), d_a + d_b))
    with pytest.raises(AssertionError, match="return a pair"):
        online_combine.check_online_combine(lambda m_a, d_a, m_b, d_b: max(m_a, m_b))


def test_sum_mistakes_tell_strides_in_the_wrong_order_from_block_0_alone():
    """Sequential addressing with rising strides adds s[0], s[1], s[2], s[4], ...: named as such, and on two
    data sets (integers and floats) no other mistake gives the same sums (the check requires both)."""
    rng = np.random.default_rng(3)
    block, blocks = 64, 3
    runs = [rng.integers(-8, 9, 1000).astype(np.float32), rng.standard_normal(1000).astype(np.float32)]
    wrong_order = "the tree's strides run in the wrong order"
    for x in runs:
        threads = block * blocks
        per_block = np.array([x[g::threads].astype(np.float64).sum() for g in range(threads)]).reshape(
            blocks, -1
        )
        rising = per_block[:, [0, 1, 2, 4, 8, 16, 32]].sum()
        named = mistakes.sum_mistakes(x, block, blocks)
        key = next(k for k in named if k.startswith(wrong_order))
        assert math.isclose(named[key], rising, rel_tol=1e-12)
    floats = mistakes.sum_mistakes(runs[1], block, blocks)
    assert not any(math.isclose(v, floats[key], rel_tol=1e-4) for k, v in floats.items() if k != key)


def test_wrong_with_a_known_unwritten_mask_names_computed_nan_as_computed():
    """A NaN the kernel computed (0 / 0) is not reported as never written, nor as the exercise not done."""
    expected = np.array([[0.5, 0.5], [0.25, 0.75]])
    got = np.full((2, 2), np.nan, np.float32)
    with pytest.raises(AssertionError) as caught:
        _harness._wrong(
            got, expected, name="y", rtol=1e-6, atol=0, hint="h", unwritten=np.zeros((2, 2), bool)
        )
    text = str(caught.value)
    assert "4 wrong element(s) hold NaN or inf that your kernel computed" in text
    assert "never written" not in text and checks.NOT_DONE not in text
    untouched = np.full((2, 2), checks.sentinel(np.float32), np.float32)  # as the check fills an output
    with pytest.raises(AssertionError, match="wrote nothing"):
        _harness._wrong(untouched, expected, name="y", rtol=1e-6, atol=0, hint="h")


def test_block_sizes_of_the_visible_warp_checks():
    """Without threads, every case runs with blocks of 64 and the largest again with blocks of 32."""
    assert _harness._launches([(3, 70), (5, 300), (2, 20)], None) == [
        ((3, 70), 64),
        ((5, 300), 64),
        ((2, 20), 64),
        ((5, 300), 32),
    ]
    assert _harness._launches([101, 10], 128) == [(101, 128), (10, 128)]
    assert softmax_rows._warp_sum_note(object()) == ""
