"""CPU memory-access tracer and sanitizer for Numba CUDA kernels (Chapters 2-5, 10).

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

`run(kernel, griddim, blockdim, *args)` is a launch on the CPU: it traces and writes the results back
into the arguments. `simulator_lacks(kernel)` names the first call Numba's simulator does not implement
(the warp intrinsics: numba#8433; `cuda.syncwarp`), so that `cudalearn.trace.launch` and
`checks.run_kernel` run such a kernel here instead (Chapter 10). `report.warp_ops` counts warp-level
executions per intrinsic (one per warp per call) and `report.atomics` the atomic operations (one per
thread per call).

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
  lane = linear thread id % 32. A block's last warp is partial when the block size
  is not a multiple of 32: its missing lanes do not exist.
* Barriers: `cuda.syncthreads()` (in the kernel or in a device function) splits a
  block's run into phases. Every thread of the block runs (in warp order) to its next
  barrier before any thread passes it. A thread that returns leaves the block; if
  others still wait at a barrier that is a barrier error (undefined behaviour on a
  GPU), and the others go on. Threads at the same barrier line count as one barrier,
  even in different loop iterations (a barrier in a device function of another file
  counts as the line that calls it).
* Warps (Chapter 10): within a phase a thread also stops at every warp intrinsic
  (`cuda.shfl_sync`, `shfl_up_sync`, `shfl_down_sync`, `shfl_xor_sync`, `ballot_sync`,
  `all_sync`, `any_sync`, `eq_sync`, `activemask`, `syncwarp`), in the kernel or in its
  device functions, nested or not (a device function that reaches one runs as a
  generator). When every lane named in the mask waits at the same call (the same
  line and column: a device function's call is the same call from every caller) with
  the same mask, the group completes at once and each lane gets what the PTX ISA
  says (shfl.sync with numba's operands: only bits 4:0 of the lane operand count;
  shfl_down_sync reads lane + delta, and a lane whose source would be past lane 31
  keeps its own value; shfl_up_sync reads lane - delta, and lanes below delta keep
  theirs; shfl_xor_sync reads lane ^ m; shfl_sync reads lane src % 32; ballot_sync is
  an int32 with bit i for lane i's predicate, negative when lane 31's is set, as
  numba types it; all/any/eq_sync are bools; activemask a uint32). A shuffled value
  keeps its type (float32 in, float32 out), so results equal a GPU's bit for bit when
  the order of operations is the same. Lanes of different masks (two halves of a warp) are
  separate groups; any `syncwarp` with the same mask meets any other. `laneid` and
  `lanemask_lt()` need no meeting.
* `WarpError` (a TraceError) is raised when the mask names a lane that returned, ran
  to the end, waits at a barrier, at another warp call or with another mask, or does
  not exist (a partial last warp); when the calling lane is not in its mask; or when
  a shuffle reads a lane outside the mask. The message names the kernel, line,
  block, warp, lanes and the fix. In CUDA these are undefined behaviour (a wrong
  value or a hang: the programming guide asks the non-exited lanes of the mask to
  execute the same intrinsic with the same mask; NVIDIA's CUDA C++ guidelines, to
  name only lanes that take part); the tracer asks, more narrowly, that every lane
  of the mask wait at this very call. It never hangs.
* `activemask()` returns the lanes that wait at that same call when the warp's
  other lanes are all stopped (at a barrier, another warp call, or gone): the
  tracer's lanes reconverge as soon as they can. A GPU after divergence (Volta's
  independent thread scheduling) may report fewer lanes: compute a mask with
  `ballot_sync` before the branch instead ("Using CUDA Warp-Level Primitives",
  NVIDIA's developer blog, 2018, shows why activemask is the wrong mask for a sum).
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
  same phase, at least one a write, not both atomic, unless both threads are
  lanes of one warp and a `cuda.syncwarp()` whose mask names every lane of the
  warp completed between the two accesses (the PTX ISA's bar.warp.sync orders memory
  among the threads it synchronises); and global accesses by threads of different blocks (no barrier
  orders blocks). Shuffles and votes order nothing in memory. After such a
  syncwarp a lane's reads of shared elements its warp wrote before it count as
  initialized.
* Any index outside [0, n) raises `TraceOutOfBounds`; negative indices do not
  wrap around (CUDA does not wrap).
* New shared and local arrays hold NaN (floats) or 0 (other dtypes), so a read
  before a write shows in the outputs too. Shared writes are tracked per block
  by byte address (initcheck); local arrays are not.
* A kernel that does not finish (an endless `while`) raises `TraceEndless` (a
  TraceError) once one block has made MAX_BLOCK_ACCESSES array accesses: it names the
  block, a thread, its most executed line and the `while` loop around it. This bounds
  a trace's memory (each access is kept until its block ends); a loop with no array
  access at all runs until the caller's time limit.
* Not modelled: caches, timing, warp scheduling (the interleaving of warps is one
  valid order; atomics run in block order, a GPU's order varies), constant and local
  memory (not counted), a `syncwarp` whose mask leaves out lanes of the warp (it
  synchronises them but orders no memory for the race check: a race it prevents is
  still reported), `match_any_sync` / `match_all_sync`, cooperative groups and any
  other CUDA function FakeCuda does not define (a kernel that uses one raises
  `TraceUnsupported`, naming the call, the kernel and the line), a warp intrinsic
  reached through another variable than its `cuda.<name>` (a TraceError), and the
  compiler, which may merge, vectorise, hoist or drop the accesses the source makes
  (a tiled matmul's `sA[ty, k]` reads become one 128-bit load per 4 values on an H200).
"""

from cudalearn.trace.arrays import TracedArray
from cudalearn.trace.execute import trace
from cudalearn.trace.fake_cuda import FakeCuda
from cudalearn.trace.model import (
    Dim3,
    TraceEndless,
    TraceError,
    TraceOutOfBounds,
    TraceUnsupported,
    WarpError,
)
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
from cudalearn.trace.simulator import launch, run, simulator_lacks

__all__ = [
    "trace",
    "launch",
    "run",
    "simulator_lacks",
    "WarpError",
    "TraceReport",
    "Counts",
    "LineStats",
    "Race",
    "BarrierError",
    "UninitializedRead",
    "SharedRequest",
    "TILE_BARRIERS_HINT",
    "TraceError",
    "TraceEndless",
    "TraceOutOfBounds",
    "TraceUnsupported",
    "TracedArray",
    "Dim3",
    "FakeCuda",
]
