"""The intrinsics compute a GPU's values, alike in the tracer and the simulator (runtime.intrinsics).

Each kernel below runs on edge inputs under Numba's simulator (as `cudalearn` sets it up: simfix,
simintrinsics) and under the tracer; both must give the GPU's values, written out here from numba-cuda
0.30's typing and lowering (cudadecl.py: popc/clz keep the argument's type, brev is uint32 unless the
argument is a uint64, ffs is a uint32 over 32 or 64 bits, threadIdx.x and laneid are int32; cudaimpl.py:
ctpop, ctlz, __nv_brev, __nv_ffs(ll), llvm.fma, __nv_cbrt(f); nvvm.py: the float atomics' CAS loops).
A kernel that could tell the tracer from what runs could show the race check a clean path and run a
racy one (issue 34).
"""

import numpy as np
import pytest
from numba import cuda

from cudalearn.runtime import intrinsics, simintrinsics
from cudalearn.trace import trace

I64 = np.array([-1, 0, 1, -5, -(2**63), 2**63 - 1, 2**31, 1 << 40], np.int64)
I32 = np.array([-1, 0, 1, -5, -(2**31), 2**31 - 1, 6, 1 << 20], np.int32)
U64 = np.array([2**64 - 1, 0, 1, 2**63, 3, 1 << 40, 5, 7], np.uint64)


def _bits(v, n):
    return int(v) & ((1 << n) - 1)


def _rule(values, n, brev_n, ffs_n):
    """(popc, clz, brev, ffs) of each value written out: two's complement over n bits; brev over brev_n."""
    rows = []
    for v in values:
        b = _bits(v, n)
        low = _bits(v, ffs_n)
        rev = int(format(_bits(v, brev_n), f"0{brev_n}b")[::-1], 2)
        rows.append([bin(b).count("1"), n - b.bit_length(), rev, (low & -low).bit_length()])
    return np.array(rows, np.uint64)


@cuda.jit
def bit_intrinsics(x, out):
    t = cuda.threadIdx.x
    v = x[t]
    out[t, 0] = cuda.popc(v)
    out[t, 1] = cuda.clz(v)
    out[t, 2] = cuda.brev(v)
    out[t, 3] = cuda.ffs(v)


@cuda.jit
def coordinate_widths(out):
    t = cuda.threadIdx.x
    out[t, 0] = cuda.clz(t)  # int32: 32 - bit_length
    out[t, 1] = cuda.clz(t + 0)  # int32 + int64 literal: int64
    out[t, 2] = cuda.popc(-1 - t)  # an int64 literal expression: over 64 bits
    out[t, 3] = cuda.clz(cuda.laneid)  # int32
    out[t, 4] = cuda.clz(cuda.blockDim.x)  # int32
    out[t, 5] = cuda.clz(cuda.warpsize)  # int32


@cuda.jit
def float_intrinsics(a, b, c, out):
    t = cuda.threadIdx.x
    out[t, 0] = cuda.fma(a[t], b[t], c[t])
    out[t, 1] = cuda.cbrt(a[t])
    out[t, 2] = cuda.selp(a[t] > 0, a[t], c[t])


@cuda.jit
def atomic_sequence(vals, acc, old):
    for k in range(vals.shape[0]):  # one thread: the order of the updates is the kernel's
        old[k, 0] = cuda.atomic.max(acc, 0, vals[k])
        old[k, 1] = cuda.atomic.min(acc, 1, vals[k])
        old[k, 2] = cuda.atomic.nanmax(acc, 2, vals[k])
        old[k, 3] = cuda.atomic.nanmin(acc, 3, vals[k])
        old[k, 4] = cuda.atomic.add(acc, 4, vals[k])


@cuda.jit
def min_max(a, b, out):
    t = cuda.threadIdx.x
    out[t, 0] = max(a[t], b[t])  # two float32: fmaxf, a NaN dropped
    out[t, 1] = min(a[t], b[t])
    out[t, 2] = max(a[t], b[t], a[t])  # three: numba's generic builtin, Python's rule
    out[t, 3] = max(t, 2)  # ints: Python's


@pytest.fixture(scope="module", autouse=True)
def simulator_as_cudalearn_runs_it():
    assert simintrinsics.apply()


def _both(kernel, griddim, blockdim, *args):
    """The outputs of kernel under the simulator and under the tracer, on copies of args."""
    sim = [a.copy() for a in args]
    kernel[griddim, blockdim](*sim)
    traced = trace(kernel, griddim, blockdim, *[a.copy() for a in args]).outputs
    return sim, traced


@pytest.mark.parametrize(
    "values, n, brev_n, ffs_n",
    [(I64, 64, 32, 64), (I32, 32, 32, 32), (U64, 64, 64, 64)],
    ids=["int64", "int32", "uint64"],
)
def test_bit_intrinsics_follow_the_gpu_in_the_simulator_and_the_tracer(values, n, brev_n, ffs_n):
    expected = _rule(values, n, brev_n, ffs_n)
    sim, traced = _both(bit_intrinsics, 1, len(values), values, np.zeros((len(values), 4), np.uint64))
    np.testing.assert_array_equal(sim[1], expected)
    np.testing.assert_array_equal(traced[1], expected)
    assert expected[0, 0] == n  # popc(-1) over the width: the simulator's own popc said 1


def test_thread_coordinates_are_int32_and_their_arithmetic_int64():
    expected = [
        [
            32 - t.bit_length(),
            64 - t.bit_length(),
            bin((-1 - t) & (2**64 - 1)).count("1"),
            32 - t.bit_length(),
        ]
        + [32 - (8).bit_length(), 32 - (32).bit_length()]
        for t in range(8)
    ]
    sim, traced = _both(coordinate_widths, 1, 8, np.zeros((8, 6), np.int64))
    np.testing.assert_array_equal(sim[0], expected)
    np.testing.assert_array_equal(traced[0], expected)


def test_fma_rounds_once_and_cbrt_is_real():
    e = np.float32(2.0**-12)
    a = np.array([1 + e, -8, 3, 1e30], np.float32)
    b = np.array([1 + e, 1, 0, 1e30], np.float32)
    c = np.array([-1, 5, -2, -np.inf], np.float32)
    sim, traced = _both(float_intrinsics, 1, 4, a, b, c, np.zeros((4, 3), np.float32))
    exact = np.float32(2.0**-11 + 2.0**-24)  # (1 + 2^-12)^2 - 1, representable; a*b then +c gives 2^-11
    assert np.float32(a[0] * b[0]) + c[0] == np.float32(2.0**-11)
    for got in (sim[3], traced[3]):
        assert got[0, 0] == exact
        np.testing.assert_array_equal(got[:, 1], np.cbrt(a))  # cbrt(-8) = -2, not a complex number
        np.testing.assert_array_equal(got[:, 2], np.where(a > 0, a, c))
        assert got[3, 0] == -np.inf and got[1, 0] == -3 and got[2, 0] == -2
    assert (
        intrinsics.fma(1.0 + 2.0**-30, 1.0 + 2.0**-30, -1.0) == 2.0**-29 + 2.0**-60
    )  # float64: one rounding


def test_atomics_return_the_old_value_and_treat_nan_as_a_gpu_does():
    vals = np.array([1, np.nan, 3, -2], np.float32)
    acc = np.array([0, 0, np.nan, np.nan, 0], np.float32)
    sim, traced = _both(atomic_sequence, 1, 1, vals, acc, np.zeros((4, 5), np.float32))
    nan = np.nan
    # max/min: a NaN value or element leaves the element; nanmax/nanmin: a NaN element is replaced
    old = np.array([[0, 0, nan, nan, 0], [1, 0, 1, 1, 1], [1, 0, 1, 1, nan], [3, 0, 3, 1, nan]], np.float32)
    final = np.array([3, -2, 3, -2, nan], np.float32)
    for got in (sim, traced):
        np.testing.assert_array_equal(got[2], old)
        np.testing.assert_array_equal(got[1], final)


def test_max_and_min_of_two_floats_drop_a_nan_as_fmaxf_does():
    nan = np.nan
    a = np.array([nan, 1, nan, 2], np.float32)
    b = np.array([1, nan, nan, -3], np.float32)
    expected = np.array(
        [[1, 1, nan, 2], [1, 1, 1, 2], [nan, nan, nan, 2], [2, -3, 2, 3]], np.float32
    )  # max(nan, 1, nan): Python's rule keeps the first nan, then 1 > nan is False
    sim, traced = _both(min_max, 1, 4, a, b, np.zeros((4, 4), np.float32))
    np.testing.assert_array_equal(sim[2], expected)
    np.testing.assert_array_equal(traced[2], expected)
    assert "max" not in globals() and "min" not in globals()  # given to the kernel for its launch only


def test_int32_arithmetic_is_plain_int():
    x = intrinsics.Int32(7)
    assert type(x + 1) is int and type(x * x) is int and intrinsics.width(x) == 32
    assert (
        intrinsics.width(x + 0) == 64
        and intrinsics.clz(x) == 29
        and type(intrinsics.clz(x)) is intrinsics.Int32
    )


@pytest.mark.compile
def test_the_widths_are_those_the_real_compiler_uses():
    """The PTX of bit_intrinsics: popc/clz over the argument's width, brev over 32 bits but for a uint64."""
    from cudalearn.compile import ptx

    out = np.zeros((8, 4), np.uint64)
    i64, i32, u64 = (ptx.compile_for_gpu(bit_intrinsics, (x, out)) for x in (I64, I32, U64))
    assert all(op in i64 for op in ("popc.b64", "clz.b64", "brev.b32")) and "brev.b64" not in i64
    assert all(op in i32 for op in ("popc.b32", "clz.b32", "brev.b32")) and "popc.b64" not in i32
    assert "brev.b64" in u64
