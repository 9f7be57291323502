"""Lab 5 (fusion and a shallow network): wrong answers students write, and valid alternatives."""

from mutations import valid, wrong

EPILOGUE = "        Y[row, col] = max(acc + b[col], float32(0.0))  # the epilogue: bias and ReLU in registers"
LOAD_X = "        sX[ty, tx] = X[row, k0 + tx] if row < X.shape[0] and k0 + tx < K else float32(0.0)"
LOAD_W = "        sW[ty, tx] = W[k0 + ty, col] if k0 + ty < K and col < W.shape[1] else float32(0.0)"
SECOND_BARRIER = "            acc += sX[ty, k] * sW[k, tx]\n        cuda.syncthreads()\n"
GUARD = "    if row < Y.shape[0] and col < Y.shape[1]:\n"
BACKWARD_STORE = "        dA[row, col] = acc if A[row, col] > float32(0.0) else float32(0.0)"

_NAIVE_FUSED = '''@cuda.jit
def linear_relu_tiled(X, W, b, Y):
    """Lab 5: Y = relu(X @ W + b), one thread per output, straight from global memory."""
    col, row = cuda.grid(2)
    if row < Y.shape[0] and col < Y.shape[1]:
        acc = float32(0.0)
        for k in range(X.shape[1]):
            acc += X[row, k] * W[k, col]
        Y[row, col] = max(acc + b[col], float32(0.0))
'''

_LINEAR_RELU = [
    wrong(
        "naive-fused",
        "linear_relu_tiled",
        "Chapter 2's naive product with the epilogue: right values, no shared tiles",
        r"results are right, but .* no shared-memory access.*naive product",
        code=_NAIVE_FUSED,
    ),
    wrong(
        "w-from-global",
        "linear_relu_tiled",
        "tiles X in shared memory but reads W straight from global memory in the inner loop",
        r"results are right, but .*global loads touch \d+ sectors.*course's tiled kernel touches",
        (
            "            acc += sX[ty, k] * sW[k, tx]",
            "            if k0 + k < K and col < W.shape[1]:\n"
            "                acc += sX[ty, k] * W[k0 + k, col]",
        ),
    ),
    wrong(
        "float64-acc",
        "linear_relu_tiled",
        "accumulates in float64 (acc = 0.0)",
        r"float64",
        ("acc = float32(0.0)", "acc = 0.0"),
    ),
    wrong(
        "relu-float64",
        "linear_relu_tiled",
        "ReLU as max(acc + b[col], 0.0): the comparison and the result in float64",
        r"float64",
        ("max(acc + b[col], float32(0.0))", "max(acc + b[col], 0.0)"),
    ),
    wrong(
        "epilogue-in-global-memory",
        "linear_relu_tiled",
        "'fused' epilogue that stores Z, re-reads it to add the bias, stores, re-reads and stores again",
        r"stored .* 3 times.*read 2 times.*in a register",
        (
            EPILOGUE,
            "        Y[row, col] = acc\n"
            "        Y[row, col] = Y[row, col] + b[col]\n"
            "        Y[row, col] = max(Y[row, col], float32(0.0))",
        ),
    ),
    wrong(
        "store-in-tile-loop",
        "linear_relu_tiled",
        "stores the epilogue inside the tile loop (once per tile step, the last one wins)",
        r"stored .* 3 times.*in a register",
        (GUARD + EPILOGUE, ""),
        (
            SECOND_BARRIER,
            SECOND_BARRIER.replace("\n        cuda.syncthreads()\n", "\n")
            + "        if row < Y.shape[0] and col < Y.shape[1]:\n"
            "            Y[row, col] = max(acc + b[col], float32(0.0))\n"
            "        cuda.syncthreads()\n",
        ),
    ),
    wrong(
        "accumulate-into-Y",
        "linear_relu_tiled",
        "accumulates into the output, which nobody zeroed (Y[row, col] += ...)",
        r"reads `Y` before.*not zeroed.*register",
        (
            "        for k in range(TILE):\n            acc += sX[ty, k] * sW[k, tx]",
            "        if row < Y.shape[0] and col < Y.shape[1]:\n"
            "            for k in range(TILE):\n"
            "                Y[row, col] += sX[ty, k] * sW[k, tx]",
        ),
        ("max(acc + b[col], float32(0.0))", "max(Y[row, col] + b[col], float32(0.0))"),
    ),
    wrong(
        "bias-twice",
        "linear_relu_tiled",
        "adds the bias twice",
        r"bias (was )?added twice",
        ("max(acc + b[col], float32(0.0))", "max(acc + b[col] + b[col], float32(0.0))"),
    ),
    wrong(
        "bias-by-row",
        "linear_relu_tiled",
        "adds the bias along the wrong axis: b[row]",
        r"b\[row\].*b\[col\]",
        ("max(acc + b[col], float32(0.0))", "max(acc + b[row], float32(0.0))"),
    ),
    wrong(
        "relu-before-bias",
        "linear_relu_tiled",
        "ReLU before the bias: relu(acc) + b[col]",
        r"bias was added after the ReLU",
        ("max(acc + b[col], float32(0.0))", "max(acc, float32(0.0)) + b[col]"),
    ),
    wrong(
        "k-loop-fixed-count",
        "linear_relu_tiled",
        "a tile loop of a fixed count, three tiles: what the visible check's k once needed",
        r"sums only the first \d+ values along k.*fixed number of times",
        ("    for k0 in range(0, K, TILE):", "    for k0 in range(0, 3 * TILE, TILE):"),
    ),
    wrong(
        "no-relu",
        "linear_relu_tiled",
        "forgets the ReLU",
        r"without the ReLU",
        ("max(acc + b[col], float32(0.0))", "acc + b[col]"),
    ),
    wrong(
        "no-load-guard",
        "linear_relu_tiled",
        "loads the X tile without a guard",
        r"outside an array.*[Gg]uard",
        (LOAD_X, "        sX[ty, tx] = X[row, k0 + tx]"),
    ),
    wrong(
        "no-store-guard",
        "linear_relu_tiled",
        "stores without the guard on the last partial block",
        r"outside an array.*[Gg]uard",
        (GUARD + EPILOGUE, "    Y[row, col] = max(acc + b[col], float32(0.0))"),
    ),
    wrong(
        "one-barrier",
        "linear_relu_tiled",
        "forgets the second syncthreads (the next tile overwrites the one being read)",
        r"race.*syncthreads",
        (SECOND_BARRIER, SECOND_BARRIER.replace("\n        cuda.syncthreads()\n", "\n")),
    ),
    wrong(
        "shared-shape-computed",
        "linear_relu_tiled",
        "a shared tile whose shape is computed in the kernel: (TILE, TILE + 1)",
        r"compile|compiler",
        (
            "sX = cuda.shared.array((TILE, TILE), float32)",
            "sX = cuda.shared.array((TILE, TILE + 1), float32)",
        ),
    ),
    valid(
        "relu-by-condition",
        "linear_relu_tiled",
        "the ReLU as a condition on a float32 register",
        (
            EPILOGUE,
            "        v = acc + b[col]\n        Y[row, col] = v if v > float32(0.0) else float32(0.0)",
        ),
    ),
    valid(
        "early-return-after-last-barrier",
        "linear_relu_tiled",
        "returns early after the tile loop (after the last barrier) instead of an if block",
        (
            GUARD + EPILOGUE,
            "    if row >= Y.shape[0] or col >= Y.shape[1]:\n"
            "        return\n"
            "    Y[row, col] = max(acc + b[col], float32(0.0))",
        ),
    ),
    wrong(
        "x-tile-left-unfilled",
        "linear_relu_tiled",
        "loads X's tile only inside the matrix, without storing 0 outside it",
        r"blocks stick out of Y and K is smaller than TILE.*initcheck.*sX\[",
        (LOAD_X, "        if row < X.shape[0] and k0 + tx < K:\n            sX[ty, tx] = X[row, k0 + tx]"),
    ),
    wrong(
        "w-tile-left-unfilled",
        "linear_relu_tiled",
        "loads W's tile only inside the matrix, without storing 0 outside it",
        r"blocks stick out of Y and K is smaller than TILE.*initcheck.*sW\[",
        (LOAD_W, "        if k0 + ty < K and col < W.shape[1]:\n            sW[ty, tx] = W[k0 + ty, col]"),
    ),
    wrong(
        "second-barrier-in-store-guard",
        "linear_relu_tiled",
        "puts the second barrier under the output's guard",
        r"synccheck.*without reaching the barrier",
        (
            SECOND_BARRIER,
            "            acc += sX[ty, k] * sW[k, tx]\n        if row < Y.shape[0] and col < Y.shape[1]:\n"
            "            cuda.syncthreads()\n",
        ),
    ),
    valid(
        "bias-in-register-first",
        "linear_relu_tiled",
        "starts the accumulator at the bias (guarded), then applies the ReLU",
        ("    acc = float32(0.0)\n", "    acc = b[col] if col < W.shape[1] else float32(0.0)\n"),
        ("max(acc + b[col], float32(0.0))", "max(acc, float32(0.0))"),
    ),
]

_LAYER_FORWARD = [
    wrong(
        "blocks-of-32",
        "layer_forward",
        "launches blocks of (32, 32) threads whatever TILE is",
        r"`layer_forward` failed .*Your kernel itself passes on a right launch.*blocks of \(TILE, TILE\)",
        ("(TILE, TILE)](", "(32, 32)]("),
    ),
    wrong(
        "two-launches",
        "layer_forward",
        "launches the kernel twice (a 'warm-up' launch first)",
        r"2 launches",
        (
            "    linear_relu_tiled[grid, (TILE, TILE)](X, W, b, Y)",
            "    linear_relu_tiled[grid, (TILE, TILE)](X, W, b, Y)\n"
            "    linear_relu_tiled[grid, (TILE, TILE)](X, W, b, Y)",
        ),
    ),
    wrong(
        "unfused-layer",
        "layer_forward",
        "the layer as a product kernel with zero bias, then a ReLU kernel: two launches",
        r"2 launches: linear_relu_tiled, relu_inplace",
        code="""@cuda.jit
def relu_inplace(Z, b):
    col, row = cuda.grid(2)
    if row < Z.shape[0] and col < Z.shape[1]:
        Z[row, col] = max(Z[row, col] + b[col], float32(0.0))


def layer_forward(X, W, b):
    m, n = X.shape[0], W.shape[1]
    Y = cuda.device_array((m, n), dtype=np.float32)
    grid = (math.ceil(n / TILE), math.ceil(m / TILE))
    linear_relu_tiled[grid, (TILE, TILE)](X, W, cuda.to_device(np.zeros(n, np.float32)), Y)
    relu_inplace[grid, (TILE, TILE)](Y, b)
    return Y
""",
    ),
    wrong(
        "returns-host-copy",
        "layer_forward",
        "returns Y.copy_to_host()",
        r"copied 1 array",
        ("    return Y", "    return Y.copy_to_host()"),
    ),
    wrong(
        "shapes-from-host",
        "layer_forward",
        "copies X to the host to read its shape",
        r"copied 1 array",
        ("    m, n = X.shape[0], W.shape[1]", "    m, n = X.copy_to_host().shape[0], W.shape[1]"),
    ),
    wrong(
        "grid-swapped",
        "layer_forward",
        "a grid with x along the rows: (ceil(m / TILE), ceil(n / TILE))",
        r"grid.*ceil\(n / TILE\), math\.ceil\(m / TILE\)",
        (
            "    grid = (math.ceil(n / TILE), math.ceil(m / TILE))",
            "    grid = (math.ceil(m / TILE), math.ceil(n / TILE))",
        ),
    ),
    wrong(
        "grid-floor",
        "layer_forward",
        "a grid that rounds down: (n // TILE, m // TILE)",
        r"grid.*ceil\(n / TILE\), math\.ceil\(m / TILE\)",
        ("    grid = (math.ceil(n / TILE), math.ceil(m / TILE))", "    grid = (n // TILE, m // TILE)"),
    ),
    wrong(
        "forgot-return",
        "layer_forward",
        "launches the kernel and forgets `return Y`",
        r"returned None.*return Y",
        ("    return Y", "    Y"),
    ),
    wrong(
        "float64-output",
        "layer_forward",
        "allocates Y as float64",
        r"dtype float64",
        ("dtype=np.float32", "dtype=np.float64"),
    ),
    valid(
        "integer-ceil",
        "layer_forward",
        "the grid by integer ceiling division",
        (
            "    grid = (math.ceil(n / TILE), math.ceil(m / TILE))",
            "    grid = ((n + TILE - 1) // TILE, (m + TILE - 1) // TILE)",
        ),
    ),
    valid(
        "keywords-and-stream",
        "layer_forward",
        "the output allocated with shape= keywords, launched on the default stream",
        (
            "    Y = cuda.device_array((m, n), dtype=np.float32)",
            "    Y = cuda.device_array(shape=(X.shape[0], W.shape[1]), dtype=np.float32)",
        ),
        (
            "    linear_relu_tiled[grid, (TILE, TILE)](X, W, b, Y)",
            "    linear_relu_tiled[grid, (TILE, TILE), cuda.default_stream()](X, W, b, Y)",
        ),
    ),
]

_BACKWARD = [
    wrong(
        "backward-block-typed-in",
        "backward_input",
        "the simulator's block size typed into the index: blockIdx * 8 + threadIdx",
        r"right with blocks of \(8, 8\) and wrong with blocks of \(16, 4\).*type the block size",
        (
            "    col, row = cuda.grid(2)  # x runs along the columns: a warp reads a row of WT",
            "    col = cuda.blockIdx.x * 8 + cuda.threadIdx.x\n"
            "    row = cuda.blockIdx.y * 8 + cuda.threadIdx.y",
        ),
    ),
    wrong(
        "backward-float64-acc",
        "backward_input",
        "accumulates in float64 (acc = 0.0)",
        r"float64",
        ("acc = float32(0.0)", "acc = 0.0"),
    ),
    wrong(
        "backward-x-on-rows",
        "backward_input",
        "takes the row from x: row, col = cuda.grid(2)",
        r"dA\[y, x\]|col, row = cuda\.grid\(2\)",
        ("    col, row = cuda.grid(2)", "    row, col = cuda.grid(2)"),
    ),
    wrong(
        "backward-reads-A-every-step",
        "backward_input",
        "reads A[row, col] again at every step of the sum",
        r"sectors.*line \d+.*A\[row, col\]",
        (
            "            acc += dZ[row, j] * WT[j, col]",
            "            acc += dZ[row, j] * WT[j, col] * (A[row, col] > 0)",
        ),
        (BACKWARD_STORE, "        dA[row, col] = acc"),
    ),
    wrong(
        "backward-no-mask",
        "backward_input",
        "forgets the ReLU's mask (A > 0)",
        r"mask|A > 0",
        (BACKWARD_STORE, "        dA[row, col] = acc"),
    ),
    wrong(
        "backward-mask-from-dZ",
        "backward_input",
        "masks with the sign of the sum instead of A",
        r"mask|A > 0",
        (BACKWARD_STORE, "        dA[row, col] = acc if acc > float32(0.0) else float32(0.0)"),
    ),
    wrong(
        "backward-times-A",
        "backward_input",
        "multiplies by A instead of masking by (A > 0)",
        r"mask|A > 0",
        (BACKWARD_STORE, "        dA[row, col] = acc * A[row, col]"),
    ),
    wrong(
        "backward-no-guard",
        "backward_input",
        "no guard on the last partial block",
        r"outside an array.*[Gg]uard",
        ("    if row < dA.shape[0] and col < dA.shape[1]:\n", "    if True:\n"),
    ),
    wrong(
        "backward-accumulate-into-dA",
        "backward_input",
        "accumulates into dA, which nobody zeroed",
        r"reads `dA` before.*not zeroed.*register",
        ("            acc += dZ[row, j] * WT[j, col]", "            dA[row, col] += dZ[row, j] * WT[j, col]"),
        (
            BACKWARD_STORE,
            "        dA[row, col] = dA[row, col] if A[row, col] > float32(0.0) else float32(0.0)",
        ),
    ),
    wrong(
        "backward-sum-over-k",
        "backward_input",
        "sums over the wrong dimension: range(WT.shape[1])",
        r"outside an array|wrong at",
        ("for j in range(dZ.shape[1])", "for j in range(dA.shape[1])"),
    ),
    valid(
        "backward-grid-stride",
        "backward_input",
        "a 2-D grid-stride loop",
        code='''@cuda.jit
def backward_input(dZ, WT, A, dA):
    """Lab 5: dA = (dZ @ WT) * (A > 0) with a grid-stride loop."""
    x0, y0 = cuda.grid(2)
    sx, sy = cuda.gridsize(2)
    for row in range(y0, dA.shape[0], sy):
        for col in range(x0, dA.shape[1], sx):
            acc = float32(0.0)
            for j in range(dZ.shape[1]):
                acc += dZ[row, j] * WT[j, col]
            dA[row, col] = acc if A[row, col] > float32(0.0) else float32(0.0)
''',
    ),
    valid(
        "backward-mask-first",
        "backward_input",
        "reads A first and skips the sum where the ReLU was off (early return)",
        code='''@cuda.jit
def backward_input(dZ, WT, A, dA):
    """Lab 5: dA = (dZ @ WT) * (A > 0), skipping the sum where A <= 0."""
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row >= dA.shape[0] or col >= dA.shape[1]:
        return
    if A[row, col] <= float32(0.0):
        dA[row, col] = float32(0.0)
        return
    acc = float32(0.0)
    for j in range(dZ.shape[1]):
        acc = cuda.fma(dZ[row, j], WT[j, col], acc)
    dA[row, col] = acc
''',
    ),
]

_BYTES = [
    wrong(
        "bytes-float",
        "epilogue_bytes",
        "returns a float (per_element * m * n * 1.0)",
        r"int",
        ("    return per_element * m * n", "    return per_element * m * n * 1.0"),
    ),
    valid(
        "bytes-numpy-int",
        "epilogue_bytes",
        "returns a NumPy integer (np.prod): the one rule accepts a Python int or a NumPy integer",
        ("    return per_element * m * n", "    return np.prod([per_element, m, n])"),
    ),
    wrong(
        "bytes-no-bias-read",
        "epilogue_bytes",
        "forgets the reads of b[col]",
        r"epilogue_bytes\(.*\)` is .* expected",
        ("4 + 4 if fused else 4 + (4 + 4 + 4) + (4 + 4)", "4 if fused else 4 + (4 + 4) + (4 + 4)"),
    ),
    wrong(
        "bytes-no-z-store",
        "epilogue_bytes",
        "forgets the matmul's store of Z in the unfused count",
        r"epilogue_bytes\(.*False\)` is .* expected",
        ("4 + (4 + 4 + 4) + (4 + 4)", "(4 + 4 + 4) + (4 + 4)"),
    ),
    wrong(
        "bytes-hard-coded",
        "epilogue_bytes",
        "hard-codes the 1024 x 1024 answer",
        r"epilogue_bytes\(.*\)` is .* expected",
        code='''def epilogue_bytes(m, n, fused):
    """Lab 5: global bytes of the epilogue."""
    return 8 * 1024 * 1024 if fused else 24 * 1024 * 1024
''',
    ),
    valid(
        "bytes-by-accesses",
        "epilogue_bytes",
        "counts accesses, then bytes",
        code='''def epilogue_bytes(m, n, fused):
    """Lab 5: global bytes of the epilogue."""
    accesses = 2 if fused else 1 + 3 + 2
    return int(4 * accesses * m * n)
''',
    ),
    valid(
        "bytes-saved",
        "epilogue_bytes",
        "the fused count plus the 16 bytes an element that fusion saves",
        code='''def epilogue_bytes(m, n, fused):
    """Lab 5: global bytes of the epilogue."""
    fused_bytes = 8 * m * n
    return fused_bytes if fused else fused_bytes + 16 * m * n
''',
    ),
]

MUTATIONS = _LINEAR_RELU + _LAYER_FORWARD + _BACKWARD + _BYTES
