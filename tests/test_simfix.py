"""The simulator's shared-array race: shown to exist, and shown to be fixed by cudalearn.simfix.

numba-cuda 0.30's FakeCUDAShared.array does check-then-set without a lock,
and one FakeCUDAShared serves a whole launch (all blocks). A thread switch
between the check and the set gives two threads of the first block two
different arrays. Widening that window (np.empty that sleeps, which
releases the GIL) turns a rare corruption into a certain one; the locked
version gives the right answer under the same widened window.
"""

import time

import numpy as np
import pytest
from numba import cuda, float32

from cudalearn import simfix

T = 8


@cuda.jit
def transpose_tile(out):
    tile = cuda.shared.array((T, T), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    tile[ty, tx] = ty * T + tx
    cuda.syncthreads()
    out[ty, tx] = tile[tx, ty]


EXPECTED = np.arange(T * T, dtype=np.float32).reshape(T, T).T


@pytest.fixture
def slow_empty(monkeypatch):
    """np.empty that sleeps first, so other threads run between the check and the set."""
    real = np.empty

    def empty(*args, **kwargs):
        time.sleep(0.002)
        return real(*args, **kwargs)

    monkeypatch.setattr(np, "empty", empty)


def _launch() -> np.ndarray:
    out = np.zeros((T, T), np.float32)
    transpose_tile[1, (T, T)](out)
    return out


def test_fix_is_installed():
    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    assert simfix.apply()
    assert FakeCUDAShared.array is simfix._locked_array
    assert simfix.ORIGINAL_ARRAY is not None


def test_unlocked_simulator_gives_threads_different_shared_arrays(slow_empty, monkeypatch):
    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    monkeypatch.setattr(FakeCUDAShared, "array", simfix.ORIGINAL_ARRAY)
    wrong = sum(not np.array_equal(_launch(), EXPECTED) for _ in range(3))
    assert wrong == 3, "the widened race window should corrupt every launch of the unpatched simulator"


def test_locked_simulator_is_right_under_the_same_window(slow_empty):
    for _ in range(3):
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
