"""Nsight Compute on Chapter 10's row kernels: DRAM bytes, L1 hits, instructions (books 10, 10c, 10d).

`launch_twice` is the child an ncu run profiles (`scripts/ncu_rows.py`): each softmax and LayerNorm row
kernel launched twice at the chapter's GPU shapes (the second, warm launch is kept). `METRICS` is what
ncu is asked for; the stored profile (key `ch10.ncu_rows`) holds them per kernel, with the sizes.
`dram_sweeps` reads it: the DRAM bytes a kernel read, in reads of the whole array; `tested` says, for
a summary, whether a stored profile bears on an explanation.
"""

from __future__ import annotations

from cudalearn.measure import stated

#: The kernels profiled, by the names of `cudalearn.chapters.ch10.kernels` (softmax, layernorm).
SOFTMAX_KERNELS = ("softmax_warp", "softmax_online", "softmax_registers")
LAYERNORM_KERNELS = ("layernorm", "layernorm_block", "layernorm_pairs")
KERNELS = SOFTMAX_KERNELS + LAYERNORM_KERNELS

#: Metric names known to Nsight Compute 2023-2025 (the first eight as in scripts/ncu_chain.py).
CORE_METRICS = (
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "smsp__inst_executed.sum",
    "launch__registers_per_thread",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smsp__average_warp_latency_per_inst_issued.ratio",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
)
#: Asked for too; a run that ncu refuses with them is retried with CORE_METRICS alone.
EXTRA_METRICS = (
    "l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct",
    "lts__t_sectors_srcunit_tex_op_read.sum",
)


def launch_twice() -> dict:
    """Launch every row kernel twice on the chapter's GPU shapes; return the shapes (ncu's child, Ch. 10)."""
    import torch

    from cudalearn.chapters.ch10.kernels import layernorm, softmax
    from cudalearn.runtime import launch
    from cudalearn.runtime.device import mode, torch_device
    from cudalearn.runtime.numba_backend import cuda
    from cudalearn.runtime.sizes import size

    sizes = {
        "softmax": (size("ch10.softmax_rows"), size("ch10.softmax_cols")),
        "layernorm": (size("ch10.ln_rows"), size("ch10.ln_cols")),
    }
    dev = torch_device()  # the GPU; the CPU under the simulator (a test runs it there, at small sizes)
    x, y = (torch.randn(*sizes["softmax"], device=dev) for _ in range(2))
    xl, yl = (torch.randn(*sizes["layernorm"], device=dev) for _ in range(2))
    g, b = torch.ones(sizes["layernorm"][1], device=dev), torch.zeros(sizes["layernorm"][1], device=dev)
    for _ in range(2):
        for name in SOFTMAX_KERNELS:
            softmax.launch_rows(getattr(softmax, name), launch.cuda_view(x), launch.cuda_view(y))
        for name in LAYERNORM_KERNELS:
            views = (launch.cuda_view(t) for t in (xl, yl, g, b))
            softmax.launch_rows(getattr(layernorm, name), *views, 1e-5)
    if mode() == "gpu":
        cuda.synchronize()
    return {k: {"rows": r, "cols": c} for k, (r, c) in sizes.items()}


def dram_sweeps(profile: dict, name: str) -> float:
    """DRAM bytes `name` read in the stored profile, in whole reads of its input array (Ch. 10)."""
    size = profile["size"]["softmax" if name in SOFTMAX_KERNELS else "layernorm"]
    return profile["metrics"][name]["dram__bytes_read.sum"] / (4 * size["rows"] * size["cols"])


def tested(what: str) -> str:
    """A summary's sentence: whether a stored profile bears on `what` (books 10 and 10d)."""
    profile, where = stated.stored("ch10.ncu_rows")
    if profile is None:
        return stated.wrap(
            f"No Nsight Compute profile of these kernels is stored yet: nothing here tests {what} "
            "(scripts/ncu_rows.py would)."
        )
    return stated.wrap(f"The stored Nsight Compute profile ({where}) is printed above: read {what} in it.")
