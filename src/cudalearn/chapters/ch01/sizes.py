"""Chapter 1's problem sizes, per run mode (read through `cudalearn.size`)."""

SIZES = {
    # Chapter 1: CPU matmul
    "ch1.loop_n": {"gpu": 96, "sim": 48},
    "ch1.blas_n": {"gpu": 2048, "sim": 512},
    "ch1.copy_n": {"gpu": 1 << 25, "sim": 1 << 24},  # NumPy only (CPU bandwidth), no kernel
}
