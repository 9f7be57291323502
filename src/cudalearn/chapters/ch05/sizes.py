"""Chapter 5's problem sizes, per run mode (read through `cudalearn.size`)."""

SIZES = {
    # Chapter 5: fusion and a shallow network
    "ch5.side": {"gpu": 16, "sim": 8},  # images are side x side pixels
    "ch5.copies": {"gpu": 36, "sim": 2},  # augmented renderings of each original digit
    "ch5.originals": {"gpu": 1797, "sim": 64},  # of load_digits' 1797
    "ch5.hidden": {"gpu": 1024, "sim": 16},
    "ch5.batch": {"gpu": 1024, "sim": 16},
    "ch5.epochs": {"gpu": 12, "sim": 1},
    "ch5.timed_epochs": {"gpu": 5, "sim": 1},
    "ch5.eval_rows": {"gpu": 1 << 20, "sim": 48},  # training rows whose accuracy is tracked
    "ch5.equiv_steps": {"gpu": 4, "sim": 2},
    "ch5.sweep_steps": {"gpu": 20, "sim": 1},
    "ch5.tile": {"gpu": 16, "sim": 8},
    "ch5.naive_block": {"gpu": 16, "sim": 8},
    "ch5.ew_block_x": {"gpu": 32, "sim": 8},
    "ch5.ew_block_y": {"gpu": 8, "sim": 4},
    "ch5.kernel_m": {"gpu": 1024, "sim": 16},
    "ch5.kernel_k": {"gpu": 1024, "sim": 24},
    "ch5.kernel_n": {"gpu": 1024, "sim": 20},
    "ch5.chain_rows": {"gpu": 16384, "sim": 16},
    "ch5.chain_cols": {"gpu": 4096, "sim": 64},
    "ch5.odd_rows": {"gpu": 999, "sim": 13},  # off the block grid: odd rows, cols not a multiple of 128
    "ch5.odd_cols": {"gpu": 1002, "sim": 42},  # even: the paired kernel takes whole pairs
    "ch5.trace_batch": {"gpu": 16, "sim": 16},  # the tracer runs on the CPU in both modes
    "ch5.trace_in": {"gpu": 64, "sim": 64},
    "ch5.trace_out": {"gpu": 64, "sim": 64},
}
