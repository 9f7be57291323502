"""The tuned network's products (deep dive 5b): 128-bit shared reads (Chapter 6) in its kernels.

`make_blocked_vec(cfg)` builds `make_blocked`'s three products with each thread's outputs in groups
of four, so that a step along k reads them with 128-bit shared loads (`tile_steps`); `blocked_vec(cfg)`
caches them. Their tile sizes are `tiles.VEC_TILES` (and `tiles.SKINNY_TILES` for the narrow results,
which run `make_blocked`'s kernels): `tiles.tuned_tiles_for_mode()`. `cudalearn.chapters.ch05.model`'s
`TunedMLP` runs them.
"""

from __future__ import annotations

import functools

from cudalearn.chapters.ch05.kernels.blocked import blocked
from cudalearn.chapters.ch05.kernels.tiles import VEC_TILES, Tiles
from cudalearn.runtime.numba_backend import cuda, float32, int64, uint32

#: made per configuration by a factory, so none is listed here: tests/chapters/ch05/test_mlp.py compiles
#: blocked_vec(VEC_TILES)'s kernels for sm_75 and sm_90
SIGNATURES: dict[str, str] = {}


# teaching copy: the book shows make_blocked_vec whole, its three kernels' set-up and stores written out
def make_blocked_vec(cfg: Tiles):
    """make_blocked's three products for `cfg`, each thread's outputs in groups of four (Chapter 5).

    Thread (tx, ty) owns rows `tile_steps.vec_offset(i, 4 ty, TY)` and columns
    `vec_offset(j, 4 tx, TX)` of the block's tile: Chapter 6's layout, so each step along k reads
    its TM + TN values with (TM + TN) / 4 128-bit shared loads. The A tile is kept transposed
    (sAt[k, r], rows of BM + 4), and the tile's BK steps are written out
    (`tile_steps.make_tile_steps`). In the weight gradient the X tile needs no transposing at all:
    sAt[k, r] = X[s0 + k, row0 + r]. Same arguments, launches (`cfg.launch`) and results as
    `make_blocked`'s kernels; `sgd_transpose` is `blocked(cfg)`'s.
    """
    from cudalearn.chapters.ch05.kernels.tile_steps import VEC, make_tile_steps, vec_offset

    TX, TY = cfg.threads
    NT = TX * TY
    BM, BN, BK, TM, TN = cfg.bm, cfg.bn, cfg.bk, cfg.tm, cfg.tn
    if TM % VEC or TN % VEC or BM * BK % NT or BK * BN % NT:
        why = f"tm and tn must be multiples of {VEC}, and the tiles must split evenly"
        raise ValueError(f"{cfg}: {why}")
    A_LOADS, B_LOADS = BM * BK // NT, BK * BN // NT
    WIDTH = BM + VEC  # rows of sAt start on 16-byte boundaries, for the 128-bit reads
    # A warp stores its part of the transposed A tile as G neighbouring k of 32 / G rows: with rows
    # of BM + 4 floats, k = 0..7 of rows r..r+3 fall in 32 different banks (k of one row, as in
    # make_blocked, would share 8 banks: a 4-way conflict), and each row's G floats of X are one
    # 32-byte sector where K is a multiple of 8 (every product but the logits layer's input
    # gradient, K = 10, whose 40-byte rows straddle sectors).
    G = 8 if BK % 8 == 0 else BK
    steps = make_tile_steps(BK, TM, TN, TX, TY)
    steps_db = make_tile_steps(BK, TM, TN, TX, TY, colsum=True)

    @cuda.jit(device=True, inline="always")
    def load_a_transposed(X, sAt, row0, k0, t, m, K):
        """sAt[c, r] = X[row0 + r, k0 + c], zeros outside X: the A tile of the first two kernels."""
        for p in range(A_LOADS):
            e = t + p * NT
            r, c = (e // G) % BM, (e // (G * BM)) * G + e % G
            v = float32(0.0)
            if row0 + r < m and k0 + c < K:
                v = X[row0 + r, k0 + c]
            sAt[c, r] = v

    @cuda.jit(device=True, inline="always")
    def load_b(W, sB, k0, col0, t, K, n):
        """sB[r, c] = W[k0 + r, col0 + c], zeros outside W."""
        for p in range(B_LOADS):
            e = t + p * NT
            r, c = e // BN, e % BN
            v = float32(0.0)
            if k0 + r < K and col0 + c < n:
                v = W[k0 + r, col0 + c]
            sB[r, c] = v

    @cuda.jit(device=True, inline="always")
    def tile_product(X, W, sAt, sB, a, w, acc, row0, col0, t, c0, r0):
        """acc = this thread's outputs of X[row0:row0 + BM] @ W[:, col0:col0 + BN] (Ch. 5)."""
        m, K, n = X.shape[0], X.shape[1], W.shape[1]
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0.0)
        for k0 in range(0, K, BK):
            load_a_transposed(X, sAt, row0, k0, t, m, K)
            load_b(W, sB, k0, col0, t, K, n)
            cuda.syncthreads()
            steps(sAt, sB, uint32(0), c0, r0, a, w, acc)
            cuda.syncthreads()

    @cuda.jit
    def linear_forward_vec(X, W, b, Y, relu):
        """Y = X @ W + b, then ReLU if relu != 0, as linear_forward; 128-bit shared reads."""
        sAt = cuda.shared.array((BK, WIDTH), float32)
        sB = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array((TM, TN), float32)
        a = cuda.local.array(TM, float32)
        w = cuda.local.array(TN, float32)
        tx, ty = int64(uint32(cuda.threadIdx.x)), int64(uint32(cuda.threadIdx.y))
        t = ty * TX + tx
        row0 = int64(uint32(cuda.blockIdx.y)) * BM
        col0 = int64(uint32(cuda.blockIdx.x)) * BN
        m, n = X.shape[0], W.shape[1]
        c0, r0 = tx * VEC, ty * VEC
        tile_product(X, W, sAt, sB, a, w, acc, row0, col0, t, c0, r0)
        for i in range(TM):
            r = row0 + vec_offset(i, r0, TY)
            for j in range(TN):
                c = col0 + vec_offset(j, c0, TX)
                if r < m and c < n:
                    v = acc[i, j] + b[c]
                    if relu != 0 and v < float32(0.0):
                        v = float32(0.0)
                    Y[r, c] = v

    @cuda.jit
    def linear_backward_input_vec(dZ, WT, A, dA):
        """dA = (dZ @ WT) * (A > 0), as linear_backward_input; 128-bit shared reads."""
        sAt = cuda.shared.array((BK, WIDTH), float32)
        sB = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array((TM, TN), float32)
        a = cuda.local.array(TM, float32)
        w = cuda.local.array(TN, float32)
        tx, ty = int64(uint32(cuda.threadIdx.x)), int64(uint32(cuda.threadIdx.y))
        t = ty * TX + tx
        row0 = int64(uint32(cuda.blockIdx.y)) * BM
        col0 = int64(uint32(cuda.blockIdx.x)) * BN
        m, n = dZ.shape[0], WT.shape[1]
        c0, r0 = tx * VEC, ty * VEC
        tile_product(dZ, WT, sAt, sB, a, w, acc, row0, col0, t, c0, r0)
        for i in range(TM):
            r = row0 + vec_offset(i, r0, TY)
            for j in range(TN):
                c = col0 + vec_offset(j, c0, TX)
                if r < m and c < n:
                    dA[r, c] = acc[i, j] if A[r, c] > float32(0.0) else float32(0.0)

    @cuda.jit
    def linear_backward_weight_vec(X, dZ, dW, db):
        """dW = X.T @ dZ and db = dZ's column sums, as linear_backward_weight; 128-bit reads."""
        sAt = cuda.shared.array((BK, WIDTH), float32)
        sB = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array((TM, TN), float32)
        a = cuda.local.array(TM, float32)
        w = cuda.local.array(TN, float32)
        dbacc = cuda.local.array(TN, float32)
        tx, ty = int64(uint32(cuda.threadIdx.x)), int64(uint32(cuda.threadIdx.y))
        t = ty * TX + tx
        row0 = int64(uint32(cuda.blockIdx.y)) * BM  # rows of dW: input features
        col0 = int64(uint32(cuda.blockIdx.x)) * BN  # columns of dW: output features
        batch, k_in, n = X.shape[0], X.shape[1], dZ.shape[1]
        c0, r0 = tx * VEC, ty * VEC
        sums = cuda.blockIdx.y == 0 and ty == 0  # these threads also sum dZ's columns
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0.0)
        for j in range(TN):
            dbacc[j] = float32(0.0)
        for s0 in range(0, batch, BK):  # the sum runs over the batch
            # X[s0 + k, row0 + r] is already the transposed tile: sAt[k, r]
            for p in range(A_LOADS):
                e = t + p * NT
                k, r = e // BM, e % BM
                v = float32(0.0)
                if s0 + k < batch and row0 + r < k_in:
                    v = X[s0 + k, row0 + r]
                sAt[k, r] = v
            load_b(dZ, sB, s0, col0, t, batch, n)
            cuda.syncthreads()
            steps_db(sAt, sB, uint32(0), c0, r0, a, w, acc, sums, dbacc)
            cuda.syncthreads()
        for i in range(TM):
            r = row0 + vec_offset(i, r0, TY)
            for j in range(TN):
                c = col0 + vec_offset(j, c0, TX)
                if r < k_in and c < n:
                    dW[r, c] = acc[i, j]
        if sums:
            for j in range(TN):
                c = col0 + vec_offset(j, c0, TX)
                if c < n:
                    db[c] = dbacc[j]

    return {
        "linear_forward": linear_forward_vec,
        "linear_backward_input": linear_backward_input_vec,
        "linear_backward_weight": linear_backward_weight_vec,
        "sgd_transpose": blocked(cfg)["sgd_transpose"],
    }


@functools.cache
def blocked_vec(cfg: Tiles = VEC_TILES):
    """The cached kernels of `make_blocked_vec(cfg)`, a dict name -> kernel (Chapter 5)."""
    return make_blocked_vec(cfg)
