"""Chapter 9's problem sizes, per run mode (read through `cudalearn.size`)."""

SIZES = {
    # Chapter 9: ViT patching
    "ch9.show_patch": {"gpu": 32, "sim": 32},  # patches drawn on the sample image
    "ch9.kernel_stride": {"gpu": 1, "sim": 16},  # the Numba kernel's image: every k-th pixel
    "ch9.kernel_patch": {"gpu": 32, "sim": 8},
    "ch9.trace_image": {"gpu": 32, "sim": 32},  # the tracer runs on the CPU in both modes
    "ch9.trace_image_14": {"gpu": 56, "sim": 56},  # p = 14: 56 float32 a row, 7 whole sectors
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
