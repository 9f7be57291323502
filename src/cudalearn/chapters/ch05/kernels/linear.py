"""The shallow network's matrix products (Chapter 5): naive baselines, tiled and fused kernels.

Shapes follow the network of `cudalearn.chapters.ch05.model`: a batch X (m, k) times a
weight matrix W (k, n) plus a bias b (n,) gives Z (m, n). All float32.

Naive baselines (one thread per output element, global memory only):

* `matmul_bt_naive`: C = A @ B.T, the backward pass's dX = dZ @ W.T read
  from W as it is stored: neighbouring threads read W a whole row apart;
* `matmul_at_naive`: C = A.T @ B, the weight gradient dW = X.T @ dZ.

(The naive forward product is Chapter 2's `matmul_naive`.)

Tiled kernels, made by factories because a shared array's shape must be a
compile-time constant (Chapter 3):

* `make_tiled(TILE)`: `matmul_tiled_plain` (C = A @ B, no epilogue) and `linear_relu_tiled`
  (Y = relu(X @ W + b)), (TILE, TILE) threads, one output each; the second
  is the first with bias and ReLU applied before the only store (the lab's
  kernel);
* `make_blocked(cfg)`: register-blocked kernels, each thread computing a
  (TM, TN) patch of outputs from (BM, BK) and (BK, BN) shared tiles:
  `linear_forward` (bias and optional ReLU fused), `linear_backward_input`
  (dA = (dZ @ WT) * (A > 0): pre-transposed weights, ReLU's gradient
  fused), `linear_backward_weight` (dW = X.T @ dZ with X's tile transposed
  through shared memory with the padding column, and db fused),
  `sgd_transpose` (W -= lr dW, b -= lr db, and WT = W.T through a padded
  tile).

Module-level kernels are built for the GPU configuration (`GPU_TILES`) and
listed in `SIGNATURES`; `blocked(cfg)` and `tiled(TILE)` return (cached)
kernels for any configuration, such as the small one the simulator uses.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from cudalearn.runtime import launch as grids
from cudalearn.runtime.numba_backend import cuda, float32, int64, uint32

_MM = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"
_WGRAD = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1], float32[::1])"
SIGNATURES = {
    "matmul_bt_naive": _MM,
    "matmul_at_naive": _MM,
    "matmul_tiled_plain": _MM,
    "linear_relu_tiled": "void(float32[:, ::1], float32[:, ::1], float32[::1], float32[:, ::1])",
    "linear_forward": "void(float32[:, ::1], float32[:, ::1], float32[::1], float32[:, ::1], int64)",
    "linear_backward_input": "void(float32[:, ::1], float32[:, ::1], float32[:, ::1], float32[:, ::1])",
    "linear_backward_weight": _WGRAD,
    "linear_backward_weight_unpadded": _WGRAD,
    "sgd_transpose": (
        "void(float32[:, ::1], float32[:, ::1], float32[:, ::1], float32[::1], float32[::1], float32)"
    ),
}


# Naive baselines -------------------------------------------------------------------------------


@cuda.jit
def matmul_bt_naive(A, B, C):
    """C = A @ B.T, thread (x, y) on C[y, x]; A (m, k), B (n, k), C (m, n) float32 (Chapter 5).

    The backward pass's dX = dZ @ W.T with W (in, out) as stored: at each
    step the 32 threads of a warp (neighbouring x) read B[x, k] for 32
    neighbouring x, i.e. 32 values a whole row of B apart: 32 sectors.
    """
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = float32(0.0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[col, k]
        C[row, col] = acc


@cuda.jit
def matmul_at_naive(A, B, C):
    """C = A.T @ B, thread (x, y) on C[y, x]; A (k, m), B (k, n), C (m, n) float32 (Chapter 5).

    The weight gradient dW = X.T @ dZ: at each step a warp reads one value
    of A (the same for all its threads: a broadcast) and 32 neighbouring
    values of a row of B (coalesced).
    """
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = float32(0.0)
        for k in range(A.shape[0]):
            acc += A[k, row] * B[k, col]
        C[row, col] = acc


# Tiled, one output per thread (Chapter 3's tiles, plus the fused epilogue) ---------------------


def make_tiled(TILE):
    """(matmul_tiled_plain, linear_relu_tiled): (TILE, TILE) blocks and shared tiles (Chapter 5).

    Launch both with blocks of (TILE, TILE) threads and a grid of
    (ceil(n / TILE), ceil(m / TILE)) blocks; thread (x, y) computes output
    [by * TILE + y, bx * TILE + x]. Tiles that stick out of a matrix are
    filled with zeros, so any sizes work.
    """

    @cuda.jit
    def matmul_tiled_plain(A, B, C):
        """C = A @ B through (TILE, TILE) shared tiles; A (m, k), B (k, n), C (m, n) float32."""
        sA = cuda.shared.array((TILE, TILE), float32)
        sB = cuda.shared.array((TILE, TILE), float32)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        row = cuda.blockIdx.y * TILE + ty
        col = cuda.blockIdx.x * TILE + tx
        K = A.shape[1]
        acc = float32(0.0)
        for k0 in range(0, K, TILE):
            sA[ty, tx] = A[row, k0 + tx] if row < A.shape[0] and k0 + tx < K else float32(0.0)
            sB[ty, tx] = B[k0 + ty, col] if k0 + ty < K and col < B.shape[1] else float32(0.0)
            cuda.syncthreads()
            for k in range(TILE):
                acc += sA[ty, k] * sB[k, tx]
            cuda.syncthreads()
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc

    @cuda.jit
    def linear_relu_tiled(X, W, b, Y):
        """Y = relu(X @ W + b) in one launch; X (m, k), W (k, n), b (n,), Y (m, n) float32."""
        sX = cuda.shared.array((TILE, TILE), float32)
        sW = cuda.shared.array((TILE, TILE), float32)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        row = cuda.blockIdx.y * TILE + ty
        col = cuda.blockIdx.x * TILE + tx
        K = X.shape[1]
        acc = float32(0.0)
        for k0 in range(0, K, TILE):
            sX[ty, tx] = X[row, k0 + tx] if row < X.shape[0] and k0 + tx < K else float32(0.0)
            sW[ty, tx] = W[k0 + ty, col] if k0 + ty < K and col < W.shape[1] else float32(0.0)
            cuda.syncthreads()
            for k in range(TILE):
                acc += sX[ty, k] * sW[k, tx]
            cuda.syncthreads()
        if row < Y.shape[0] and col < Y.shape[1]:
            Y[row, col] = max(acc + b[col], float32(0.0))  # the epilogue: bias and ReLU in registers

    return matmul_tiled_plain, linear_relu_tiled


@functools.cache
def tiled(TILE: int):
    """The cached (matmul_tiled_plain, linear_relu_tiled) pair for one TILE (Chapter 5)."""
    return make_tiled(TILE)


def tiled_launch(m: int, n: int, TILE: int):
    """(griddim, blockdim) of the tiled kernels for an (m, n) output (Chapter 5)."""
    return grids.square(m, n, TILE)


# Register-blocked, fused kernels ---------------------------------------------------------------


@dataclass(frozen=True)
class Tiles:
    """Tile sizes of the register-blocked kernels (Chapter 5).

    A block computes a (bm, bn) tile of the output with (bn // tn, bm // tm)
    threads, each thread a (tm, tn) patch held in registers; the k dimension
    advances bk at a time through shared memory. The SGD kernel transposes
    (tt, tt) tiles with (tt, tr) threads.
    """

    bm: int = 64
    bn: int = 64
    bk: int = 16
    tm: int = 4
    tn: int = 4
    tt: int = 32
    tr: int = 8

    @property
    def threads(self) -> tuple[int, int]:
        """blockdim (x, y) of the matrix-product kernels."""
        return (self.bn // self.tn, self.bm // self.tm)

    def thread_outputs(self, tx: int, ty: int) -> tuple[list[int], list[int]]:
        """(rows, columns) of the block's output tile that thread (tx, ty) computes: strided by TY, TX."""
        threads_x, threads_y = self.threads
        return [ty + i * threads_y for i in range(self.tm)], [tx + j * threads_x for j in range(self.tn)]

    def launch(self, m: int, n: int):
        """(griddim, blockdim) of a matrix-product kernel for an (m, n) output."""
        return grids.grid_2d(m, n, self.threads, per_thread=(self.tn, self.tm))

    def sgd_launch(self, k: int, n: int):
        """(griddim, blockdim) of `sgd_transpose` for a (k, n) weight matrix: TT / TR rows a thread."""
        return grids.grid_2d(k, n, (self.tt, self.tr), per_thread=(1, self.tt // self.tr))


#: The GPU configuration: 64 x 64 output tiles, 256 threads each computing 4 x 4 outputs.
GPU_TILES = Tiles()
#: The simulator's configuration: the same kernels on 8 x 8 tiles (16 threads, 2 x 2 outputs each).
SIM_TILES = Tiles(bm=8, bn=8, bk=4, tm=2, tn=2, tt=8, tr=2)


def constants(cfg: Tiles = GPU_TILES, pad: int = 1) -> dict[str, tuple[int, str]]:
    """{name: (value, meaning)} of every constant the register-blocked kernels use (Chapter 5).

    The one place these are computed: `make_blocked` builds its kernels from
    them and Chapter 5 prints them as a table.
    """
    TX, TY = cfg.threads
    NT = TX * TY
    if cfg.bm * cfg.bk % NT or cfg.bk * cfg.bn % NT or cfg.tt % cfg.tr:
        raise ValueError(f"tile sizes {cfg} do not divide evenly among the threads")
    return {
        "BM": (cfg.bm, "rows of the output tile one block computes"),
        "BN": (cfg.bn, "columns of that output tile"),
        "BK": (cfg.bk, "step along k: the shared tiles are (BM, BK) of A and (BK, BN) of B"),
        "TM": (cfg.tm, "rows of the patch of outputs each thread keeps in registers"),
        "TN": (cfg.tn, "columns of that patch"),
        "TX": (TX, "threads of a block along x (columns): BN / TN"),
        "TY": (TY, "threads of a block along y (rows): BM / TM"),
        "NT": (NT, "threads of a block: TX * TY"),
        "A_LOADS": (cfg.bm * cfg.bk // NT, "elements of the A tile each thread copies to shared memory"),
        "B_LOADS": (cfg.bk * cfg.bn // NT, "elements of the B tile each thread copies"),
        "BKP": (cfg.bk + pad, "row length of the transposed tile in the weight gradient: BK + padding"),
        "TT": (cfg.tt, "side of the square tile that sgd_transpose transposes"),
        "TR": (cfg.tr, "rows of threads in sgd_transpose's block: each thread does TT / TR rows"),
        "TTP": (cfg.tt + 1, "row length of that tile: TT plus the padding column"),
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

    @cuda.jit
    def linear_backward_weight(X, dZ, dW, db):
        """dW = X.T @ dZ and db = dZ summed over rows; X (m, k), dZ (m, n), dW (k, n), db (n,) float32.

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
            for p in range(A_LOADS):  # X[s0:s0+BK, row0:row0+BM], read along rows, stored transposed
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


# The tuned network's products: Chapter 6's 128-bit shared reads in Chapter 5's kernels ------------

#: Tiles of the tuned products (`make_blocked_vec`): 64 x 64 outputs, BK = 32, 4 x 4 outputs a thread.
VEC_TILES = Tiles(bk=32)
VEC_SIM_TILES = Tiles(bm=8, bn=8, bk=4, tm=4, tn=4, tt=8, tr=2)
#: Results of at most SKINNY_COLS columns (the 10 logits, their weight gradient) use small tiles of one
#: output a thread instead: a 64-column tile would leave most of a block idle, and few blocks to spread.
#: Under the simulator the limit is 10, so that the tiny network's hidden layers take the main tiles.
SKINNY_COLS, SKINNY_SIM_COLS = 32, 10
SKINNY_TILES = Tiles(bm=16, bn=16, bk=64, tm=1, tn=1)
SKINNY_SIM_TILES = Tiles(bm=8, bn=4, bk=8, tm=1, tn=1, tt=8, tr=2)


def make_blocked_vec(cfg: Tiles):
    """make_blocked's three products for `cfg`, each thread's outputs in groups of four (Chapter 5).

    Thread (tx, ty) owns rows `tile_steps.vec_offset(i, 4 ty, TY)` and columns `vec_offset(j, 4 tx, TX)`
    of the block's tile: Chapter 6's layout, so each step along k reads its TM + TN values with
    (TM + TN) / 4 128-bit shared loads. The A tile is kept transposed (sAt[k, r], rows of BM + 4), and
    the tile's BK steps are written out (`tile_steps.make_tile_steps`). In the weight gradient the X
    tile needs no transposing at all: sAt[k, r] = X[s0 + k, row0 + r]. Same arguments, launches
    (`cfg.launch`) and results as `make_blocked`'s kernels; `sgd_transpose` is `blocked(cfg)`'s.
    """
    from cudalearn.chapters.ch05.kernels.tile_steps import VEC, make_tile_steps, vec_offset

    TX, TY = cfg.threads
    NT = TX * TY
    BM, BN, BK, TM, TN = cfg.bm, cfg.bn, cfg.bk, cfg.tm, cfg.tn
    if TM % VEC or TN % VEC or BM * BK % NT or BK * BN % NT:
        raise ValueError(f"{cfg}: tm and tn must be multiples of {VEC}, and the tiles must split evenly")
    A_LOADS, B_LOADS = BM * BK // NT, BK * BN // NT
    WIDTH = BM + VEC  # rows of sAt start on 16-byte boundaries, for the 128-bit reads
    # A warp stores its part of the transposed A tile as G neighbouring k of 32 / G rows: with rows of
    # BM + 4 floats, k = 0..7 of rows r..r+3 fall in 32 different banks (k of one row, as in
    # make_blocked, would share 8 banks: a 4-way conflict), and each row's G floats of X are one
    # 32-byte sector.
    G = 8 if BK % 8 == 0 else BK
    steps = make_tile_steps(BK, TM, TN, TX, TY)
    steps_db = make_tile_steps(BK, TM, TN, TX, TY, colsum=True)

    @cuda.jit(device=True, inline="always")
    def load_a_transposed(X, sAt, row0, k0, t, m, K):
        """sAt[c, r] = X[row0 + r, k0 + c], zeros outside X: the A tile of forward and backward_input."""
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
        """dW = X.T @ dZ and db = dZ's column sums, as linear_backward_weight; 128-bit shared reads."""
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
            for p in range(A_LOADS):  # X[s0 + k, row0 + r] is already the transposed tile: sAt[k, r]
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


def tuned_tiles_for_mode(mode: str | None = None) -> tuple[Tiles, Tiles, int]:
    """(VEC_TILES, SKINNY_TILES, SKINNY_COLS) on a GPU, their simulator values under the simulator (Ch. 5)."""
    from cudalearn.runtime.device import mode as _mode

    if (mode or _mode()) == "sim":
        return VEC_SIM_TILES, SKINNY_SIM_TILES, SKINNY_SIM_COLS
    return VEC_TILES, SKINNY_TILES, SKINNY_COLS


def tiles_for_mode(mode: str | None = None) -> Tiles:
    """GPU_TILES on a GPU (and for PTX), SIM_TILES under the simulator (Chapter 5)."""
    from cudalearn.runtime.device import mode as _mode

    return SIM_TILES if (mode or _mode()) == "sim" else GPU_TILES


# The GPU configuration, at module level (compiled to PTX by the tests) --------------------------

TILE = 16  #: tile of the one-output-per-thread kernels on a GPU
matmul_tiled_plain, linear_relu_tiled = tiled(TILE)
_gpu = blocked(GPU_TILES, 1)
linear_forward = _gpu["linear_forward"]
linear_backward_input = _gpu["linear_backward_input"]
linear_backward_weight = _gpu["linear_backward_weight"]
sgd_transpose = _gpu["sgd_transpose"]
#: The same weight-gradient kernel without the padding column, to count its bank conflicts.
linear_backward_weight_unpadded = blocked(GPU_TILES, 0)["linear_backward_weight"]
del _gpu
