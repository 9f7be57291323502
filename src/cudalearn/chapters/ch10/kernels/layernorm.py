"""LayerNorm kernels of Chapter 10: one warp or one block per row, Welford's and Chan's rules, float32.

Every kernel reads x (rows, cols) float32, C-contiguous, gamma and beta
(cols,) float32, and writes y of x's shape: y = (x - mean) / sqrt(var + eps)
* gamma + beta (Ba, Kiros and Hinton, "Layer Normalization", 2016; var is
the biased variance, as `torch.nn.functional.layer_norm` uses). They launch
through `softmax.launch_rows` and `softmax.prepare_rows`, as the softmax
kernels do (`layernorm_args` makes their arguments):

* `layernorm`: one warp per row. A row of at most 32 * LN_VALS columns is
  read once into registers; each lane takes the (count, mean, M2) of its
  values by two passes over its registers, and the lanes' summaries are
  merged by Chan, Golub and LeVeque's pairwise rule (`welford_merge`)
  through shuffles (`warp_welford`).
* `layernorm_block`: `layernorm` with one block of LN_BLOCK threads per row,
  LN_BLOCK_VALS values a thread; the two sums go through `sum_over_block`.
* `layernorm_pairs`: `layernorm` with 8-byte accesses, the arrays viewed as
  float64 pairs of float32 columns (deep dive 5c's trick): half the loads and
  stores for the same bytes; the mean and the squared deviations by
  `warp_sum`.
* `layernorm_long`: any row length, streamed: each lane runs Welford's
  one-pass update over its columns (`welford_update`), the lanes merge as
  above, and the write reads the row a second time.

All arithmetic is float32: `math.sqrt` of a float32 lowers to `sqrt.rn.f32`,
and the constants are float32 (the PTX has no f64; tests check it). Every
lane of a warp works on the same row, so a warp either skips a row past the
end as a whole or runs every shuffle with FULL_MASK.
"""

import math

import numpy as np

from cudalearn.chapters.ch05.kernels.elementwise import _pack_pair, _unpack_pair
from cudalearn.chapters.ch10.kernels.reductions import FULL_MASK, WARPS, sum_over_block, warp_sum
from cudalearn.runtime import launch
from cudalearn.runtime.numba_backend import cuda, float32, float64, uint32

SIGNATURES = {
    "layernorm": "void(float32[:, ::1], float32[::1], float32[::1], float32[:, ::1], float32)",
    "layernorm_block": "void(float32[:, ::1], float32[::1], float32[::1], float32[:, ::1], float32)",
    "layernorm_long": "void(float32[:, ::1], float32[::1], float32[::1], float32[:, ::1], float32)",
    "layernorm_pairs": "void(float64[:, ::1], float64[::1], float64[::1], float64[:, ::1], float32)",
}

#: Values per lane that `layernorm` keeps in registers: rows up to 32 * 24 = 768 columns.
LN_VALS = 24
#: Pairs of columns (8 bytes each) per lane that `layernorm_pairs` keeps: rows up to 32 * 12 * 2 = 768.
LN_PAIRS = 12
#: Threads of `layernorm_block`'s blocks (one block per row); at most reductions.BLOCK.
LN_BLOCK = 128
#: Values per thread that `layernorm_block` keeps in registers: rows up to 128 * 8 = 1024 columns.
LN_BLOCK_VALS = 8


# Welford's update and Chan's merge: one home each, used per element and across lanes -----------


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
def layernorm(x, gamma, beta, y, eps):
    """y[r] = (x[r] - mean) / sqrt(var + eps) * gamma + beta; a warp per row, in registers (Ch. 10).

    gamma, beta (cols,) float32; var is the biased variance M2 / cols. Rows
    of at most 32 * LN_VALS columns (`layernorm_long` takes longer ones).
    Each lane loads its columns into `vals` (independent loads) and, since
    they are in registers, takes its own (count, mean, M2) by the two-pass
    formula, the mean and then the squared deviations from it, at no extra
    memory traffic; the lanes' summaries merge by Chan's rule through
    shuffles (`warp_welford`); the row is written once, from registers.
    Indices are unsigned: no negative-index wrap-around code (Chapter 2a).
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
    """`layernorm` with a block of LN_BLOCK threads per row, LN_BLOCK_VALS values a thread (Ch. 10).

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
    """`layernorm` for rows of any length: Welford's update over x, a second read to write (Ch. 10).

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

    Each float64 of x2 (rows, cols / 2) holds two neighbouring float32 columns, as deep dive 5c's
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
                y0 = (lo[k] - mean) * rstd * g0 + c0
                y2[row, j] = _pack_pair(y0, (hi[k] - mean) * rstd * g1 + c1)


# Host side -----------------------------------------------------------------------------------


def layernorm_args(name, x, y, extra):
    """(x, gamma, beta, y, eps) of LayerNorm kernel `name`'s launch on x into y, extra = (gamma, beta,
    eps); a row longer than the kernel holds in registers refused, and for `layernorm_pairs` the float64
    views of the arrays (Chapter 10)."""
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
    gamma, beta, eps = extra
    if name == "layernorm_pairs":  # the same memory, two float32 columns a float64
        if x.shape[1] % 2:
            raise ValueError(
                f"layernorm_pairs needs an even number of columns (whole pairs), got {x.shape[1]}: "
                "use layernorm"
            )
        x, gamma, beta, y = (launch.cuda_view(a).view(np.float64) for a in (x, gamma, beta, y))
    return x, gamma, beta, y, np.float32(eps)


def layernorm_reference(x, gamma, beta, eps) -> np.ndarray:
    """LayerNorm of each row of x in NumPy (float64, biased variance), rounded to float32 (Chapter 10)."""
    x = np.asarray(x, np.float64)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    out = (x - mean) / np.sqrt(var + float(eps)) * np.asarray(gamma, np.float64) + np.asarray(
        beta, np.float64
    )
    return out.astype(np.float32)
