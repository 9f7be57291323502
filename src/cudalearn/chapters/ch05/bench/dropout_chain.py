"""Chapter 5's memory-bound chain timed: bias, ReLU, dropout unfused, fused, paired and in PyTorch.

The kernels, their launches, bytes and NumPy specification live in
`cudalearn.chapters.ch05.kernels.elementwise`, the paired ones in `chain_pairs`; this module makes
the callables that Chapter 5 and `scripts/bench_fusion.py` time with `timing.measure`.
"""

from __future__ import annotations

from cudalearn.measure import stated

#: The name of the paired kernel's row in the chain's timings.
PAIRED = "fused, 8-byte accesses"
#: The pairs a thread of the unsigned-index paired kernels timed (`bias_relu_dropout_pairs_u32(pairs)`).
PAIRS_U32 = (2, 4)


def u32_name(pairs: int) -> str:
    """The row name of `bias_relu_dropout_pairs_u32(pairs)` in the chain's timings (Chapter 5)."""
    return f"fused, 8-byte, unsigned, {pairs} pairs"


#: Every fused kernel's row name, the goal's candidates (the fastest of a run is judged).
FUSED = ("fused: 1 kernel", PAIRED, *(u32_name(p) for p in PAIRS_U32))


def best_fused(rows) -> tuple[str | None, float | None]:
    """(name, GB/s) of the fastest fused kernel among timing rows; (None, None) without GPU times (Ch. 5)."""
    rates = {r["name"]: r.get("gbps") for r in rows if r["name"] in FUSED and r.get("gbps")}
    if not rates:
        return None, None
    name = max(rates, key=rates.get)
    return name, rates[name]


def vs_copy(chain_results, copy_results) -> tuple[float | None, str | None, float | None]:
    """Print each chain row's share of the copy's GB/s; check what deep dive 5c says of the first fused one.

    The prose reads: the first fused kernel beats the four kernels, falls short of the 3.7x its DRAM
    bytes predict, and stays well below (under 85% of) the copy; checked on the stored run only.
    Returns (copy GB/s, fastest fused kernel's name, its GB/s), Nones without GPU figures (deep dive 5c)."""
    copy_gbps = next((r.get("gbps") for r in copy_results.rows if r["name"] == "copy (torch)"), None)
    fused_name, fused_gbps = best_fused(chain_results.rows)
    if not (copy_gbps and fused_gbps):
        print("no GPU bandwidths to compare: no reference run is stored yet for these figures")
        return None, None, None
    if not stated.one_run("ch5.copy", "ch5.chain"):  # a share of another run's copy would mean nothing
        print(
            f"the copy and the chain come from two stored runs: {copy_results.label}; {chain_results.label}"
        )
        return None, None, None
    for row in chain_results.rows + copy_results.rows:
        if row.get("gbps"):
            print(f"{row['name']:35s} {row['gbps']:8,.0f} GB/s = {row['gbps'] / copy_gbps:6.1%} of the copy")
        else:
            print(f"{row['name']:35s} not timed in this run")
    one = next(r for r in chain_results.rows if r["name"] == "fused: 1 kernel")
    if (
        chain_results.source != "reference"
    ):  # the reader's own GPU: printed, not held to the stored run's text
        return copy_gbps, fused_name, fused_gbps
    stated.check(
        one,
        chain_results.label,
        lambda r: 1 < r["vs_baseline"] < 3.7 and r["gbps"] < 0.85 * copy_gbps,
        "the first fused kernel beats the four, short of the bytes' 3.7x, well below the copy",
    )
    return copy_gbps, fused_name, fused_gbps


def chain_candidates(rows, cols, p=0.1, seed=0, block=None):
    """Callables for timing the chain: (copies, chain, check) dicts on the device (Chapter 5).

    copies: {'copy (torch)': ..., 'copy_2d (Numba)': ...}, each a
    device-to-device copy of a (rows, cols) float32 array; chain:
    {'unfused: 4 kernels': ..., 'fused: 1 kernel': ..., PAIRED: ..., u32_name(p) for
    p in PAIRS_U32: ..., 'PyTorch eager': ...};
    `cols` must be even (the paired kernels take whole pairs).
    check() runs every chain candidate once and returns their outputs as
    host arrays with the NumPy reference, for a check before timing.
    PyTorch tensors live on `cudalearn.torch_device()`. `block`: the 2-D
    launch's block, by default (32, 8) on a GPU and smaller under the simulator.
    """
    import numpy as np
    import torch

    from cudalearn.chapters.ch05.kernels.chain_pairs import (
        bias_relu_dropout_pairs,
        bias_relu_dropout_pairs_u32,
        launch_pairs,
        pair_views,
    )
    from cudalearn.chapters.ch05.kernels.elementwise import (
        bias_relu_dropout,
        chain_bias,
        chain_inputs,
        chain_mask,
        chain_reference,
        chain_relu,
        chain_scale,
        copy_2d,
        launch_chain,
    )
    from cudalearn.runtime.device import torch_device
    from cudalearn.runtime.numba_backend import cuda
    from cudalearn.runtime.sizes import size

    Z, b, mask, s = chain_inputs(rows, cols, p, seed)
    dZ, db, dmask = cuda.to_device(Z), cuda.to_device(b), cuda.to_device(mask)
    dY = cuda.device_array_like(dZ)
    dev = torch_device()
    tZ, tb = torch.from_numpy(Z).to(dev), torch.from_numpy(b).to(dev)
    tmask = torch.from_numpy(mask.astype(bool)).to(dev)
    tY = torch.empty_like(tZ)
    block = block or (size("ch5.ew_block_x"), size("ch5.ew_block_y"))
    grid, block = launch_chain((rows, cols), block)
    pair_grid, _ = launch_pairs((rows, cols), block)
    u32_kernels = {
        pairs: (bias_relu_dropout_pairs_u32(pairs), launch_pairs((rows, cols), block, pairs)[0])
        for pairs in PAIRS_U32
    }
    Z2, b2, mask2, Y2 = pair_views(dZ, db, dmask, dY)  # once: a view costs host time, not GPU time
    fs = float(s)

    def unfused():
        chain_bias[grid, block](dZ, db, dY)
        chain_relu[grid, block](dY)
        chain_mask[grid, block](dY, dmask)
        chain_scale[grid, block](dY, s)

    def torch_eager():
        torch.mul(torch.relu(tZ + tb) * tmask, fs, out=tY)

    chain = {
        "unfused: 4 kernels": unfused,
        "fused: 1 kernel": lambda: bias_relu_dropout[grid, block](dZ, db, dmask, s, dY),
        PAIRED: lambda: bias_relu_dropout_pairs[pair_grid, block](Z2, b2, mask2, s, Y2),
        **{
            u32_name(pairs): lambda k=k, g=g: k[g, block](Z2, b2, mask2, s, Y2)
            for pairs, (k, g) in u32_kernels.items()
        },
        "PyTorch eager": torch_eager,
    }
    copies = {
        "copy (torch)": lambda: tY.copy_(tZ),
        "copy_2d (Numba)": lambda: copy_2d[grid, block](dZ, dY),
    }

    def check():
        outs = {}
        unfused()
        outs["unfused: 4 kernels"] = dY.copy_to_host()
        bias_relu_dropout[grid, block](dZ, db, dmask, s, dY)
        outs["fused: 1 kernel"] = dY.copy_to_host()
        for name in (PAIRED, *(u32_name(pairs) for pairs in PAIRS_U32)):
            dY.copy_to_device(np.full(Z.shape, np.nan, np.float32))  # a kernel that writes nothing fails
            chain[name]()
            outs[name] = dY.copy_to_host()
        torch_eager()
        outs["PyTorch eager"] = tY.cpu().numpy().copy()  # on the CPU, .numpy() shares memory
        copy_2d[grid, block](dZ, dY)
        outs["copy_2d (Numba)"] = dY.copy_to_host()
        tY.copy_(tZ)
        outs["copy (torch)"] = tY.cpu().numpy().copy()
        expected = chain_reference(Z, b, mask, s)
        return outs, {
            "chain": expected,
            "copy": np.ascontiguousarray(Z),
        }

    return copies, chain, check
