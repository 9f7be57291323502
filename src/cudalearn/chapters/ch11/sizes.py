"""Chapter 11's problem sizes, per run mode (read through `cudalearn.size`).

Chapter 11's programs run under torchrun, one process per GPU. The checks
(outputs, gradients, bytes) run in `ch11.check_procs` processes in both
modes: NCCL on a machine with that many GPUs, gloo CPU processes otherwise.
The timed runs happen only on GPUs ("sim": 0 steps); their shapes are the
programs' own defaults (a GPT-style MLP of width 4096 for `tp_step`).
"""

SIZES = {
    "ch11.check_procs": {"gpu": 2, "sim": 2},  # processes of the checks (a world the CPU can run too)
    "ch11.tp_time_steps": {"gpu": 20, "sim": 0},  # timed forward+backward passes of the split MLP
    "ch11.coll_iters": {"gpu": 20, "sim": 3},  # timed calls per message size of the all-reduce
    "ch11.coll_max_bytes": {"gpu": 2**30, "sim": 2**14},  # largest message: 1 GiB on GPUs
    # the book's bytes-per-step table: a GPT-style block (width 4096, hidden 16384), 8192 tokens a step
    "ch11.table_tokens": {"gpu": 8192, "sim": 8192},
    "ch11.table_d": {"gpu": 4096, "sim": 4096},
    "ch11.table_hidden": {"gpu": 16384, "sim": 16384},
}
