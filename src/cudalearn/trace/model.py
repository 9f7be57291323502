"""The tracer's machine model: constants, errors and thread coordinates (Chapters 2-4, 10)."""

import numpy as np

from cudalearn.runtime.intrinsics import Int32

WARP_SIZE = 32
NUM_BANKS = 32  # shared-memory banks
BANK_BYTES = 4  # bytes per bank word
SECTOR_BYTES = 32  # global-memory sector
SHARED_ALIGN = 128  # each shared array starts at a multiple of this many bytes
MAX_STATIC_SHARED = 48 * 1024  # static shared memory a block may declare
MAX_BLOCK_THREADS = 1024
MAX_THREADS = 2**16  # the tracer runs every thread in Python
MAX_RACES = 20  # races kept in a report (all are counted)
MAX_FINDINGS = 20  # barrier errors and uninitialized reads kept in a report (all are counted)
MAX_KEPT_REQUESTS = 50_000  # shared requests kept for shared_request / bank_diagram
# Array accesses one block may make before the tracer calls its kernel endless (TraceEndless). Each is kept
# until the block ends (request groups), about 100 bytes apiece: this bounds a trace's memory near 0.5 GiB,
# and sits far above the course's largest traced block (a few hundred thousand accesses).
MAX_BLOCK_ACCESSES = 4_000_000
LOAD, STORE, ATOMIC = 0, 1, 2


class TraceError(RuntimeError):
    """A kernel or launch the tracer cannot run (Chapter 2)."""


class TraceUnsupported(TraceError):
    """A kernel uses a CUDA function the tracer does not model (a warp intrinsic...): where (Chapter 2)."""

    def __init__(self, message, name, kernel, line):
        super().__init__(message)
        self.name, self.kernel, self.line = name, kernel, line


class WarpError(TraceError):
    """A warp intrinsic whose mask names a lane not at the same call, or a shuffle outside it (Chapter 10).

    On a GPU: undefined behaviour (a wrong value or a hang). kernel and line locate the call.
    """

    def __init__(self, message, kernel, line):
        super().__init__(message)
        self.kernel, self.line = kernel, line


class TraceEndless(TraceError):
    """A block that made more than MAX_BLOCK_ACCESSES array accesses: most likely an endless loop (Chapter 3).

    thread, block: the thread running when the budget ran out; line: its most executed access, run `steps`
    times; loop: the line of the innermost loop around that access (0: unknown).
    """

    def __init__(self, message, kernel, thread, block, line, steps, loop=0):
        super().__init__(message)
        self.kernel, self.thread, self.block = kernel, thread, block
        self.line, self.steps, self.loop = line, steps, loop


class TraceOutOfBounds(IndexError):
    """An array access outside its shape, with array, index, thread and line (Chapter 2)."""

    def __init__(self, message, array, index, shape, thread, block, line):
        super().__init__(message)
        self.array, self.index, self.shape = array, index, shape
        self.thread, self.block, self.line = thread, block, line


class Dim3:
    """threadIdx / blockIdx / blockDim / gridDim: an object with .x .y .z (Chapter 2)."""

    __slots__ = ("x", "y", "z")

    def __init__(self, x, y, z):
        self.x, self.y, self.z = x, y, z

    def __iter__(self):
        return iter((self.x, self.y, self.z))

    def __repr__(self):
        return f"({self.x}, {self.y}, {self.z})"


def int32_dim3(d):
    """A Dim3 of (x, y, z) whose values Numba types int32 (threadIdx, blockIdx, blockDim, gridDim)."""
    return Dim3(*(Int32(v) for v in d))


def dim3(d, what, least=1) -> tuple:
    """An int or a 1-3 tuple of ints >= least as an (x, y, z) tuple, missing ones = least."""
    t = tuple(d) if isinstance(d, (tuple, list)) else (d,)
    if not 1 <= len(t) <= 3 or not all(isinstance(v, (int, np.integer)) and v >= least for v in t):
        raise TraceError(f"{what} must be an int or a tuple of 1-3 ints >= {least}, got {d!r}")
    return tuple(int(v) for v in t) + (least,) * (3 - len(t))


class LocalArray(np.ndarray):
    """A thread's cuda.local array in the tracer: NumPy's own indexing (untraced), but told apart from
    other arrays when an index falls outside it (`Recorder.local_out_of_bounds`)."""
