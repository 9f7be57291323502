"""Chapter 2's problem sizes, per run mode (read through `cudalearn.size`)."""

SIZES = {
    # Chapter 2: first kernels
    "ch2.vector_n": {"gpu": 1 << 24, "sim": 64},
    "ch2.block": {"gpu": 256, "sim": 32},
    "ch2.matmul_n": {"gpu": 2048, "sim": 32},
    "ch2.matmul_block": {"gpu": 16, "sim": 8},
    "ch2.copy_n": {"gpu": 1 << 24, "sim": 64},
    "ch2.vector_odd_n": {"gpu": 1_000_003, "sim": 45},
    "ch2.ids_n": {"gpu": 64, "sim": 64},
    "ch2.ids_block": {"gpu": 48, "sim": 48},  # not a multiple of 32, on purpose (Chapter 2)
    "ch2.demo_rows": {"gpu": 10, "sim": 10},
    "ch2.demo_cols": {"gpu": 13, "sim": 13},
    "ch2.demo_block_x": {"gpu": 8, "sim": 8},
    "ch2.demo_block_y": {"gpu": 4, "sim": 4},
}
