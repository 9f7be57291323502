"""How busy the GPU is while a transformer block runs, per token count (Chapter 9b, stored as ch9.block_pace).

Chapter 9b reads its small-N block timings as host-bound from the stored launch cost. This measures
it on one GPU, in one run: the time per call that CUDA events give (`timing.gpu_time`, calls queued
back to back) beside the sum of the block's kernel times that the profiler sees. When the kernels
add up to a small part of the time per call, the GPU waits for the host.

    python3 -c "from cudalearn.chapters.ch09 import pace; pace.write('OUT/ch9-pace.json')"
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

PATCHES = (32, 16, 8, 4)


def block_pace(
    *, dim: int = 192, heads: int = 3, batch: int = 32, image: int = 224, patches=PATCHES
) -> dict[str, Any]:
    """Per token count: ms per block call (events), GPU kernel ms per call (profiler), kernels per call."""
    import torch

    from cudalearn.chapters.ch09 import model as vit
    from cudalearn.measure import timing
    from cudalearn.nn import op_costs

    torch.manual_seed(0)
    block = vit.TransformerBlock(dim, heads).to("cuda")
    rows = []
    for p in patches:
        n = vit.num_patches(image, image, p)
        x = torch.randn(batch, n, dim, device="cuda")
        call = vit.inference(lambda x=x: block(x))
        per_call = timing.gpu_time(call)
        kernels = op_costs.gpu_kernels(call, repeat=10, top=1000)
        rows.append(
            {
                "tokens": n,
                "ms": per_call.median_ms,
                "kernel_ms": sum(k["us"] for k in kernels) / 1e3,
                "kernel_names": len(kernels),
            }
        )
    return {"size": {"dim": dim, "heads": heads, "batch": batch, "image": image}, "rows": rows}


def write(path: str | Path) -> dict[str, Any]:
    """Measure `block_pace` on this GPU and write it as a stored reference run (JSON) at `path`."""
    from cudalearn.measure import reference
    from cudalearn.runtime import precision

    precision.set_fp32()  # float32 with TF32 off, as 9b times the block
    data = {**reference.run_header(), "figures": {"ch9.block_pace": block_pace()}}
    Path(path).write_text(reference.dumps(data))
    return data
