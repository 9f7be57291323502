"""Chapter 6's problem sizes, per run mode (read through `cudalearn.size`)."""

SIZES = {
    # Chapter 6: tensor cores and Triton
    "ch6.matmul_n": {"gpu": 4096, "sim": 32},  # every matmul of the chapter
    "ch6.rounding_n": {"gpu": 512, "sim": 256},  # NumPy only (input rounding per format), no kernel
    "ch6.mlp_batch": {"gpu": 4096, "sim": 64},
    "ch6.mlp_width": {"gpu": 4096, "sim": 64},
    "ch6.mlp_classes": {"gpu": 1000, "sim": 10},
    "ch6.conv_batch": {"gpu": 64, "sim": 2},
    "ch6.conv_channels": {"gpu": 128, "sim": 4},
    "ch6.conv_hw": {"gpu": 56, "sim": 8},
    "ch6.silu_rows": {"gpu": 16384, "sim": 8},
    "ch6.silu_cols": {"gpu": 4096, "sim": 64},
    "ch6.bench_n": {"gpu": 4096, "sim": 32},  # cudalearn.chapters.ch06.bench (scripts/bench_gemm.py)
    # lab 6: block tile (BM, BN, BK), micro-tile (TM, TN); five different numbers in each mode (and no 4
    # under the simulator), so that a kernel that mixes them up, or types one in, gets a wrong result
    "ch6.lab_bm": {"gpu": 64, "sim": 12},
    "ch6.lab_bn": {"gpu": 128, "sim": 16},
    "ch6.lab_bk": {"gpu": 16, "sim": 5},
    "ch6.lab_tm": {"gpu": 8, "sim": 3},
    "ch6.lab_tn": {"gpu": 4, "sim": 2},
    "ch6.lab_bench_n": {"gpu": 2048, "sim": 32},
    "ch6.tc_n": {"gpu": 4096, "sim": 64},  # deep dive 06d (scripts/bench_tc.py): the tracer runs the sim size
}
