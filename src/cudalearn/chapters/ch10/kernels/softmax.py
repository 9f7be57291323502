"""Row softmax kernels of Chapter 10: one block or one warp per row, float32 throughout; the row launch.

Every kernel reads x (rows, cols) float32, C-contiguous, and writes y of the
same shape (y may be x itself: each thread writes only what it read):

* `softmax_block`: one block of SOFTMAX_BLOCK threads per row; the row's
  maximum and sum go through `reductions.max_over_block` / `sum_over_block` (shared
  memory and barriers). Three sweeps over the row: max, sum, write.
* `softmax_warp`: one warp per row, ROWS_PER_BLOCK rows a block; lane l
  takes columns l, l + 32, ...; max and sum by `warp_max` / `warp_sum`
  (shuffles only). Three sweeps; the second and third re-read a row the
  warp has just read (from L1 or L2 while it is still there).
* `softmax_registers`: `softmax_warp` for rows of at most 32 * SOFTMAX_VALS
  columns, each lane holding its columns in registers: SOFTMAX_VALS
  independent loads per lane in flight together, one read of the row,
  one write (as PyTorch's warp softmax for short rows does).
* `softmax_online`: one warp per row; the first sweep keeps a running
  maximum m and a running sum d rescaled whenever m grows,
  d = d * exp(m_old - m_new) + exp(x - m_new) (Milakov and Gimelshein,
  "Online normalizer calculation for softmax", 2018), and the lanes' (m, d)
  are merged with the same rule (`online_merge`; `online_update` is its
  one-element case, one exp per element); the second sweep writes.

Numerically stable: every exponent is x - (the row's maximum) <= 0, so no
exp overflows, whatever the values. All arithmetic is float32: `math.exp`
of a float32 lowers to the float32 function (libdevice's `__nv_expf`), and
the constants are float32 (the PTX has no f64; tests check it). Every lane
of a warp works on the same row, so a warp either skips a row past the end
as a whole or runs every shuffle with FULL_MASK.

`launch_rows` and `prepare_rows` launch every row kernel of the chapter:
these and the LayerNorm kernels of `layernorm`.
"""

import math

import numpy as np

from cudalearn import trace
from cudalearn.chapters.ch10.kernels.layernorm import LN_BLOCK, layernorm_args
from cudalearn.chapters.ch10.kernels.reductions import (
    FULL_MASK,
    WARPS,
    max_over_block,
    sum_over_block,
    warp_max,
    warp_sum,
)
from cudalearn.runtime import launch
from cudalearn.runtime.numba_backend import cuda, float32, uint32

SIGNATURES = {
    "softmax_block": "void(float32[:, ::1], float32[:, ::1])",
    "softmax_warp": "void(float32[:, ::1], float32[:, ::1])",
    "softmax_online": "void(float32[:, ::1], float32[:, ::1])",
    "softmax_registers": "void(float32[:, ::1], float32[:, ::1])",
}

#: Threads of `softmax_block`'s blocks (one block per row); at most reductions.BLOCK.
SOFTMAX_BLOCK = 256
#: Rows (warps) per block of the one-warp-per-row kernels: blocks of (32, ROWS_PER_BLOCK) threads.
ROWS_PER_BLOCK = 4
#: -infinity as a float32 constant: the running maximum before any element.
NEG_INF = np.float32(-np.inf)
#: Values per lane that `softmax_registers` keeps in registers: rows up to 32 * 8 = 256 columns.
SOFTMAX_VALS = 8


# The online rule: one home, used per element and across lanes ----------------------------------


@cuda.jit(device=True, inline="always")
def online_merge(m_a, d_a, m_b, d_b):
    """(m, d) of two parts of a row: m = max(m_a, m_b), d = d_a e^(m_a - m) + d_b e^(m_b - m) (Chapter 10).

    (m_a, d_a) and (m_b, d_b) are the running maximum and the sum of
    exp(x - m) of two sets of elements; one element x is the part (x, 1).
    Two empty parts (-inf, 0) give (-inf, 0), not the NaN of -inf - -inf.
    """
    m = max(m_a, m_b)
    if m == NEG_INF:
        return m, float32(0.0)
    return m, d_a * math.exp(m_a - m) + d_b * math.exp(m_b - m)


@cuda.jit(device=True, inline="always")
def online_update(m, d, v):
    """`online_merge` of (m, d) with one element v, one exp: one of the two terms is e^0 = 1 (Chapter 10).

    A row of -inf only (fully masked) gives NaN, as `torch.softmax` does.
    """
    if v > m:
        return v, d * math.exp(m - v) + float32(1.0)
    return m, d + math.exp(v - m)


@cuda.jit(device=True, inline="always")
def warp_online(m, d):
    """The lanes' (m, d) merged by `online_merge` in a shfl_xor_sync butterfly, in every lane (Chapter 10)."""
    offset = 16
    while offset > 0:
        m_o = cuda.shfl_xor_sync(FULL_MASK, m, offset)
        d_o = cuda.shfl_xor_sync(FULL_MASK, d, offset)
        m, d = online_merge(m, d, m_o, d_o)
        offset //= 2
    return m, d


# The kernels ----------------------------------------------------------------------------------


@cuda.jit
def softmax_block(x, y):
    """y[r] = softmax(x[r]); a block of SOFTMAX_BLOCK threads a row, shuffles + shared (Ch. 10)."""
    scratch = cuda.shared.array(WARPS, float32)
    row = cuda.blockIdx.x
    cols = x.shape[1]
    m = NEG_INF
    for j in range(cuda.threadIdx.x, cols, cuda.blockDim.x):
        m = max(m, x[row, j])
    m = max_over_block(m, scratch)
    d = float32(0.0)
    for j in range(cuda.threadIdx.x, cols, cuda.blockDim.x):
        d += math.exp(x[row, j] - m)
    inv = float32(1.0) / sum_over_block(d, scratch)
    for j in range(cuda.threadIdx.x, cols, cuda.blockDim.x):
        y[row, j] = math.exp(x[row, j] - m) * inv


@cuda.jit
def softmax_warp(x, y):
    """y[r] = softmax(x[r]); a warp per row, ROWS_PER_BLOCK rows a block, shuffles only (Ch. 10)."""
    lane = cuda.threadIdx.x
    row = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    if row < x.shape[0]:  # the same for all 32 lanes: the warp runs or skips the row as a whole
        cols = x.shape[1]
        m = NEG_INF
        for j in range(lane, cols, 32):
            m = max(m, x[row, j])
        m = warp_max(m)
        d = float32(0.0)
        for j in range(lane, cols, 32):
            d += math.exp(x[row, j] - m)
        inv = float32(1.0) / warp_sum(d)
        for j in range(lane, cols, 32):
            y[row, j] = math.exp(x[row, j] - m) * inv


@cuda.jit
def softmax_registers(x, y):
    """y[r] = softmax(x[r]) for rows of at most 32 * SOFTMAX_VALS columns, read once (Chapter 10).

    One warp per row as `softmax_warp`, but each lane first loads its
    columns into `vals` (independent loads, in flight together; a slot past
    the row holds -inf, whose exp is 0), then takes the maximum and the sum
    from registers and writes once: one read of the row instead of three.
    The loops over `vals` have constant trip counts, so the compiler
    unrolls them and keeps `vals` in registers (ptxas spills none: book
    10c prints its report). Its indices are built from
    `uint32` values: a signed index may be negative (Python's x[-1]), so an
    access with one picks between j and j + length, which also stops the
    column offset being folded into the address; unsigned indices need
    neither (book 10c compares the two in the PTX).
    `mine` is how many columns of the row the lane holds. `launch_rows`
    refuses rows longer than 32 * SOFTMAX_VALS.
    """
    lane = uint32(cuda.threadIdx.x)
    row = uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.y) + uint32(cuda.threadIdx.y)
    if row < uint32(x.shape[0]):
        mine = (uint32(x.shape[1]) + uint32(31) - lane) // uint32(32)  # columns lane, lane + 32..
        vals = cuda.local.array(SOFTMAX_VALS, float32)
        for k in range(SOFTMAX_VALS):
            vals[k] = x[row, lane + uint32(32 * k)] if uint32(k) < mine else NEG_INF
        m = NEG_INF
        for k in range(SOFTMAX_VALS):
            m = max(m, vals[k])
        m = warp_max(m)
        d = float32(0.0)
        for k in range(SOFTMAX_VALS):
            vals[k] = math.exp(vals[k] - m)
            d += vals[k]
        inv = float32(1.0) / warp_sum(d)
        for k in range(SOFTMAX_VALS):
            if uint32(k) < mine:
                y[row, lane + uint32(32 * k)] = vals[k] * inv


@cuda.jit
def softmax_online(x, y):
    """y[r] = softmax(x[r]); a warp per row, max and sum in one sweep, the online rule (Ch. 10)."""
    lane = cuda.threadIdx.x
    row = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    if row < x.shape[0]:
        cols = x.shape[1]
        m = NEG_INF
        d = float32(0.0)
        for j in range(lane, cols, 32):
            m, d = online_update(m, d, x[row, j])
        m, d = warp_online(m, d)
        inv = float32(1.0) / d
        for j in range(lane, cols, 32):
            y[row, j] = math.exp(x[row, j] - m) * inv


# Host side -----------------------------------------------------------------------------------


def rows_launch(kernel, rows: int):
    """(griddim, blockdim) of a row kernel: one block per row, or one warp per row (Chapter 10)."""
    if launch.kernel_name(kernel) == "softmax_block":
        return rows, SOFTMAX_BLOCK
    if launch.kernel_name(kernel) == "layernorm_block":
        return rows, LN_BLOCK
    return launch.blocks(rows, ROWS_PER_BLOCK), (32, ROWS_PER_BLOCK)


def _rows_call(kernel, x, y, extra):
    """(griddim, blockdim, args) of a row kernel's launch on x into y, its row length checked (Chapter 10)."""
    name = launch.kernel_name(kernel)
    if name == "softmax_registers" and x.shape[1] > 32 * SOFTMAX_VALS:
        raise ValueError(
            f"softmax_registers holds at most 32 * SOFTMAX_VALS = {32 * SOFTMAX_VALS} columns a row in "
            f"registers, got {x.shape[1]}: use softmax_warp or softmax_online for longer rows"
        )
    if name.startswith("layernorm"):
        args = layernorm_args(name, x, y, extra)
    else:
        args = (x, y, *extra)
    grid, block = rows_launch(kernel, x.shape[0])
    return grid, block, args


def launch_rows(kernel, x, y, *extra):
    """Run a softmax or `layernorm` row kernel on x into y (host or device arrays) and return y (Chapter 10).

    extra: layernorm's (gamma, beta, eps), passed in its signature's order
    (x, gamma, beta, y, eps); the softmax kernels take none.
    """
    grid, block, args = _rows_call(kernel, x, y, extra)
    trace.launch(kernel, grid, block, *args)
    return y


def prepare_rows(kernel, x, y, *extra):
    """`launch_rows` as a zero-argument callable, its host work done once (`launch.prepared`; Ch. 10).

    x, y (and gamma, beta) must be device arrays or CUDA tensors; what a
    benchmark or a training loop that launches the same arrays again and
    again uses.
    """
    grid, block, args = _rows_call(kernel, x, y, extra)
    return launch.prepared(kernel, grid, block, *args, sim_launch=trace.launch)


def softmax_reference(x) -> np.ndarray:
    """softmax of each row of x in NumPy: float64 arithmetic, max subtracted, rounded to float32 (Ch. 10)."""
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def online_reference(x) -> tuple[np.ndarray, np.ndarray]:
    """(m, d) of each row by the online rule, element after element in float64, for checks (Chapter 10)."""
    x = np.asarray(x, np.float64)
    m = np.full(x.shape[0], -np.inf)
    d = np.zeros(x.shape[0])
    for j in range(x.shape[1]):
        m_new = np.maximum(m, x[:, j])
        d = d * np.exp(m - m_new) + np.exp(x[:, j] - m_new)
        m = m_new
    return m, d


def timed_rows(t_in, t_out, kernels, torch_fn, *extra) -> dict:
    """{name: callable} the book times on PyTorch tensors: a copy, PyTorch's kernel, each row kernel (Ch. 10).

    t_in, t_out: (rows, cols) float32 tensors on the device; `extra` (gamma, beta tensors, eps) are passed
    to each kernel after x and y, tensors as Numba views; each kernel's launch is prepared once
    (`prepare_rows`).
    """
    found = {"copy (torch)": lambda: t_out.copy_(t_in), "PyTorch": lambda: torch_fn(t_in)}
    views = [launch.cuda_view(a) if hasattr(a, "data_ptr") else a for a in (t_in, t_out, *extra)]
    for kernel in kernels:
        found[launch.kernel_name(kernel)] = prepare_rows(kernel, *views)
    return found
