"""The access-pattern catalogue: small kernels whose shared and global counts are known (Chapters 2-4).

One set of kernels serves both sides of the tracer's validation: `tests/trace/test_trace.py` checks the
tracer's counts on them against the rules of the memory model, and `scripts/ncu_compare.py`
(`cudalearn.chapters.ch04.ncu`) compares the same counts with Nsight Compute's hardware counters.

Each pattern is a float32 (or float64) kernel with a fixed launch, so tracing it takes well under a
second (the course's matmuls about one to three). Every kernel has a name of its own, so that ncu
shows it apart: the factories name their inner functions, and the course's own kernels of Chapters
2-4 (naive, tiled, padded and transposed-tile matmuls, transposes) are copies under `course_` names.
"""

import types
from dataclasses import dataclass

import numpy as np

from cudalearn.runtime import launch
from cudalearn.runtime.numba_backend import SIMULATOR, cuda, float32, float64

N = 64  # matmul and transpose size
THREADS = 128  # threads of the 1-D patterns: 4 warps
SHARED = 4096  # float32 words of shared memory in the stride patterns (16 KiB)


def named(name, fn):
    """Give a kernel factory's inner function its own name, so ncu shows it apart."""
    fn.__name__ = fn.__qualname__ = name
    return cuda.jit(fn)


def make_shared_stride(stride, threads=THREADS):
    """out[t] = s[t * stride] after a unit-stride fill of s: gcd(stride, 32)-way conflicts (Chapter 4).

    `threads` is the block size the kernel is written for (an odd stride of 33 needs fewer than 128).
    """

    def kernel(inp, out):
        s = cuda.shared.array(SHARED, float32)
        t = cuda.threadIdx.x
        for j in range(SHARED // threads):
            s[t + j * threads] = inp[t + j * threads]
        cuda.syncthreads()
        out[t] = s[t * stride]

    return named(f"shared_stride_{stride:02d}", kernel)


@cuda.jit
def shared_broadcast(inp, out):
    """All lanes read s[7]: a broadcast, one wavefront a request."""
    s = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    s[t] = inp[t]
    cuda.syncthreads()
    out[t] = s[7]


# teaching copy: a pattern of its own (float64, a word per lane) beside the broadcast, each read whole
@cuda.jit
def shared_f64_stride_01(inp, out):
    """Consecutive float64: 2 wavefronts a request, no bank conflict."""
    s = cuda.shared.array(THREADS, float64)
    t = cuda.threadIdx.x
    s[t] = inp[t]
    cuda.syncthreads()
    out[t] = s[t]


def make_tile_col_read(width):
    """A warp reads a column of a (32, width) float32 tile: 32-way conflicts at width 32, none at 33."""

    def kernel(inp, out):
        tile = cuda.shared.array((32, width), float32)
        x = cuda.threadIdx.x
        y = cuda.threadIdx.y
        tile[y, x] = inp[y, x]
        cuda.syncthreads()
        out[y, x] = tile[x, y]

    return named(f"tile_col_read_32x{width}", kernel)


tile_col_read_32x32 = make_tile_col_read(32)  # the transposed tile of Chapter 4
tile_col_read_32x33 = make_tile_col_read(33)  # ... with its padding column


def make_global_stride(stride, dtype=float32):
    """out[t] = inp[t * stride]: 32 lanes x stride x itemsize bytes spread over sectors (Chapter 2)."""

    def kernel(inp, out):
        t = cuda.grid(1)
        out[t] = inp[t * stride]

    prefix = "global_f64" if dtype is float64 else "global"
    return named(f"{prefix}_stride_{stride:02d}", kernel)


def course_modules():
    """cudalearn.chapters' matmul, tiled and transpose modules, imported in a mode this process can give.

    This module's own import ran cudalearn.setup() (its names come from cudalearn.runtime.numba_backend);
    with Numba's real CUDA target and no GPU (tracing on a laptop), the mode is 'compile'.
    """
    from cudalearn.runtime import device

    if not SIMULATOR and not cuda.is_available():
        device.setup("compile", quiet=True)
    from cudalearn.chapters.ch02.kernels import matmul
    from cudalearn.chapters.ch03 import kernels as tiled
    from cudalearn.chapters.ch04 import kernels as transpose

    return matmul, tiled, transpose


def course_kernel(name, kernel):
    """A copy of a course kernel (cudalearn.chapters) under its own name, so ncu shows it apart.

    The copy shares the kernel's code, globals and closure (its tile size), so
    it compiles to the same machine code and the tracer reads the same source.
    """
    fn = kernel.py_func
    copy = types.FunctionType(fn.__code__, fn.__globals__, name, fn.__defaults__, fn.__closure__)
    copy.__qualname__ = name
    copy.__doc__ = fn.__doc__
    return cuda.jit(copy)


@dataclass
class Pattern:
    """A kernel, its launch, its numpy inputs and the expected output (index into args)."""

    kernel: object
    griddim: tuple
    blockdim: tuple
    args: list
    out: int
    expected: np.ndarray

    @property
    def name(self):
        return self.kernel.py_func.__name__


SHARED_STRIDES = (1, 2, 4, 8, 16, 32)  # float32 words between lanes of a shared read
GLOBAL_STRIDES = (1, 2, 4, 8, 32)  # float32 elements between lanes of a global read


def access_patterns() -> list:
    """The hand-written patterns: shared strides, a broadcast, float64, a tile's column, global strides."""
    f32 = np.arange(SHARED, dtype=np.float32)
    out = np.zeros(THREADS, np.float32)
    tile = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    idx = np.arange(THREADS)
    found = [
        Pattern(make_shared_stride(s), (1,), (THREADS,), [f32, out], 1, f32[idx * s]) for s in SHARED_STRIDES
    ]
    found += [
        Pattern(shared_broadcast, (1,), (THREADS,), [f32[:THREADS], out], 1, np.full(THREADS, 7.0)),
        Pattern(shared_f64_stride_01, (1,), (THREADS,), [idx * 1.0, idx * 0.0], 1, idx * 1.0),
        Pattern(tile_col_read_32x32, (1,), (32, 32), [tile, tile * 0], 1, tile.T),
        Pattern(tile_col_read_32x33, (1,), (32, 32), [tile, tile * 0], 1, tile.T),
    ]
    for s in GLOBAL_STRIDES:
        found.append(Pattern(make_global_stride(s), (1,), (THREADS,), [f32, out], 1, f32[idx * s]))
    f64 = np.arange(THREADS, dtype=np.float64)
    found.append(Pattern(make_global_stride(1, float64), (1,), (THREADS,), [f64, f64 * 0], 1, f64))
    return found


def course_patterns(rng) -> list:
    """The course's own kernels (Chapters 2-4) on random (N, N) matrices: matmuls and transposes."""
    A = rng.standard_normal((N, N)).astype(np.float32)
    B = rng.standard_normal((N, N)).astype(np.float32)
    C = np.zeros((N, N), np.float32)
    course_matmul, course_tiled, course_transpose = course_modules()
    mm = [
        ("course_matmul_naive", course_matmul.matmul_naive, 16),
        ("course_tiled_16x16", course_tiled.matmul_tiled16, 16),
        ("course_tiled_32x32", course_tiled.matmul_tiled32, 32),
        ("course_tiled_32x33", course_tiled.matmul_tiled32_padded, 32),
        ("course_bt_32x32", course_tiled.matmul_bt_tiled32, 32),
        ("course_bt_32x33", course_tiled.matmul_bt_tiled32_padded, 32),
    ]
    found = [
        Pattern(course_kernel(name, kernel), *launch.square(N, N, t), [A, B, C], 2, A @ B)
        for name, kernel, t in mm
    ]
    src = rng.standard_normal((N, N)).astype(np.float32)
    tr = [
        ("course_transpose_naive", course_transpose.transpose_naive),
        ("course_transpose_32x32", course_transpose.transpose_tiled32),
        ("course_transpose_32x33", course_transpose.transpose_tiled32_padded),
    ]
    for name, kernel in tr:
        found.append(Pattern(course_kernel(name, kernel), *launch.square(N, N, 32), [src, src * 0], 1, src.T))
    return found


def patterns() -> dict:
    """Every pattern by kernel name: the hand-written ones, then the course's kernels (Chapter 4)."""
    rng = np.random.default_rng(0)
    byname = {p.name: p for p in [*access_patterns(), *course_patterns(rng)]}
    clash = [(a, b) for a in byname for b in byname if a != b and a in b]
    assert not clash, f"a pattern name inside another breaks ncu row matching: {clash}"
    return byname


def close(got, want):
    """Whether an output matches its numpy reference (float32 tolerance)."""
    return bool(np.allclose(got, want, rtol=1e-4, atol=1e-4))
