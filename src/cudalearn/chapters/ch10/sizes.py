"""Chapter 10's problem sizes, per run mode (read through `cudalearn.size`).

The GPU shapes are a ViT-Base/16 forward pass at batch 64 on 224 x 224 images:
197 tokens (196 patches and the class token), width 768, 12 heads of 64. The
simulator's are tiny: kernels that shuffle run on the tracer, one Python
generator per GPU thread, so a launch keeps to a few thousand threads.
"""

SIZES = {
    # KERNELS: the benchmark (scripts/bench_reductions.py) and the package's kernels
    "ch10.sum_n": {"gpu": 2**28, "sim": 4096},  # floats summed: 1 GiB on a GPU
    "ch10.softmax_rows": {"gpu": 64 * 12 * 197, "sim": 16},  # attention-score rows: batch x heads x tokens
    "ch10.softmax_cols": {"gpu": 197, "sim": 48},  # keys per row: 197 tokens (not a multiple of 32)
    "ch10.ln_rows": {"gpu": 64 * 197, "sim": 16},  # LayerNorm rows: batch x tokens
    "ch10.ln_cols": {"gpu": 768, "sim": 48},  # the model's width
    "ch10.attn_n": {"gpu": 4096, "sim": 32},  # tokens of the one attention head timed
    "ch10.attn_d": {"gpu": 64, "sim": 16},  # its head dimension (<= attention.D_MAX)
    # BOOK: book/10-softmax-reductions.ipynb (the tracer and NumPy run on the CPU: same size in both modes)
    "ch10.vit_image": {"gpu": 32, "sim": 32},  # the small vit.ViT whose reductions are counted
    "ch10.vit_patch": {"gpu": 8, "sim": 8},
    "ch10.vit_dim": {"gpu": 32, "sim": 32},
    "ch10.vit_depth": {"gpu": 2, "sim": 2},
    "ch10.vit_heads": {"gpu": 2, "sim": 2},
    "ch10.sum_check_n": {"gpu": 2**20 + 3, "sim": 700},  # floats each sum kernel is checked on (ragged)
    "ch10.timed_sum_n": {"gpu": 2**28, "sim": 512},  # the book's timed sum (1 GiB); sim: each runs once
    "ch10.trace_n": {"gpu": 512, "sim": 512},  # floats the tracer sums: two blocks of 256
    "ch10.atomic_n": {"gpu": 5000, "sim": 5000},  # sum_atomic traced on a small grid...
    "ch10.atomic_blocks": {"gpu": 2, "sim": 2},  # ...of 2 blocks: a grid-stride loop of ~10 elements
    "ch10.fp_n": {"gpu": 2**24, "sim": 2**24},  # float32 values summed in NumPy in four orders
    "ch10.check_rows": {"gpu": 1024, "sim": 8},  # rows of the softmax and LayerNorm checks
    "ch10.check_cols": {"gpu": 197, "sim": 48},  # softmax columns of the check (not a multiple of 32)
    "ch10.trace_rows": {"gpu": 8, "sim": 8},  # the rows the tracer runs the softmax kernels on...
    "ch10.trace_cols": {"gpu": 197, "sim": 197},  # ...of a ViT's 197 scores
    "ch10.attn_trace_n": {"gpu": 64, "sim": 64},  # the attention head whose bytes the tracer counts
    "ch10.attn_trace_d": {"gpu": 16, "sim": 16},
    # LAB
}
