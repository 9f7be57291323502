"""The kernels of one hidden layer of Chapter 5's network, side by side, ready to time (Chapter 5).

`layer_candidates` builds the naive, tiled, register-tiled and PyTorch
versions of one layer's forward pass and both backward products on the same
arrays, with a check against NumPy in float64; `cudalearn.chapters.ch05.bench.command_line`
(`scripts/bench_fusion.py`) and the chapter's layer cell time them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from cudalearn.measure import gpus, stated
from cudalearn.runtime import launch
from cudalearn.runtime.sizes import size

TILED_UNFUSED = "tiled, then bias, ReLU (3 kernels)"  # fusion's share: the tiled product without its epilogue
TUNED = "tuned: 128-bit shared reads (5b)"  # deep dive 5b's products


def layer_candidates(m: int, k: int, n: int, seed: int = 0, tuned: bool = False) -> dict[str, Any]:
    """The kernels of one hidden layer, ready to time: batch m, k inputs, n outputs (Chapter 5).

    With `tuned`, each part also has deep dive 5b's product (`TUNED`: 128-bit shared reads).
    Returns {'forward': {name: fn}, 'backward_input': {...},
    'backward_weight': {...}, 'flops': {part: FLOPs per call},
    'check': fn}. Each fn launches one candidate on arrays allocated here
    (PyTorch ones on `cudalearn.torch_device()`); check() runs every
    candidate once and raises AssertionError when one disagrees with NumPy.
    """
    import torch

    from cudalearn import checks
    from cudalearn.chapters.ch02.kernels.matmul import matmul_naive
    from cudalearn.chapters.ch05 import data as epoch_data
    from cudalearn.chapters.ch05.kernels import elementwise as ew
    from cudalearn.chapters.ch05.kernels import linear
    from cudalearn.chapters.ch05.kernels.blocked import blocked
    from cudalearn.chapters.ch05.kernels.tiles import tiles_for_mode
    from cudalearn.runtime import device
    from cudalearn.runtime.numba_backend import cuda

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((m, k), dtype=np.float32)
    W = (rng.standard_normal((k, n)) / math.sqrt(k)).astype(np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    dZ = rng.standard_normal((m, n), dtype=np.float32)
    A = np.maximum(X, 0)  # the previous layer's ReLU output: about half zeros
    d = {
        name: cuda.to_device(v)
        for name, v in dict(X=X, W=W, WT=np.ascontiguousarray(W.T), b=b, dZ=dZ, A=A).items()
    }
    Y, Z = cuda.device_array((m, n), np.float32), cuda.device_array((m, n), np.float32)
    dA, dXm = cuda.device_array((m, k), np.float32), cuda.device_array((m, k), np.float32)
    dW, db = cuda.device_array((k, n), np.float32), cuda.device_array(n, np.float32)
    dev = device.torch_device()
    t = {name: torch.from_numpy(v).to(dev) for name, v in dict(X=X, W=W, b=b, dZ=dZ, A=A).items()}
    tiles = tiles_for_mode()
    kb = blocked(tiles)
    kb_unpadded = blocked(tiles, 0)
    tile = size("ch5.tile")
    matmul_tiled_plain, linear_relu_tiled = linear.tiled(tile)
    nb = size("ch5.naive_block")

    def mm(rows, cols):
        return launch.square(rows, cols, nb)

    ew_mn, ew_mk = ew.launch_2d((m, n), epoch_data.block_2d()), ew.launch_2d((m, k), epoch_data.block_2d())

    def naive_forward():
        matmul_naive[mm(m, n)](d["X"], d["W"], Z)
        ew.add_bias[ew_mn](Z, d["b"], Z)
        ew.relu[ew_mn](Z, Y)

    def tiled_unfused():
        matmul_tiled_plain[linear.tiled_launch(m, n, tile)](d["X"], d["W"], Z)
        ew.add_bias[ew_mn](Z, d["b"], Z)
        ew.relu[ew_mn](Z, Y)

    def naive_input(Wmat, kernel):
        def run():
            kernel[mm(m, k)](d["dZ"], Wmat, dA)
            ew.relu_backward[ew_mk](dA, d["A"], dXm)

        return run

    def naive_weight():
        linear.matmul_at_naive[mm(k, n)](d["X"], d["dZ"], dW)
        ew.bias_grad[ew.launch_1d(n)](d["dZ"], db)

    forward = {
        "naive: matmul, bias, ReLU (3 kernels)": naive_forward,
        TILED_UNFUSED: tiled_unfused,
        "tiled, fused (1 output a thread)": lambda: linear_relu_tiled[linear.tiled_launch(m, n, tile)](
            d["X"], d["W"], d["b"], Y
        ),
        "register-tiled, fused": lambda: kb["linear_forward"][tiles.launch(m, n)](
            d["X"], d["W"], d["b"], Y, 1
        ),
        "PyTorch (cuBLAS + ReLU)": lambda: torch.relu(torch.addmm(t["b"], t["X"], t["W"])),
    }
    backward_input = {
        "naive, W as stored (2 kernels)": naive_input(d["W"], linear.matmul_bt_naive),
        "naive, W pre-transposed (2 kernels)": naive_input(d["WT"], matmul_naive),
        "register-tiled, WT, mask fused": lambda: kb["linear_backward_input"][tiles.launch(m, k)](
            d["dZ"], d["WT"], d["A"], dXm
        ),
        "PyTorch (cuBLAS + mask)": lambda: torch.mm(t["dZ"], t["W"].t()) * (t["A"] > 0),
    }
    backward_weight = {
        "naive: X.T @ dZ, then db (2 kernels)": naive_weight,
        "register-tiled, padded, db fused": lambda: kb["linear_backward_weight"][tiles.launch(k, n)](
            d["X"], d["dZ"], dW, db
        ),
        "register-tiled, no padding": lambda: kb_unpadded["linear_backward_weight"][tiles.launch(k, n)](
            d["X"], d["dZ"], dW, db
        ),
        "PyTorch (cuBLAS + sum)": lambda: (torch.mm(t["X"].t(), t["dZ"]), t["dZ"].sum(0)),
    }
    if tuned:
        from cudalearn.chapters.ch05.kernels.tiles import tuned_tiles_for_mode
        from cudalearn.chapters.ch05.kernels.tuned import blocked_vec

        vec_tiles = tuned_tiles_for_mode()[0]
        kv = blocked_vec(vec_tiles)
        forward[TUNED] = lambda: kv["linear_forward"][vec_tiles.launch(m, n)](d["X"], d["W"], d["b"], Y, 1)
        backward_input[TUNED] = lambda: kv["linear_backward_input"][vec_tiles.launch(m, k)](
            d["dZ"], d["WT"], d["A"], dXm
        )
        backward_weight[TUNED] = lambda: kv["linear_backward_weight"][vec_tiles.launch(k, n)](
            d["X"], d["dZ"], dW, db
        )
    X64, W64, dZ64 = X.astype(np.float64), W.astype(np.float64), dZ.astype(np.float64)
    expected = {
        "forward": np.maximum(X64 @ W64 + b, 0).astype(np.float32),
        "backward_input": ((dZ64 @ W64.T) * (A > 0)).astype(np.float32),
        "backward_weight": (X64.T @ dZ64).astype(np.float32),
    }

    def blank(*arrays) -> None:
        """Fill device outputs with NaN, so that a candidate that writes nothing cannot pass."""
        for a in arrays:
            a.copy_to_device(np.full(a.shape, np.nan, dtype=np.float32))

    def check() -> None:
        tol = dict(rtol=1e-4, atol=1e-4 * math.sqrt(max(k, n, m)))
        for name, fn in forward.items():
            blank(Y)
            got = fn()
            got = got.cpu().numpy() if isinstance(got, torch.Tensor) else Y.copy_to_host()
            checks.check_close(got, expected["forward"], name=f"forward ({name})", **tol)
        for name, fn in backward_input.items():
            blank(dXm)
            got = fn()
            got = got.cpu().numpy() if isinstance(got, torch.Tensor) else dXm.copy_to_host()
            checks.check_close(got, expected["backward_input"], name=f"dZ_prev ({name})", **tol)
        for name, fn in backward_weight.items():
            blank(dW, db)
            got = fn()
            if isinstance(got, tuple):
                got_dW, got_db = (v.cpu().numpy() for v in got)
            else:
                got_dW, got_db = dW.copy_to_host(), db.copy_to_host()
            checks.check_close(got_dW, expected["backward_weight"], name=f"dW ({name})", **tol)
            checks.check_close(got_db, dZ.sum(0), name=f"db ({name})", **tol)

    return {
        "forward": forward,
        "backward_input": backward_input,
        "backward_weight": backward_weight,
        "flops": {
            "forward": 2 * m * k * n,
            "backward_input": 2 * m * n * k,
            "backward_weight": 2 * m * k * n,
        },
        "check": check,
    }


#: Below this factor over the tiled, unfused trio, the prose calls fusion's share of the forward gain small.
FUSION_SMALL = 1.2


def readback(results: dict[str, Any], where: str, sector_ratio: float) -> str:
    """Section 8's tables read back in words, from their rows, with the orderings checked (Chapter 5).

    `results` maps 'forward', 'backward_input', 'backward_weight' to `timing.measure` results of
    `layer_candidates`; `sector_ratio` is how many times fewer sectors the tracer counted for the
    transposed copy. Raises `stated.StaleProse` when the run no longer shows what the sentences state."""
    t = {part: {r["name"]: r.get("median_ms") for r in res.rows} for part, res in results.items()}
    f, bi, bw = t["forward"], t["backward_input"], t["backward_weight"]
    naive, tiled = f["naive: matmul, bias, ReLU (3 kernels)"], f["tiled, fused (1 output a thread)"]
    reg = f["register-tiled, fused"]
    stored, wt = bi["naive, W as stored (2 kernels)"], bi["naive, W pre-transposed (2 kernels)"]
    padded, unpadded = bw["register-tiled, padded, db fused"], bw["register-tiled, no padding"]
    ours = {"forward": reg, "backward_input": bi["register-tiled, WT, mask fused"], "backward_weight": padded}
    cublas = min(ours[part] / next(v for n, v in t[part].items() if n.startswith("PyTorch")) for part in ours)
    stated.check(
        t,
        where,
        lambda _: naive > tiled > reg and 1 < stored / wt < sector_ratio and unpadded > padded and cublas > 1,
        "tiling, register tiling, the transposed copy (by less than its sectors) and the padding each "
        "make their kernel faster; cuBLAS is faster than each kernel of ours",
    )
    if f.get(TILED_UNFUSED):
        unfused = f[TILED_UNFUSED]
        gain = unfused / tiled
        stated.check(
            t,
            where,
            lambda _: 1 < gain < FUSION_SMALL,
            f"fusing the epilogue makes the tiled product faster, by under {FUSION_SMALL}x: "
            "tiling brings most",
        )
        fusion = (
            f": tiling alone gives {naive / unfused:.2f}x, fusing the epilogue a further {gain:.2f}x "
            f"({(unfused - tiled) * 1e3:.0f} us of the unfused trio's {unfused * 1e3:.0f} us);"
        )
    else:
        fusion = " (this run has no tiled, unfused row to split that gain between tiling and fusion),"
    return stated.wrap(
        f"Read back: forward, one tiled kernel with the fused epilogue is {naive / tiled:.2f}x faster than "
        f"the three naive kernels{fusion} register tiling {tiled / reg:.2f}x faster again. "
        f"Backward_input: the transposed copy makes the naive kernel {stored / wt:.2f}x faster, though the "
        f"tracer counted {sector_ratio:.1f}x fewer sectors: the caches absorb most of the difference. "
        f"Backward_weight: the padding column saves {1 - padded / unpadded:.0%} of the time. cuBLAS is at "
        f"least {cublas:.1f}x faster than our kernel in each part."
    )


#: The register-tiled product of each part (deep dive 5a's kernels, which `fused` and `prepared` run).
REGISTER_TILED = {
    "forward": "register-tiled, fused",
    "backward_input": "register-tiled, WT, mask fused",
    "backward_weight": "register-tiled, padded, db fused",
}


def tuned_products(layer: dict[str, Any]) -> dict[str, Any]:
    """Deep dive 5b's table: each part's register-tiled product and its tuned one, from
    `layer_candidates(..., tuned=True)`, named 'part: candidate' (Chapter 5)."""
    return {
        f"{part}: {name}": layer[part][name] for part, reg in REGISTER_TILED.items() for name in (reg, TUNED)
    }


def tuned_report(results: Any) -> str:
    """5b's table, then how much faster each tuned product ran than the register-tiled one (Chapter 5)."""
    t = {r["name"]: r.get("median_ms") for r in results.rows}
    if not all(t.values()):
        return stated.wrap(
            f"{results}\nNo GPU run has timed these products yet: the table will show them after one."
        )
    gains = {part: t[f"{part}: {reg}"] / t[f"{part}: {TUNED}"] for part, reg in REGISTER_TILED.items()}
    said = ", ".join(f"{part} {g:.2f}x" for part, g in gains.items())
    tf = {r["name"]: r["gflops"] / 1e3 for r in results.rows}
    rates = ", ".join(
        f"{part} {tf[f'{part}: {reg}']:.1f} -> {tf[f'{part}: {TUNED}']:.1f}"
        for part, reg in REGISTER_TILED.items()
    )
    spec = gpus.spec_for(results.label)
    peak = f", of the {spec.name}'s FP32 peak of {spec.fp32_tflops:.0f} (datasheet)" if spec else ""
    return f"{results}\n\n" + stated.wrap(
        f"The tuned products against the register-tiled ones, time for time: {said}.\n"
        f"The gflops column is GFLOP/s, 2 m k n over the time. In TFLOP/s: {rates}{peak}."
    )
