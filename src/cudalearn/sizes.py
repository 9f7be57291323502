"""Problem sizes per run mode, so no notebook writes a size twice (all chapters).

A notebook asks `cudalearn.size("ch2.matmul_n")` and gets the GPU size on a
GPU and the small simulator size elsewhere. Simulator sizes stay at 64 or
below: the simulator runs one Python thread per CUDA thread.

A key is `ch<N>.<name>`, with a "gpu" and a "sim" value. A chapter adds its
keys here and asks for them as `size("chN.name")` (or an f-string such as
`size(f"ch5.trace_{s}")`); tests/test_sizes.py reads every notebook, module
and script and fails on a key asked for that is not here, or one defined
here that nothing asks for.
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
    "ch6.bench_n": {"gpu": 4096, "sim": 32},  # cudalearn.bench.gemm (scripts/bench_gemm.py)
    "ch6.lab_bm": {"gpu": 64, "sim": 16},  # lab 6: block tile (BM, BN, BK), micro-tile (TM, TN)
    "ch6.lab_bn": {"gpu": 64, "sim": 16},
    "ch6.lab_bk": {"gpu": 8, "sim": 4},
    "ch6.lab_tm": {"gpu": 4, "sim": 4},
    "ch6.lab_tn": {"gpu": 4, "sim": 4},
    "ch6.lab_bench_n": {"gpu": 2048, "sim": 32},
    # Chapter 7: AlexNet's two-GPU split
    "ch7.batch": {"gpu": 32, "sim": 4},  # the two-column check on the small network
    "ch7.step_batch": {"gpu": 128, "sim": 2},  # timed steps of the 2012 network (its batch of 128)
    "ch7.timed_steps": {"gpu": 20, "sim": 1},
    "ch7.oom_batch": {"gpu": 768, "sim": 768},  # GPU only (the simulator shows its prediction)
    "ch7.act_steps": {"gpu": 200, "sim": 200},  # ReLU vs tanh: at most this many steps per run
    "ch7.drop_train": {"gpu": 300, "sim": 300},  # dropout: training images (a quarter mislabelled)
    "ch7.drop_steps": {"gpu": 250, "sim": 250},
    "ch7.loader_batch": {"gpu": 128, "sim": 4},
    "ch7.loader_batches": {"gpu": 12, "sim": 2},
    "ch7.loader_workers": {"gpu": 8, "sim": 2},
    "ch7.loader_source": {"gpu": 256, "sim": 72},  # JPEG side; random crops of loader_crop pixels
    "ch7.loader_crop": {"gpu": 227, "sim": 64},
    "ch7.ddp_batch": {"gpu": 16, "sim": 16},  # the data-parallel check's global batch
    "ch7.ddp_time_steps": {"gpu": 20, "sim": 0},
    # Chapter 8: ResNet skip gradients (PyTorch on the CPU under the simulator; no Numba kernel)
    "ch8.width": {"gpu": 64, "sim": 64},  # fully connected blocks on the 64 pixels of a digit
    "ch8.grad_batch": {"gpu": 128, "sim": 128},
    "ch8.grad_blocks": {"gpu": 50, "sim": 50},  # 2 * 50 + 2 = 102 weight layers
    "ch8.very_deep_blocks": {"gpu": 500, "sim": 500},  # 1002 weight layers
    "ch8.conv_width": {"gpu": 32, "sim": 16},
    "ch8.conv_grad_batch": {"gpu": 32, "sim": 32},
    "ch8.jacobian_width": {"gpu": 6, "sim": 6},  # the +1 check on a block's full Jacobian
    "ch8.train_shallow_blocks": {"gpu": 1, "sim": 1},
    "ch8.train_mid_blocks": {"gpu": 10, "sim": 10},  # 22 layers, about where plain nets start to degrade
    "ch8.train_deep_blocks": {"gpu": 25, "sim": 15},
    "ch8.train_epochs": {"gpu": 20, "sim": 10},
    "ch8.train_seeds": {"gpu": 3, "sim": 1},
    "ch8.batch": {"gpu": 64, "sim": 64},
    "ch8.conv_train_deep_blocks": {"gpu": 15, "sim": 2},  # runs on a GPU only (reference figure)
    "ch8.conv_train_epochs": {"gpu": 10, "sim": 1},
    "ch8.conv_train_seeds": {"gpu": 2, "sim": 1},
    "ch8.skip_batch": {"gpu": 256, "sim": 2},
    "ch8.skip_image": {"gpu": 32, "sim": 8},
    "ch8.skip_width": {"gpu": 64, "sim": 8},
    "ch8.skip_blocks": {"gpu": 16, "sim": 2},
    # Chapter 9: ViT patching
    "ch9.show_patch": {"gpu": 32, "sim": 32},  # patches drawn on the sample image
    "ch9.kernel_stride": {"gpu": 1, "sim": 16},  # the Numba kernel's image: every k-th pixel
    "ch9.kernel_patch": {"gpu": 32, "sim": 8},
    "ch9.trace_image": {"gpu": 32, "sim": 32},  # the tracer runs on the CPU in both modes
    "ch9.bench_batch": {"gpu": 64, "sim": 1},
    "ch9.bench_image": {"gpu": 224, "sim": 16},
    "ch9.bench_patch": {"gpu": 16, "sim": 8},
    "ch9.embed_batch": {"gpu": 64, "sim": 2},
    "ch9.embed_image": {"gpu": 224, "sim": 16},
    "ch9.embed_patch": {"gpu": 16, "sim": 8},
    "ch9.embed_dim": {"gpu": 768, "sim": 16},
    "ch9.attn_image": {"gpu": 224, "sim": 32},
    "ch9.attn_dim": {"gpu": 192, "sim": 32},
    "ch9.attn_heads": {"gpu": 3, "sim": 2},
    "ch9.attn_batch": {"gpu": 32, "sim": 1},
    "ch9.cmp_image": {"gpu": 224, "sim": 32},
    "ch9.cmp_batch": {"gpu": 32, "sim": 4},
    "ch9.cmp_patch": {"gpu": 16, "sim": 8},
    "ch9.cmp_dim": {"gpu": 192, "sim": 32},
    "ch9.cmp_depth": {"gpu": 4, "sim": 2},
    "ch9.cmp_heads": {"gpu": 3, "sim": 2},
    "ch9.cmp_cnn_width": {"gpu": 32, "sim": 8},  # stage k of the CNN has width * 2**k channels
    "ch9.cmp_cnn_stages": {"gpu": 4, "sim": 2},
    "ch9.rf_image": {"gpu": 16, "sim": 16},
    "ch9.little_min": {"gpu": 100, "sim": 100},  # training sets of min, 3 * min, ... up to max images
    "ch9.little_max": {"gpu": 900, "sim": 300},
    "ch9.little_test": {"gpu": 497, "sim": 497},
    "ch9.little_epochs": {"gpu": 30, "sim": 30},
    "ch9.little_seeds": {"gpu": 2, "sim": 1},
    "ch9.little_canvas": {"gpu": 16, "sim": 16},
    "ch9.little_patch": {"gpu": 4, "sim": 4},  # ViT patch on the shifted digits (16 tokens)
    "ch9.centred_patch": {"gpu": 2, "sim": 2},  # ViT patch on the 8x8 digits (16 tokens)
    "ch9.little_dim": {"gpu": 32, "sim": 32},
    "ch9.little_batch": {"gpu": 32, "sim": 32},
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
