"""Lab 0 (setup): wrong answers students write, and valid alternatives."""

from mutations import valid, wrong

SOLVED = "return (n + threads - 1) // threads"
LAUNCH = "scale[blocks_for(x.shape[0], THREADS), THREADS](d_x, np.float32(2.0))"
GUARD = "    if i < out.shape[0]:\n        out[i] = i"

MUTATIONS = [
    # blocks_for ---------------------------------------------------------------------------
    wrong(
        "bf-floor", "blocks_for", "n // threads: rounds down", r"rounds down", (SOLVED, "return n // threads")
    ),
    wrong(
        "bf-plus-one",
        "blocks_for",
        "n // threads + 1: one block too many for multiples",
        r"one block too many",
        (SOLVED, "return n // threads + 1"),
    ),
    # A float (np.ceil(n / threads), n / threads) also fails here, but then every launch of exercise 2
    # fails with it (a launch refuses a float grid): that cascade is real, so the corpus keeps the
    # type mistakes that a launch accepts (grid_2d's floats are in lab 2's corpus).
    wrong(
        "bf-np-int64",
        "blocks_for",
        "np.ceil(n / threads).astype(int): a NumPy integer, but float division rounds for large n",
        r"float division, which rounds",
        (SOLVED, "return np.ceil(n / threads).astype(int)"),
    ),
    wrong(
        "bf-bool",
        "blocks_for",
        "n > 0 for a single block: a bool, where an int is asked for",
        r"True, a bool, where an int is asked for",
        (SOLVED, "return n > 0 if n <= threads else (n + threads - 1) // threads"),
    ),
    valid(
        "bf-numpy-integer",
        "blocks_for",
        "a NumPy integer of the integer formula (the one rule: Python int or NumPy integer)",
        (SOLVED, "return np.int64((n + threads - 1) // threads)"),
    ),
    wrong(
        "bf-math-ceil",
        "blocks_for",
        "math.ceil(n / threads): an int, but float division rounds for large n",
        r"float division, which rounds",
        (SOLVED, "import math\n\n    return math.ceil(n / threads)"),
    ),
    wrong(
        "bf-int-np-ceil",
        "blocks_for",
        "int(np.ceil(n / threads)), the NumPy spec: float division rounds for large n",
        r"float division, which rounds",
        (SOLVED, "return int(np.ceil(n / threads))"),
    ),
    valid("bf-negated-floor", "blocks_for", "-(-n // threads)", (SOLVED, "return -(-n // threads)")),
    valid(
        "bf-divmod",
        "blocks_for",
        "divmod, plus one block for a remainder",
        (SOLVED, "q, r = divmod(n, threads)\n    return q + (1 if r else 0)"),
    ),
    valid("bf-minus-one", "blocks_for", "(n - 1) // threads + 1", (SOLVED, "return (n - 1) // threads + 1")),
    # double_on_gpu -----------------------------------------------------------------------
    wrong(
        "dg-device-array",
        "double_on_gpu",
        "returns the device array, no copy_to_host",
        r"returned a device array",
        ("return d_x.copy_to_host()", "return d_x"),
    ),
    wrong(
        "dg-on-host",
        "double_on_gpu",
        "doubles on the host with NumPy, no kernel",
        r"launched no kernel",
        code='THREADS = cudalearn.size("ch0.block")\n\n\ndef double_on_gpu(x):\n    return 2 * x\n',
    ),
    wrong(
        "dg-in-place",
        "double_on_gpu",
        "launches scale on the host array x itself: x changes",
        r"changed its input x",
        ("d_x = cuda.to_device(x)", "d_x = x"),
        ("return d_x.copy_to_host()", "return x.copy()"),
    ),
    wrong(
        "dg-one-block",
        "double_on_gpu",
        "one block of THREADS threads, whatever the size",
        r"doubled only the first \d+.*blocks_for",
        (LAUNCH, "scale[1, THREADS](d_x, np.float32(2.0))"),
    ),
    wrong(
        "dg-floor-blocks",
        "double_on_gpu",
        "x.shape[0] // THREADS blocks: the last partial block is left out",
        r"doubled only the first|too few threads|grid|launch",
        (LAUNCH, "scale[max(1, x.shape[0] // THREADS), THREADS](d_x, np.float32(2.0))"),
    ),
    wrong(
        "dg-no-return",
        "double_on_gpu",
        "forgets to return the result",
        r"is None.*return",
        ("return d_x.copy_to_host()", "d_x.copy_to_host()"),
    ),
    wrong(
        "dg-swapped-launch",
        "double_on_gpu",
        "scale[THREADS, blocks]: blocks and threads swapped (the same number of threads, so right values)",
        r"blocks and threads are swapped.*1,024 threads",
        (LAUNCH, "scale[THREADS, blocks_for(x.shape[0], THREADS)](d_x, np.float32(2.0))"),
    ),
    wrong(
        "dg-patched-experiment",
        "double_on_gpu",
        "triples on the host, and replaces the check's old student-side experiment with one that reports "
        "a right round trip (a function of the course package, reassigned in the student's process)",
        r"launched no kernel",
        code='THREADS = cudalearn.size("ch0.block")\n'
        "import cudalearn.chapters.ch00.checks as lab_checks\n\n"
        "lab_checks._round_trip = lambda f, x: {\n"
        '    "got": 2 * x, "device": False, "x": x, "launches": ["scale"]\n'
        "}\n"
        "\n\ndef double_on_gpu(x):\n    return 3 * x\n",
    ),
    valid(
        "dg-two-steps",
        "double_on_gpu",
        "blocks in a variable, a Python float factor",
        (LAUNCH, "blocks = blocks_for(x.size, THREADS)\n    scale[blocks, THREADS](d_x, 2.0)"),
    ),
    valid(
        "dg-copy-into",
        "double_on_gpu",
        "copies back into a fresh host array with copy_to_host(out)",
        ("return d_x.copy_to_host()", "out = np.empty_like(x)\n    d_x.copy_to_host(out)\n    return out"),
    ),
    # fill_index --------------------------------------------------------------------------
    wrong(
        "fi-no-guard",
        "fill_index",
        "no guard: threads of the last block write past the end",
        r"out-of-bounds write to out.*surplus threads of the last, partial block",
        (GUARD, "    out[i] = i"),
    ),
    wrong(
        "fi-guard-le",
        "fill_index",
        "guard with <= lets one thread past the end",
        r"out-of-bounds write to out",
        ("if i < out.shape[0]:", "if i <= out.shape[0]:"),
    ),
    wrong(
        "fi-guard-minus-one",
        "fill_index",
        "guard i < n - 1 leaves the last element out",
        r"only the last element.*guard stop one short",
        ("if i < out.shape[0]:", "if i < out.shape[0] - 1:"),
    ),
    wrong(
        "fi-thread-index",
        "fill_index",
        "index from threadIdx.x only: every block writes the first elements",
        r"race.*ignores the block",
        ("i = cuda.grid(1)", "i = cuda.threadIdx.x"),
    ),
    wrong(
        "fi-block-index",
        "fill_index",
        "index from blockIdx.x only",
        r"race|several threads wrote",
        ("i = cuda.grid(1)", "i = cuda.blockIdx.x"),
    ),
    wrong(
        "fi-writes-local-index",
        "fill_index",
        "global index for the element but writes threadIdx.x",
        r"restart at 0 in every block.*cuda\.grid\(1\)",
        ("        out[i] = i", "        out[i] = cuda.threadIdx.x"),
    ),
    wrong(
        "fi-griddim",
        "fill_index",
        "blockIdx.x * gridDim.x + threadIdx.x: gridDim for blockDim",
        r"race|never written",
        ("i = cuda.grid(1)", "i = cuda.blockIdx.x * cuda.gridDim.x + cuda.threadIdx.x"),
    ),
    wrong(
        "fi-hard-coded-block",
        "fill_index",
        "blockIdx.x * 32 + threadIdx.x: the block size hard-coded",
        r"type the block size into the index",
        ("i = cuda.grid(1)", "i = cuda.blockIdx.x * 32 + cuda.threadIdx.x"),
    ),
    wrong(
        "fi-every-thread-loops",
        "fill_index",
        "every thread loops over the whole array",
        r"right result, but.*several threads wrote the same element.*loop over the whole array",
        (GUARD, "    for j in range(out.shape[0]):\n        out[j] = j"),
    ),
    wrong(
        "fi-shifted",
        "fill_index",
        "writes i + 1",
        r"shifted by one",
        ("        out[i] = i", "        out[i] = i + 1"),
    ),
    valid(
        "fi-early-return",
        "fill_index",
        "early return for the surplus threads",
        (GUARD, "    if i >= out.size:\n        return\n    out[i] = i"),
    ),
    valid(
        "fi-grid-stride",
        "fill_index",
        "a grid-stride loop",
        (GUARD, "    for j in range(i, out.shape[0], cuda.gridsize(1)):\n        out[j] = j"),
    ),
    valid(
        "fi-explicit-index",
        "fill_index",
        "the global index written out",
        ("i = cuda.grid(1)", "i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x"),
    ),
]
