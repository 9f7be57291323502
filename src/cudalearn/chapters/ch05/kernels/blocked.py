"""The register-blocked, fused products of Chapter 5's optimised network (`make_blocked`).

Each thread computes a (TM, TN) patch of outputs from (BM, BK) and (BK, BN) shared tiles (the sizes
of a `tiles.Tiles` configuration, the constants `tiles.constants(cfg)`):

* `linear_forward`: Y = X @ W + b, with bias and optional ReLU fused;
* `linear_backward_input`: dA = (dZ @ WT) * (A > 0), pre-transposed weights, ReLU's gradient fused;
* `linear_backward_weight`: dW = X.T @ dZ, X's tile transposed through shared memory with the
  padding column, and db fused;
* `sgd_transpose`: W -= lr dW, b -= lr db, and WT = W.T through a padded tile.

Module-level kernels are built for the GPU configuration (`tiles.GPU_TILES`) and listed in
`SIGNATURES`; `blocked(cfg, pad)` returns the (cached) kernels for any configuration, such as the
small one the simulator uses.
"""

from __future__ import annotations

import functools

from cudalearn.chapters.ch05.kernels.tiles import GPU_TILES, Tiles, constants
from cudalearn.runtime.numba_backend import cuda, float32, uint32

_WGRAD = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1], float32[::1])"
SIGNATURES = {
    "linear_forward": "void(float32[:, ::1], float32[:, ::1], float32[::1], float32[:, ::1], int64)",
    "linear_backward_input": "void(float32[:, ::1], float32[:, ::1], float32[:, ::1], float32[:, ::1])",
    "linear_backward_weight": _WGRAD,
    "linear_backward_weight_unpadded": _WGRAD,
    "sgd_transpose": (
        "void(float32[:, ::1], float32[:, ::1], float32[:, ::1], float32[::1], float32[::1], float32)"
    ),
}


def make_blocked(cfg: Tiles, pad: int = 1):
    """The register-blocked kernels for one Tiles configuration; `pad`: the padding column (Chapter 5).

    Returns a dict name -> kernel: linear_forward, linear_backward_input,
    linear_backward_weight, sgd_transpose. Their constants come from `constants(cfg, pad)`.
    """
    c = {name: value for name, (value, _) in constants(cfg, pad).items()}
    BM, BN, BK, TM, TN, TX, TY, NT = (c[n] for n in ("BM", "BN", "BK", "TM", "TN", "TX", "TY", "NT"))
    A_LOADS, B_LOADS, BKP = c["A_LOADS"], c["B_LOADS"], c["BKP"]
    TT, TR, TTP = c["TT"], c["TR"], c["TTP"]

    # teaching copy: the book shows linear_forward whole, its tile loop written out
    @cuda.jit
    def linear_forward(X, W, b, Y, relu):
        """Y = X @ W + b, then ReLU if relu != 0; X (m, k), W (k, n), b (n,), Y (m, n) float32.

        Each thread keeps a (TM, TN) patch of Y in registers: rows ty + i*TY,
        columns tx + j*TX, so a warp's loads and stores stay coalesced.
        Bias and ReLU are applied to the registers before the only store.
        """
        sA = cuda.shared.array((BM, BK), float32)
        sB = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array((TM, TN), float32)
        a = cuda.local.array(TM, float32)
        w = cuda.local.array(TN, float32)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        t = ty * TX + tx
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN
        m = X.shape[0]
        K = X.shape[1]
        n = W.shape[1]
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0.0)
        for k0 in range(0, K, BK):
            for p in range(A_LOADS):  # the (BM, BK) tile of X, rows of BK neighbours
                r = (t + p * NT) // BK
                c = (t + p * NT) % BK
                inside = row0 + r < m and k0 + c < K
                sA[r, c] = X[row0 + r, k0 + c] if inside else float32(0.0)
            for p in range(B_LOADS):  # the (BK, BN) tile of W, rows of BN neighbours
                r = (t + p * NT) // BN
                c = (t + p * NT) % BN
                inside = k0 + r < K and col0 + c < n
                sB[r, c] = W[k0 + r, col0 + c] if inside else float32(0.0)
            cuda.syncthreads()
            for kk in range(BK):
                k = uint32(kk)  # unsigned indices: no code for negative ones, immediate offsets
                for i in range(TM):
                    a[i] = sA[uint32(ty + i * TY), k]
                for j in range(TN):
                    w[j] = sB[k, uint32(tx + j * TX)]
                for i in range(TM):
                    for j in range(TN):
                        acc[i, j] += a[i] * w[j]
            cuda.syncthreads()
        for i in range(TM):
            r = row0 + ty + i * TY
            for j in range(TN):
                c = col0 + tx + j * TX
                if r < m and c < n:
                    v = acc[i, j] + b[c]
                    if relu != 0 and v < float32(0.0):
                        v = float32(0.0)
                    Y[r, c] = v

    # teaching copy: linear_forward's tile loop, which the book shows written out there
    @cuda.jit
    def linear_backward_input(dZ, WT, A, dA):
        """dA = (dZ @ WT) * (A > 0); dZ (m, n), WT (n, k), A and dA (m, k) float32.

        The gradient of the previous layer's pre-activation: WT is the
        weight matrix kept transposed, so its rows are read whole
        (coalesced), and the ReLU's gradient (A > 0) is applied in registers.
        """
        sA = cuda.shared.array((BM, BK), float32)
        sB = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array((TM, TN), float32)
        a = cuda.local.array(TM, float32)
        w = cuda.local.array(TN, float32)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        t = ty * TX + tx
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN
        m = dZ.shape[0]
        K = dZ.shape[1]
        n = WT.shape[1]
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0.0)
        for k0 in range(0, K, BK):
            for p in range(A_LOADS):
                r = (t + p * NT) // BK
                c = (t + p * NT) % BK
                inside = row0 + r < m and k0 + c < K
                sA[r, c] = dZ[row0 + r, k0 + c] if inside else float32(0.0)
            for p in range(B_LOADS):
                r = (t + p * NT) // BN
                c = (t + p * NT) % BN
                inside = k0 + r < K and col0 + c < n
                sB[r, c] = WT[k0 + r, col0 + c] if inside else float32(0.0)
            cuda.syncthreads()
            for kk in range(BK):
                k = uint32(kk)  # unsigned indices: no code for negative ones, immediate offsets
                for i in range(TM):
                    a[i] = sA[uint32(ty + i * TY), k]
                for j in range(TN):
                    w[j] = sB[k, uint32(tx + j * TX)]
                for i in range(TM):
                    for j in range(TN):
                        acc[i, j] += a[i] * w[j]
            cuda.syncthreads()
        for i in range(TM):
            r = row0 + ty + i * TY
            for j in range(TN):
                c = col0 + tx + j * TX
                if r < m and c < n:
                    dA[r, c] = acc[i, j] if A[r, c] > float32(0.0) else float32(0.0)

    # teaching copy: the book shows linear_backward_weight whole, its tile loop written out
    @cuda.jit
    def linear_backward_weight(X, dZ, dW, db):
        """dW = X.T @ dZ and db = dZ summed over rows; X (m, k), dZ (m, n), dW (k, n), db (n,).

        The product needs X transposed. Each X tile is read along its rows
        (coalesced) and stored transposed into sA (BM, BK + pad): with the
        padding column, neighbouring threads' stores land in different
        banks. Blocks of the first row of tiles also sum dZ's columns from
        the tiles they load anyway: the bias gradient costs no extra pass.
        """
        sA = cuda.shared.array((BM, BKP), float32)
        sB = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array((TM, TN), float32)
        a = cuda.local.array(TM, float32)
        w = cuda.local.array(TN, float32)
        dbacc = cuda.local.array(TN, float32)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        t = ty * TX + tx
        row0 = cuda.blockIdx.y * BM  # rows of dW: input features
        col0 = cuda.blockIdx.x * BN  # columns of dW: output features
        batch = X.shape[0]
        k_in = X.shape[1]
        n = dZ.shape[1]
        sums = cuda.blockIdx.y == 0 and ty == 0  # these threads also sum dZ's columns
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0.0)
        for j in range(TN):
            dbacc[j] = float32(0.0)
        for s0 in range(0, batch, BK):  # the sum runs over the batch
            # X[s0:s0+BK, row0:row0+BM], read along rows, stored transposed
            for p in range(A_LOADS):
                r = (t + p * NT) // BM
                c = (t + p * NT) % BM
                inside = s0 + r < batch and row0 + c < k_in
                sA[c, r] = X[s0 + r, row0 + c] if inside else float32(0.0)
            for p in range(B_LOADS):
                r = (t + p * NT) // BN
                c = (t + p * NT) % BN
                inside = s0 + r < batch and col0 + c < n
                sB[r, c] = dZ[s0 + r, col0 + c] if inside else float32(0.0)
            cuda.syncthreads()
            for kk in range(BK):
                k = uint32(kk)  # unsigned indices: no code for negative ones, immediate offsets
                for i in range(TM):
                    a[i] = sA[uint32(ty + i * TY), k]
                for j in range(TN):
                    w[j] = sB[k, uint32(tx + j * TX)]
                for i in range(TM):
                    for j in range(TN):
                        acc[i, j] += a[i] * w[j]
                if sums:
                    for j in range(TN):
                        dbacc[j] += w[j]
            cuda.syncthreads()
        for i in range(TM):
            r = row0 + ty + i * TY
            for j in range(TN):
                c = col0 + tx + j * TX
                if r < k_in and c < n:
                    dW[r, c] = acc[i, j]
        if sums:
            for j in range(TN):
                c = col0 + tx + j * TX
                if c < n:
                    db[c] = dbacc[j]

    @cuda.jit
    def sgd_transpose(W, dW, WT, b, db, lr):
        """W -= lr * dW, WT = W.T, b -= lr * db; W, dW (k, n), WT (n, k), b, db (n,), lr float32.

        One launch updates a layer and keeps its transposed copy for the next
        backward pass. The transposed writes go through a (TT, TT + 1) shared
        tile, so both the global reads and the global writes are coalesced,
        and the column reads of the tile are free of bank conflicts.
        """
        tile = cuda.shared.array((TT, TTP), float32)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        r0 = cuda.blockIdx.y * TT
        c0 = cuda.blockIdx.x * TT
        k = W.shape[0]
        n = W.shape[1]
        for i in range(0, TT, TR):
            r = r0 + ty + i
            c = c0 + tx
            if r < k and c < n:
                v = W[r, c] - lr * dW[r, c]
                W[r, c] = v
                tile[ty + i, tx] = v
        if cuda.blockIdx.y == 0 and ty == 0 and c0 + tx < n:
            b[c0 + tx] -= lr * db[c0 + tx]
        cuda.syncthreads()
        for i in range(0, TT, TR):
            r = c0 + ty + i  # a row of WT is a column of W
            c = r0 + tx
            if r < n and c < k:
                WT[r, c] = tile[tx, ty + i]

    return {
        "linear_forward": linear_forward,
        "linear_backward_input": linear_backward_input,
        "linear_backward_weight": linear_backward_weight,
        "sgd_transpose": sgd_transpose,
    }


@functools.cache
def blocked(cfg: Tiles = GPU_TILES, pad: int = 1):
    """The cached register-blocked kernels for one configuration, as a dict name -> kernel (Chapter 5)."""
    return make_blocked(cfg, pad)


# The GPU configuration, at module level (compiled to PTX by the tests) --------------------------

_gpu = blocked(GPU_TILES, 1)
linear_forward = _gpu["linear_forward"]
linear_backward_input = _gpu["linear_backward_input"]
linear_backward_weight = _gpu["linear_backward_weight"]
sgd_transpose = _gpu["sgd_transpose"]
#: The same weight-gradient kernel without the padding column, to count its bank conflicts.
linear_backward_weight_unpadded = blocked(GPU_TILES, 0)["linear_backward_weight"]
del _gpu
