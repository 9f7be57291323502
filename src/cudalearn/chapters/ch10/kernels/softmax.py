"""Row softmax and LayerNorm kernels of Chapter 10: one block or one warp per row, float32 throughout.

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
* `layernorm`: one warp per row; y = (x - mean) / sqrt(var + eps) * gamma +
  beta (Ba, Kiros and Hinton, "Layer Normalization", 2016; var is the
  biased variance, as `torch.nn.functional.layer_norm` uses). A row of at
  most 32 * LN_VALS columns is read once into registers; each lane takes the
  (count, mean, M2) of its values by two passes over its registers,
  and the lanes' summaries are merged by Chan, Golub and LeVeque's pairwise
  rule (`welford_merge`) through shuffles (`warp_welford`).
* `layernorm_block`: `layernorm` with one block of LN_BLOCK threads per row,
  LN_BLOCK_VALS values a thread; the two sums go through `sum_over_block`.
* `layernorm_pairs`: `layernorm` with 8-byte accesses, the arrays viewed as
  float64 pairs of float32 columns (Chapter 5's trick): half the loads and
  stores for the same bytes; the mean and the squared deviations by
  `warp_sum`.
* `layernorm_long`: any row length, streamed: each lane runs Welford's
  one-pass update over its columns (`welford_update`), the lanes merge as
  above, and the write reads the row a second time.

Numerically stable: every exponent is x - (the row's maximum) <= 0, so no
exp overflows, whatever the values. All arithmetic is float32: `math.exp`
and `math.sqrt` of a float32 lower to the float32 functions (libdevice's
`__nv_expf`, `sqrt.rn.f32`), and the constants are float32 (the PTX has no f64; tests
check it). Every lane of a warp works on the same row, so a warp either
skips a row past the end as a whole or runs every shuffle with FULL_MASK.
"""

import math

import numpy as np

from cudalearn import trace
from cudalearn.chapters.ch05.kernels.elementwise import _pack_pair, _unpack_pair
from cudalearn.chapters.ch10.kernels.reductions import (
    FULL_MASK,
    WARPS,
    max_over_block,
    sum_over_block,
    warp_max,
    warp_sum,
)
from cudalearn.runtime import launch
from cudalearn.runtime.numba_backend import cuda, float32, float64, uint32

SIGNATURES = {
    "softmax_block": "void(float32[:, ::1], float32[:, ::1])",
    "softmax_warp": "void(float32[:, ::1], float32[:, ::1])",
    "softmax_online": "void(float32[:, ::1], float32[:, ::1])",
    "softmax_registers": "void(float32[:, ::1], float32[:, ::1])",
    "layernorm": "void(float32[:, ::1], float32[::1], float32[::1], float32[:, ::1], float32)",
    "layernorm_block": "void(float32[:, ::1], float32[::1], float32[::1], float32[:, ::1], float32)",
    "layernorm_long": "void(float32[:, ::1], float32[::1], float32[::1], float32[:, ::1], float32)",
    "layernorm_pairs": "void(float64[:, ::1], float64[::1], float64[::1], float64[:, ::1], float32)",
}

#: Threads of `softmax_block`'s blocks (one block per row); at most reductions.BLOCK.
SOFTMAX_BLOCK = 256
#: Rows (warps) per block of the one-warp-per-row kernels: blocks of (32, ROWS_PER_BLOCK) threads.
ROWS_PER_BLOCK = 4
#: -infinity as a float32 constant: the running maximum before any element.
NEG_INF = np.float32(-np.inf)
#: Values per lane that `softmax_registers` keeps in registers: rows up to 32 * 8 = 256 columns.
SOFTMAX_VALS = 8
#: Values per lane that `layernorm` keeps in registers: rows up to 32 * 24 = 768 columns.
LN_VALS = 24
#: Pairs of columns (8 bytes each) per lane that `layernorm_pairs` keeps: rows up to 32 * 12 * 2 = 768.
LN_PAIRS = 12
#: Threads of `layernorm_block`'s blocks (one block per row); at most reductions.BLOCK.
LN_BLOCK = 128
#: Values per thread that `layernorm_block` keeps in registers: rows up to 128 * 8 = 1024 columns.
LN_BLOCK_VALS = 8


# The online rule and Welford's: one home each, used per element and across lanes -------------


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


@cuda.jit(device=True, inline="always")
def welford_update(count, mean, m2, v):
    """Welford's update of (count, mean, M2) by one value v; M2 = sum of squared deviations (Chapter 10)."""
    count += float32(1.0)
    delta = v - mean
    mean += delta / count
    m2 += delta * (v - mean)
    return count, mean, m2


@cuda.jit(device=True, inline="always")
def welford_merge(n_a, mean_a, m2_a, n_b, mean_b, m2_b):
    """Chan, Golub and LeVeque's merge of two (count, mean, M2) summaries; empty parts allowed (Chapter 10).

    n = n_a + n_b, delta = mean_b - mean_a, mean = mean_a + delta n_b / n,
    M2 = M2_a + M2_b + delta^2 n_a n_b / n.
    """
    n = n_a + n_b
    if n == float32(0.0):
        return n, mean_a, m2_a
    delta = mean_b - mean_a
    w = n_b / n
    return n, mean_a + delta * w, m2_a + m2_b + delta * delta * n_a * w


@cuda.jit(device=True, inline="always")
def warp_welford(count, mean, m2):
    """The lanes' (count, mean, M2) merged by `welford_merge` in a shfl_xor_sync butterfly (Chapter 10).

    The merge is not symmetric in its rounding, so at every step both lanes
    of a pair merge (lower lane, upper lane): every lane ends with the same bits.
    """
    offset = 16
    while offset > 0:
        n_o = cuda.shfl_xor_sync(FULL_MASK, count, offset)
        mean_o = cuda.shfl_xor_sync(FULL_MASK, mean, offset)
        m2_o = cuda.shfl_xor_sync(FULL_MASK, m2, offset)
        if cuda.laneid & offset:  # the partner is the lower lane: it goes first
            count, mean, m2 = welford_merge(n_o, mean_o, m2_o, count, mean, m2)
        else:
            count, mean, m2 = welford_merge(count, mean, m2, n_o, mean_o, m2_o)
        offset //= 2
    return count, mean, m2


# The kernels ----------------------------------------------------------------------------------


@cuda.jit
def softmax_block(x, y):
    """y[r] = softmax(x[r]); one block of SOFTMAX_BLOCK threads per row, shared-memory reductions (Ch. 10)."""
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
    """y[r] = softmax(x[r]); one warp per row, ROWS_PER_BLOCK rows a block, shuffles only (Chapter 10)."""
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
    unrolls them and keeps `vals` in registers. Its indices are built from
    `uint32` values: a signed index may be negative (Python's x[-1]), so an
    access with one picks between j and j + length, which also stops the
    column offset being folded into the address; unsigned indices need
    neither (half the instructions executed, in Chapter 10's probe).
    `mine` is how many columns of the row the lane holds. `launch_rows`
    refuses rows longer than 32 * SOFTMAX_VALS.
    """
    lane = uint32(cuda.threadIdx.x)
    row = uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.y) + uint32(cuda.threadIdx.y)
    if row < uint32(x.shape[0]):
        mine = (uint32(x.shape[1]) + uint32(31) - lane) // uint32(32)  # columns lane, lane + 32, ...
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
    """y[r] = softmax(x[r]); one warp per row, max and sum in one sweep by the online rule (Chapter 10)."""
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


@cuda.jit
def layernorm(x, gamma, beta, y, eps):
    """y[r] = (x[r] - mean) / sqrt(var + eps) * gamma + beta; one warp per row, in registers (Chapter 10).

    gamma, beta (cols,) float32; var is the biased variance M2 / cols. Rows
    of at most 32 * LN_VALS columns (`layernorm_long` takes longer ones).
    Each lane loads its columns into `vals` (independent loads) and, since
    they are in registers, takes its own (count, mean, M2) by the two-pass
    formula, the mean and then the squared deviations from it, at no extra
    memory traffic; the lanes' summaries merge by Chan's rule through
    shuffles (`warp_welford`); the row is written once, from registers.
    Indices are unsigned (see `softmax_registers`).
    """
    lane = uint32(cuda.threadIdx.x)
    row = uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.y) + uint32(cuda.threadIdx.y)
    if row < uint32(x.shape[0]):
        cols = uint32(x.shape[1])
        vals = cuda.local.array(LN_VALS, float32)
        s = float32(0.0)
        n = float32(0.0)
        for k in range(LN_VALS):
            j = lane + uint32(32 * k)
            vals[k] = x[row, j] if j < cols else float32(0.0)
        for k in range(LN_VALS):
            if lane + uint32(32 * k) < cols:
                s += vals[k]
                n += float32(1.0)
        mean = s / n if n > float32(0.0) else float32(0.0)
        m2 = float32(0.0)
        for k in range(LN_VALS):
            if lane + uint32(32 * k) < cols:
                dv = vals[k] - mean
                m2 += dv * dv
        n, mean, m2 = warp_welford(n, mean, m2)
        rstd = float32(1.0) / math.sqrt(m2 / n + eps)
        for k in range(LN_VALS):
            j = lane + uint32(32 * k)
            if j < cols:
                y[row, j] = (vals[k] - mean) * rstd * gamma[j] + beta[j]


@cuda.jit
def layernorm_block(x, gamma, beta, y, eps):
    """`layernorm` with one block of LN_BLOCK threads per row, LN_BLOCK_VALS values a thread (Chapter 10).

    Rows of at most LN_BLOCK * LN_BLOCK_VALS columns. Thread t holds columns
    t, t + LN_BLOCK, ... in registers; the row's sum and then its sum of
    squared deviations go through `sum_over_block` (warp shuffles, then the
    warps' sums in shared memory): the two passes over registers, for the
    whole block. Four times the threads of `layernorm` on a row, each with a
    quarter of the values: fewer registers, and a row's life is shorter.
    """
    scratch = cuda.shared.array(WARPS, float32)
    row = uint32(cuda.blockIdx.x)
    t = uint32(cuda.threadIdx.x)
    cols = uint32(x.shape[1])
    vals = cuda.local.array(LN_BLOCK_VALS, float32)
    s = float32(0.0)
    for k in range(LN_BLOCK_VALS):
        j = t + uint32(LN_BLOCK * k)
        vals[k] = x[row, j] if j < cols else float32(0.0)
        s += vals[k]
    mean = sum_over_block(s, scratch) / float32(cols)
    q = float32(0.0)
    for k in range(LN_BLOCK_VALS):
        if t + uint32(LN_BLOCK * k) < cols:
            dv = vals[k] - mean
            q += dv * dv
    rstd = float32(1.0) / math.sqrt(sum_over_block(q, scratch) / float32(cols) + eps)
    for k in range(LN_BLOCK_VALS):
        j = t + uint32(LN_BLOCK * k)
        if j < cols:
            y[row, j] = (vals[k] - mean) * rstd * gamma[j] + beta[j]


@cuda.jit
def layernorm_long(x, gamma, beta, y, eps):
    """`layernorm` for rows of any length: Welford's update over x, then a second read to write (Ch. 10).

    One warp per row. A row too long for registers is streamed: each lane
    runs Welford's one-pass update over its columns (`welford_update`), the
    lanes merge by Chan's rule (`warp_welford`), and the write reads x again.
    """
    lane = cuda.threadIdx.x
    row = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    if row < x.shape[0]:
        cols = x.shape[1]
        count = float32(0.0)
        mean = float32(0.0)
        m2 = float32(0.0)
        for j in range(lane, cols, 32):
            count, mean, m2 = welford_update(count, mean, m2, x[row, j])
        count, mean, m2 = warp_welford(count, mean, m2)
        rstd = float32(1.0) / math.sqrt(m2 / count + eps)
        for j in range(lane, cols, 32):
            y[row, j] = (x[row, j] - mean) * rstd * gamma[j] + beta[j]


@cuda.jit
def layernorm_pairs(x2, g2, b2, y2, eps):
    """`layernorm` with 8-byte accesses: x, gamma, beta and y viewed as float64 pairs (Chapter 10).

    Each float64 of x2 (rows, cols / 2) holds two neighbouring float32 columns, as Chapter 5's
    `bias_relu_dropout_pairs` reads them: one load moves both, so a lane issues half the loads
    and stores of `layernorm` for the same bytes. Lane l holds pairs l, l + 32, ... (at most
    LN_PAIRS), split into their float32 halves in registers (`_unpack_pair`); the mean and then
    the sum of squared deviations go through `warp_sum` (two passes over registers); the row
    is written as pairs (`_pack_pair`). Rows of an even number of columns, at most 64 * LN_PAIRS;
    `launch_rows` makes the views.
    """
    lane = uint32(cuda.threadIdx.x)
    row = uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.y) + uint32(cuda.threadIdx.y)
    if row < uint32(x2.shape[0]):
        pairs = uint32(x2.shape[1])
        words = cuda.local.array(LN_PAIRS, float64)
        lo = cuda.local.array(LN_PAIRS, float32)
        hi = cuda.local.array(LN_PAIRS, float32)
        for k in range(LN_PAIRS):  # every load first: all of them in flight together
            j = lane + uint32(32 * k)
            words[k] = x2[row, j] if j < pairs else float64(0.0)
        s = float32(0.0)
        for k in range(LN_PAIRS):
            lo[k], hi[k] = _unpack_pair(words[k])
            s += lo[k] + hi[k]
        cols = float32(2) * float32(pairs)
        mean = warp_sum(s) / cols
        q = float32(0.0)
        for k in range(LN_PAIRS):
            if lane + uint32(32 * k) < pairs:
                d0 = lo[k] - mean
                d1 = hi[k] - mean
                q += d0 * d0 + d1 * d1
        rstd = float32(1.0) / math.sqrt(warp_sum(q) / cols + eps)
        for k in range(LN_PAIRS):
            j = lane + uint32(32 * k)
            if j < pairs:
                g0, g1 = _unpack_pair(g2[j])
                c0, c1 = _unpack_pair(b2[j])
                y2[row, j] = _pack_pair((lo[k] - mean) * rstd * g0 + c0, (hi[k] - mean) * rstd * g1 + c1)


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
    held = {
        "layernorm": 32 * LN_VALS,
        "layernorm_block": LN_BLOCK * LN_BLOCK_VALS,
        "layernorm_pairs": 64 * LN_PAIRS,
    }.get(name)
    if held is not None and x.shape[1] > held:
        raise ValueError(
            f"{name} holds at most {held} columns a row in registers, got {x.shape[1]}: use "
            "layernorm_long for longer rows"
        )
    grid, block = rows_launch(kernel, x.shape[0])
    if name.startswith("layernorm"):
        gamma, beta, eps = extra
        if name == "layernorm_pairs":  # the same memory, two float32 columns a float64
            if x.shape[1] % 2:
                raise ValueError(
                    f"layernorm_pairs needs an even number of columns (whole pairs), got {x.shape[1]}: "
                    "use layernorm"
                )
            x, gamma, beta, y = (launch.cuda_view(a).view(np.float64) for a in (x, gamma, beta, y))
        return grid, block, (x, gamma, beta, y, np.float32(eps))
    return grid, block, (x, y, *extra)


def launch_rows(kernel, x, y, *extra):
    """Run a row kernel of this module on x into y (host or device arrays) and return y (Chapter 10).

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


def layernorm_reference(x, gamma, beta, eps) -> np.ndarray:
    """LayerNorm of each row of x in NumPy (float64, biased variance), rounded to float32 (Chapter 10)."""
    x = np.asarray(x, np.float64)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    out = (x - mean) / np.sqrt(var + float(eps)) * np.asarray(gamma, np.float64) + np.asarray(
        beta, np.float64
    )
    return out.astype(np.float32)


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
