"""CPU memory-access tracer and sanitizer for Numba CUDA kernels (Chapters 2-5).

`trace(kernel, griddim, blockdim, *args)` runs a `@cuda.jit` kernel's Python
source on the CPU, one thread at a time, with every global and shared array
access recorded, and returns a `TraceReport`: bank conflicts, global sectors
(coalescing) and the sanitizer's findings, per source line. Nothing is
launched on a GPU; it works with or without one. The source is read with
`inspect`, except for a kernel `cudalearn grade` rebuilt from a student's
answer: that one is traced from the syntax tree the grader verified
(`execute.use_tree`), never from text read back. Messages quote source
lines from the line cache and parse index expressions from the executing
instruction's position; no text of the kernel is ever evaluated apart from
the instrumented def.

Sanitizer (the CPU counterpart of compute-sanitizer's four tools)
-----------------------------------------------------------------
* racecheck: `report.races` (first MAX_RACES `Race`s), `report.race_count`.
* synccheck: `report.barrier_errors` (first MAX_FINDINGS `BarrierError`s),
  `report.barrier_error_count`: at a barrier, threads of the block that
  executed a `return` ('returned', with the return's line), ran to the end of
  the kernel without reaching it ('skipped': a barrier inside an `if`) or wait
  at another barrier ('divergent'). A return after the last barrier is valid.
  The first error of each kind and line is also a string in `report.warnings`.
* initcheck: `report.uninitialized_reads` (count, also per line) and
  `report.uninitialized` (first MAX_FINDINGS `UninitializedRead`s): a read of
  a shared element that no thread of the block wrote in an earlier phase and
  the reading thread did not write earlier in this phase. `same_phase` marks
  the ones another thread writes in the reader's phase (a missing barrier:
  also a race). Stale data from an earlier tile counts as written.
* memcheck: `TraceOutOfBounds` (an IndexError) names the array, index, shape,
  thread, block and line, and says what is true: a surplus thread of a last,
  partial block (guard it), or the index expression's value against the
  extent (index arithmetic, swapped row and column).
* `report.race_message(hint)`: the first race as a student-facing message with its fix
  (by default a tiled kernel's two barriers): the one wording every check uses.
* `report.sanitizer_message()`: the first barrier error, else the first
  uninitialized read not explained by a race, as a student-facing message
  with the fix ('' when clean); `checks.trace_kernel` raises it.

Memory model
------------
* Threads are numbered x fastest, then y, then z; warp = linear thread id // 32,
  lane = linear thread id % 32.
* Barriers: `cuda.syncthreads()` splits a block's run into phases. Every thread
  of the block runs (in warp order) to its next barrier before any thread
  passes it. A thread that returns leaves the block; if others still wait at a
  barrier that is a barrier error (undefined behaviour on a GPU), and the
  others go on. Threads at the same barrier line count as one barrier, even in
  different loop iterations.
* Lockstep approximation: the k-th execution of one source line by each thread
  of a warp, for one array and one direction (load or store), forms one warp
  request. Different arrays on one line are different requests, and so are the
  load and the store of `a[i] += 1`. An atomic counts as a load and a store.
* Shared memory: 32 banks of 4 bytes; bank = (byte address // 4) % 32. Each
  shared array is laid out row-major (C order) from its own base; the bases
  follow declaration order, each rounded up to a multiple of 128 bytes. A
  request costs as many wavefronts as its busiest bank has distinct 4-byte
  words (many lanes reading one word is a broadcast: free), at least 1. An
  8-byte element spans two words, so 32 lanes reading consecutive float64 need
  2 wavefronts. Bank conflicts are the wavefronts beyond the ideal
  ceil(distinct words / 32) of each request, as Nsight Compute counts them:
  for 4-byte elements, wavefronts - requests; for that float64 read, 0.
* Global memory: every array starts 256-byte aligned; a request costs the
  number of distinct 32-byte sectors its lanes touch.
* Races: two accesses to one element by different threads of a block in the
  same phase, at least one a write, not both atomic; and global accesses by
  threads of different blocks (no barrier orders blocks).
* Any index outside [0, n) raises `TraceOutOfBounds`; negative indices do not
  wrap around (CUDA does not wrap).
* New shared and local arrays hold NaN (floats) or 0 (other dtypes), so a read
  before a write shows in the outputs too. Shared writes are tracked per block
  by byte address (initcheck); local arrays are not.
* Not modelled: caches, timing, warp scheduling, `syncwarp` (a no-op), constant
  and local memory (not counted), warp intrinsics (`cuda.shfl_down_sync`, `cuda.ballot_sync`...),
  cooperative groups and any other CUDA function FakeCuda does not define (a kernel that uses one
  raises `TraceUnsupported`, naming the call, the kernel and the line), and the
  compiler, which may merge, vectorise, hoist or drop the accesses the source makes
  (a tiled matmul's `sA[ty, k]` reads become one 128-bit load per 4 values on an H200).
"""

from cudalearn.trace.execute import trace
from cudalearn.trace.fake_cuda import FakeCuda
from cudalearn.trace.model import Dim3, TraceError, TraceOutOfBounds, TraceUnsupported
from cudalearn.trace.recorder import TracedArray
from cudalearn.trace.report import (
    TILE_BARRIERS_HINT,
    BarrierError,
    Counts,
    LineStats,
    Race,
    SharedRequest,
    TraceReport,
    UninitializedRead,
)

__all__ = [
    "trace",
    "TraceReport",
    "Counts",
    "LineStats",
    "Race",
    "BarrierError",
    "UninitializedRead",
    "SharedRequest",
    "TILE_BARRIERS_HINT",
    "TraceError",
    "TraceOutOfBounds",
    "TraceUnsupported",
    "TracedArray",
    "Dim3",
    "FakeCuda",
]
