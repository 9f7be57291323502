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

from cudalearn.runtime import launch
from cudalearn.runtime.sizes import size


def layer_candidates(m: int, k: int, n: int, seed: int = 0) -> dict[str, Any]:
    """The kernels of one hidden layer, ready to time: batch m, k inputs, n outputs (Chapter 5).

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
    _, linear_relu_tiled = linear.tiled(tile)
    nb = size("ch5.naive_block")

    def mm(rows, cols):
        return launch.square(rows, cols, nb)

    ew_mn, ew_mk = ew.launch_2d((m, n), epoch_data.block_2d()), ew.launch_2d((m, k), epoch_data.block_2d())

    def naive_forward():
        matmul_naive[mm(m, n)](d["X"], d["W"], Z)
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
