"""One attention head, softmax(Q K^T / sqrt(d)) V, in three kernels and in one (Chapter 10).

q, k, v and the output o are (n, d) float32, C-contiguous, d <= D_MAX.

* Three kernels, an (n, n) matrix in global memory (`attention_three`):
  `attention_scores` writes s = scale * q k^T (a tiled product, Chapter 3,
  with k's tile padded to (TILE, TILE + 1) because it is read down its
  columns, Chapter 4); `softmax.softmax_warp` turns each row of s into
  probabilities p; `attention_weighted` (Chapter 3's `matmul_tiled32`,
  the same kernel, not a copy) writes o = p v.
* One kernel over key tiles with the online rule (`attention_fused`), the
  idea of FlashAttention (Dao et al., "FlashAttention: Fast and
  Memory-Efficient Exact Attention with IO-Awareness", 2022): a block takes
  BQ queries, one warp each, and walks over the keys BK at a time, with the
  block's queries and the current k and v tiles in shared memory. Lane l
  scores key j0 + l against its warp's query; the warp keeps the running
  maximum m, the running sum l of exp(s - m) and its output row (two
  columns a lane), and when m grows it rescales both by exp(m_old - m_new):
  the rule of `softmax.online_merge`, applied to a tile of keys and to the
  output. No (n, n) matrix is ever written; q, k and v are read from global
  memory (k and v once per block, mostly from L2) and o written once.
"""

import math

import numpy as np
from numba import cuda, float32

from cudalearn import launch
from cudalearn.kernels import softmax, tiled
from cudalearn.kernels.reductions import FULL_MASK, warp_max, warp_sum
from cudalearn.kernels.softmax import NEG_INF

SIGNATURES = {
    "attention_scores": "void(float32[:, ::1], float32[:, ::1], float32[:, ::1], float32)",
    "attention_fused": "void(float32[:, ::1], float32[:, ::1], float32[:, ::1], float32[:, ::1], float32)",
}

#: Tile of `attention_scores`: blocks of (TILE, TILE) threads, one score each.
TILE = 32
#: Row width of `attention_scores`' k tile: padded by one word (a shared shape must be a constant).
TILE_WIDTH = TILE + 1
#: Largest head dimension the fused kernel holds in shared memory (two output columns a lane).
D_MAX = 64
#: Queries per block of `attention_fused`: one warp each, blocks of (32, BQ) threads.
BQ = 16
#: Keys per tile of `attention_fused`: one per lane.
BK = 32
#: Row width of the fused kernel's k tile: padded by one word, as it is read down its columns.
K_WIDTH = D_MAX + 1

#: o = p v for p (n, n) and v (n, d): Chapter 3's tiled product, launched with (32, 32) blocks.
attention_weighted = tiled.matmul_tiled32


@cuda.jit
def attention_scores(q, k, s, scale):
    """s[i, j] = scale * (q[i] . k[j]); q, k (n, d), s (n, n) float32, (TILE, TILE) blocks (Chapter 10)."""
    sq = cuda.shared.array((TILE, TILE), float32)
    sk = cuda.shared.array((TILE, TILE_WIDTH), float32)  # read as sk[tx, c]: padded, no bank conflict
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    n = q.shape[0]
    d = q.shape[1]
    i = cuda.blockIdx.y * TILE + ty  # the query of this thread's score
    j = cuda.blockIdx.x * TILE + tx  # its key
    kj = cuda.blockIdx.x * TILE + ty  # the key row this thread loads into the tile
    acc = float32(0.0)
    for c0 in range(0, d, TILE):
        c = c0 + tx
        sq[ty, tx] = q[i, c] if i < n and c < d else float32(0.0)
        sk[ty, tx] = k[kj, c] if kj < n and c < d else float32(0.0)
        cuda.syncthreads()
        for t in range(TILE):
            acc += sq[ty, t] * sk[tx, t]
        cuda.syncthreads()
    if i < n and j < n:
        s[i, j] = acc * scale


@cuda.jit
def attention_fused(q, k, v, o, scale):
    """o = softmax(scale * q k^T) v in one kernel over key tiles, online rule (Chapter 10).

    q, k, v, o (n, d) float32 with d <= D_MAX; blocks of (32, BQ) threads,
    warp w of block b on query b * BQ + w.
    """
    sq = cuda.shared.array((BQ, D_MAX), float32)
    sk = cuda.shared.array((BK, K_WIDTH), float32)
    sv = cuda.shared.array((BK, D_MAX), float32)
    lane = cuda.threadIdx.x
    w = cuda.threadIdx.y
    tid = w * 32 + lane
    n = q.shape[0]
    d = q.shape[1]
    q0 = cuda.blockIdx.x * BQ
    for e in range(tid, BQ * D_MAX, 32 * BQ):  # the block's queries, zeros past n and d
        r = e // D_MAX
        c = e - r * D_MAX
        sq[r, c] = q[q0 + r, c] if q0 + r < n and c < d else float32(0.0)
    m = NEG_INF  # running maximum of this warp's scores
    total = float32(0.0)  # running sum of exp(s - m)
    acc0 = float32(0.0)  # output columns lane and lane + 32, unnormalised, relative to m
    acc1 = float32(0.0)
    for j0 in range(0, n, BK):
        cuda.syncthreads()  # every warp is done with the previous tile (and the queries are in)
        for e in range(tid, BK * D_MAX, 32 * BQ):
            r = e // D_MAX
            c = e - r * D_MAX
            inside = j0 + r < n and c < d
            sk[r, c] = k[j0 + r, c] if inside else float32(0.0)
            sv[r, c] = v[j0 + r, c] if inside else float32(0.0)  # zeros: p * 0 adds nothing
        cuda.syncthreads()
        s = NEG_INF  # a key past n scores -inf: its weight exp(-inf - m) is 0
        if j0 + lane < n:
            s = float32(0.0)
            for c in range(d):
                s += sq[w, c] * sk[lane, c]
            s *= scale
        m_new = max(m, warp_max(s))  # finite: key j0 (lane 0) is always inside
        p = math.exp(s - m_new)
        alpha = math.exp(m - m_new)  # exp(-inf) = 0 on the first tile
        total = total * alpha + warp_sum(p)
        acc0 *= alpha
        acc1 *= alpha
        for jj in range(BK):
            pj = cuda.shfl_sync(FULL_MASK, p, jj)  # key jj's weight, from lane jj
            acc0 += pj * sv[jj, lane]
            acc1 += pj * sv[jj, lane + 32]
        m = m_new
    i = q0 + w
    if i < n:
        inv = float32(1.0) / total
        if lane < d:
            o[i, lane] = acc0 * inv
        if lane + 32 < d:
            o[i, lane + 32] = acc1 * inv


# Host side -----------------------------------------------------------------------------------


def _check_shapes(q, k, v):
    """Raise ValueError unless q, k, v are (n, d) alike with 0 < d <= D_MAX."""
    if not (q.shape == k.shape == v.shape) or len(q.shape) != 2:
        raise ValueError(f"q, k, v must be (n, d) alike, got {q.shape}, {k.shape}, {v.shape}")
    if not 0 < q.shape[1] <= D_MAX:
        raise ValueError(f"the head dimension d = {q.shape[1]} must be from 1 to D_MAX = {D_MAX}")


def _like(x, shape):
    """An empty float32 array of `shape` where x lives: on the device if x is a device array."""
    return cuda.device_array(shape, np.float32) if hasattr(x, "copy_to_host") else np.empty(shape, np.float32)


def scale_of(d: int) -> np.float32:
    """The scores' scale 1 / sqrt(d) as float32 (Chapter 10)."""
    return np.float32(1.0 / math.sqrt(d))


def attention_three(q, k, v, s=None, p=None, o=None):
    """o = softmax(q k^T / sqrt(d)) v by three launches, s and p (n, n) in global memory (Chapter 10).

    Host or device arrays; s, p, o are allocated where q lives unless given
    (pass them to time the launches alone). Returns o.
    """
    _check_shapes(q, k, v)
    n, d = q.shape
    s = _like(q, (n, n)) if s is None else s
    p = _like(q, (n, n)) if p is None else p
    o = _like(q, (n, d)) if o is None else o
    grid, block = launch.square(n, n, TILE)
    launch.run(attention_scores, grid, block, q, k, s, scale_of(d))
    softmax.launch_rows(softmax.softmax_warp, s, p)
    grid, block = launch.grid_2d(n, d, (TILE, TILE))
    launch.run(attention_weighted, grid, block, p, v, o)
    return o


def fused_launch(n: int):
    """(griddim, blockdim) of `attention_fused` for n queries: blocks of (32, BQ) threads (Chapter 10)."""
    return launch.blocks(n, BQ), (32, BQ)


def launch_attention_fused(q, k, v, o=None):
    """o = softmax(q k^T / sqrt(d)) v by `attention_fused`, one launch; host or device arrays (Ch. 10)."""
    _check_shapes(q, k, v)
    n, d = q.shape
    o = _like(q, (n, d)) if o is None else o
    grid, block = fused_launch(n)
    launch.run(attention_fused, grid, block, q, k, v, o, scale_of(d))
    return o


def attention_reference(q, k, v) -> np.ndarray:
    """softmax(q k^T / sqrt(d)) v in NumPy, float64 arithmetic, rounded to float32 (Chapter 10)."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    s = q @ k.T / math.sqrt(q.shape[1])
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return ((e / e.sum(axis=1, keepdims=True)) @ v).astype(np.float32)


def bytes_moved(n: int, d: int) -> dict[str, int]:
    """Global-memory bytes each version must move at least (compulsory traffic, float32) (Chapter 10).

    three kernels: q, k read, s written; s read, p written; p, v read, o
    written. fused: q, k, v read and o written once. The tracer counts what
    the kernels actually touch, re-reads included.
    """
    qkv, nn = 4 * n * d, 4 * n * n
    return {"three kernels": 2 * qkv + nn + 2 * nn + nn + 2 * qkv, "fused": 4 * qkv}
