"""Each chapter's measurements in one place: what is timed, how, and the goals it is judged by (Ch. 2-10).

One module per benchmark; `scripts/bench_*.py` are their command lines, and
`scripts/gpu_run.py` runs those on a GPU to store the figures:

* `vector_add`: Chapter 2's vector add, one and several elements a thread, against torch.add, and its goal;
* `tiling`: Chapters 3-4's naive, tiled and padded matmuls against cuBLAS FP32, and their two goals;
* `shallow_net`: Chapter 5's network trained and stepped, against PyTorch, and its goals;
* `fused_layer`: the kernels of one of its hidden layers (naive, tiled, register-tiled, PyTorch);
* `dropout_chain`: Chapter 5's bias, ReLU and dropout chain, unfused, fused and in PyTorch;
* `gemm`: Chapter 6's register-blocked kernels, Triton and cuBLAS in four formats, and its goal;
* `operands`: the square matmul operands (host, device, PyTorch) and cuBLAS's FP32 product;
* `reductions`: Chapter 10's sums, row softmax, LayerNorm and attention, against PyTorch and the copy.

Importing this package or its modules chooses no run mode: each `main`
calls `cudalearn.setup()` first, and the kernels are imported after it.
"""

#: What a benchmark that checks every candidate under the simulator prints there (Chapters 2 and 10).
SIMULATED = (
    "This benchmark times GPU kernels and this process runs the simulator: nothing is timed. "
    "Every candidate runs once at the simulator's sizes (a check); the stored GPU figures follow, if any."
)
