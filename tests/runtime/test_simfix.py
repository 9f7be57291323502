"""The simulator's shared-array race: shown to exist, and shown to be fixed by cudalearn.runtime.simfix.

numba-cuda 0.30's FakeCUDAShared.array does check-then-set without a lock,
and one FakeCUDAShared serves a whole launch (all blocks). A thread switch
between the check and the set gives two threads of the first block two
different arrays. Making two threads meet inside np.empty turns a rare
corruption (about 1 launch in 200-400 at switch interval 1e-4, see
scripts/sim_race.py) into a certain one; the locked version gives the
right answer under the same conditions.
"""

import threading

import numpy as np
import pytest
from numba import cuda, float32

from cudalearn.runtime import simfix

N = 64  # even, so no thread reads the element it wrote itself


@cuda.jit
def reverse_through_shared(out):
    tile = cuda.shared.array(N, float32)
    i = cuda.threadIdx.x
    tile[i] = i
    cuda.syncthreads()
    out[i] = tile[N - 1 - i]


EXPECTED = np.arange(N, dtype=np.float32)[::-1]


@pytest.fixture
def meeting_empty(monkeypatch):
    """np.empty that waits (up to 0.5 s) for a second thread to enter it, and fills with NaN.

    Unlocked, two threads of the first block meet inside np.empty, so the
    race happens on every launch, deterministically; locked, the second
    thread waits for the lock instead, the wait times out and nothing races.
    """
    real_full = np.full
    state = {"barrier": threading.Barrier(2, timeout=0.5)}

    def empty(shape, dtype=float, *args, **kwargs):
        try:
            state["barrier"].wait()
        except threading.BrokenBarrierError:
            pass
        return real_full(shape, np.nan, dtype=dtype)

    monkeypatch.setattr(np, "empty", empty)
    return state


def _launch() -> np.ndarray:
    out = np.zeros(N, np.float32)
    reverse_through_shared[1, N](out)
    return out


def test_fix_is_installed():
    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    assert simfix.apply()
    assert FakeCUDAShared.array is simfix._locked_array
    assert simfix.ORIGINAL_ARRAY is not None


def test_unlocked_simulator_gives_threads_different_shared_arrays(meeting_empty, monkeypatch):
    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    monkeypatch.setattr(FakeCUDAShared, "array", simfix.ORIGINAL_ARRAY)
    for _ in range(3):
        meeting_empty["barrier"] = threading.Barrier(2, timeout=0.5)
        out = _launch()
        assert np.isnan(out).any(), "two threads should have got two different shared arrays"


def test_locked_simulator_is_right_under_the_same_window(meeting_empty):
    for _ in range(3):
        meeting_empty["barrier"] = threading.Barrier(2, timeout=0.5)
        np.testing.assert_array_equal(_launch(), EXPECTED)


def test_two_shared_arrays_on_two_lines_stay_distinct():
    @cuda.jit
    def two(out):
        a = cuda.shared.array(4, float32)
        b = cuda.shared.array(4, float32)
        i = cuda.threadIdx.x
        a[i] = i
        b[i] = 10 * i
        cuda.syncthreads()
        out[i] = a[3 - i] + b[i]

    out = np.zeros(4, np.float32)
    two[1, 4](out)
    np.testing.assert_array_equal(out, [3 + 0, 2 + 10, 1 + 20, 0 + 30])
