"""The sum kernels of Chapter 10: Harris's tree in shared memory, warp shuffles, one atomic per block.

Every kernel sums float32 `x` (n,) in float32. The first four load one
element per thread into a shared array of BLOCK floats and write one partial
sum per block to `partial[blockIdx.x]`; `launch_sum` sums the partials with a
second launch of the same kernel (and a third...) until one value is left,
as Harris does ("Optimizing Parallel Reduction in CUDA", NVIDIA, 2007):

* `sum_interleaved` (Harris's kernel 1): at step s the threads with
  `tid % (2*s) == 0` add element tid + s; the active threads are scattered
  over every warp (divergence) and `%` is slow;
* `sum_strided_index` (kernel 2): thread tid adds at `index = 2*s*tid`;
  the active threads are packed into the first warps, but the shared
  accesses are 2*s words apart: bank conflicts;
* `sum_sequential` (kernel 3): `tid < s` adds element tid + s, s halving
  from blockDim/2; contiguous threads, contiguous words, no conflict;
* `sum_shuffle`: kernel 3 down to 32 values, then the first warp finishes
  with `warp_sum`, register to register, no shared memory and no barrier
  (NVIDIA's blog "Using CUDA Warp-Level Primitives", Lin and Grover, 2018;
  "Faster Parallel Reductions on Kepler", Luitjens, 2014);
* `sum_atomic`: the fast one. A grid-stride loop over the whole array on
  a grid of as many blocks as the GPU holds at once (`atomic_blocks`),
  each thread adding UNROLL independent loads per iteration (UNROLL loads
  in flight per thread: 16 bytes, 32 KB on a full SM of 2048 threads);
  then `sum_over_block` (a `warp_sum` per warp, the warps' sums in shared
  memory, added in order) and one `cuda.atomic.add` per block into
  `out[0]`: one launch, no partials, no second pass.

The order of the float32 additions, which sets the rounding (Chapter 10):
kernels 1 and 2 add neighbours, (x0+x1), (x2+x3), then those pairs, ...;
kernel 3 and `sum_shuffle` add halves, x[i] + x[i + blockDim/2], then the
halves of that, ...; `tree_sum_reference` computes both orders in NumPy,
bit for bit. `sum_atomic`'s thread t adds x[t], x[t + G], ... (G the grid's
thread count) into UNROLL accumulators combined as (a0 + a1) + (a2 + a3),
the warp adds its lanes as a butterfly, the block its warps in order, and
the blocks' atomics land in whatever order the GPU runs them: its last bits
may differ from run to run.

Blocks hold a power of two of threads, a multiple of 32, at most BLOCK
(shared arrays have compile-time shapes: BLOCK floats). The warp functions
use FULL_MASK: every lane of the warp calls them together.
"""

import numpy as np

from cudalearn import trace
from cudalearn.runtime import launch
from cudalearn.runtime.numba_backend import cuda, float32

SIGNATURES = {
    "sum_interleaved": "void(float32[::1], float32[::1])",
    "sum_strided_index": "void(float32[::1], float32[::1])",
    "sum_sequential": "void(float32[::1], float32[::1])",
    "sum_shuffle": "void(float32[::1], float32[::1])",
    "sum_atomic": "void(float32[::1], float32[::1])",
    "clear_first": "void(float32[::1])",
}

#: Threads per block of every sum kernel (Harris's kernels use 128 or 256; 8 warps here).
BLOCK = 256
#: The shuffle mask naming all 32 lanes of a warp.
FULL_MASK = 0xFFFFFFFF
#: Warps in a block of BLOCK threads: the size of `sum_over_block`'s shared array.
WARPS = BLOCK // 32
#: Independent loads (and accumulators) per iteration of `sum_atomic`'s grid-stride loop.
UNROLL = 4


# Device functions: a warp's and a block's sum ---------------------------------------------------


@cuda.jit(device=True, inline="always")
def warp_sum(v):
    """The sum of v over the 32 lanes of a warp, in every lane: a shfl_xor_sync butterfly (Ch. 10).

    Step o = 16, 8, 4, 2, 1 adds the value of lane (lane ^ o); after it every
    group of 2*o lanes holds its sum, bit for bit the same in each of them.
    """
    offset = 16
    while offset > 0:
        v += cuda.shfl_xor_sync(FULL_MASK, v, offset)
        offset //= 2
    return v


@cuda.jit(device=True, inline="always")
def warp_max(v):
    """The maximum of v over the 32 lanes of a warp, in every lane: a shfl_xor_sync butterfly (Chapter 10)."""
    offset = 16
    while offset > 0:
        v = max(v, cuda.shfl_xor_sync(FULL_MASK, v, offset))
        offset //= 2
    return v


@cuda.jit(device=True, inline="always")
def sum_over_block(v, scratch):
    """v summed over a block, in every thread: warp sums, then the warps' sums in order (Ch. 10).

    `scratch` is a shared float32 array of at least WARPS elements; all threads
    of the block must call it (it has barriers). The second barrier lets
    the caller reuse `scratch` right away.
    """
    tid = cuda.threadIdx.x + cuda.threadIdx.y * cuda.blockDim.x
    v = warp_sum(v)
    if tid % 32 == 0:
        scratch[tid // 32] = v
    cuda.syncthreads()
    v = scratch[0]
    for w in range(1, (cuda.blockDim.x * cuda.blockDim.y) // 32):
        v += scratch[w]  # every thread reads the same words (a broadcast) in the same order
    cuda.syncthreads()
    return v


@cuda.jit(device=True, inline="always")
def max_over_block(v, scratch):
    """The maximum of v over a block, in every thread; `scratch` as `sum_over_block`'s (Chapter 10)."""
    tid = cuda.threadIdx.x + cuda.threadIdx.y * cuda.blockDim.x
    v = warp_max(v)
    if tid % 32 == 0:
        scratch[tid // 32] = v
    cuda.syncthreads()
    v = scratch[0]
    for w in range(1, (cuda.blockDim.x * cuda.blockDim.y) // 32):
        v = max(v, scratch[w])
    cuda.syncthreads()
    return v


# Harris's tree: one partial sum per block ---------------------------------------------------


@cuda.jit(device=True, inline="always")
def load_block(x, sdata):
    """sdata[tid] = x[blockIdx.x * blockDim.x + tid], 0 past the end of x, then a barrier (Chapter 10)."""
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    sdata[tid] = x[i] if i < x.shape[0] else float32(0.0)
    cuda.syncthreads()


@cuda.jit
def sum_interleaved(x, partial):
    """partial[b] = the sum of block b's elements; Harris's kernel 1, `tid % (2*s) == 0` (Ch 10)."""
    sdata = cuda.shared.array(BLOCK, float32)
    load_block(x, sdata)
    tid = cuda.threadIdx.x
    s = 1
    while s < cuda.blockDim.x:
        if tid % (2 * s) == 0:  # half the threads of every warp idle at s = 1, more after
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s *= 2
    if tid == 0:
        partial[cuda.blockIdx.x] = sdata[0]


# teaching copy: Harris's kernels 1 and 2 differ only in their addressing, and the book diffs the two sources
@cuda.jit
def sum_strided_index(x, partial):
    """partial[b] = the sum of block b's elements; Harris's kernel 2, `index = 2*s*tid` (Chapter 10)."""
    sdata = cuda.shared.array(BLOCK, float32)
    load_block(x, sdata)
    tid = cuda.threadIdx.x
    s = 1
    while s < cuda.blockDim.x:
        index = 2 * s * tid  # active threads packed into the first warps, words 2*s apart
        if index < cuda.blockDim.x:
            sdata[index] += sdata[index + s]
        cuda.syncthreads()
        s *= 2
    if tid == 0:
        partial[cuda.blockIdx.x] = sdata[0]


@cuda.jit
def sum_sequential(x, partial):
    """partial[b] = the sum of block b's elements; Harris's kernel 3, `tid < s` (Chapter 10)."""
    sdata = cuda.shared.array(BLOCK, float32)
    load_block(x, sdata)
    tid = cuda.threadIdx.x
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:  # contiguous threads, contiguous words: no divergence in a warp, no conflict
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s //= 2
    if tid == 0:
        partial[cuda.blockIdx.x] = sdata[0]


@cuda.jit
def sum_shuffle(x, partial):
    """partial[b] = sum of block b's elements: kernel 3 to 32 values, then `warp_sum` (Ch. 10)."""
    sdata = cuda.shared.array(BLOCK, float32)
    load_block(x, sdata)
    tid = cuda.threadIdx.x
    s = cuda.blockDim.x // 2
    while s >= 32:
        if tid < s:
            sdata[tid] += sdata[tid + s]
        cuda.syncthreads()
        s //= 2
    if tid < 32:  # the whole first warp, so FULL_MASK names exactly the lanes that shuffle
        v = warp_sum(sdata[tid])
        if tid == 0:
            partial[cuda.blockIdx.x] = v


@cuda.jit
def sum_atomic(x, out):
    """out[0] += the sum of x: grid-stride loop, `sum_over_block`, one atomic add a block (Ch. 10).

    out (1,) float32 must hold 0 before the launch (`clear_first`). Each
    thread adds UNROLL elements a grid apart per iteration into UNROLL
    accumulators, so UNROLL independent loads are in flight per thread.
    """
    scratch = cuda.shared.array(WARPS, float32)
    n = x.shape[0]
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    a0 = float32(0.0)
    a1 = float32(0.0)
    a2 = float32(0.0)
    a3 = float32(0.0)
    while i + 3 * stride < n:  # UNROLL = 4 loads, each coalesced across the warp
        a0 += x[i]
        a1 += x[i + stride]
        a2 += x[i + 2 * stride]
        a3 += x[i + 3 * stride]
        i += 4 * stride
    while i < n:  # the last, partial sweep
        a0 += x[i]
        i += stride
    v = sum_over_block((a0 + a1) + (a2 + a3), scratch)
    if cuda.threadIdx.x == 0:
        cuda.atomic.add(out, 0, v)


@cuda.jit
def clear_first(out):
    """out[0] = 0: readies `sum_atomic`'s output on the device, with no copy from the host (Chapter 10)."""
    if cuda.grid(1) == 0:
        out[0] = float32(0.0)


# Host side -----------------------------------------------------------------------------------


def atomic_blocks(n: int, threads: int = BLOCK) -> int:
    """Blocks of `sum_atomic`'s grid for n floats: all the GPU holds at once, fewer if n is small (Ch. 10).

    On a GPU: the blocks of `threads` threads that fit on one SM together
    (CUDA's occupancy calculator, through Numba's
    `max_cooperative_grid_blocks`) times the SM count: one full wave, every
    block busy to the end (a second, partial wave would leave most SMs idle
    while it runs, since every block has the same share). On an H100/H200
    (or A100) SM: 8 blocks of 256 threads at 28 registers (ptxas, sm_90),
    2048 threads, the most such an SM runs. Under the simulator (no SMs) the grid just covers n
    with UNROLL elements a thread.
    """
    from cudalearn.runtime import device

    need = max(1, launch.blocks(n, threads * UNROLL))
    if device.mode() != "gpu":
        return need
    compiled = sum_atomic.compile(SIGNATURES["sum_atomic"])
    try:
        resident = compiled.max_cooperative_grid_blocks(threads)
    except AttributeError:  # a Numba without the occupancy query: the SM's thread limit instead
        dev = cuda.get_current_device()
        resident = (dev.MAX_THREADS_PER_MULTIPROCESSOR // threads) * dev.MULTIPROCESSOR_COUNT
    return min(need, resident)


def sum_launcher(kernel, x, blocks: int | None = None, threads: int = BLOCK):
    """(run, result): run() sums device array x with `kernel` into the (1,) device array result (Ch. 10).

    run() only launches (nothing is copied or synchronised), so it can be
    timed. A tree kernel writes one partial per block, and the same kernel
    sums those partials again, pass after pass, into buffers allocated
    here, until one block's sum is left (Harris's recursive launches).
    `sum_atomic` clears result with `clear_first` and runs once, on
    `blocks` blocks (default `atomic_blocks(n)`). `threads` must be a power
    of two from 32 to BLOCK.
    """
    if threads < 32 or threads > BLOCK or threads & (threads - 1):
        raise ValueError(f"threads must be a power of two from 32 to {BLOCK}, got {threads}")
    n = x.shape[0]
    if n == 0:
        raise ValueError("an empty array has no sum to launch")
    if launch.kernel_name(kernel) == "sum_atomic":
        result = cuda.device_array(1, np.float32)
        grid = blocks or atomic_blocks(n, threads)

        def run_atomic():
            trace.launch(clear_first, 1, 32, result)
            trace.launch(kernel, grid, threads, x, result)

        return run_atomic, result
    passes, src = [], x
    while True:
        grid = launch.blocks(src.shape[0], threads)
        dst = cuda.device_array(grid, np.float32)
        passes.append((grid, src, dst))
        if grid == 1:
            break
        src = dst

    def run_tree():
        for grid, src, dst in passes:
            trace.launch(kernel, grid, threads, src, dst)

    return run_tree, passes[-1][2]


def launch_sum(kernel, x, blocks: int | None = None, threads: int = BLOCK) -> float:
    """The float32 sum of x (host or device array) by one of this module's sum kernels (Chapter 10)."""
    if not hasattr(x, "copy_to_host"):  # a host array: copy it to the device once
        x = cuda.to_device(np.ascontiguousarray(x, np.float32))
    run, result = sum_launcher(kernel, x, blocks, threads)
    run()
    return float(result.copy_to_host()[0])


def tree_sum_reference(x, threads: int = BLOCK, interleaved: bool = False) -> np.ndarray:
    """The partial sums (float32) a tree kernel writes, in its exact order of additions (Chapter 10).

    interleaved=False: halves, as `sum_sequential` and `sum_shuffle` add;
    interleaved=True: neighbours, as `sum_interleaved` and `sum_strided_index`.
    The last block is padded with zeros, as the kernels pad it.
    """
    x = np.asarray(x, np.float32).ravel()
    blocks = launch.blocks(x.size, threads)
    a = np.zeros(blocks * threads, np.float32)
    a[: x.size] = x
    a = a.reshape(blocks, threads)
    while a.shape[1] > 1:
        half = a.shape[1] // 2
        a = a[:, 0::2] + a[:, 1::2] if interleaved else a[:, :half] + a[:, half:]
    return a[:, 0]
