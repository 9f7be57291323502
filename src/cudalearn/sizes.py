"""Problem sizes per run mode, so no notebook writes a size twice (all chapters).

A notebook asks `cudalearn.size("ch2.matmul_n")` and gets the GPU size on a
GPU and the small simulator size elsewhere. Simulator sizes stay at 64 or
below: the simulator runs one Python thread per CUDA thread.
"""

from __future__ import annotations

from cudalearn.device import mode as _mode

#: name -> {"gpu": value, "sim": value}. Chapter prefix first.
SIZES: dict[str, dict[str, int]] = {
    # Chapter 0: setup
    "ch0.vector_n": {"gpu": 1 << 24, "sim": 64},
    "ch0.busy_iters": {"gpu": 20_000, "sim": 4},
    "ch0.block": {"gpu": 256, "sim": 32},
    # Chapter 1: CPU matmul
    "ch1.loop_n": {"gpu": 96, "sim": 48},
    "ch1.blas_n": {"gpu": 2048, "sim": 512},
    "ch1.copy_n": {"gpu": 1 << 25, "sim": 1 << 24},  # NumPy only (CPU bandwidth), no kernel
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
    # Chapter 3: tiling (the tracer runs on the CPU in both modes: its sizes are small in both)
    "ch3.matmul_n": {"gpu": 2048, "sim": 32},
    "ch3.check_n": {"gpu": 1000, "sim": 37},  # not a multiple of 16 or 32, on purpose
    "ch3.trace_n": {"gpu": 64, "sim": 64},
    "ch3.race_n": {"gpu": 32, "sim": 32},
    # Chapter 4: bank conflicts
    "ch4.transpose_n": {"gpu": 8192, "sim": 32},
    "ch4.matmul_n": {"gpu": 2048, "sim": 32},
    "ch4.trace_n": {"gpu": 64, "sim": 64},
    # Chapter 5: fusion and a shallow network
    "ch5.side": {"gpu": 16, "sim": 8},  # images are side x side pixels
    "ch5.copies": {"gpu": 36, "sim": 3},  # augmented renderings of each original digit
    "ch5.originals": {"gpu": 1797, "sim": 64},  # of load_digits' 1797
    "ch5.hidden": {"gpu": 1024, "sim": 16},
    "ch5.batch": {"gpu": 1024, "sim": 16},
    "ch5.epochs": {"gpu": 12, "sim": 1},
    "ch5.timed_epochs": {"gpu": 3, "sim": 1},
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
    "ch5.trace_batch": {"gpu": 16, "sim": 16},  # the tracer runs on the CPU in both modes
    "ch5.trace_in": {"gpu": 64, "sim": 64},
    "ch5.trace_out": {"gpu": 64, "sim": 64},
}


def size(name: str, mode: str | None = None) -> int:
    """The size called `name` for this process's mode, or for `mode` if given (all chapters)."""
    try:
        entry = SIZES[name]
    except KeyError:
        known = ", ".join(sorted(SIZES))
        raise KeyError(f"no size called {name!r}; known sizes: {known}") from None
    mode = mode or _mode()
    return entry["gpu" if mode == "compile" else mode]
