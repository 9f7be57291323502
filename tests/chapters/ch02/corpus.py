"""Lab 2 (first kernels): wrong answers students write, and valid alternatives."""

from mutations import valid, wrong

VA_GUARD = (
    "    if i < out.shape[0]:  # the last block may have threads past the end\n        out[i] = a[i] + b[i]"
)
VA_STORE = "        out[i] = a[i] + b[i]"
GRID = "return ((cols + bx - 1) // bx, (rows + by - 1) // by)"
MM_MAP = "    col, row = cuda.grid(2)  # grid(2) is (x, y): x picks the column"
MM_GUARD = "    if row < C.shape[0] and col < C.shape[1]:"
MM_ACC = "acc = float32(0.0)"
MM_LOOP = "            acc += A[row, k] * B[k, col]"

MUTATIONS = [
    # vector_add ---------------------------------------------------------------------------
    wrong(
        "va-no-guard",
        "vector_add",
        "no guard",
        r"out-of-bounds .*surplus threads of the last, partial block",
        (VA_GUARD, "    out[i] = a[i] + b[i]"),
    ),
    wrong(
        "va-guard-le",
        "vector_add",
        "guard with <=",
        r"out-of-bounds",
        ("if i < out.shape[0]:", "if i <= out.shape[0]:"),
    ),
    wrong(
        "va-guard-short",
        "vector_add",
        "guard i < n - 1",
        r"only the last element.*guard stop one short",
        ("if i < out.shape[0]:", "if i < out.shape[0] - 1:"),
    ),
    wrong(
        "va-thread-index",
        "vector_add",
        "i = threadIdx.x",
        r"race.*ignores the block",
        ("i = cuda.grid(1)", "i = cuda.threadIdx.x"),
    ),
    wrong(
        "va-hard-coded-block",
        "vector_add",
        "blockIdx.x * 32 + threadIdx.x",
        r"type the block size into the index",
        ("i = cuda.grid(1)", "i = cuda.blockIdx.x * 32 + cuda.threadIdx.x"),
    ),
    wrong(
        "va-every-thread-loops",
        "vector_add",
        "every thread adds the whole vectors",
        r"right result, but.*several threads wrote the same element.*loop over the whole array",
        (VA_GUARD, "    for j in range(out.shape[0]):\n        out[j] = a[j] + b[j]"),
    ),
    wrong(
        "va-into-a",
        "vector_add",
        "writes the sum into a",
        r"changed its input `a`",
        (VA_STORE, "        a[i] = a[i] + b[i]"),
    ),
    wrong(
        "va-accumulate",
        "vector_add",
        "out[i] += a[i] + b[i]: reads out before writing it",
        r"reads `out` before writing it",
        (VA_STORE, "        out[i] += a[i] + b[i]"),
    ),
    wrong(
        "va-griddim",
        "vector_add",
        "blockIdx.x * gridDim.x + threadIdx.x",
        r"race|never written",
        ("i = cuda.grid(1)", "i = cuda.blockIdx.x * cuda.gridDim.x + cuda.threadIdx.x"),
    ),
    wrong(
        "va-a-twice",
        "vector_add",
        "a[i] + a[i]",
        r"added a\[i\] to itself",
        (VA_STORE, "        out[i] = a[i] + a[i]"),
    ),
    valid(
        "va-early-return",
        "vector_add",
        "early return",
        (VA_GUARD, "    if i >= out.size:\n        return\n    out[i] = a[i] + b[i]"),
    ),
    valid(
        "va-grid-stride",
        "vector_add",
        "a grid-stride loop",
        (VA_GUARD, "    for j in range(i, out.shape[0], cuda.gridsize(1)):\n        out[j] = a[j] + b[j]"),
    ),
    valid(
        "va-explicit-index",
        "vector_add",
        "the global index written out, guard on a",
        ("i = cuda.grid(1)", "i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x"),
        ("if i < out.shape[0]:", "if i < a.shape[0]:"),
    ),
    # grid_2d ------------------------------------------------------------------------------
    wrong(
        "g2-np-ceil",
        "grid_2d",
        "floats from np.ceil",
        r"item 0 that is np\.float64.*numpy\.float64",
        (GRID, "import numpy as np\n\n    return (np.ceil(cols / bx), np.ceil(rows / by))"),
    ),
    wrong(
        "g2-swapped",
        "grid_2d",
        "rows first",
        r"x and y are swapped",
        (GRID, "return ((rows + by - 1) // by, (cols + bx - 1) // bx)"),
    ),
    wrong(
        "g2-floor",
        "grid_2d",
        "rounds down",
        r"// rounds down",
        (GRID, "return (cols // bx, rows // by)"),
    ),
    wrong(
        "g2-list",
        "grid_2d",
        "returns a list",
        r"a list, where a tuple",
        (GRID, "return [(cols + bx - 1) // bx, (rows + by - 1) // by]"),
    ),
    wrong(
        "g2-bx-for-both",
        "grid_2d",
        "divides the rows by bx",
        r"divided by by",
        (GRID, "return ((cols + bx - 1) // bx, (rows + bx - 1) // bx)"),
    ),
    wrong(
        "g2-true-division",
        "grid_2d",
        "math.ceil of a float division, then / for y",
        r"float, where an int is asked for",
        (GRID, "return ((cols + bx - 1) // bx, (rows + by - 1) / by)"),
    ),
    valid(
        "g2-math-ceil",
        "grid_2d",
        "math.ceil (a Python int, exact at these sizes)",
        (GRID, "import math\n\n    return (math.ceil(cols / bx), math.ceil(rows / by))"),
    ),
    valid(
        "g2-negated",
        "grid_2d",
        "-(-cols // bx) from the block's items",
        ("    bx, by = block\n    " + GRID, "    return (-(-cols // block[0]), -(-rows // block[1]))"),
    ),
    # matmul_naive -------------------------------------------------------------------------
    wrong(
        "mm-x-is-row",
        "matmul_naive",
        "thread (x, y) computes C[x, y]",
        r"computing C\[x, y\] covers.*must compute C\[y, x\]",
        (MM_MAP, "    row, col = cuda.grid(2)"),
    ),
    wrong(
        "mm-float64-acc",
        "matmul_naive",
        "acc = 0.0: a float64 accumulator",
        r"float64",
        (MM_ACC, "acc = 0.0"),
    ),
    wrong(
        "mm-guard-rows-only",
        "matmul_naive",
        "guards only the rows",
        r"out-of-bounds",
        (MM_GUARD, "    if row < C.shape[0]:"),
    ),
    wrong(
        "mm-no-guard",
        "matmul_naive",
        "no guard at all",
        r"out-of-bounds",
        (MM_GUARD, "    if True:"),
    ),
    wrong(
        "mm-guard-k",
        "matmul_naive",
        "guards the columns with A.shape[1] (k)",
        r"out-of-bounds|never written|past the end of .C.",
        (MM_GUARD, "    if row < C.shape[0] and col < A.shape[1]:"),
    ),
    wrong(
        "mm-loop-n",
        "matmul_naive",
        "sums over n (C.shape[1]) instead of k",
        r"out-of-bounds|wrong at",
        ("for k in range(A.shape[1]):", "for k in range(C.shape[1]):"),
    ),
    wrong(
        "mm-b-transposed",
        "matmul_naive",
        "B[col, k] for B[k, col]",
        r"out-of-bounds read of B",
        (MM_LOOP, "            acc += A[row, k] * B[col, k]"),
    ),
    wrong(
        "mm-accumulate-into-c",
        "matmul_naive",
        "C[row, col] += ... with no zeroing",
        r"reads `C` before writing it",
        (MM_LOOP + "\n        C[row, col] = acc", "            C[row, col] += A[row, k] * B[k, col]"),
    ),
    wrong(
        "mm-every-thread-loops",
        "matmul_naive",
        "every thread computes the whole product",
        r"right result, but.*several threads wrote the same element",
        code=(
            "@cuda.jit\ndef matmul_naive(A, B, C):\n    for row in range(C.shape[0]):\n"
            "        for col in range(C.shape[1]):\n            acc = float32(0.0)\n"
            "            for k in range(A.shape[1]):\n                acc += A[row, k] * B[k, col]\n"
            "            C[row, col] = acc\n"
        ),
    ),
    wrong(
        "mm-hard-coded-block",
        "matmul_naive",
        "blockIdx * 8 + threadIdx: the sim's block size typed in",
        r"type the block size into the index",
        (
            MM_MAP,
            "    col = cuda.blockIdx.x * 8 + cuda.threadIdx.x\n"
            "    row = cuda.blockIdx.y * 8 + cuda.threadIdx.y",
        ),
    ),
    wrong(
        "mm-b-column-from-row",
        "matmul_naive",
        "reads B[k, row]: the row index where the column belongs",
        r"every wrong element is a right sum of another column.*reads B\[k, row\], where B\[k, col\] belongs",
        ("acc += A[row, k] * B[k, col]", "acc += A[row, k] * B[k, row]"),
    ),
    wrong(
        "mm-a-row-from-col",
        "matmul_naive",
        "reads A[col, k]: the column index where the row belongs",
        r"index `col` is \d+ on axis 0 of A.*swapped row and column|reads A\[col, k\], where A\[row, k\]",
        ("acc += A[row, k] * B[k, col]", "acc += A[col, k] * B[k, col]"),
    ),
    wrong(
        "mm-acc-in-loop",
        "matmul_naive",
        "acc reset inside the loop over k",
        r"only the last product.*once, before the loop",
        (
            "        acc = float32(0.0)  # a float32 accumulator: 0.0 alone would make it float64\n"
            "        for k in range(A.shape[1]):\n",
            "        for k in range(A.shape[1]):\n            acc = float32(0.0)\n",
        ),
    ),
    valid(
        "mm-early-return",
        "matmul_naive",
        "early return, explicit indices",
        (
            MM_MAP + "\n" + MM_GUARD,
            "    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x\n"
            "    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y\n"
            "    if row >= C.shape[0] or col >= C.shape[1]:\n        return\n    if True:",
        ),
    ),
    valid(
        "mm-grid-stride",
        "matmul_naive",
        "2-D grid-stride loops",
        code=(
            "@cuda.jit\ndef matmul_naive(A, B, C):\n    x0, y0 = cuda.grid(2)\n"
            "    sx, sy = cuda.gridsize(2)\n"
            "    for row in range(y0, C.shape[0], sy):\n        for col in range(x0, C.shape[1], sx):\n"
            "            acc = float32(0.0)\n            for k in range(A.shape[1]):\n"
            "                acc += A[row, k] * B[k, col]\n            C[row, col] = acc\n"
        ),
    ),
    valid(
        "mm-float32-zero",
        "matmul_naive",
        "acc = float32(0), loop bound from B",
        (MM_ACC, "acc = float32(0)"),
        ("for k in range(A.shape[1]):", "for k in range(B.shape[0]):"),
    ),
    wrong(
        "grid-block-unpacked-reversed",
        "grid_2d",
        "unpacks the block as by, bx = block",
        r"block is \(bx, by\), x first: bx = block\[0\]",
        ("bx, by = block", "by, bx = block"),
    ),
    wrong(
        "mm-k-from-one",
        "matmul_naive",
        "starts the loop over k at 1",
        r"misses the first product of its sum \(k = 0\)",
        ("for k in range(A.shape[1]):", "for k in range(1, A.shape[1]):"),
    ),
    wrong(
        "mm-k-one-short",
        "matmul_naive",
        "stops the loop over k one early",
        r"misses the last product of its sum \(k = \d+\)",
        ("for k in range(A.shape[1]):", "for k in range(A.shape[1] - 1):"),
    ),
    wrong(
        "mm-row-from-blockdim-x",
        "matmul_naive",
        "builds the row with cuda.blockDim.x",
        r"the row needs cuda\.blockDim\.y",
        (
            MM_MAP,
            "    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x\n"
            "    row = cuda.blockIdx.y * cuda.blockDim.x + cuda.threadIdx.y",
        ),
    ),
    wrong(
        "va-index-from-one",
        "vector_add",
        "adds 1 to the global index",
        r"only the first element, \[0\], is wrong: does your index start at 1",
        ("i = cuda.grid(1)", "i = cuda.grid(1) + 1"),
    ),
    wrong(
        "va-grid-stride-by-block",
        "vector_add",
        "a grid-stride loop that steps by blockDim.x instead of the whole grid",
        r"each thread writes several: a grid-stride loop must step over the whole grid, cuda\.gridsize\(1\)",
        (
            VA_GUARD,
            "    for j in range(i, out.shape[0], cuda.blockDim.x):\n        out[j] = a[j] + b[j]",
        ),
    ),
]
