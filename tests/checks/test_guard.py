"""Guard zones (`cudalearn.checks.guard`): one rule for the checks and the grader's sandbox."""

import numpy as np
import pytest
from numba import cuda

from cudalearn import checks
from cudalearn.checks import guard
from cudalearn.grading import server


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.float64])
def test_writes_beside_the_array_are_counted_on_the_side_they_hit(dtype):
    g = guard.Guarded(np.arange(5).astype(dtype))
    assert g.overwritten() == (0, 0)
    np.testing.assert_array_equal(g.result(), np.arange(5).astype(dtype))
    g = guard.Guarded(np.zeros(5, dtype))
    flat = g.buffer.copy_to_host()
    size = flat.itemsize
    for k in (guard.GUARD + 5, guard.GUARD + 7, guard.GUARD - 1):  # two past the end, one before the start
        flat.view(np.uint8)[k * size] ^= 0xFF  # a store of any other value (random bytes may hold NaN)
    g.buffer.copy_to_device(flat)
    assert g.overwritten() == (1, 2)


def test_the_checks_and_the_sandbox_use_the_same_zones():
    view, g = server._guard(cuda.to_device(np.zeros((2, 3), np.float32)))
    assert isinstance(g, guard.Guarded) and view.shape == (2, 3)
    flat = g.buffer.copy_to_host()
    flat[guard.GUARD + 6] = 1.0
    g.buffer.copy_to_device(flat)
    with pytest.raises(IndexError, match="past the end of `out`"):
        server._check_guard("`out`", (2, 3), g)
    assert not hasattr(checks, "GUARD")  # no second size that could disagree
