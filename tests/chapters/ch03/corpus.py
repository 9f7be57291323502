"""Lab 3 (tiling): wrong answers students write, and valid alternatives."""

from mutations import valid, wrong

# --- Exercise 1: global_bytes_tiled -----------------------------------------------------------------

BYTES = [
    wrong(
        "bytes-float",
        "global_bytes_tiled",
        "divides with / and returns a float (2.0e6, not an int)",
        r"a float.*asks for an int",
        ("blocks = (n // tile) ** 2", "blocks = (n / tile) ** 2"),
        ("2 * (n // tile)", "2 * (n / tile)"),
    ),
    wrong(
        "bytes-naive",
        "global_bytes_tiled",
        "returns the naive kernel's traffic, forgetting that a tile serves many outputs",
        r"naive kernel's traffic.*divided by the tile size",
        code="def global_bytes_tiled(n, tile):\n    return 2 * n**3 * 4\n",
    ),
    wrong(
        "bytes-elements",
        "global_bytes_tiled",
        "counts float32 values instead of bytes",
        r"float32 values, not bytes",
        ("* tile * tile * 4", "* tile * tile"),
    ),
    wrong(
        "bytes-one-matrix",
        "global_bytes_tiled",
        "counts the tiles of A only",
        r"one matrix.*A AND of B",
        ("tiles_per_block = 2 * (n // tile)", "tiles_per_block = n // tile"),
    ),
    wrong(
        "bytes-tile-twice",
        "global_bytes_tiled",
        "divides the naive count by tile * tile",
        r"divided by the tile size twice",
        code="def global_bytes_tiled(n, tile):\n    return 2 * n**3 * 4 // (tile * tile)\n",
    ),
    wrong(
        "bytes-hardcoded-16",
        "global_bytes_tiled",
        "hard-codes the lab's tile of 16",
        r"global_bytes_tiled\(1024, 32\).*expected",
        code="def global_bytes_tiled(n, tile):\n    return 2 * n**3 * 4 // 16\n",
    ),
    valid(
        "bytes-closed-form",
        "global_bytes_tiled",
        "the closed form 8 n^3 / tile",
        code="def global_bytes_tiled(n, tile):\n    return 8 * n**3 // tile\n",
    ),
    valid(
        "bytes-int-of-float",
        "global_bytes_tiled",
        "float arithmetic turned into an int at the end",
        code="def global_bytes_tiled(n, tile):\n    return int(2 * n**3 * 4 / tile)\n",
    ),
]

# --- Exercise 2: matmul_tiled -------------------------------------------------------------------------

EARLY_RETURN = """TILE = 16


@cuda.jit
def matmul_tiled(A, B, C):
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    if row >= C.shape[0] or col >= C.shape[1]:
        return
    K = A.shape[1]
    acc = float32(0.0)
    for t in range((K + TILE - 1) // TILE):
        k0 = t * TILE
        a = float32(0.0)
        if k0 + tx < K:
            a = A[row, k0 + tx]
        b = float32(0.0)
        if k0 + ty < K:
            b = B[k0 + ty, col]
        sA[ty, tx] = a
        sB[ty, tx] = b
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    C[row, col] = acc
"""

NO_ZERO_FILL = """TILE = 16


@cuda.jit
def matmul_tiled(A, B, C):
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    K = A.shape[1]
    acc = float32(0.0)
    for t in range((K + TILE - 1) // TILE):
        k0 = t * TILE
        if row < A.shape[0] and k0 + tx < K:
            sA[ty, tx] = A[row, k0 + tx]
        if k0 + ty < K and col < B.shape[1]:
            sB[ty, tx] = B[k0 + ty, col]
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc
"""

BARRIER_IN_GUARD = """TILE = 16


@cuda.jit
def matmul_tiled(A, B, C):
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    K = A.shape[1]
    if row < C.shape[0] and col < C.shape[1]:
        acc = float32(0.0)
        for t in range((K + TILE - 1) // TILE):
            k0 = t * TILE
            a = float32(0.0)
            if k0 + tx < K:
                a = A[row, k0 + tx]
            b = float32(0.0)
            if k0 + ty < K:
                b = B[k0 + ty, col]
            sA[ty, tx] = a
            sB[ty, tx] = b
            cuda.syncthreads()
            for k in range(TILE):
                acc += sA[ty, k] * sB[k, tx]
            cuda.syncthreads()
        C[row, col] = acc
"""

TILE8_IN_16_BLOCKS = """TILE = 16


@cuda.jit
def matmul_tiled(A, B, C):
    sA = cuda.shared.array((8, 8), float32)
    sB = cuda.shared.array((8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    K = A.shape[1]
    acc = float32(0.0)
    for t in range((K + 7) // 8):
        k0 = t * 8
        a = float32(0.0)
        if row < A.shape[0] and k0 + tx < K:
            a = A[row, k0 + tx]
        b = float32(0.0)
        if k0 + ty < K and col < B.shape[1]:
            b = B[k0 + ty, col]
        sA[ty, tx] = a
        sB[ty, tx] = b
        cuda.syncthreads()
        for k in range(8):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc
"""

ACCUMULATE_IN_C = """TILE = 16


@cuda.jit
def matmul_tiled(A, B, C):
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    K = A.shape[1]
    for t in range((K + TILE - 1) // TILE):
        k0 = t * TILE
        a = float32(0.0)
        if row < A.shape[0] and k0 + tx < K:
            a = A[row, k0 + tx]
        b = float32(0.0)
        if k0 + ty < K and col < B.shape[1]:
            b = B[k0 + ty, col]
        sA[ty, tx] = a
        sB[ty, tx] = b
        cuda.syncthreads()
        if row < C.shape[0] and col < C.shape[1]:
            for k in range(TILE):
                C[row, col] += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
"""

ALT_LOADS_AND_RETURN = """TILE = 16


@cuda.jit
def matmul_tiled(A, B, C):
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    col, row = cuda.grid(2)
    M, K = A.shape
    N = B.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        if row < M and k0 + tx < K:
            sA[ty, tx] = A[row, k0 + tx]
        else:
            sA[ty, tx] = float32(0.0)
        sB[ty, tx] = B[k0 + ty, col] if (k0 + ty < K and col < N) else float32(0.0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row >= M or col >= N:
        return  # after the last barrier: nobody waits for this thread any more
    C[row, col] = acc
"""

GUARDED_COMPUTE = """TILE = 16


@cuda.jit
def matmul_tiled(A, B, C):
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    inside = row < C.shape[0] and col < C.shape[1]
    K = A.shape[1]
    acc = float32(0.0)
    for t in range((K + TILE - 1) // TILE):
        k0 = t * TILE
        a = float32(0.0)
        if row < A.shape[0] and k0 + tx < K:
            a = A[row, k0 + tx]
        b = float32(0.0)
        if k0 + ty < K and col < B.shape[1]:
            b = B[k0 + ty, col]
        sA[ty, tx] = a
        sB[ty, tx] = b
        cuda.syncthreads()
        if inside:  # only threads with an output do the arithmetic; all reach both barriers
            for k in range(TILE):
                acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if inside:
        C[row, col] = acc
"""

MATMUL = [
    wrong(
        "float64-acc",
        "matmul_tiled",
        "accumulates in float64 (acc = 0.0)",
        r"float64",
        ("acc = float32(0.0)", "acc = 0.0"),
    ),
    wrong(
        "early-return",
        "matmul_tiled",
        "returns early for threads outside C, before the barriers (and drops the row/col load guards)",
        r"barrier.*return",
        code=EARLY_RETURN,
    ),
    wrong(
        "no-zero-fill",
        "matmul_tiled",
        "loads only the elements inside A and B; the partial tiles keep stale or unwritten values",
        r"initcheck.*float32\(0\.0\)",
        code=NO_ZERO_FILL,
    ),
    wrong(
        "barrier-in-guard",
        "matmul_tiled",
        "puts the whole tile loop, barriers included, inside `if row < m and col < n`",
        r"synccheck.*syncthreads\(\) inside an if",
        code=BARRIER_IN_GUARD,
    ),
    wrong(
        "no-second-barrier",
        "matmul_tiled",
        "drops the barrier at the end of the loop body",
        r"race.*second cuda\.syncthreads\(\)",
        (
            "        cuda.syncthreads()  # 2: everyone is done reading before the next tiles overwrite them"
            "\n",
            "",
        ),
    ),
    wrong(
        "no-first-barrier",
        "matmul_tiled",
        "drops the barrier between the loads and the inner loop",
        r"race.*cuda\.syncthreads\(\) after the loads",
        ("        cuda.syncthreads()  # 1: both tiles are complete before anyone reads them\n", ""),
    ),
    wrong(
        "swapped-row-col",
        "matmul_tiled",
        "takes the row from tx and the column from ty",
        r"multiples of TILE.*C\[by \* TILE \+ ty, bx \* TILE \+ tx\]",
        ("row = cuda.blockIdx.y * TILE + ty", "row = cuda.blockIdx.y * TILE + tx"),
        ("col = cuda.blockIdx.x * TILE + tx", "col = cuda.blockIdx.x * TILE + ty"),
    ),
    wrong(
        "swapped-thread-axes",
        "matmul_tiled",
        "tx = threadIdx.y and ty = threadIdx.x: right result, uncoalesced loads",
        r"not coalesced.*cuda\.threadIdx\.x",
        ("tx = cuda.threadIdx.x", "tx = cuda.threadIdx.y"),
        ("ty = cuda.threadIdx.y", "ty = cuda.threadIdx.x"),
    ),
    wrong(
        "k-loop-drops-partial",
        "matmul_tiled",
        "loops over K // TILE tiles, dropping the last partial one",
        r"k is a multiple of TILE.*K // TILE drops",
        ("range((K + TILE - 1) // TILE)", "range(K // TILE)"),
    ),
    wrong(
        "k-loop-fixed-count",
        "matmul_tiled",
        "a tile loop of a fixed count, range(3): the tiles the visible check's k once needed",
        r"sums only the first 3 tile\(s\) along k.*fixed number of times",
        ("range((K + TILE - 1) // TILE)", "range(3)"),
    ),
    wrong(
        "store-in-tile-loop",
        "matmul_tiled",
        "writes C[row, col] = acc at the end of every tile step",
        r"write C more than once.*after the tile loop",
        (
            "        cuda.syncthreads()  # 2: everyone is done reading before the next tiles overwrite them"
            "\n",
            "        cuda.syncthreads()  # 2\n        if row < C.shape[0] and col < C.shape[1]:\n"
            "            C[row, col] = acc\n",
        ),
    ),
    wrong(
        "tile8-in-16-blocks",
        "matmul_tiled",
        "(8, 8) shared tiles in (TILE, TILE) = 16x16 blocks",
        r"out-of-bounds (write to|read of) s[AB]\[",
        code=TILE8_IN_16_BLOCKS,
    ),
    wrong(
        "accumulate-in-C",
        "matmul_tiled",
        "adds into C[row, col] directly, never zeroed",
        r"reads C before writing it",
        code=ACCUMULATE_IN_C,
    ),
    wrong(
        "no-shared-memory",
        "matmul_tiled",
        "the naive kernel of Chapter 2, without tiles",
        r"does not use shared memory",
        code="TILE = 16\n\n\n@cuda.jit\ndef matmul_tiled(A, B, C):\n"
        "    col, row = cuda.grid(2)\n"
        "    if row < C.shape[0] and col < C.shape[1]:\n"
        "        acc = float32(0.0)\n"
        "        for k in range(A.shape[1]):\n"
        "            acc += A[row, k] * B[k, col]\n"
        "        C[row, col] = acc\n",
    ),
    valid("solution-again", "matmul_tiled", "the solution itself"),
    valid(
        "grid-loads-return-after-barriers",
        "matmul_tiled",
        "cuda.grid(2), a k0 loop with a step, if/else and conditional-expression loads, early return "
        "after the last barrier",
        code=ALT_LOADS_AND_RETURN,
    ),
    valid(
        "import-repeated",
        "matmul_tiled",
        "repeats the first cells' `from numba import cuda, float32` at the top of the answer cell",
        ("TILE = 16", "from numba import cuda, float32\n\nTILE = 16"),
    ),
    valid(
        "import-numpy-as-np",
        "matmul_tiled",
        "`import numpy as np` in the answer cell and `np.float32(0.0)` in the kernel",
        ("TILE = 16", "import numpy as np\n\nTILE = 16"),
        ("acc = float32(0.0)", "acc = np.float32(0.0)"),
    ),
    valid(
        "import-numba",
        "matmul_tiled",
        "`import numba` in the answer cell and `numba.float32` as the shared tiles' type",
        ("TILE = 16", "import numba\n\nTILE = 16"),
        (
            "sA = cuda.shared.array((TILE, TILE), float32)",
            "sA = cuda.shared.array((TILE, TILE), numba.float32)",
        ),
        (
            "sB = cuda.shared.array((TILE, TILE), float32)",
            "sB = cuda.shared.array((TILE, TILE), numba.float32)",
        ),
    ),
    valid(
        "import-float32-as-f32",
        "matmul_tiled",
        "`from numba import float32 as f32` in the answer cell and `f32(0.0)` in the kernel",
        ("TILE = 16", "from numba import float32 as f32\n\nTILE = 16"),
        ("acc = float32(0.0)", "acc = f32(0.0)"),
    ),
    valid(
        "guarded-compute",
        "matmul_tiled",
        "threads outside C skip the arithmetic but reach every barrier",
        code=GUARDED_COMPUTE,
    ),
]

MUTATIONS = BYTES + MATMUL
