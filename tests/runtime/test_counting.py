"""`runtime.counting`: launches and host copies counted once, for the checks, chapter 5 and the grader."""

import numpy as np
import pytest
from numba import cuda

from cudalearn.chapters.ch00 import kernels as basics
from cudalearn.chapters.ch05 import model as mlp
from cudalearn.runtime import counting, device, launch


def test_launches_and_copies_are_counted_in_nested_blocks_and_unpatched_after():
    a = cuda.to_device(np.ones(8, np.float32))
    launch_before = counting.device_array_class().copy_to_host
    with counting.observe() as outer:
        basics.scale[1, 8](a, np.float32(2.0))
        with counting.observe() as inner, mlp.count_launches() as launches:
            basics.scale[1, 8](a, np.float32(3.0))
            host = a.copy_to_host()
        a.copy_to_host()
    assert outer.launches == ["scale", "scale"] and outer.copies == 2
    assert inner.launches == ["scale"] and inner.copies == 1
    assert launches.count == 1 and launches.names == ["scale"]
    np.testing.assert_array_equal(host, np.full(8, 6.0, np.float32))
    assert counting.device_array_class().copy_to_host is launch_before  # nothing left patched
    with counting.observe() as later, counting.observe() as same_so_far:  # equal contents, two blocks
        pass
    assert later.launches == same_so_far.launches == [] and later.copies == 0


@pytest.mark.skipif(device.mode() != "gpu", reason="a prepared launch bypasses Numba's launch only on a GPU")
def test_a_prepared_launch_is_counted_once_on_a_gpu():
    """On a GPU `launch.prepared` goes around `_Kernel.launch`, which counting wraps: it reports itself
    (counted=True), once per call; a plain launch is counted by the wrap, and the kernel runs each time."""
    a = cuda.to_device(np.ones(8, np.float32))
    go = launch.prepared(basics.scale, 1, 8, a, np.float32(2.0))
    with counting.observe() as seen:
        go()
        go()
        basics.scale[1, 8](a, np.float32(0.5))
        host = a.copy_to_host()
    assert seen.launches == ["scale", "scale", "scale"] and seen.copies == 1
    np.testing.assert_array_equal(host, np.full(8, 2.0, np.float32))  # 1 * 2 * 2 * 0.5
