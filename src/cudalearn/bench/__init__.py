"""Each chapter's measurements in one place: what is timed, how, and the goals it is judged by (Chapters 3-6).

One module per benchmark; `scripts/bench_*.py` are their command lines, and
`scripts/gpu_run.py` runs those on a GPU to store the figures:

* `tiling`: Chapters 3-4's naive, tiled and padded matmuls against cuBLAS FP32, and their two goals;
* `shallow_net`: Chapter 5's network trained and stepped, against PyTorch, and its goals;
* `fused_layer`: the kernels of one of its hidden layers (naive, tiled, register-tiled, PyTorch);
* `dropout_chain`: Chapter 5's bias, ReLU and dropout chain, unfused, fused and in PyTorch;
* `gemm`: Chapter 6's register-blocked kernels, Triton and cuBLAS in four formats, and its goal;
* `operands`: the square matmul operands (host, device, PyTorch) and cuBLAS's FP32 product.

Importing this package or its modules chooses no run mode: each `main`
calls `cudalearn.setup()` first, and the kernels are imported after it.
"""
