"""Every kernel compiled for a T4 inside its check: the real compiler's verdict, in plain words (all labs).

The kernels below run under the simulator (which these tests use), yet a real GPU's compiler rejects
them or makes them compute in float64; `checks.run_kernel` must say so, naming the line and the fix.
"""

import math
import time
import warnings

import numpy as np
import pytest
from numba import cuda, float32

from cudalearn import checks
from cudalearn.chapters.ch00 import kernels as basics
from cudalearn.chapters.ch03 import kernels as tiled
from cudalearn.chapters.ch05.kernels import linear
from cudalearn.compile import ptx

pytestmark = pytest.mark.compile

TILE = 32
PADDED = TILE + 1


@cuda.jit
def shape_computed(a, out):
    s = cuda.shared.array((TILE, TILE + 1), float32)
    i = cuda.threadIdx.x
    s[0, i] = a[i]
    out[i] = s[0, i]


@cuda.jit
def shape_argument(a, out, n):
    s = cuda.shared.array(n, float32)
    i = cuda.threadIdx.x
    s[i] = a[i]
    out[i] = s[i]


@cuda.jit
def shape_list(a, out):
    s = cuda.shared.array([32, 32], float32)
    i = cuda.threadIdx.x
    s[0, i] = a[i]
    out[i] = s[0, i]


@cuda.jit
def local_shape_argument(a, out, n):
    t = cuda.local.array(n, float32)
    i = cuda.threadIdx.x
    t[0] = a[i]
    out[i] = t[0]


@cuda.jit
def python_list(a, out):
    i = cuda.threadIdx.x
    tmp = [0.0, 1.0]
    out[i] = a[i] + tmp[1]


@cuda.jit
def numpy_zeros(a, out):
    i = cuda.threadIdx.x
    tmp = np.zeros(4, np.float32)
    out[i] = a[i] + tmp[0]


@cuda.jit
def print_fstring(a, out):
    i = cuda.threadIdx.x
    print(f"i={i}")
    out[i] = a[i]


def plain_double(x):
    return x * 2


@cuda.jit
def calls_plain_function(a, out):
    i = cuda.threadIdx.x
    out[i] = plain_double(a[i])


@cuda.jit
def uses_dict(a, out):
    i = cuda.threadIdx.x
    d = {"a": 1.0}
    out[i] = a[i] * d["a"]


@cuda.jit
def raises_fstring(a, out):
    i = cuda.threadIdx.x
    if i >= a.shape[0]:
        raise IndexError(f"bad index {i}")
    out[i] = a[i]


@cuda.jit(device=True)
def factorial(n):
    if n <= 1:
        return 1
    return n * factorial(n - 1)


@cuda.jit
def recursive(a, out):
    i = cuda.threadIdx.x
    out[i] = a[i] * factorial(i)


@cuda.jit
def try_except(a, out):
    i = cuda.threadIdx.x
    try:
        out[i] = a[i]
    except IndexError:
        pass


@cuda.jit
def returns_value(a, out):
    i = cuda.threadIdx.x
    out[i] = a[i]
    return 1


@cuda.jit
def matmul_f64_acc(A, B, C):
    i, j = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        acc = 0.0
        for k in range(A.shape[1]):
            acc += A[i, k] * B[k, j]
        C[i, j] = acc


@cuda.jit
def matmul_f32_acc(A, B, C):
    i, j = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        acc = float32(0.0)
        for k in range(A.shape[1]):
            acc += A[i, k] * B[k, j]
        C[i, j] = acc


@cuda.jit
def relu_f64_constant(a, out):
    i = cuda.grid(1)
    if i < a.shape[0]:
        out[i] = max(a[i], 0.0)


@cuda.jit
def mean_int_divide(a, out, n):
    i = cuda.grid(1)
    if i < a.shape[0]:
        out[i] = a[i] / n


@cuda.jit
def scale_by(a, out, alpha):
    i = cuda.grid(1)
    if i < a.shape[0]:
        out[i] = a[i] * alpha


@cuda.jit
def math_f32(a, out):
    i = cuda.grid(1)
    if i < a.shape[0]:
        out[i] = math.sqrt(a[i]) + math.exp(a[i]) + a[i] ** 2 + math.tanh(a[i]) + a[i] * float32(0.1)


@cuda.jit
def f64_constant(a, out):
    i = cuda.grid(1)
    if i < a.shape[0]:
        out[i] = a[i] * 0.1 + a[i]


@cuda.jit
def padded_tile(a, out):
    s = cuda.shared.array((TILE, PADDED), float32)
    i = cuda.threadIdx.x
    s[0, i] = a[i]
    cuda.syncthreads()
    out[i] = s[0, i]


@cuda.jit
def float_index(a, out):
    i = cuda.grid(1)
    scale = float32(1.0) / float32(3.0)  # a float division that is fine: the message must not point here
    half = a.shape[0] / 2
    if i < half:
        out[i] = a[i + half] * scale


@cuda.jit(device=True)
def add_no_return(x, y):
    x = x + y


@cuda.jit
def stores_none(a, out):
    i = cuda.grid(1)
    if i < a.shape[0]:
        out[i] = add_no_return(a[i], a[i])


V = np.zeros(32, np.float32)
M = np.zeros((4, 4), np.float32)

# kernel, args, what the message must say (cause, then the student's line)
REJECTED = [
    (
        shape_computed,
        (V, V),
        "computed inside the kernel",
        "s = cuda.shared.array((TILE, TILE + 1), float32)",
    ),
    (shape_argument, (V, V, 32), "is a variable", "s = cuda.shared.array(n, float32)"),
    (shape_list, (V, V), "is a Python list", "s = cuda.shared.array([32, 32], float32)"),
    (
        local_shape_argument,
        (V, V, 32),
        "`cuda.local.array` is a variable",
        "t = cuda.local.array(n, float32)",
    ),
    (python_list, (V, V), "builds a Python list", "tmp = [0.0, 1.0]"),
    (numpy_zeros, (V, V), "allocates a numpy array", "tmp = np.zeros(4, np.float32)"),
    (print_fstring, (V, V), "builds a string", 'print(f"i={i}")'),
    (
        calls_plain_function,
        (V, V),
        "`plain_double` is a plain Python function",
        "out[i] = plain_double(a[i])",
    ),
    (uses_dict, (V, V), "builds a Python dict", 'd = {"a": 1.0}'),
    (raises_fstring, (V, V), "builds a string", 'raise IndexError(f"bad index {i}")'),
    (recursive, (V, V), "recursion", "out[i] = a[i] * factorial(i)"),
    (try_except, (V, V), "`try`/`except`", "try:"),
    (returns_value, (V, V), "returns a value", "return 1"),
    (float_index, (V, V), "indexed with a float", "half = a.shape[0] / 2"),
    (stores_none, (V, V), "a device function that ends without", "out[i] = add_no_return(a[i], a[i])"),
]


@pytest.mark.parametrize("kernel,args,cause,line", REJECTED, ids=[k.py_func.__name__ for k, *_ in REJECTED])
def test_a_kernel_the_real_compiler_rejects_gets_its_cause_line_and_fix(kernel, args, cause, line):
    with pytest.raises(AssertionError) as e:
        ptx.compile_for_gpu(kernel, args)
    msg = str(e.value)
    assert msg.startswith(
        f"your kernel `{kernel.py_func.__name__}` runs under the simulator but a real GPU's compiler "
        f"(sm_75, a T4) rejects it: "
    ), msg
    assert cause in msg and f"`{line}`" in msg, msg
    assert " Fix: " in msg and "(Compiler said: " in msg, msg


@cuda.jit
def barrier_typo(a, out):
    i = cuda.grid(1)
    cuda.syncthread()
    if i < a.shape[0]:
        out[i] = a[i]


@cuda.jit
def index_typo(a, out):
    i = cuda.threadIdxx.x
    out[i] = a[i]


def test_a_misspelt_cuda_name_is_named_a_typo_with_the_closest_name():
    """`cuda.syncthread()`: not a CUDA function (Numba's raw AttributeError once read as 'no compiler')."""
    with pytest.raises(AssertionError) as e:
        ptx.compile_for_gpu(barrier_typo, (V, V))
    msg = str(e.value)
    assert msg.startswith(
        "your kernel `barrier_typo` cannot compile: `cuda.syncthread` is not a CUDA function"
    ), msg
    assert "(line " in msg and "`cuda.syncthread()`" in msg and "write `cuda.syncthreads`" in msg, msg
    assert "tracer" not in msg and "simulator" not in msg, msg
    with pytest.raises(AssertionError, match=r"`cuda\.threadIdxx` is not a CUDA function.*`cuda\.threadIdx`"):
        ptx.compile_for_gpu(index_typo, (V, V))


@cuda.jit
def barrier_not_called(a, out):
    i = cuda.grid(1)
    if i < a.shape[0]:
        out[i] = a[i]
    cuda.syncthreads  # noqa: B018  (the mistake under test: no call, no barrier)
    if i < a.shape[0]:
        out[i] += a[i]


def test_a_cuda_function_named_without_its_call_is_caught_before_any_launch():
    """`cuda.syncthreads` with no parentheses compiles and does nothing: check_kernel names the line."""
    with pytest.raises(AssertionError) as e:
        ptx.check_kernel(barrier_not_called, (np.zeros(4, np.float32), np.zeros(4, np.float32)))
    line = barrier_not_called.py_func.__code__.co_firstlineno + 5
    assert str(e.value) == (
        f"your kernel `barrier_not_called` names `cuda.syncthreads` without calling it (line {line}): the "
        "statement does nothing, so there is no barrier or call there. Fix: write `cuda.syncthreads()`."
    )
    from cudalearn.compile.errors import uncalled_cuda

    assert uncalled_cuda(barrier_typo.py_func) is None, "a call, even of a misspelt name, is not this mistake"


def test_the_computed_shape_message_gives_the_module_level_fix():
    with pytest.raises(AssertionError, match=r"`PADDED = TILE \+ 1` above the kernel"):
        ptx.compile_for_gpu(shape_computed, (V, V))


@pytest.mark.parametrize(
    "kernel,args",
    [
        (padded_tile, (V, V)),
        (matmul_f32_acc, (M, M, M)),
        (math_f32, (V, V)),
        (basics.vector_add, (V, V, V)),
        (tiled.matmul_tiled32_padded, (M, M, M)),
        (linear.linear_relu_tiled, (M, M, np.zeros(4, np.float32), M)),
    ],
)
def test_valid_float32_kernels_compile_with_no_float64(kernel, args):
    text = ptx.compile_for_gpu(kernel, args)
    assert ".target sm_75" in text
    assert ptx.float64_ops(text) == {}, ptx.float64_ops(text)
    ptx.check_kernel(kernel, args)


def test_float64_ops_counts_each_opcode_predicated_or_not():
    text = """
    .loc 1 12 5
    mov.f64 %fd1, 0d0000000000000000;
    .loc 1 13 5
    cvt.f64.f32 %fd2, %f1;
    add.f64 %fd3, %fd1, %fd2;
    @%p1 add.f64 %fd3, %fd3, %fd2;
    fma.rn.f64 %fd4, %fd3, %fd2, %fd1;
    add.s64 %rd1, %rd2, %rd3;
    ld.global.f32 %f2, [%rd1];
    cvt.rn.f32.f64 %f3, %fd4;
    """
    ops = ptx.float64_ops(text)
    assert ops == {"mov.f64": 1, "cvt.f64.f32": 1, "add.f64": 2, "fma.rn.f64": 1, "cvt.rn.f32.f64": 1}
    assert ptx.float64_lines(text) == [("", 12), ("", 13)]


def test_a_float64_accumulator_is_found_counted_and_located():
    text = ptx.compile_for_gpu(matmul_f64_acc, (M, M, M))
    ops = ptx.float64_ops(text)
    assert ops["add.f64"] >= 1 and ops["cvt.f64.f32"] >= 1, ops
    with pytest.raises(AssertionError) as e:
        ptx.check_float32(text, matmul_f64_acc.py_func, ptx.argument_types((M, M, M)))
    msg = str(e.value)
    assert msg.startswith("your kernel `matmul_f64_acc` computes in float64 (PTX has "), msg
    assert f"{ops['add.f64']} add.f64" in msg and "line " in msg, msg
    assert "`acc += A[i, k] * B[k, j]`" in msg and "float32(0.0)" in msg, msg


@pytest.mark.parametrize(
    "kernel,args,line",
    [
        (relu_f64_constant, (V, V), "out[i] = max(a[i], 0.0)"),
        (f64_constant, (V, V), "out[i] = a[i] * 0.1 + a[i]"),
        (mean_int_divide, (V, V, 3), "out[i] = a[i] / n"),
        (scale_by, (V, V, 2.5), "out[i] = a[i] * alpha"),
    ],
)
def test_float64_from_a_literal_an_int_or_a_python_float_is_found(kernel, args, line):
    with pytest.raises(AssertionError, match="computes in float64") as e:
        ptx.check_kernel(kernel, args, names=["a", "out", "n_or_alpha"])
    assert f"`{line}`" in str(e.value), str(e.value)
    if isinstance(args[-1], float):
        assert "`n_or_alpha` as a Python float (float64): pass np.float32(...)" in str(e.value)
    ptx.check_kernel(kernel, args, float32_only=False)  # the switch for a kernel meant to use float64


def test_float64_data_is_not_blamed_on_the_kernel():
    d = np.zeros(32, np.float64)
    ptx.check_kernel(relu_f64_constant, (d, d))


def test_the_compile_is_cached_per_function_types_and_cc():
    ptx.compile_for_gpu(matmul_f32_acc, (M, M, M))
    n = len(ptx.TIMINGS)
    start = time.perf_counter()
    for _ in range(5):
        ptx.compile_for_gpu(matmul_f32_acc, (M, M, M))
    assert len(ptx.TIMINGS) == n, "a cached compile ran the compiler again"
    assert (time.perf_counter() - start) / 5 < 0.05
    ptx.compile_for_gpu(matmul_f32_acc, (M.astype(np.float64),) * 3)  # new types: compiled again
    assert len(ptx.TIMINGS) == n + 1
    assert ptx.TIMINGS[-1][0] == "matmul_f32_acc"


def test_run_kernel_fails_kernels_that_pass_under_the_simulator():
    a = np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    shape_computed[1, 32](a, out)  # the simulator runs it, and gets it right
    np.testing.assert_array_equal(out, a)
    with pytest.raises(AssertionError, match=r"rejects it: the shape of `cuda.shared.array` is computed"):
        checks.run_kernel(shape_computed, 1, 32, a, checks.empty_output(32))
    A = np.ones((4, 4), np.float32)
    C = checks.run_kernel(
        matmul_f64_acc, (1, 1), (4, 4), A, A, checks.empty_output((4, 4)), float32_only=False
    )[2]
    np.testing.assert_array_equal(C, A @ A)
    with pytest.raises(AssertionError, match=r"computes in float64 \(PTX has .*add\.f64"):
        checks.run_kernel(matmul_f64_acc, (1, 1), (4, 4), A, A, checks.empty_output((4, 4)))


def test_no_compiler_warns_once_and_never_fails_the_student(monkeypatch):
    def unavailable(*_):
        raise ptx.CompilerUnavailable("no NVVM here")

    monkeypatch.setattr(ptx, "_CACHE", {})
    monkeypatch.setattr(ptx, "_WARNED", set())
    monkeypatch.setattr(ptx, "_via_worker", unavailable)
    monkeypatch.setattr(ptx, "_compile_here", unavailable)
    A = np.ones((4, 4), np.float32)
    with pytest.warns(RuntimeWarning, match="no NVVM here"):
        checks.run_kernel(matmul_f64_acc, (1, 1), (4, 4), A, A, checks.empty_output((4, 4)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checks.run_kernel(matmul_f64_acc, (1, 1), (4, 4), A, A, checks.empty_output((4, 4)))


class _Handle:
    """Like the grader's handle on a student's kernel: `.py_func` is a copy; calling it is not allowed."""

    def __init__(self, kernel):
        self.py_func = kernel.py_func

    def __getitem__(self, _):
        raise AssertionError("the compile check must not launch the kernel")


def test_a_handle_is_compiled_from_its_py_func_never_called():
    with pytest.raises(AssertionError, match="computes in float64"):
        ptx.check_kernel(_Handle(matmul_f64_acc), (M, M, M))
    ptx.check_kernel(_Handle(matmul_f32_acc), (M, M, M))
    ptx.check_kernel(object(), (M, M, M))  # no Python function to compile: nothing to check


def test_grader_handles_are_compiled_like_any_kernel():
    handle = type("Remote", (_Handle,), {"__module__": "cudalearn.grading.remote"})(matmul_f64_acc)
    with pytest.raises(AssertionError, match="computes in float64"):
        ptx.check_kernel(handle, (M, M, M))


def test_prestart_warms_the_worker_in_the_background():
    ptx.prestart()
    assert ".target sm_75" in ptx.compile_for_gpu(padded_tile, (V, V))
