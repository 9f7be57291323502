"""Lab 10 (softmax and reductions): wrong answers students write, and valid alternatives."""

from mutations import valid, wrong

LOOP = (
    "    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):  # the grid-stride loop\n"
    "        acc += x[i]"
)
ATOMIC = "    if tid == 0:\n        cuda.atomic.add(out, 0, s[0])"
TREE_BARRIER = "        cuda.syncthreads()  # outside the if: every thread of the block reaches it\n"
SHFL = "v += cuda.shfl_xor_sync(FULL_MASK, v, offset)"
LANE0 = "if cuda.laneid == 0 and w < out.shape[0]:"
LOAD = (
    "    v = float32(0.0)\n    if i < x.shape[0]:\n        v = x[i]\n"
    "    s = warp_sum(v)  # every lane calls it, those past the end of x with 0\n"
)
EXP = "math.exp(x[row, j] - m)"
ROWS = "range(lane, n, 32)"
SUM = "    s = cuda.shfl_sync(FULL_MASK, warp_sum(s), 0)  # lane 0's total, in every lane"
XOR_MAX = "v = max(v, cuda.shfl_xor_sync(FULL_MASK, v, offset))"
COMBINE = "    m = max(m_a, m_b)\n    return m, d_a * math.exp(m_a - m) + d_b * math.exp(m_b - m)"
LOOP_HEAD = "    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):"
TREE = (
    "    while stride > 0:  # sequential addressing: the active threads are the first `stride`\n"
    "        if tid < stride:\n"
    "            s[tid] += s[tid + stride]\n" + TREE_BARRIER + "        stride //= 2\n"
)
WARP_SUM_DOWN = (
    "@cuda.jit(device=True)\ndef warp_sum_down(v):\n    offset = 16\n    while offset > 0:\n"
    "        v += cuda.shfl_down_sync(FULL_MASK, v, offset)\n        offset //= 2\n    return v\n\n\n"
)

MUTATIONS = [
    # Exercise 1: block_sum ------------------------------------------------------------------------
    wrong(
        "sum-no-grid-stride",
        "array_sum",
        "one element per thread: no grid-stride loop, though the grid has fewer threads than elements",
        r"grid's stride",
        (LOOP, "    i = cuda.grid(1)\n    if i < x.shape[0]:\n        acc += x[i]"),
    ),
    wrong(
        "sum-no-first-barrier",
        "array_sum",
        "no barrier between writing the partials and the tree",
        r"race",
        ("    s[tid] = acc\n    cuda.syncthreads()\n", "    s[tid] = acc\n"),
    ),
    wrong(
        "sum-no-tree-barrier",
        "array_sum",
        "no barrier between the steps of the tree",
        r"race",
        (TREE_BARRIER, ""),
    ),
    wrong(
        "sum-barrier-in-if",
        "array_sum",
        "the tree's barrier inside `if tid < stride:`",
        r"syncthreads",
        (
            "            s[tid] += s[tid + stride]\n" + TREE_BARRIER,
            "            s[tid] += s[tid + stride]\n    " + TREE_BARRIER,
        ),
    ),
    wrong(
        "sum-every-thread-adds-total",
        "array_sum",
        "every thread of the block adds s[0] to out[0]",
        r"only one thread per block",
        (ATOMIC, "    cuda.atomic.add(out, 0, s[0])"),
    ),
    wrong(
        "sum-atomic-per-thread",
        "array_sum",
        "each thread adds its own partial atomically (right sum, one atomic per thread)",
        r"atomic operations .*expected \d+: one per block",
        (ATOMIC, "    cuda.atomic.add(out, 0, acc)"),
    ),
    wrong(
        "sum-plain-add",
        "array_sum",
        "out[0] += s[0] instead of an atomic: blocks race on out[0]",
        r"race",
        ("cuda.atomic.add(out, 0, s[0])", "out[0] += s[0]"),
    ),
    wrong(
        "sum-float64-acc",
        "array_sum",
        "acc = 0.0: a float64 accumulator",
        r"float64",
        ("acc = float32(0.0)", "acc = 0.0"),
    ),
    wrong(
        "sum-stops-at-2",
        "array_sum",
        "the tree stops before stride 1",
        r"one step early",
        ("while stride > 0:", "while stride > 1:"),
    ),
    wrong(
        "sum-idle-threads-skip-slot",
        "array_sum",
        "threads with no element leave their shared slot unwritten",
        r"initcheck.*s\[32\].*Hint: every thread of the block writes its slot.*past the end of the array.*"
        r"float32\(0\.0\), the identity of a sum",
        ("    s[tid] = acc\n", "    if cuda.grid(1) < x.shape[0]:\n        s[tid] = acc\n"),
    ),
    wrong(
        "sum-early-return",
        "array_sum",
        "threads past the end return before the barriers",
        r"returned on line.*Hint: a thread with no element of x \(past the end of the array\) must not "
        r"return",
        (
            "    acc = float32(0.0)\n",
            "    if cuda.grid(1) >= x.shape[0]:\n        return\n    acc = float32(0.0)\n",
        ),
    ),
    wrong(
        "sum-stride-from-block",
        "array_sum",
        "the tree starts at stride = BLOCK",
        r"outside",
        ("stride = BLOCK // 2", "stride = BLOCK"),
    ),
    wrong(
        "sum-global-tid",
        "array_sum",
        "indexes the shared array with the global thread index",
        r"outside",
        ("tid = cuda.threadIdx.x", "tid = cuda.grid(1)"),
    ),
    wrong(
        "sum-stride-blockdim",
        "array_sum",
        "the grid-stride loop steps by cuda.blockDim.x: elements added several times",
        r"added several times: the grid-stride loop steps by cuda\.blockDim\.x",
        (LOOP_HEAD, "    for i in range(cuda.grid(1), x.shape[0], cuda.blockDim.x):"),
    ),
    wrong(
        "sum-loop-from-tid",
        "array_sum",
        "the grid-stride loop starts at cuda.threadIdx.x: every block adds the same elements",
        r"every block added the same elements.*start it at cuda\.grid\(1\)",
        (LOOP_HEAD, "    for i in range(tid, x.shape[0], cuda.gridsize(1)):"),
    ),
    wrong(
        "sum-loop-misses-last",
        "array_sum",
        "the loop's bound is x.shape[0] - 1: the last element is left out",
        r"the last element, x\[n - 1\], is missing",
        (LOOP_HEAD, "    for i in range(cuda.grid(1), x.shape[0] - 1, cuda.gridsize(1)):"),
    ),
    wrong(
        "sum-acc-overwrite",
        "array_sum",
        "acc = x[i]: each thread keeps its last element only",
        r"only the last of its grid-stride elements.*acc \+= x\[i\]",
        ("        acc += x[i]", "        acc = x[i]"),
    ),
    wrong(
        "sum-last-warp-no-sync",
        "array_sum",
        "the tree's last warp unrolled without barriers (warp-synchronous, unsafe since Volta)",
        r"race.*a warp does not run in lockstep",
        (
            TREE,
            "    while stride > 32:\n        if tid < stride:\n            s[tid] += s[tid + stride]\n"
            "        cuda.syncthreads()\n        stride //= 2\n"
            "    if tid < 32:  # one warp left: no barrier, as if its lanes ran in lockstep\n"
            "        while stride > 0:\n            s[tid] += s[tid + stride]\n            stride //= 2\n",
        ),
    ),
    wrong(
        "sum-guard-bound",
        "array_sum",
        "the tree's guard is `tid + stride < BLOCK`: threads past `stride` add too, racing with the readers",
        r"race on s\[",
        ("        if tid < stride:\n", "        if tid + stride < BLOCK:\n"),
    ),
    valid("sum-block-128", "array_sum", "blocks of 128 threads", ("BLOCK = 64", "BLOCK = 128")),
    valid("sum-block-32", "array_sum", "blocks of one warp, 32 threads", ("BLOCK = 64", "BLOCK = 32")),
    wrong(
        "sum-interleaved-one-warp",
        "array_sum",
        "interleaved addressing in blocks of one warp (BLOCK = 32): as many warp instructions as "
        "sequential addressing, the busy lanes still scattered",
        r"sum is right.*blocks of 32 threads a warp stored into shared memory from its lanes 0, 2, 4.*"
        r"Hint: sequential addressing",
        ("BLOCK = 64", "BLOCK = 32"),
        ("    stride = BLOCK // 2\n", ""),
        (
            TREE,
            "    stride = 1\n    while stride < BLOCK:\n        if tid % (2 * stride) == 0:\n"
            "            s[tid] += s[tid + stride]\n        cuda.syncthreads()\n        stride *= 2\n",
        ),
    ),
    valid(
        "sum-while-stride",
        "array_sum",
        "a while grid-stride loop and a shift for the stride",
        (
            LOOP,
            "    i = cuda.grid(1)\n    while i < x.shape[0]:\n"
            "        acc += x[i]\n        i += cuda.gridsize(1)",
        ),
        ("stride //= 2", "stride >>= 1"),
    ),
    valid(
        "sum-last-thread-adds",
        "array_sum",
        "the block's last thread does the atomic",
        ("    if tid == 0:\n", "    if tid == BLOCK - 1:\n"),
    ),
    wrong(
        "sum-interleaved",
        "array_sum",
        "interleaved addressing (the stride doubles, `if tid % (2 * stride) == 0:`), where the text asks "
        "for sequential addressing: the right sum, with divergent warps",
        r"sum is right.*a warp stored into shared memory from its lanes 0, 2, 4, .* only.*interleaved "
        r"addressing.*divergent warps.*Hint: sequential addressing",
        ("    stride = BLOCK // 2\n", ""),
        (
            TREE,
            "    stride = 1\n    while stride < BLOCK:\n        if tid % (2 * stride) == 0:\n"
            "            s[tid] += s[tid + stride]\n        cuda.syncthreads()\n        stride *= 2\n",
        ),
    ),
    wrong(
        "sum-strided-index",
        "array_sum",
        "consecutive threads with a strided index (`index = 2 * stride * tid`), Harris's second kernel: the "
        "right sum, with bank conflicts",
        r"sum is right.*bank conflict\(s\).*strided index.*Hint: sequential addressing",
        ("    stride = BLOCK // 2\n", ""),
        (
            TREE,
            "    stride = 1\n    while stride < BLOCK:\n        index = 2 * stride * tid\n"
            "        if index < BLOCK:\n            s[index] += s[index + stride]\n"
            "        cuda.syncthreads()\n        stride *= 2\n",
        ),
    ),
    wrong(
        "sum-strides-ascending",
        "array_sum",
        "sequential addressing with the strides in the wrong order: 1, 2, 4, ... instead of BLOCK // 2 down",
        r"^(?!.*only block 0).*strides run in the wrong order.*halves down to 1",
        ("    stride = BLOCK // 2\n", "    stride = 1\n"),
        ("    while stride > 0:  #", "    while stride < BLOCK:  #"),
        ("        stride //= 2\n", "        stride *= 2\n"),
    ),
    valid(
        "sum-shuffles",
        "array_sum",
        "a shfl_down_sync tree in each warp, then thread 0 adds the warps' sums from shared memory",
        code=(
            "BLOCK = 64\nWARPS = BLOCK // 32  # a module-level constant: the shared array's size\n\n\n"
            "@cuda.jit\ndef array_sum(x, out):\n"
            "    s = cuda.shared.array(WARPS, float32)\n"
            "    tid = cuda.threadIdx.x\n"
            "    acc = float32(0.0)\n"
            "    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):\n"
            "        acc += x[i]\n"
            "    offset = 16\n"
            "    while offset > 0:\n"
            "        acc += cuda.shfl_down_sync(FULL_MASK, acc, offset)\n"
            "        offset //= 2\n"
            "    if cuda.laneid == 0:\n"
            "        s[tid // 32] = acc\n"
            "    cuda.syncthreads()\n"
            "    if tid == 0:\n"
            "        total = float32(0.0)\n"
            "        for w in range(WARPS):\n"
            "            total += s[w]\n"
            "        cuda.atomic.add(out, 0, total)\n"
        ),
    ),
    # Exercise 2: warp_sum and warp_sums -------------------------------------------------------------
    wrong(
        "warp-half-mask",
        "warp_sums",
        "mask 0xFFFF: half the lanes, though all 32 call the shuffle",
        r"warp-level error",
        (SHFL, "v += cuda.shfl_xor_sync(0xFFFF, v, offset)"),
    ),
    wrong(
        "warp-shfl-up",
        "warp_sums",
        "shfl_up_sync instead of shfl_down_sync",
        r"shfl_up_sync moves values up",
        (SHFL, "v += cuda.shfl_up_sync(FULL_MASK, v, offset)"),
    ),
    wrong(
        "warp-lane-31",
        "warp_sums",
        "a shfl_down_sync tree, and lane 31 writes the warp's sum",
        r"written by lane 31",
        (SHFL, "v += cuda.shfl_down_sync(FULL_MASK, v, offset)"),
        (LANE0, "if cuda.laneid == 31 and w < out.shape[0]:"),
    ),
    wrong(
        "warp-partial-skips",
        "warp_sums",
        "lanes past the end of x skip the shuffle (a partial warp)",
        r"warp-level error",
        (LOAD, "    s = float32(0.0)\n    if i < x.shape[0]:\n        s = warp_sum(x[i])\n"),
    ),
    wrong(
        "warp-early-return",
        "warp_sums",
        "lanes past the end of x return before the shuffle",
        r"warp-level error",
        (
            "    i = cuda.grid(1)\n    v = float32(0.0)\n",
            "    i = cuda.grid(1)\n    if i >= x.shape[0]:\n        return\n    v = float32(0.0)\n",
        ),
    ),
    wrong(
        "warp-offset-32",
        "warp_sums",
        "the offsets start at 32",
        r"twice the right one",
        ("    offset = 16\n", "    offset = 32\n"),
    ),
    wrong(
        "warp-no-offset-1",
        "warp_sums",
        "the loop stops before offset 1",
        r"only its even lanes",
        ("while offset > 0:", "while offset > 1:"),
    ),
    wrong(
        "warp-start-8",
        "warp_sums",
        "the offsets start at 8",
        r"only its lanes 0-15",
        ("    offset = 16\n", "    offset = 8\n"),
    ),
    wrong(
        "warp-no-out-guard",
        "warp_sums",
        "no guard on warps past the end of out",
        r"^(?!.*not a multiple)(?!.*surplus).*outside.*out\[1\].*lane 0 of warp w writes out\[w\] only "
        r"`if w < out\.shape\[0\]`",
        (LANE0, "if cuda.laneid == 0:"),
    ),
    wrong(
        "warp-float64",
        "warp_sums",
        "v = 0.0: the shuffled value is float64",
        r"float64",
        ("v = float32(0.0)", "v = 0.0"),
    ),
    wrong(
        "warp-block-local-index",
        "warp_sums",
        "w = cuda.threadIdx.x // 32: the warp's index within its block",
        r"cuda\.threadIdx\.x // 32 numbers the warps within one block",
        ("    w = i // 32\n", "    w = cuda.threadIdx.x // 32\n"),
    ),
    wrong(
        "warp-shfl-sync",
        "warp_sums",
        "cuda.shfl_sync (a broadcast from lane `offset`) instead of shfl_xor_sync",
        r"shfl_sync\(mask, v, offset\) reads lane `offset` itself",
        (SHFL, "v += cuda.shfl_sync(FULL_MASK, v, offset)"),
    ),
    wrong(
        "warp-threadidx-zero",
        "warp_sums",
        "`cuda.threadIdx.x == 0` writes: one warp per block",
        r"only the first warp of each block wrote.*cuda\.laneid == 0",
        (LANE0, "if cuda.threadIdx.x == 0 and w < out.shape[0]:"),
    ),
    wrong(
        "warp-no-x-guard",
        "warp_sums",
        "no guard on the load of x: lanes past the end read outside it",
        r"out-of-bounds read of x\[",
        ("    if i < x.shape[0]:\n        v = x[i]\n", "    v = x[i]\n"),
    ),
    wrong(
        "warp-two-warps-per-block",
        "warp_sums",
        "the warp's index computed for blocks of 64 threads: "
        "w = cuda.blockIdx.x * 2 + cuda.threadIdx.x // 32",
        r"computed for blocks of 64 threads \(2 warp\(s\) a block, typed in\).*blocks of 32 threads",
        ("    w = i // 32\n", "    w = cuda.blockIdx.x * 2 + cuda.threadIdx.x // 32\n"),
    ),
    wrong(
        "warp-shared-memory",
        "warp_sums",
        "the warp's values through shared memory, added by lane 0 in a loop: right sums, no shuffle",
        r"warp sums are right, but traced for n = 10 your kernel made \d+ shared-memory request\(s\), 0 "
        r"shuffle\(s\).*through shuffles",
        code=(
            "@cuda.jit(device=True)\ndef warp_sum(v):\n    offset = 16\n    while offset > 0:\n"
            "        v += cuda.shfl_xor_sync(FULL_MASK, v, offset)\n        offset //= 2\n    return v\n\n\n"
            "@cuda.jit\ndef warp_sums(x, out):\n"
            "    s = cuda.shared.array(1024, float32)\n"
            "    i = cuda.grid(1)\n    t = cuda.threadIdx.x\n"
            "    v = float32(0.0)\n    if i < x.shape[0]:\n        v = x[i]\n"
            "    s[t] = v\n    cuda.syncthreads()\n"
            "    w = i // 32\n"
            "    if cuda.laneid == 0 and w < out.shape[0]:\n"
            "        total = float32(0.0)\n        for k in range(32):\n            total += s[t + k]\n"
            "        out[w] = total\n"
        ),
    ),
    valid(
        "warp-down",
        "warp_sums",
        "a shfl_down_sync tree: the sum in lane 0 only, which writes it",
        (SHFL, "v += cuda.shfl_down_sync(FULL_MASK, v, offset)"),
    ),
    valid(
        "warp-increasing-offsets",
        "warp_sums",
        "offsets 1, 2, 4, 8, 16 with shfl_down_sync: lane 0 still gets every lane once",
        (SHFL, "v += cuda.shfl_down_sync(FULL_MASK, v, offset)"),
        ("    offset = 16\n    while offset > 0:", "    offset = 1\n    while offset < 32:"),
        ("offset //= 2", "offset *= 2"),
    ),
    valid(
        "warp-tuple-offsets",
        "warp_sums",
        "a loop over a tuple of offsets and threadIdx.x % 32 for the lane",
        ("    offset = 16\n    while offset > 0:\n", "    for offset in (16, 8, 4, 2, 1):\n"),
        ("        offset //= 2\n", ""),
        (LANE0, "if cuda.threadIdx.x % 32 == 0 and w < out.shape[0]:"),
    ),
    # Exercise 3: softmax_rows -------------------------------------------------------------------------
    wrong(
        "sm-no-max",
        "softmax_rows",
        "exp(x) without the max subtracted",
        r"^(?!.*not done yet)(?!.*never written).*overflowed float32.*subtract the row's maximum",
        (EXP, "math.exp(x[row, j])"),
        (EXP, "math.exp(x[row, j])"),
    ),
    wrong(
        "sm-max-first-32",
        "softmax_rows",
        "the max over the first 32 columns only",
        r"first 32 columns only",
        (
            "    for j in range(lane, n, 32):\n        m = max(m, x[row, j])",
            "    if lane < n:\n        m = x[row, lane]",
        ),
    ),
    wrong(
        "sm-lane-max",
        "softmax_rows",
        "each lane's own max: no warp_max",
        r"max of its own columns",
        ("    m = warp_max(m)  # the row's max, in every lane\n", ""),
    ),
    valid(
        "sm-no-broadcast",
        "softmax_rows",
        "no broadcast: the solution's warp_sum (a butterfly) leaves the sum in every lane",
        (SUM, "    s = warp_sum(s)"),
    ),
    wrong(
        "sm-lane-sum",
        "softmax_rows",
        "each lane divides by its own partial sum",
        r"sum of its own columns",
        (SUM, "    s = s + float32(0.0)"),
    ),
    wrong(
        "sm-only-32-columns",
        "softmax_rows",
        "each lane handles one column: the columns beyond 32 are left out",
        r"columns beyond the first 32 are missing",
        (ROWS, "range(lane, min(n, 32), 32)"),
        (ROWS, "range(lane, min(n, 32), 32)"),
        (ROWS, "range(lane, min(n, 32), 32)"),
    ),
    wrong(
        "sm-float64-sum",
        "softmax_rows",
        "s = 0.0: a float64 accumulator",
        r"float64",
        ("s = float32(0.0)", "s = 0.0"),
    ),
    wrong(
        "sm-no-row-guard",
        "softmax_rows",
        "no guard on warps past the last row",
        r"^(?!.*swapped).*outside.*row 3 does not exist.*if row >= x\.shape\[0\]: return",
        (
            "    if row >= x.shape[0]:\n"
            "        return  # the whole warp leaves together: no lane is missing at a shuffle\n",
            "",
        ),
    ),
    wrong(
        "sm-shuffle-in-if",
        "softmax_rows",
        "warp_max called only by the lanes that have a column",
        r"warp-level error",
        ("    m = warp_max(m)", "    if lane < n:\n        m = warp_max(m)"),
    ),
    wrong(
        "sm-max-in-lane-0",
        "softmax_rows",
        "warp_max with shfl_down_sync: the max only in lane 0",
        r"max only in lane 0|in lane 0 only",
        (XOR_MAX, "v = max(v, cuda.shfl_down_sync(FULL_MASK, v, offset))"),
    ),
    wrong(
        "sm-init-zero",
        "softmax_rows",
        "the max starts at 0.0, not -inf (0 / 0 in a row of logits below -88)",
        r"^(?!.*never written)(?!.*not done yet).*hold NaN or inf that your kernel computed"
        r".*max starts at 0.*float32\(-math\.inf\)",
        ("float32(-math.inf)", "float32(0.0)"),
    ),
    wrong(
        "sm-sum-no-max",
        "softmax_rows",
        "the sum's exp forgets m: y = exp(x - m) / sum(exp(x))",
        r"divided by the sum of exp\(x\), without m",
        ("        s += math.exp(x[row, j] - m)", "        s += math.exp(x[row, j])"),
    ),
    wrong(
        "sm-sum-with-max",
        "softmax_rows",
        "warp_max where warp_sum was meant (copied from the max pass)",
        r"largest lane's partial sum.*warp_sum",
        ("warp_sum(s)", "warp_max(s)"),
    ),
    wrong(
        "sm-down-sum-no-broadcast",
        "softmax_rows",
        "a shfl_down_sync tree for the row's sum (valid in exercise 2), and no broadcast of lane 0's sum",
        r"only lane 0 holds the row's sum; broadcast it",
        ("@cuda.jit\ndef softmax_rows", WARP_SUM_DOWN + "@cuda.jit\ndef softmax_rows"),
        (SUM, "    s = warp_sum_down(s)"),
    ),
    wrong(
        "sm-running-sum",
        "softmax_rows",
        "y written in the sum's loop, divided by the running partial sum",
        r"sums to .*, not 1.*complete only after every lane's loop",
        (
            "        s += math.exp(x[row, j] - m)\n",
            "        s += math.exp(x[row, j] - m)\n        y[row, j] = math.exp(x[row, j] - m) / s\n",
        ),
        (SUM + "\n    for j in range(lane, n, 32):\n        y[row, j] = math.exp(x[row, j] - m) / s", ""),
    ),
    wrong(
        "sm-lane-threadidx",
        "softmax_rows",
        "lane = cuda.threadIdx.x: the second warp of a block starts at column 32",
        r"never written.*cuda\.laneid, 0 to 31 in every warp",
        ("    lane = cuda.laneid\n", "    lane = cuda.threadIdx.x\n"),
    ),
    wrong(
        "sm-row-two-warps-per-block",
        "softmax_rows",
        "the row computed for blocks of 64 threads: row = cuda.blockIdx.x * 2 + cuda.threadIdx.x // 32",
        r"blocks of 32 threads.*never written.*a block of 32 threads holds 1 warp\(s\).*typed in",
        ("    row = cuda.grid(1) // 32\n", "    row = cuda.blockIdx.x * 2 + cuda.threadIdx.x // 32\n"),
    ),
    wrong(
        "sm-three-columns-a-lane",
        "softmax_rows",
        "each lane handles at most three columns (an unroll for rows of up to 96): long rows cut short",
        r"x \(5, 300\).*never written.*up to the row's end.*however long the row: 300 columns",
        (ROWS, "range(lane, min(n, 96), 32)"),
        (ROWS, "range(lane, min(n, 96), 32)"),
        (ROWS, "range(lane, min(n, 96), 32)"),
    ),
    wrong(
        "sm-lane0-whole-row",
        "softmax_rows",
        "lane 0 of each warp does the whole row in three loops, the other lanes return: no shuffle",
        r"softmax rows are right, but traced for x \(2, 20\) your kernel made 0 shuffle\(s\) for 2 warp\(s\)"
        r".*through shuffles",
        (
            "    if row >= x.shape[0]:\n",
            "    if row >= x.shape[0] or cuda.laneid != 0:\n",
        ),
        (ROWS, "range(0, n)"),
        ("    m = warp_max(m)  # the row's max, in every lane\n", ""),
        (ROWS, "range(0, n)"),
        (SUM + "\n", ""),
        (ROWS, "range(0, n)"),
    ),
    valid(
        "sm-finite-init",
        "softmax_rows",
        "the max starts at -3e38 and warp_max loops over a tuple",
        ("float32(-math.inf)", "float32(-3.0e38)"),
        (
            "    offset = 16\n    while offset > 0:\n        v = max",
            "    for offset in (16, 8, 4, 2, 1):\n        v = max",
        ),
        ("        offset //= 2\n    return v", "    return v"),
    ),
    valid(
        "sm-store-then-scale",
        "softmax_rows",
        "the exps stored in y in the second pass, scaled by 1/s in the third",
        (
            "    for j in range(lane, n, 32):\n        s += math.exp(x[row, j] - m)",
            "    for j in range(lane, n, 32):\n"
            "        e = math.exp(x[row, j] - m)\n        y[row, j] = e\n        s += e",
        ),
        ("        y[row, j] = math.exp(x[row, j] - m) / s", "        y[row, j] = y[row, j] / s"),
    ),
    valid(
        "sm-online",
        "softmax_rows",
        "one pass per lane with the online rule, then a butterfly of the lanes' (m, d) states",
        (
            "    m = float32(-math.inf)\n    for j in range(lane, n, 32):\n        m = max(m, x[row, j])\n"
            "    m = warp_max(m)  # the row's max, in every lane\n"
            "    s = float32(0.0)\n    for j in range(lane, n, 32):\n        s += math.exp(x[row, j] - m)\n"
            + SUM
            + "\n",
            "    m = float32(-math.inf)\n    s = float32(0.0)\n    for j in range(lane, n, 32):\n"
            "        v = x[row, j]\n        if v > m:\n            s = s * math.exp(m - v) + float32(1.0)\n"
            "            m = v\n        else:\n            s += math.exp(v - m)\n"
            "    offset = 16\n    while offset > 0:\n"
            "        m_o = cuda.shfl_xor_sync(FULL_MASK, m, offset)\n"
            "        s_o = cuda.shfl_xor_sync(FULL_MASK, s, offset)\n"
            "        m_new = max(m, m_o)\n"
            "        if m_new > float32(-math.inf):  # a lane with no column has the empty state (-inf, 0)\n"
            "            s = s * math.exp(m - m_new) + s_o * math.exp(m_o - m_new)\n"
            "        m = m_new\n        offset //= 2\n",
        ),
    ),
    # Exercise 4: online_combine -----------------------------------------------------------------------
    wrong(
        "comb-no-rescale",
        "online_combine",
        "adds the sums without rescaling",
        r"without rescaling",
        (COMBINE, "    m = max(m_a, m_b)\n    return m, d_a + d_b"),
    ),
    wrong(
        "comb-rescale-a-only",
        "online_combine",
        "rescales d_a only",
        r"only d_a was rescaled",
        (COMBINE, "    m = max(m_a, m_b)\n    return m, d_a * math.exp(m_a - m) + d_b"),
    ),
    wrong(
        "comb-inverted",
        "online_combine",
        "exp(m - m_a) instead of exp(m_a - m)",
        r"factors are inverted",
        (COMBINE, "    m = max(m_a, m_b)\n    return m, d_a * math.exp(m - m_a) + d_b * math.exp(m - m_b)"),
    ),
    wrong(
        "comb-newest-max",
        "online_combine",
        "takes the newest chunk's max as m",
        r"not the larger of m_a and m_b",
        (COMBINE, "    m = m_b\n    return m, d_a * math.exp(m_a - m) + d_b * math.exp(m_b - m)"),
    ),
    wrong(
        "comb-swapped",
        "online_combine",
        "returns (d, m)",
        r"\(d, m\)",
        (COMBINE, "    m = max(m_a, m_b)\n    return d_a * math.exp(m_a - m) + d_b * math.exp(m_b - m), m"),
    ),
    wrong(
        "comb-rescale-b-only",
        "online_combine",
        "rescales d_b only",
        r"only d_b was rescaled",
        (COMBINE, "    m = max(m_a, m_b)\n    return m, d_a + d_b * math.exp(m_b - m)"),
    ),
    wrong(
        "comb-forgets-db",
        "online_combine",
        "adds exp(m_b - m), as if chunk b were one element: d_b dropped",
        r"d_b is missing",
        (COMBINE, "    m = max(m_a, m_b)\n    return m, d_a * math.exp(m_a - m) + math.exp(m_b - m)"),
    ),
    wrong(
        "comb-min",
        "online_combine",
        "m = min(m_a, m_b)",
        r"the new m is the smaller of m_a and m_b",
        (COMBINE, "    m = min(m_a, m_b)\n    return m, d_a * math.exp(m_a - m) + d_b * math.exp(m_b - m)"),
    ),
    wrong(
        "comb-no-shift",
        "online_combine",
        "scales the sums by exp(m_a) and exp(m_b), the new max not subtracted",
        r"the factors are exp\(m_a\) and exp\(m_b\)",
        (COMBINE, "    m = max(m_a, m_b)\n    return m, d_a * math.exp(m_a) + d_b * math.exp(m_b)"),
    ),
    wrong(
        "comb-overflow",
        "online_combine",
        "rescales through exp(m_a) / exp(m): right on small logits, overflows near 1000",
        r"raised OverflowError.*nothing overflows",
        (
            COMBINE,
            "    m = max(m_a, m_b)\n    return m, (d_a * math.exp(m_a) + d_b * math.exp(m_b)) / math.exp(m)",
        ),
    ),
    valid(
        "comb-empty-guard",
        "online_combine",
        "early returns for an empty state (d = 0)",
        (
            COMBINE,
            "    if d_a == 0:\n        return m_b, d_b\n    if d_b == 0:\n        return m_a, d_a\n"
            + COMBINE,
        ),
    ),
    valid(
        "comb-branch",
        "online_combine",
        "a branch on the larger max (one exp)",
        (
            COMBINE,
            "    if m_a >= m_b:\n        return m_a, d_a + d_b * math.exp(m_b - m_a)\n"
            "    return m_b, d_a * math.exp(m_a - m_b) + d_b",
        ),
    ),
    valid(
        "comb-numpy",
        "online_combine",
        "NumPy's maximum and exp (NumPy floats back)",
        (
            COMBINE,
            "    m = np.maximum(m_a, m_b)\n    return m, d_a * np.exp(m_a - m) + d_b * np.exp(m_b - m)",
        ),
    ),
]
