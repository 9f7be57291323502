"""Chapter 5's network's forward pass in FP16 on 06d's tensor-core kernel against its FP32 one (Chapter 6).

`TensorCoreMLP(params)` keeps each layer's W.T as float16 (out, in), zero-padded to the tiles of
`tc_gemm.make_tc_gemm`, and `prepare(X)` makes its forward pass, one launch a layer: Y = relu(X @ W + b)
with float16 X and W, float32 accumulation, bias and ReLU in the epilogue, which rounds the result to
float16 for the next layer (`pack_f16x2`); the last layer writes float32 logits. `compare()` times its
forward pass against Chapter 5's fastest float32 network (`TunedMLP`) on the same weights and batch in one run
(`bench.tc.mlp`) and reports the largest difference of the logits relative to the largest logit.
"""

from __future__ import annotations

import numpy as np

from cudalearn.chapters.ch05 import model as ch05_model
from cudalearn.chapters.ch06.kernels import tc_gemm
from cudalearn.chapters.ch06.tc_steps import as_array, as_words, table, tiles_for
from cudalearn.runtime import device, sizes

KEY = "bench.tc.mlp"
STEP = "cp.async pipeline"  # the 06d kernel the network uses (its tiles: bench_tc.tiles_for)


def _up(x, tile):
    """x rounded up to a multiple of tile."""
    return -(-x // tile) * tile


class TensorCoreMLP:
    """Chapter 5's MLP forward pass, FP16 inputs and weights, FP32 accumulation, on tc_gemm (06d)."""

    def __init__(self, params, cc=None):
        import torch

        self.dev = device.torch_device()
        self.tiles = tiles = tiles_for(STEP, cc)
        if device.mode() == "gpu" and tuple(cc) < (8, 0):
            self.tiles = tiles = {**tiles, "stages": 1}  # no cp.async on sm_75
        shape = tc_gemm.shape_for(cc if device.mode() == "gpu" else None)
        self.hidden = tc_gemm.make_tc_gemm(**tiles, shape=shape, relu=True, half=True)  # float16 out
        self.last = tc_gemm.make_tc_gemm(**tiles, shape=shape)  # the logits, float32
        self.classes = params[-1][0].shape[1]
        self.W, self.b = [], []
        for W, b in params:
            k, n = W.shape
            WT = np.zeros((_up(n, tiles["BN"]), _up(k, tiles["BK"])), np.float16)
            WT[:n, :k] = W.T
            bp = np.zeros(WT.shape[0], np.float32)
            bp[:n] = b
            self.W.append(torch.from_numpy(WT).to(self.dev))
            self.b.append(torch.from_numpy(bp).to(self.dev))

    def prepare(self, X):
        """The forward pass of X (m, d) float32 as a callable that returns the padded float32
        logits: X in float16, padded to the tiles, every layer's output allocated once; one launch
        a layer."""
        import torch

        from cudalearn.trace import launch

        m, d = X.shape
        rows = _up(m, self.tiles["BM"])
        h = torch.zeros(rows, self.W[0].shape[1], dtype=torch.float16, device=self.dev)
        h[:m, :d] = torch.as_tensor(np.asarray(X)).to(self.dev).half()
        threads, steps = tc_gemm.threads_per_block(self.tiles), []
        for layer, (W, b) in enumerate(zip(self.W, self.b, strict=True)):
            last = layer == len(self.W) - 1
            dtype = None if last else torch.float16
            out = torch.empty(h.shape[0], W.shape[0], device=self.dev, dtype=dtype)
            grid = (W.shape[0] // self.tiles["BN"], h.shape[0] // self.tiles["BM"])
            y = as_array(out) if last else as_words(out)
            kernel = self.last if last else self.hidden
            steps.append((kernel, grid, (as_words(h), as_words(W), as_array(b), y)))
            h = out

        def forward():
            for kernel, grid, args in steps:
                launch(kernel, grid, threads, *args)
            return h

        return forward


def compare() -> str:
    """Time the FP16 tensor-core forward pass against Chapter 5's TunedMLP (FP32) in one run; the text."""
    from cudalearn.measure import reference, timing
    from cudalearn.runtime.numba_backend import cuda

    side, hidden, batch = (sizes.size(f"ch5.{s}") for s in ("side", "hidden", "batch"))
    params = ch05_model.init_params(ch05_model.layer_sizes(side * side, hidden))
    X = np.random.default_rng(1).random((batch, side * side), dtype=np.float32)
    cc = device.info().compute_capability
    fp32 = ch05_model.TunedMLP(params, batch, 0.1)
    dX = cuda.to_device(X)
    tc = TensorCoreMLP(params, cc)
    tc_forward = tc.prepare(X)
    want = fp32.forward(dX).copy_to_host()
    got = tc_forward()[:batch, : tc.classes].float().cpu().numpy()
    error = float(np.abs(got - want).max() / np.abs(want).max())
    reference.record(KEY + ".error", {"max_abs_diff_over_max_logit": error})
    flops = sum(2 * batch * W.shape[0] * W.shape[1] for W, _ in params)
    found = {
        "TunedMLP FP32 (Ch. 5)": lambda: fp32.forward(dX),
        "tensor cores FP16 (06d)": tc_forward,
    }
    results = timing.measure(
        KEY,
        found,
        baseline="TunedMLP FP32 (Ch. 5)",
        flops=flops,
        size={"batch": batch, "sizes": list(tc_sizes(params))},
    )
    return (
        f"{table(results)}\nlogits: largest difference {error:.2e} of the largest |logit| (FP16 against FP32)"
    )


def tc_sizes(params):
    """The layer sizes (features, hidden..., classes) of params."""
    return (params[0][0].shape[0], *(W.shape[1] for W, _ in params))
