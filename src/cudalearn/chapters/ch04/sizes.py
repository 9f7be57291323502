"""Chapter 4's problem sizes, per run mode (read through `cudalearn.size`)."""

SIZES = {
    # Chapter 4: bank conflicts
    "ch4.transpose_n": {"gpu": 8192, "sim": 32},
    "ch4.matmul_n": {"gpu": 2048, "sim": 32},
    "ch4.trace_n": {"gpu": 64, "sim": 64},
}
