"""Lab 1 (CPU matmul): wrong answers students write, and valid alternatives."""

from mutations import valid, wrong

LOOPS_HEAD = '''def matmul_loops(A, B):
    """C = A @ B with Python loops; A (m, k), B (k, n) float64 -> C (m, n) float64."""
'''
IT = "return 2 * m * n * k / ((m * k + k * n + m * n) * bytes_per_element)"
AT = "return min(peak_gflops, intensity * bandwidth_gbs)"

MUTATIONS = [
    # matmul_loops -------------------------------------------------------------------------
    wrong(
        "ml-at",
        "matmul_loops",
        "returns A @ B where the loops are asked for",
        r"uses @.*Python loops",
        code=LOOPS_HEAD + "    return A @ B\n",
    ),
    wrong(
        "ml-np-dot",
        "matmul_loops",
        "returns np.dot(A, B)",
        r"uses np\.dot.*Python loops",
        code=LOOPS_HEAD + "    return np.dot(A, B)\n",
    ),
    wrong(
        "ml-method-dot",
        "matmul_loops",
        "returns A.dot(B)",
        r"uses \.dot.*Python loops",
        code=LOOPS_HEAD + "    return A.dot(B)\n",
    ),
    wrong(
        "ml-row-at-col",
        "matmul_loops",
        "loops over i, j but each C[i, j] is A[i, :] @ B[:, j]",
        r"uses @",
        code=LOOPS_HEAD
        + "    C = np.zeros((A.shape[0], B.shape[1]))\n    for i in range(A.shape[0]):\n"
        + "        for j in range(B.shape[1]):\n            C[i, j] = A[i, :] @ B[:, j]\n    return C\n",
    ),
    wrong(
        "ml-einsum",
        "matmul_loops",
        "np.einsum('ik,kj->ij', A, B)",
        r"uses np\.einsum",
        code=LOOPS_HEAD + "    return np.einsum('ik,kj->ij', A, B)\n",
    ),
    wrong(
        "ml-inner-range-n",
        "matmul_loops",
        "the inner loop runs over n, not k (right only for square matrices)",
        r"IndexError.*not square",
        ("for p in range(k):", "for p in range(n):"),
    ),
    wrong(
        "ml-acc-not-reset",
        "matmul_loops",
        "acc = 0.0 once, outside the loops: each C[i, j] adds the previous ones",
        r"sum of the previous ones.*acc = 0\.0 for every",
        ("    for i in range(m):\n", "    acc = 0.0\n    for i in range(m):\n"),
        ("            acc = 0.0\n", ""),
    ),
    wrong(
        "ml-acc-in-loop",
        "matmul_loops",
        "acc = 0.0 inside the loop over p: only the last product is kept",
        r"only the last product",
        (
            "            acc = 0.0\n            for p in range(k):\n",
            "            for p in range(k):\n                acc = 0.0\n",
        ),
    ),
    wrong(
        "ml-float32",
        "matmul_loops",
        "C allocated as float32",
        r"dtype float32, expected float64",
        ("C = np.zeros((m, n))", "C = np.zeros((m, n), dtype=np.float32)"),
    ),
    wrong(
        "ml-asarray-at",
        "matmul_loops",
        "converts the check's arrays with np.asarray (plain arrays accept @), then uses @",
        r"uses @.*Python loops",
        code=LOOPS_HEAD + "    return np.asarray(A) @ np.asarray(B)\n",
    ),
    wrong(
        "ml-getattr",
        "matmul_loops",
        "reaches np.matmul through getattr, on plain copies of the arrays",
        r"uses getattr.*by their names",
        code=LOOPS_HEAD + '    return getattr(np, "mat" + "mul")(np.array(A), np.array(B))\n',
    ),
    wrong(
        "ml-zero-inputs",
        "matmul_loops",
        "zeroes A and B in place and returns zeros (A @ B of the zeroed inputs)",
        r"is wrong at",
        code=LOOPS_HEAD
        + "    C = np.zeros((A.shape[0], B.shape[1]))\n    A[...] = 0\n    B[...] = 0\n    return C\n",
    ),
    wrong(
        "ml-broadcast-sum",
        "matmul_loops",
        "a broadcast product summed over k: no @, no np.dot, no loop",
        r"uses (a None or \.\.\. index|\.sum).*loops over single elements",
        code=LOOPS_HEAD + "    return (A[:, :, None] * B[None, :, :]).sum(axis=1)\n",
    ),
    wrong(
        "ml-np-sum-broadcast",
        "matmul_loops",
        "np.sum of a broadcast product through reshape",
        r"uses np\.sum.*loops over single elements",
        code=LOOPS_HEAD
        + "    m, k = A.shape\n    n = B.shape[1]\n"
        + "    return np.sum(A.reshape(m, k, 1) * B.reshape(1, k, n), axis=1)\n",
    ),
    wrong(
        "ml-row-times-column",
        "matmul_loops",
        "loops over i and j, but each C[i, j] is sum(A[i, :] * B[:, j]): the loop over k is NumPy's",
        r"right values but uses np\.multiply on a whole matrix, a row or a column.*loops over single",
        code=LOOPS_HEAD
        + "    m, k = A.shape\n    n = B.shape[1]\n    C = np.zeros((m, n))\n    for i in range(m):\n"
        + "        for j in range(n):\n            C[i, j] = sum(A[i, :] * B[:, j])\n    return C\n",
    ),
    wrong(
        "ml-helper-row-product",
        "matmul_loops",
        "the row-times-column product hidden in a helper of the same cell",
        r"right values but uses np\.multiply.*loops over single",
        code="def rowdot(r, c):\n    return sum(r * c)\n\n\n"
        + LOOPS_HEAD
        + "    m = A.shape[0]\n    n = B.shape[1]\n    C = np.zeros((m, n))\n    for i in range(m):\n"
        + "        for j in range(n):\n            C[i, j] = rowdot(A[i], B.T[j])\n    return C\n",
    ),
    wrong(
        "ml-patch-the-check",
        "matmul_loops",
        "replaces the check's student-side run with setattr, then broadcasts",
        r"uses (setattr|\.sum)",
        code="import cudalearn.chapters.ch01.checks as lab_checks\n\n"
        + 'setattr(lab_checks, "_loops_only", lambda f, A, B: {})\n\n\n'
        + LOOPS_HEAD
        + "    return (A[:, :, None] * B[None, :, :]).sum(axis=1)\n",
    ),
    valid(
        "ml-iterate-rows",
        "matmul_loops",
        "iterates the rows of A and of B.T, zip of two element iterators",
        code=LOOPS_HEAD
        + "    C = np.zeros((A.shape[0], B.shape[1]), dtype=A.dtype)\n"
        + "    for i, row in enumerate(A):\n        for j, col in enumerate(B.T):\n"
        + "            C[i, j] = sum(a * b for a, b in zip(row, col))\n    return C\n",
    ),
    valid(
        "ml-ikj",
        "matmul_loops",
        "the i, p, j loop order, accumulating into C",
        code=LOOPS_HEAD
        + "    m, k = A.shape\n    n = B.shape[1]\n    C = np.zeros((m, n))\n    for i in range(m):\n"
        + "        for p in range(k):\n            a = A[i, p]\n            for j in range(n):\n"
        + "                C[i, j] += a * B[p, j]\n    return C\n",
    ),
    valid(
        "ml-sum-generator",
        "matmul_loops",
        "sum() over a generator for each element",
        code=LOOPS_HEAD
        + "    m, k = A.shape\n    n = B.shape[1]\n    C = np.empty((m, n))\n    for i in range(m):\n"
        + "        for j in range(n):\n            C[i, j] = sum(A[i, p] * B[p, j] for p in range(k))\n"
        + "    return C\n",
    ),
    valid(
        "ml-lists",
        "matmul_loops",
        "nested lists, converted at the end",
        code=LOOPS_HEAD
        + "    m, k = A.shape\n    n = B.shape[1]\n"
        + "    rows = [[sum(A[i][p] * B[p][j] for p in range(k)) for j in range(n)] for i in range(m)]\n"
        + "    return np.array(rows, dtype=np.float64).reshape(m, n)\n",
    ),
    # matmul_flops -------------------------------------------------------------------------
    wrong(
        "mf-no-two",
        "matmul_flops",
        "m * n * k: one operation per term",
        r"one operation per term",
        ("return 2 * m * n * k", "return m * n * k"),
    ),
    wrong(
        "mf-float",
        "matmul_flops",
        "2.0 * m * n * k: a float",
        r"a float, where an int is asked for",
        ("return 2 * m * n * k", "return 2.0 * m * n * k"),
    ),
    wrong(
        "mf-k-minus-one",
        "matmul_flops",
        "k - 1 additions per output",
        r"k additions per output",
        ("return 2 * m * n * k", "return m * n * (2 * k - 1)"),
    ),
    wrong(
        "mf-no-n",
        "matmul_flops",
        "forgets n",
        r"left out n",
        ("return 2 * m * n * k", "return 2 * m * k"),
    ),
    valid(
        "mf-np-prod",
        "matmul_flops",
        "np.prod: a NumPy integer (the one rule: Python int or NumPy integer)",
        ("return 2 * m * n * k", "return 2 * np.prod([m, n, k])"),
    ),
    wrong(
        "mf-float-cast",
        "matmul_flops",
        "float(2 * m * n * k): a float holding a whole number",
        r"2\.0, a float, where an int is asked for",
        ("return 2 * m * n * k", "return float(2 * m * n * k)"),
    ),
    valid("mf-reordered", "matmul_flops", "k * m * n * 2", ("return 2 * m * n * k", "return k * m * n * 2")),
    valid(
        "mf-per-output",
        "matmul_flops",
        "outputs times 2k",
        ("return 2 * m * n * k", "outputs = m * n\n    return outputs * (2 * k)"),
    ),
    # intensity ---------------------------------------------------------------------------
    wrong(
        "in-no-c",
        "intensity",
        "counts only A and B",
        r"left out C's bytes",
        (IT, "return 2 * m * n * k / ((m * k + k * n) * bytes_per_element)"),
    ),
    wrong(
        "in-no-two",
        "intensity",
        "FLOPs as m * n * k",
        r"FLOPs are 2 \* m \* n \* k",
        (IT, "return m * n * k / ((m * k + k * n + m * n) * bytes_per_element)"),
    ),
    wrong(
        "in-four-bytes",
        "intensity",
        "hard-codes 4 bytes per element",
        r"4 bytes per element.*bytes_per_element",
        (IT, "return 2 * m * n * k / ((m * k + k * n + m * n) * 4)"),
    ),
    wrong(
        "in-floor-division",
        "intensity",
        "// instead of /",
        r"// rounds",
        (IT, "return 2 * m * n * k // ((m * k + k * n + m * n) * bytes_per_element)"),
    ),
    wrong(
        "in-elements",
        "intensity",
        "divides by elements, not bytes",
        r"elements, not bytes",
        (IT, "return 2 * m * n * k / (m * k + k * n + m * n)"),
    ),
    valid(
        "in-named",
        "intensity",
        "named FLOPs and bytes, float()",
        (
            IT,
            "flops = 2 * m * n * k\n    nbytes = (m * k + k * n + m * n) * bytes_per_element\n"
            "    return float(flops / nbytes)",
        ),
    ),
    valid(
        "in-numpy",
        "intensity",
        "NumPy arrays' sizes and a np.float64",
        (
            IT,
            "sizes = np.array([m * k, k * n, m * n], dtype=np.float64)\n"
            "    return np.float64(2 * m * n * k) / (sizes.sum() * bytes_per_element)",
        ),
    ),
    # attainable --------------------------------------------------------------------------
    wrong(
        "at-max",
        "attainable",
        "max instead of min",
        r"min, not max",
        (AT, "return max(peak_gflops, intensity * bandwidth_gbs)"),
    ),
    wrong(
        "at-no-cap", "attainable", "forgets the peak", r"peak caps", (AT, "return intensity * bandwidth_gbs")
    ),
    wrong(
        "at-t4-hard-coded",
        "attainable",
        "hard-codes the T4's peak and bandwidth",
        r"T4's figures",
        (AT, "return min(8100.0, intensity * 320.0)"),
    ),
    wrong(
        "at-units",
        "attainable",
        "multiplies by 1e9 (GB/s to B/s) and compares with GFLOP/s",
        r"no factor 1e9",
        (AT, "return min(peak_gflops, intensity * bandwidth_gbs * 1e9)"),
    ),
    wrong(
        "at-hard-ridge",
        "attainable",
        "compares with the T4's ridge point 25.3",
        r"T4's ridge point",
        (AT, "return peak_gflops if intensity >= 25.3125 else intensity * bandwidth_gbs"),
    ),
    valid(
        "at-np-minimum",
        "attainable",
        "np.minimum",
        (AT, "return np.minimum(peak_gflops, intensity * bandwidth_gbs)"),
    ),
    valid(
        "at-ridge",
        "attainable",
        "an if on the ridge point computed from the arguments",
        (
            AT,
            "ridge = peak_gflops / bandwidth_gbs\n"
            "    return peak_gflops if intensity >= ridge else intensity * bandwidth_gbs",
        ),
    ),
]
