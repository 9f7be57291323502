"""Chapter 0's problem sizes, per run mode (read through `cudalearn.size`)."""

SIZES = {
    # Chapter 0: setup
    "ch0.vector_n": {"gpu": 1 << 24, "sim": 64},
    "ch0.busy_iters": {"gpu": 20_000, "sim": 4},
    "ch0.block": {"gpu": 256, "sim": 32},
}
