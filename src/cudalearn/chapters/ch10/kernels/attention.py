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
  BQ queries, QW per warp, and walks over the keys BK at a time, with the
  block's queries and the current k and v tiles in shared memory. Lane l
  scores keys j0 + l and j0 + l + 32 against each of its warp's QW queries,
  so each k value it loads feeds QW independent FMA chains (and each
  query value, the same word for the whole warp, a broadcast, feeds two).
  Per query the warp keeps the running maximum m, the running sum of
  exp(s - m) and its output row (two columns a lane), and when m grows it
  rescales both by exp(m_old - m_new): the rule of `softmax.online_merge`,
  applied to a tile of keys and to the output. The weights reach the
  output's lanes by shuffles; each v value a lane loads feeds QW FMAs. No
  (n, n) matrix is ever written; q, k and v are read from global memory
  (k and v once per block, mostly from L2) and o written once.
"""

import math

import numpy as np

from cudalearn import trace
from cudalearn.chapters.ch03 import kernels as tiled
from cudalearn.chapters.ch10.kernels import softmax
from cudalearn.chapters.ch10.kernels.reductions import FULL_MASK, warp_max, warp_sum
from cudalearn.chapters.ch10.kernels.softmax import NEG_INF
from cudalearn.runtime import launch
from cudalearn.runtime.numba_backend import cuda, float32, uint32

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
#: Queries per warp of `attention_fused`: each shared load of k or v feeds QW independent FMAs.
QW = 4
#: Warps per block of `attention_fused`: blocks of (32, WARPS) threads.
WARPS = 4
#: Queries per block of `attention_fused` (n = 4096 gives 256 blocks, more than an H200's 132 SMs).
BQ = QW * WARPS
#: Keys per tile of `attention_fused`: two per lane, keys j0 + lane and j0 + lane + 32.
BK = 64
#: Tile rows the block loads per pass, one thread per element (32 * WARPS is a multiple of D_MAX).
LOAD_ROWS = 32 * WARPS // D_MAX
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

    q, k, v, o (n, d) float32 with d <= D_MAX; blocks of (32, WARPS) threads,
    warp w of block b on the QW queries b * BQ + w * QW + r, r < QW.
    """
    sq = cuda.shared.array((BQ, D_MAX), float32)
    sk = cuda.shared.array((BK, K_WIDTH), float32)
    sv = cuda.shared.array((BK, D_MAX), float32)
    m = cuda.local.array(QW, float32)  # per query r of this warp: running maximum of its scores,
    total = cuda.local.array(QW, float32)  # running sum of exp(s - m),
    acc = cuda.local.array((QW, 2), float32)  # output columns lane and lane + 32, relative to m,
    s = cuda.local.array((QW, 2), float32)  # scores (then weights), keys j0 + lane, j0 + lane + 32
    # Unsigned indices into the tiles: Numba emits no negative-index wraparound code in the loops.
    lane = uint32(cuda.threadIdx.x)
    hi = lane + uint32(32)  # the lane's second key and output column (an index; compare lane + 32)
    w = cuda.threadIdx.y
    tid = w * 32 + cuda.threadIdx.x
    n = q.shape[0]
    d = q.shape[1]
    q0 = cuda.blockIdx.x * BQ
    qw = uint32(w * QW)  # this warp's first row of sq
    r_load = tid // D_MAX  # this thread loads column c_load of rows r_load, r_load + LOAD_ROWS..
    c_load = tid - r_load * D_MAX
    cu_load = uint32(c_load)
    for e in range(tid, BQ * D_MAX, 32 * WARPS):  # the block's queries, zeros past n and d
        r = e // D_MAX
        c = e - r * D_MAX
        sq[r, c] = q[q0 + r, c] if q0 + r < n and c < d else float32(0.0)
    for r in range(QW):
        m[r] = NEG_INF
        total[r] = float32(0.0)
        acc[r, 0] = float32(0.0)
        acc[r, 1] = float32(0.0)
    for j0 in range(0, n, BK):
        cuda.syncthreads()  # every warp is done with the previous tile (and the queries are in)
        for r in range(r_load, BK, LOAD_ROWS):  # a warp loads half a row: coalesced along d
            ru = uint32(r)
            key = uint32(j0 + r)
            inside = j0 + r < n and c_load < d
            sk[ru, cu_load] = k[key, cu_load] if inside else float32(0.0)
            sv[ru, cu_load] = v[key, cu_load] if inside else float32(0.0)  # zeros: p * 0 adds 0
        cuda.syncthreads()
        for r in range(QW):
            s[r, 0] = float32(0.0)
            s[r, 1] = float32(0.0)
        # D_MAX, a constant trip count the compiler unrolls (zeros past d add 0): each pair of
        # sk loads feeds 2 * QW independent FMA chains (sq[qw + r, c]: one word for all lanes)
        for c in range(D_MAX):
            cu = uint32(c)
            ka = sk[lane, cu]
            kb = sk[hi, cu]
            for r in range(QW):
                qc = sq[qw + uint32(r), cu]
                s[r, 0] += qc * ka
                s[r, 1] += qc * kb
        for r in range(QW):
            # a key past n scores -inf: its weight exp(-inf - m) is 0
            sa = s[r, 0] * scale if j0 + lane < n else NEG_INF
            sb = s[r, 1] * scale if j0 + lane + 32 < n else NEG_INF  # int64: no float64 compare
            m_new = max(m[r], warp_max(max(sa, sb)))  # finite: key j0 (lane 0) is always inside
            s[r, 0] = math.exp(sa - m_new)
            s[r, 1] = math.exp(sb - m_new)
            alpha = math.exp(m[r] - m_new)  # exp(-inf) = 0 on the first tile
            total[r] = total[r] * alpha + warp_sum(s[r, 0] + s[r, 1])
            acc[r, 0] *= alpha
            acc[r, 1] *= alpha
            m[r] = m_new
        for jj in range(32):  # keys jj, jj + 32: 4 sv loads feed 4 * QW FMAs, weights from lane jj
            ju = uint32(jj)
            va = sv[ju, lane]
            vb = sv[ju, hi]
            wa = sv[ju + uint32(32), lane]
            wb = sv[ju + uint32(32), hi]
            for r in range(QW):
                pa = cuda.shfl_sync(FULL_MASK, s[r, 0], jj)  # weight of key j0 + jj
                pb = cuda.shfl_sync(FULL_MASK, s[r, 1], jj)  # weight of key j0 + jj + 32
                acc[r, 0] += pa * va
                acc[r, 0] += pb * wa
                acc[r, 1] += pa * vb
                acc[r, 1] += pb * wb
    for r in range(QW):
        i = q0 + qw + r
        if i < n:
            inv = float32(1.0) / total[r]
            if lane < d:
                o[i, lane] = acc[r, 0] * inv
            if lane + 32 < d:
                o[i, hi] = acc[r, 1] * inv


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
    """o = softmax(q k^T / sqrt(d)) v by three launches, s and p (n, n) in global memory (Ch. 10).

    Host or device arrays; s, p, o are allocated where q lives unless given
    (pass them to time the launches alone). Returns o.
    """
    _check_shapes(q, k, v)
    n, d = q.shape
    s = _like(q, (n, n)) if s is None else s
    p = _like(q, (n, n)) if p is None else p
    o = _like(q, (n, d)) if o is None else o
    grid, block = launch.square(n, n, TILE)
    trace.launch(attention_scores, grid, block, q, k, s, scale_of(d))
    softmax.launch_rows(softmax.softmax_warp, s, p)
    grid, block = launch.grid_2d(n, d, (TILE, TILE))
    trace.launch(attention_weighted, grid, block, p, v, o)
    return o


def fused_launch(n: int):
    """(griddim, blockdim) of `attention_fused` for n queries: BQ per block, (32, WARPS) threads (Ch. 10)."""
    return launch.blocks(n, BQ), (32, WARPS)


def launch_attention_fused(q, k, v, o=None):
    """o = softmax(q k^T / sqrt(d)) v by `attention_fused`, one launch; host or device arrays (Ch. 10)."""
    _check_shapes(q, k, v)
    n, d = q.shape
    o = _like(q, (n, d)) if o is None else o
    grid, block = fused_launch(n)
    trace.launch(attention_fused, grid, block, q, k, v, o, scale_of(d))
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
