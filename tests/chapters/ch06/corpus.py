"""Lab 6 (register blocking, tensor-core precisions): wrong answers students write, and valid alternatives."""

from mutations import valid, wrong

LOADS = """            for i in range(TM):
                a[i] = sA[ty * TM + i, k]
            for j in range(TN):
                b[j] = sB[k, tx * TN + j]
"""
FMAS = """            for i in range(TM):
                for j in range(TN):
                    acc[i, j] += a[i] * b[j]
"""
STORE = """    for i in range(TM):
        for j in range(TN):
            r = row0 + ty * TM + i
            c = col0 + tx * TN + j
            if r < M and c < N:
                C[r, c] = acc[i, j]"""
A_SOL = "    return (group + 8 * ((i >> 1) & 1), 2 * thread + (i & 1) + 8 * (i >> 2))"
LA = "                a[i] = sA[ty * TM + i, k]"
LB = "                b[j] = sB[k, tx * TN + j]"
RC = "            r = row0 + ty * TM + i\n            c = col0 + tx * TN + j"
STORE_IN_LOOP = """        for i in range(TM):
            for j in range(TN):
                r = row0 + ty * TM + i
                c = col0 + tx * TN + j
                if r < M and c < N:
                    C[r, c] = acc[i, j]
"""

MUTATIONS = [
    # Exercise 1: reads_per_fma -------------------------------------------------------------------
    wrong(
        "reads-per-output",
        "reads_per_fma",
        "divides 2 reads by the TM * TN outputs",
        r"reads_per_fma\(8, 1\).*expected 1\.125",
        ("return (TM + TN) / (TM * TN)", "return 2 / (TM * TN)"),
    ),
    wrong(
        "reads-inverted",
        "reads_per_fma",
        "multiply-adds per read instead of reads per multiply-add",
        r"reads_per_fma\(1, 1\)` is 0\.5, expected 2\.0",
        ("return (TM + TN) / (TM * TN)", "return (TM * TN) / (TM + TN)"),
    ),
    wrong(
        "reads-integer-division",
        "reads_per_fma",
        "integer division: // instead of /",
        r"reads_per_fma\(8, 1\)` is 1, expected 1\.125",
        ("return (TM + TN) / (TM * TN)", "return (TM + TN) // (TM * TN)"),
    ),
    wrong(
        "reads-total",
        "reads_per_fma",
        "the reads of one step along k, not per multiply-add",
        r"reads_per_fma\(8, 1\).*expected 1\.125",
        ("return (TM + TN) / (TM * TN)", "return float(TM + TN)"),
    ),
    valid(
        "reads-sum-of-inverses",
        "reads_per_fma",
        "1/TN + 1/TM, the same fraction",
        ("return (TM + TN) / (TM * TN)", "return 1 / TN + 1 / TM"),
    ),
    valid(
        "reads-explicit-counts",
        "reads_per_fma",
        "counts reads and multiply-adds by name",
        ("return (TM + TN) / (TM * TN)", "reads, fmas = TM + TN, TM * TN\n    return reads / fmas"),
    ),
    # Exercise 2: matmul_regblock -----------------------------------------------------------------
    wrong(
        "store-inside-tile-loop",
        "matmul_regblock",
        "writes acc into C at the end of every tile (right result, partial sums stored each time)",
        r"stores each element of C 2 times.*once, after the loop over tiles",
        (FMAS + "        cuda.syncthreads()", FMAS + STORE_IN_LOOP + "        cuda.syncthreads()"),
        (STORE, "    pass"),
    ),
    wrong(
        "unblocked-reads",
        "matmul_regblock",
        "reads sA and sB inside the i, j loops (one shared read per multiply-add)",
        r"reads shared memory 12 times per step along k.*load a and b before the i, j loops",
        (LOADS + FMAS, FMAS.replace("a[i] * b[j]", "sA[ty * TM + i, k] * sB[k, tx * TN + j]")),
    ),
    wrong(
        "no-store-guard",
        "matmul_regblock",
        "stores without the `if r < M and c < N` guard",
        r"outside|guard",
        (
            "            if r < M and c < N:\n                C[r, c] = acc[i, j]",
            "            C[r, c] = acc[i, j]",
        ),
    ),
    wrong(
        "store-guard-or",
        "matmul_regblock",
        "guards the store with `or` instead of `and`",
        r"outside|guard",
        ("if r < M and c < N:", "if r < M or c < N:"),
    ),
    wrong(
        "store-transposed",
        "matmul_regblock",
        "stores C[c, r] (row and column swapped)",
        r"transpose|swapped|outside",
        ("C[r, c] = acc[i, j]", "C[c, r] = acc[i, j]"),
    ),
    wrong(
        "overwrites-acc",
        "matmul_regblock",
        "acc[i, j] = a[i] * b[j]: keeps only the last product",
        r"only the last product.*acc\[i, j\] \+=",
        ("acc[i, j] += a[i] * b[j]", "acc[i, j] = a[i] * b[j]"),
    ),
    wrong(
        "micro-tile-stride-wrong",
        "matmul_regblock",
        "reads A's values at ty + i instead of ty * TM + i",
        r"is wrong at \d+ of \d+ elements",
        ("a[i] = sA[ty * TM + i, k]", "a[i] = sA[ty + i, k]"),
    ),
    wrong(
        "adds-into-C",
        "matmul_regblock",
        "accumulates straight into C, which is not zeroed",
        r"adds into C.*accumulate in `acc`",
        (
            FMAS,
            """            for i in range(TM):
                for j in range(TN):
                    if row0 + ty * TM + i < M and col0 + tx * TN + j < N:
                        C[row0 + ty * TM + i, col0 + tx * TN + j] += a[i] * b[j]
""",
        ),
        (STORE, "    pass"),
    ),
    wrong(
        "k-over-K",
        "matmul_regblock",
        "loops k over the whole K instead of the tile's BK",
        r"outside|IndexError",
        ("        for k in range(BK):\n", "        for k in range(K):\n"),
    ),
    valid(
        "float-casts-folded",
        "matmul_regblock",
        "casts the operands to Python floats; a float32 product is exact in float64, so the compiler folds "
        "the casts away and the PTX is float32 arithmetic only (checked by cudalearn.compile.ptx)",
        ("acc[i, j] += a[i] * b[j]", "acc[i, j] += float(a[i]) * float(b[j])"),
    ),
    wrong(
        "no-second-barrier",
        "matmul_regblock",
        "drops the barrier before the next tiles overwrite sA and sB",
        r"race",
        (
            FMAS + "        cuda.syncthreads()\n",
            FMAS,
        ),
    ),
    valid(
        "swapped-thread-mapping",
        "matmul_regblock",
        "thread t takes tile row t % (BM // TM) and column t // (BM // TM): another valid mapping",
        (
            "    tx = t % (BN // TN)\n    ty = t // (BN // TN)\n",
            "    ty = t % (BM // TM)\n    tx = t // (BM // TM)\n",
        ),
    ),
    valid(
        "store-j-outer",
        "matmul_regblock",
        "the store loops with j outside, i inside, and the guard split in two",
        (
            STORE,
            """    for j in range(TN):
        c = col0 + tx * TN + j
        if c < N:
            for i in range(TM):
                r = row0 + ty * TM + i
                if r < M:
                    C[r, c] = acc[i, j]""",
        ),
    ),
    valid(
        "a-loaded-in-outer-loop",
        "matmul_regblock",
        "loads b first, then each a[i] just before its row of multiply-adds",
        (
            LOADS + FMAS,
            """            for j in range(TN):
                b[j] = sB[k, tx * TN + j]
            for i in range(TM):
                a[i] = sA[ty * TM + i, k]
                for j in range(TN):
                    acc[i, j] += a[i] * b[j]
""",
        ),
    ),
    # Exercise 3: autocast_dtype ------------------------------------------------------------------
    wrong(
        "fp16-from-turing",
        "autocast_dtype",
        "float16 only from sm_75 (forgets Volta)",
        r"autocast_dtype\(\(7, 0\)\) is None, expected torch\.float16",
        ("if tuple(cc) >= (7, 0):", "if tuple(cc) >= (7, 5):"),
    ),
    wrong(
        "bf16-listed-gpus",
        "autocast_dtype",
        "bfloat16 only for the listed A100 and H100/H200",
        r"autocast_dtype\(\(8, 6\)\) is torch\.float16, expected torch\.bfloat16",
        ("if tuple(cc) >= (8, 0):", "if tuple(cc) in [(8, 0), (9, 0)]:"),
    ),
    wrong(
        "bf16-major-range",
        "autocast_dtype",
        "bfloat16 for majors 8 and 9 only (misses Blackwell)",
        r"autocast_dtype\(\(10, 0\)\) is torch\.float16",
        ("if tuple(cc) >= (8, 0):", "if cc[0] in (8, 9):"),
    ),
    wrong(
        "float16-tested-first",
        "autocast_dtype",
        "tests sm_70 before sm_80, so every newer GPU gets float16",
        r"autocast_dtype\(\(8, 0\)\) is torch\.float16, expected torch\.bfloat16",
        code=(
            "def autocast_dtype(cc):\n"
            "    if tuple(cc) >= (7, 0):\n"
            "        return torch.float16\n"
            "    if tuple(cc) >= (8, 0):\n"
            "        return torch.bfloat16\n"
            "    return None\n"
        ),
    ),
    wrong(
        "float32-without-tensor-cores",
        "autocast_dtype",
        "returns torch.float32 instead of None below sm_70",
        r"is torch\.float32, expected None",
        ("    return None", "    return torch.float32"),
    ),
    wrong(
        "dtype-names",
        "autocast_dtype",
        "returns the names as strings",
        r"is 'bfloat16', expected torch\.bfloat16",
        ("return torch.bfloat16", 'return "bfloat16"'),
        ("return torch.float16", 'return "float16"'),
    ),
    wrong(
        "tn-for-tm",
        "matmul_regblock",
        "reads A's rows with TN where TM belongs (the two are equal on no lab size)",
        r"C \(m, k, n = .*\)` is wrong",
        (LA, "                a[i] = sA[ty * TN + i, k]"),
    ),
    wrong(
        "typed-in-4",
        "matmul_regblock",
        "types the micro-tile as 4 instead of TM and TN",
        r"is wrong|outside",
        (LA, "                a[i] = sA[ty * 4 + i, k]"),
        (LB, "                b[j] = sB[k, tx * 4 + j]"),
    ),
    wrong(
        "typed-in-sim-tiles",
        "matmul_regblock",
        "types the simulator's tile sizes (BK = 5, TM = 3, TN = 2) where the names belong: right under the "
        "simulator's sizes only",
        r"not with other ones.*tile size typed in as a number where the tile's name belongs \(line \d+, "
        r"`for k in range\(5\):`: 5 is BK here; line \d+, `a\[i\] = sA\[ty \* 3 \+ i, k\]`: 3 is TM here",
        ("        for k in range(BK):\n", "        for k in range(5):\n"),
        (LA, "                a[i] = sA[ty * 3 + i, k]"),
        (LB, "                b[j] = sB[k, tx * 2 + j]"),
    ),
    wrong(
        "acc-zeroed-every-tile",
        "matmul_regblock",
        "sets acc to zero at the start of every tile",
        r"only the products of the last tile along k.*Zero acc once, before the loop over tiles",
        (
            "        for k in range(BK):\n",
            "        for i in range(TM):\n            for j in range(TN):\n"
            "                acc[i, j] = float32(0.0)\n        for k in range(BK):\n",
        ),
    ),
    wrong(
        "operands-from-global",
        "matmul_regblock",
        "reads a and b from A and B in global memory, never from the shared tiles",
        r"reads shared memory only 0\.0 times per step along k.*a\[i\] = sA\[ty \* TM \+ i, k\]",
        (
            LOADS,
            "            for i in range(TM):\n"
            "                gr = row0 + ty * TM + i\n"
            "                a[i] = A[gr, k0 + k] if gr < M and k0 + k < K else float32(0.0)\n"
            "            for j in range(TN):\n"
            "                gc = col0 + tx * TN + j\n"
            "                b[j] = B[k0 + k, gc] if k0 + k < K and gc < N else float32(0.0)\n",
        ),
    ),
    wrong(
        "barrier-in-store-guard",
        "matmul_regblock",
        "puts a cuda.syncthreads() inside the store's guard",
        r"block that sticks out of C.*synccheck.*without reaching the barrier",
        (
            "                C[r, c] = acc[i, j]",
            "                C[r, c] = acc[i, j]\n                cuda.syncthreads()",
        ),
    ),
    wrong(
        "acc-transposed-in-store",
        "matmul_regblock",
        "stores acc[j, i]",
        r"out-of-bounds access of acc\[j, i\] \(shape \(\d+, \d+\)\).*local array",
        ("C[r, c] = acc[i, j]", "C[r, c] = acc[j, i]"),
    ),
    wrong(
        "strided-loads-contiguous-store",
        "matmul_regblock",
        "reads strided rows and columns of the tiles but stores contiguous ones",
        r"holds the right values, but in the wrong places",
        (LA, "                a[i] = sA[ty + i * (BM // TM), k]"),
        (LB, "                b[j] = sB[k, tx + j * (BN // TN)]"),
    ),
    valid(
        "strided-micro-tile",
        "matmul_regblock",
        "owns rows ty + i * (BM // TM) and columns tx + j * (BN // TN), in the loads and the store",
        (LA, "                a[i] = sA[ty + i * (BM // TM), k]"),
        (LB, "                b[j] = sB[k, tx + j * (BN // TN)]"),
        (RC, "            r = row0 + ty + i * (BM // TM)\n            c = col0 + tx + j * (BN // TN)"),
    ),
    valid(
        "by-major",
        "autocast_dtype",
        "decides on the major version alone",
        code=(
            "def autocast_dtype(cc):\n"
            "    major, _ = cc\n"
            "    if major >= 8:\n"
            "        return torch.bfloat16\n"
            "    return torch.float16 if major == 7 else None\n"
        ),
    ),
    valid(
        "conditional-expression",
        "autocast_dtype",
        "one conditional expression on the tuple",
        code=(
            "def autocast_dtype(cc):\n"
            "    cc = tuple(cc)\n"
            "    return torch.bfloat16 if cc >= (8, 0) else torch.float16 if cc >= (7, 0) else None\n"
        ),
    ),
    # Exercise 4, part 1: a_fragment (deep dive 06d) --------------------------------------------------------
    wrong(
        "a-row-col-swapped",
        "a_fragment",
        "returns (col, row)",
        r"a_fragment is wrong for \d+ of 256.*a_fragment\(0, 1\) is \(1, 0\), expected \(0, 1\).*groupID",
        (A_SOL, "    return (2 * thread + (i & 1) + 8 * (i >> 2), group + 8 * ((i >> 1) & 1))"),
    ),
    wrong(
        "a-no-column-offset",
        "a_fragment",
        "forgets the 8 columns further right for a4..a7",
        r"a_fragment\(0, 4\) is \(0, 0\), expected \(0, 8\)",
        (A_SOL, "    return (group + 8 * ((i >> 1) & 1), 2 * thread + (i & 1))"),
    ),
    wrong(
        "a-halves-swapped",
        "a_fragment",
        "puts a2, a3 in the right half and a4, a5 in the lower half (rows and columns of i swapped)",
        r"a_fragment\(0, 2\) is \(0, 8\), expected \(8, 0\)",
        (A_SOL, "    return (group + 8 * (i >> 2), 2 * thread + (i & 1) + 8 * ((i >> 1) & 1))"),
    ),
    wrong(
        "a-lane-mod-8",
        "a_fragment",
        "groups of 8 lanes instead of 4: row lane // 8",
        r"a_fragment is wrong for \d+ of 256",
        ("    group, thread = lane >> 2, lane % 4", "    group, thread = lane >> 3, lane % 4"),
    ),
    valid(
        "a-membership",
        "a_fragment",
        "membership tests instead of bit arithmetic",
        ("    group, thread = lane >> 2, lane % 4\n", ""),
        (
            A_SOL,
            "    row = lane // 4 + (8 if i in (2, 3, 6, 7) else 0)\n"
            "    col = 2 * (lane % 4) + i % 2 + (8 if i >= 4 else 0)\n"
            "    return row, col",
        ),
    ),
    valid(
        "a-register-pairs",
        "a_fragment",
        "computes the register (i // 2) first, then the element in it",
        (
            A_SOL,
            "    reg, half = divmod(i, 2)\n"
            "    return (group + 8 * (reg % 2), 2 * thread + half + 8 * (reg // 2))",
        ),
    ),
    # Exercise 4, part 2: warp_tile (deep dive 06d) ----------------------------------------------------------
    wrong(
        "a1-a2-swapped",
        "warp_tile",
        "loads a1 from the right half and a2 from the lower half",
        r"your A fragment is",
        ("        a1 = A[r0 + g + 8, kw + t]", "        a1 = A[r0 + g, kw + t + 4]"),
        ("        a2 = A[r0 + g, kw + t + 4]", "        a2 = A[r0 + g + 8, kw + t]"),
    ),
    wrong(
        "a-rows-by-8",
        "warp_tile",
        "takes a lane's rows 8 apart as groupID * 2",
        r"your A fragment is",
        ("        a0 = A[r0 + g, kw + t]", "        a0 = A[r0 + 2 * g % 16, kw + t]"),
    ),
    wrong(
        "b1-same-k",
        "warp_tile",
        "loads b1 from the same 8 values of k as b0",
        r"your B fragment is",
        ("        b1 = B[c0 + g, kw + t + 4]", "        b1 = B[c0 + g, kw + t]"),
    ),
    wrong(
        "b-lane-roles-swapped",
        "warp_tile",
        "swaps groupID and threadID_in_group in B",
        r"your B fragment is",
        ("        b0 = B[c0 + g, kw + t]", "        b0 = B[c0 + t, kw + g % 4]"),
    ),
    wrong(
        "d1-d2-swapped",
        "warp_tile",
        "stores d1 on row g + 8 and d2 on row g",
        r"the store of d0..d3",
        ("    C[r0 + g, c0 + 2 * t + 1] = d1", "    C[r0 + g, c0 + 2 * t + 1] = d2"),
        ("    C[r0 + g + 8, c0 + 2 * t] = d2", "    C[r0 + g + 8, c0 + 2 * t] = d1"),
    ),
    wrong(
        "store-columns-by-t",
        "warp_tile",
        "stores at column c0 + t instead of c0 + 2 * t",
        r"the store of d0..d3|is never written",
        ("    C[r0 + g, c0 + 2 * t] = d0", "    C[r0 + g, c0 + t] = d0"),
        ("    C[r0 + g, c0 + 2 * t + 1] = d1", "    C[r0 + g, c0 + t + 4] = d1"),
        ("    C[r0 + g + 8, c0 + 2 * t] = d2", "    C[r0 + g + 8, c0 + t] = d2"),
        ("    C[r0 + g + 8, c0 + 2 * t + 1] = d3", "    C[r0 + g + 8, c0 + t + 4] = d3"),
    ),
    wrong(
        "no-store",
        "warp_tile",
        "never stores d0..d3",
        r"is never written \(all NaN\)",
        ("    C[r0 + g, c0 + 2 * t] = d0\n", ""),
        ("    C[r0 + g, c0 + 2 * t + 1] = d1\n", ""),
        ("    C[r0 + g + 8, c0 + 2 * t] = d2\n", ""),
        ("    C[r0 + g + 8, c0 + 2 * t + 1] = d3", "    pass"),
    ),
    wrong(
        "only-lane-0-stores",
        "warp_tile",
        "lets lane 0 store the whole tile's first elements only",
        r"is wrong at \d+ of \d+ elements|is never written",
        ("    C[r0 + g, c0 + 2 * t] = d0", "    if lane == 0:\n        C[r0 + g, c0 + 2 * t] = d0"),
        ("    C[r0 + g, c0 + 2 * t + 1] = d1", "    if lane == 0:\n        C[r0 + g, c0 + 2 * t + 1] = d1"),
        ("    C[r0 + g + 8, c0 + 2 * t] = d2", "    if lane == 0:\n        C[r0 + g + 8, c0 + 2 * t] = d2"),
        (
            "    C[r0 + g + 8, c0 + 2 * t + 1] = d3",
            "    if lane == 0:\n        C[r0 + g + 8, c0 + 2 * t + 1] = d3",
        ),
    ),
    wrong(
        "second-half-of-k-skipped",
        "warp_tile",
        "reuses a0, a1 and b0 for k 8-15",
        r"your A fragment is wrong: in the first tile's mma_m16n8k8 for k 8-15",
        ("        a2 = A[r0 + g, kw + t + 4]", "        a2 = A[r0 + g, kw + t]"),
        ("        a3 = A[r0 + g + 8, kw + t + 4]", "        a3 = A[r0 + g + 8, kw + t]"),
        ("        b1 = B[c0 + g, kw + t + 4]", "        b1 = B[c0 + g, kw + t]"),
    ),
    valid(
        "row-variables",
        "warp_tile",
        "names the two rows and two k words first",
        (
            "        a0 = A[r0 + g, kw + t]\n        a1 = A[r0 + g + 8, kw + t]\n"
            "        a2 = A[r0 + g, kw + t + 4]\n        a3 = A[r0 + g + 8, kw + t + 4]\n"
            "        b0 = B[c0 + g, kw + t]\n        b1 = B[c0 + g, kw + t + 4]\n",
            "        top, low, k0, k1 = r0 + g, r0 + g + 8, kw + t, kw + t + 4\n"
            "        a0, a1, a2, a3 = A[top, k0], A[low, k0], A[top, k1], A[low, k1]\n"
            "        b0, b1 = B[c0 + g, k0], B[c0 + g, k1]\n",
        ),
    ),
    valid(
        "store-loop",
        "warp_tile",
        "stores the two rows in a loop",
        (
            "    C[r0 + g, c0 + 2 * t] = d0\n    C[r0 + g, c0 + 2 * t + 1] = d1\n"
            "    C[r0 + g + 8, c0 + 2 * t] = d2\n    C[r0 + g + 8, c0 + 2 * t + 1] = d3",
            "    for h in range(2):\n"
            "        lo = d0 if h == 0 else d2\n"
            "        hi = d1 if h == 0 else d3\n"
            "        C[r0 + g + 8 * h, c0 + 2 * t] = lo\n"
            "        C[r0 + g + 8 * h, c0 + 2 * t + 1] = hi",
        ),
    ),
]
