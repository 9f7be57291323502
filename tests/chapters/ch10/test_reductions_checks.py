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
