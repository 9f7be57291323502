"""Chapter 3's problem sizes, per run mode (read through `cudalearn.size`)."""

SIZES = {
    # Chapter 3: tiling (the tracer runs on the CPU in both modes: its sizes are small in both)
    "ch3.matmul_n": {"gpu": 2048, "sim": 32},
    "ch3.check_n": {"gpu": 1000, "sim": 37},  # not a multiple of 16 or 32, on purpose
    "ch3.trace_n": {"gpu": 64, "sim": 64},
    "ch3.race_n": {"gpu": 32, "sim": 32},
}
