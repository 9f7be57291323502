"""Lab 4 (bank conflicts): wrong answers students write, and valid alternatives."""

from mutations import valid, wrong

# --- Exercise 1: bank_of --------------------------------------------------------------------------------


def _bank(expr: str) -> str:
    return f"def bank_of(row, col, width):\n    return {expr}\n"


BANK = [
    wrong(
        "bank-col-only",
        "bank_of",
        "ignores the row",
        r"as if every row were 32 words",
        code=_bank("col % 32"),
    ),
    wrong(
        "bank-width-32",
        "bank_of",
        "assumes 32 columns, whatever the width",
        r"as if every row were 32 words",
        code=_bank("(row * 32 + col) % 32"),
    ),
    wrong(
        "bank-column-major",
        "bank_of",
        "column-major word index",
        r"column-major",
        code=_bank("(col * width + row) % 32"),
    ),
    wrong(
        "bank-bytes",
        "bank_of",
        "byte address modulo 32 instead of the 4-byte word",
        r"byte address",
        code=_bank("(4 * (row * width + col)) % 32"),
    ),
    wrong(
        "bank-33-banks",
        "bank_of",
        "33 banks, from the padded width",
        r"32 banks",
        code=_bank("(row * width + col) % 33"),
    ),
    wrong(
        "bank-float",
        "bank_of",
        "a float modulo: 1.0 instead of 1",
        r"a float.*asks for an int",
        code=_bank("(row * width + col) % 32.0"),
    ),
    valid("bank-mask", "bank_of", "a bit mask instead of the modulo", code=_bank("(row * width + col) & 31")),
    valid(
        "bank-from-bytes",
        "bank_of",
        "through the byte address and numpy",
        code="import numpy as np\n\n\ndef bank_of(row, col, width):\n"
        "    address = 4 * (row * width + col)\n    return int(np.mod(address // 4, 32))\n",
    ),
]

# --- Exercise 2: transpose_no_conflict -----------------------------------------------------------------

TRANSPOSE_HEAD = """TILE = 32


@cuda.jit
def transpose_no_conflict(src, dst):
"""

XOR_TRANSPOSE = (
    TRANSPOSE_HEAD
    + """    tile = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    if row < src.shape[0] and col < src.shape[1]:
        tile[ty, tx ^ ty] = src[row, col]  # an XOR swizzle of the columns: each row permuted
    cuda.syncthreads()
    out_row = cuda.blockIdx.x * TILE + ty
    out_col = cuda.blockIdx.y * TILE + tx
    if out_row < dst.shape[0] and out_col < dst.shape[1]:
        dst[out_row, out_col] = tile[tx, ty ^ tx]
"""
)

CONSTANT_AND_RETURN = """TILE = 32
PADDED = TILE + 1  # a module constant: Numba reads it when it compiles the kernel


@cuda.jit
def transpose_no_conflict(src, dst):
    tile = cuda.shared.array((TILE, PADDED), float32)
    x = cuda.blockIdx.x * TILE + cuda.threadIdx.x
    y = cuda.blockIdx.y * TILE + cuda.threadIdx.y
    if y < src.shape[0] and x < src.shape[1]:
        tile[cuda.threadIdx.y, cuda.threadIdx.x] = src[y, x]
    cuda.syncthreads()
    x = cuda.blockIdx.y * TILE + cuda.threadIdx.x
    y = cuda.blockIdx.x * TILE + cuda.threadIdx.y
    if y >= dst.shape[0] or x >= dst.shape[1]:
        return  # after the only barrier
    dst[y, x] = tile[cuda.threadIdx.x, cuda.threadIdx.y]
"""

EARLY_RETURN_TRANSPOSE = (
    TRANSPOSE_HEAD
    + """    tile = cuda.shared.array((TILE, 33), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    if row >= src.shape[0] or col >= src.shape[1]:
        return
    tile[ty, tx] = src[row, col]
    cuda.syncthreads()
    out_row = cuda.blockIdx.x * TILE + ty
    out_col = cuda.blockIdx.y * TILE + tx
    if out_row < dst.shape[0] and out_col < dst.shape[1]:
        dst[out_row, out_col] = tile[tx, ty]
"""
)

UNCOALESCED_WRITE = (
    TRANSPOSE_HEAD
    + """    tile = cuda.shared.array((TILE, 33), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    if row < src.shape[0] and col < src.shape[1]:
        tile[ty, tx] = src[row, col]
    cuda.syncthreads()
    if row < src.shape[0] and col < src.shape[1]:
        dst[col, row] = tile[ty, tx]
"""
)

TRANSPOSE = [
    wrong(
        "transpose-unpadded",
        "transpose_no_conflict",
        "keeps the (TILE, TILE) tile: the 32-way conflict stays",
        r"bank conflicts.*tile\[tx, ty\].*TILE \+ 1",
        ("(TILE, 33)", "(TILE, TILE)"),
    ),
    wrong(
        "transpose-pad-in-kernel",
        "transpose_no_conflict",
        "writes the padded shape as (TILE, TILE + 1) inside the kernel",
        r"compil",
        ("(TILE, 33)", "(TILE, TILE + 1)"),
    ),
    wrong(
        "transpose-pad-34",
        "transpose_no_conflict",
        "pads by two columns: a 2-way conflict",
        r"bank conflicts",
        ("(TILE, 33)", "(TILE, 34)"),
    ),
    wrong(
        "transpose-no-tile",
        "transpose_no_conflict",
        "drops the shared tile (no tile, no conflict)",
        r"does not use shared memory",
        code=TRANSPOSE_HEAD + "    x, y = cuda.grid(2)\n    if y < src.shape[0] and x < src.shape[1]:\n"
        "        dst[x, y] = src[y, x]\n",
    ),
    wrong(
        "transpose-no-barrier",
        "transpose_no_conflict",
        "no cuda.syncthreads() between the store and the read of the tile",
        r"race",
        ("    cuda.syncthreads()\n", ""),
    ),
    wrong(
        "transpose-unguarded-write",
        "transpose_no_conflict",
        "guards the read but not the write",
        r"out-of-bounds write to dst.*the write to dst needs its own guard",
        (
            "    if out_row < dst.shape[0] and out_col < dst.shape[1]:\n        dst",
            "    if True:\n        dst",
        ),
    ),
    wrong(
        "transpose-write-guard-of-src",
        "transpose_no_conflict",
        "guards the write with the read's indices and src's shape",
        r"out-of-bounds write to dst.*the write to dst needs its own guard",
        (
            "if out_row < dst.shape[0] and out_col < dst.shape[1]:",
            "if row < src.shape[0] and col < src.shape[1]:",
        ),
    ),
    wrong(
        "transpose-early-return",
        "transpose_no_conflict",
        "returns before the barrier for threads outside src",
        r"synccheck.*return",
        code=EARLY_RETURN_TRANSPOSE,
    ),
    wrong(
        "transpose-same-thread-index",
        "transpose_no_conflict",
        "reads tile[ty, tx] back: swaps the blocks, not the threads",
        r"whole tiles.*tile\[tx, ty\]",
        ("= tile[tx, ty]", "= tile[ty, tx]"),
    ),
    wrong(
        "transpose-blocks-not-swapped",
        "transpose_no_conflict",
        "writes dst at the read's block: out_row = by * TILE + ty",
        r"block indices swap|out-of-bounds",
        ("out_row = cuda.blockIdx.x * TILE + ty", "out_row = cuda.blockIdx.y * TILE + ty"),
        ("out_col = cuda.blockIdx.y * TILE + tx", "out_col = cuda.blockIdx.x * TILE + tx"),
    ),
    wrong(
        "transpose-uncoalesced-write",
        "transpose_no_conflict",
        "goes through the tile but writes dst[col, row]: down a column of dst",
        r"global sectors.*along a row of dst",
        code=UNCOALESCED_WRITE,
    ),
    valid("transpose-solution-again", "transpose_no_conflict", "the solution itself"),
    valid(
        "transpose-import-repeated",
        "transpose_no_conflict",
        "repeats the first cells' `from numba import cuda, float32` in the answer cell (exercise 3, which "
        "uses float32 too, keeps its points)",
        ("TILE = 32", "from numba import cuda, float32\n\nTILE = 32"),
    ),
    valid(
        "transpose-xor-swizzle",
        "transpose_no_conflict",
        "an XOR swizzle of a (TILE, TILE) tile",
        code=XOR_TRANSPOSE,
    ),
    valid(
        "transpose-constant-and-return",
        "transpose_no_conflict",
        "the width as a module constant, early return after the barrier",
        code=CONSTANT_AND_RETURN,
    ),
]

# --- Exercise 3: matmul_bt_no_conflict -----------------------------------------------------------------

PAD_LINE = "sBt = cuda.shared.array((TILE, 33), float32)"

XOR_MATMUL = """@cuda.jit
def matmul_bt_no_conflict(A, B, C):
    sA = cuda.shared.array((TILE, TILE), float32)
    sBt = cuda.shared.array((TILE, TILE), float32)  # swizzled: row j keeps column k at k ^ j
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
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
        sBt[tx, ty ^ tx] = b
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sBt[tx, k ^ tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc
"""

CONSTANT_MATMUL = """BT_WIDTH = TILE + 1  # the padded width, a module constant


@cuda.jit
def matmul_bt_no_conflict(A, B, C):
    sA = cuda.shared.array((TILE, TILE), float32)
    sBt = cuda.shared.array((TILE, BT_WIDTH), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K = A.shape
    N = B.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        sA[ty, tx] = A[row, k0 + tx] if row < M and k0 + tx < K else float32(0.0)
        sBt[tx, ty] = B[k0 + ty, col] if k0 + ty < K and col < N else float32(0.0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sBt[tx, k]
        cuda.syncthreads()
    if row >= M or col >= N:
        return  # after the last barrier
    C[row, col] = acc
"""

EARLY_RETURN_MATMUL = """@cuda.jit
def matmul_bt_no_conflict(A, B, C):
    sA = cuda.shared.array((TILE, TILE), float32)
    sBt = cuda.shared.array((TILE, 33), float32)
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
        sBt[tx, ty] = b
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sBt[tx, k]
        cuda.syncthreads()
    C[row, col] = acc
"""

MATMUL = [
    wrong(
        "bt-unpadded",
        "matmul_bt_no_conflict",
        "keeps sBt (TILE, TILE): the 32-way conflict stays",
        r"bank conflicts.*sBt\[tx, (k|ty)\].*TILE \+ 1",
        (PAD_LINE, "sBt = cuda.shared.array((TILE, TILE), float32)"),
    ),
    wrong(
        "bt-pad-in-kernel",
        "matmul_bt_no_conflict",
        "writes (TILE, TILE + 1) inside the kernel",
        r"compil",
        (PAD_LINE, "sBt = cuda.shared.array((TILE, TILE + 1), float32)"),
    ),
    wrong(
        "bt-untransposed",
        "matmul_bt_no_conflict",
        "drops the transposed tile: sB[ty, tx] = b and sB[k, tx]",
        r"no longer keeps the B tile transposed",
        (PAD_LINE, "sBt = cuda.shared.array((TILE, TILE), float32)"),
        ("sBt[tx, ty] = b", "sBt[ty, tx] = b"),
        ("sBt[tx, k]", "sBt[k, tx]"),
    ),
    wrong(
        "bt-float64-acc",
        "matmul_bt_no_conflict",
        "accumulates in float64 (acc = 0.0)",
        r"float64",
        ("acc = float32(0.0)", "acc = 0.0"),
    ),
    wrong(
        "bt-pads-the-wrong-tile",
        "matmul_bt_no_conflict",
        "pads sA instead of sBt",
        r"bank conflicts.*sBt",
        ("sA = cuda.shared.array((TILE, TILE), float32)", "sA = cuda.shared.array((TILE, 33), float32)"),
        (PAD_LINE, "sBt = cuda.shared.array((TILE, TILE), float32)"),
    ),
    wrong(
        "bt-pad-34",
        "matmul_bt_no_conflict",
        "pads by two columns: 2-way conflicts",
        r"bank conflicts",
        (PAD_LINE, "sBt = cuda.shared.array((TILE, 34), float32)"),
    ),
    wrong(
        "bt-read-untransposed",
        "matmul_bt_no_conflict",
        "stores sBt[tx, ty] but reads sBt[k, tx]",
        r"multiples of TILE.*sBt\[tx, k\]",
        ("sBt[tx, k]", "sBt[k, tx]"),
    ),
    wrong(
        "bt-no-second-barrier",
        "matmul_bt_no_conflict",
        "drops the barrier at the end of the loop body",
        r"race.*second cuda\.syncthreads\(\)",
        ("        cuda.syncthreads()\n    if row", "    if row"),
    ),
    wrong(
        "bt-k-loop-drops-partial",
        "matmul_bt_no_conflict",
        "loops over K // TILE tiles",
        r"k is a multiple of TILE.*K // TILE drops",
        ("range((K + TILE - 1) // TILE)", "range(K // TILE)"),
    ),
    wrong(
        "bt-k-loop-fixed-count",
        "matmul_bt_no_conflict",
        "a tile loop of a fixed count, range(2): the tiles the visible check's k once needed",
        r"sums only the first 2 tile\(s\) along k.*fixed number of times",
        ("range((K + TILE - 1) // TILE)", "range(2)"),
    ),
    wrong(
        "bt-early-return",
        "matmul_bt_no_conflict",
        "returns before the barriers for threads outside C",
        r"synccheck.*return",
        code=EARLY_RETURN_MATMUL,
    ),
    wrong(
        "bt-store-in-tile-loop",
        "matmul_bt_no_conflict",
        "writes C[row, col] = acc after every tile",
        r"write C more than once",
        (
            "        cuda.syncthreads()\n    if row",
            "        cuda.syncthreads()\n        if row < C.shape[0] and col < C.shape[1]:\n"
            "            C[row, col] = acc\n    if row",
        ),
    ),
    valid("bt-solution-again", "matmul_bt_no_conflict", "the solution itself"),
    valid(
        "bt-import-numpy-as-np",
        "matmul_bt_no_conflict",
        "`import numpy as np` in the answer cell and `np.float32` in the kernel",
        ("@cuda.jit", "import numpy as np\n\n\n@cuda.jit"),
        ("acc = float32(0.0)", "acc = np.float32(0.0)"),
    ),
    valid("bt-xor-swizzle", "matmul_bt_no_conflict", "an XOR swizzle of a (TILE, TILE) sBt", code=XOR_MATMUL),
    valid(
        "bt-constant-and-return",
        "matmul_bt_no_conflict",
        "the width as a module constant, conditional-expression loads, a k0 step, return after the barriers",
        code=CONSTANT_MATMUL,
    ),
]

MUTATIONS = BANK + TRANSPOSE + MATMUL
