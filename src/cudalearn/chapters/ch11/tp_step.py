"""A transformer block's MLP split over N processes, checked and timed, under torchrun (Chapter 11).

    python -m torch.distributed.run --standalone --nproc_per_node=N \\
        $(python -c 'from cudalearn.chapters.ch11 import tp_step; print(tp_step.__file__)') --out DIR

Multi-node: the same command on each of M nodes, `torchrun --nnodes=M
--rdzv_backend=c10d --rdzv_endpoint=HOST:PORT --nproc_per_node=N ...`
(`parallel_runs.rendezvous`): the rendezvous numbers the nodes.

It ships inside the package (so Colab has it too). Every process builds the
same unsplit pair of layers from one seed, then its share of them
(`tensor_parallel.tp_mlp`: the first layer split by output features, the
second by input features), and:

1. **checks** the split against the unsplit layers in float64, on a small
   MLP: the output, the input's gradient and every weight's gradient (the
   shards gathered), and the bytes each process sent, counted at every
   collective, against `tensor_parallel.bytes_per_step`;
2. with `--time-steps S`, **times** S forward and backward passes of an MLP
   at the timed shape (`--tokens`, `--d-model`, `--hidden`, `--dtype`),
   and the all-reduce of one (tokens, d_model) activation alone, the
   slowest process's median per call.

Process 0 writes DIR/tp-<backend>-<world>.json (world, backend, device,
versions, the check's errors and bytes, the timings). One launch with one
process gives the unsplit baseline of the same shape. NVLink multicast stays
off and NCCL without a GPU per process is refused with the reason
(`dist_program.start`, through `dist_program.run_program`).
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist

from cudalearn.chapters.ch11 import tensor_parallel as tp
from cudalearn.dist.program import DTYPES, parser, run_program, slowest_ms
from cudalearn.nn.alexnet import Traffic
from cudalearn.runtime import precision

#: The check's small MLP (tokens, d_in, hidden, d_out): hidden splits over 1, 2, 4 and 8 processes.
CHECK_SHAPE = (6, 8, 16, 12)


def parse(argv=None) -> argparse.Namespace:
    """Chapter 11: the command line (`argv` or sys.argv): `dist_program.parser`'s, and the MLP's sizes."""
    p = parser(__doc__, "folder for tp-<backend>-<world>.json")
    p.add_argument("--time-steps", type=int, default=0, help="timed forward+backward passes (0: none)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--tokens", type=int, default=8192, help="rows of x in the timed MLP")
    p.add_argument("--d-model", type=int, default=4096, help="its input and output width")
    p.add_argument("--hidden", type=int, default=16384, help="its hidden width, split over the processes")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bfloat16")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def _unsplit(shape, device, dtype, seed):
    """The unsplit fc1 (hidden, d_in) and fc2 (d_out, hidden), x (tokens, d_in), the loss's weights g."""
    tokens, d_in, hidden, d_out = shape
    torch.manual_seed(seed)
    fc1 = torch.nn.Linear(d_in, hidden, device=device, dtype=dtype)
    fc2 = torch.nn.Linear(hidden, d_out, device=device, dtype=dtype)
    x = torch.randn(tokens, d_in, device=device, dtype=dtype)
    g = torch.randn(tokens, d_out, device=device, dtype=dtype)
    return fc1, fc2, x, g


def _gather(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Every process's `t` joined along `dim`, in rank order (no autograd)."""
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t.contiguous())
    return torch.cat(parts, dim=dim)


def compare_with_unsplit(device: torch.device, shape=CHECK_SHAPE, seed: int = 0) -> dict:
    """Chapter 11: `tp_mlp` on the default group against the unsplit layers, in float64.

    Returns the largest absolute error of the output, of the input's
    gradient and of each parameter's gradient (shards gathered), and the
    bytes this process counted per direction with the bytes
    `tensor_parallel.bytes_per_step` predicts.
    """
    world = dist.get_world_size()
    tokens, d_in, _, d_out = shape
    fc1, fc2, x, g = _unsplit(shape, device, torch.float64, seed)
    x_ref = x.clone().requires_grad_()
    y_ref = fc2(torch.nn.functional.gelu(fc1(x_ref)))
    (y_ref * g).sum().backward()

    traffic = Traffic()
    mlp = tp.tp_mlp(fc1, fc2, torch.nn.GELU(), traffic=traffic)
    col, row = mlp[0], mlp[2]
    xp = x.clone().requires_grad_()
    y = mlp(xp)
    (y * g).sum().backward()
    pairs = {
        "output": (y, y_ref),
        "input gradient": (xp.grad, x_ref.grad),
        "fc1 weight gradient": (_gather(col.weight.grad, 0), fc1.weight.grad),
        "fc1 bias gradient": (_gather(col.bias.grad, 0), fc1.bias.grad),
        "fc2 weight gradient": (_gather(row.weight.grad, 1), fc2.weight.grad),
        "fc2 bias gradient": (row.bias.grad, fc2.bias.grad),
    }
    errors = {k: float((a - b).abs().max()) for k, (a, b) in pairs.items()}
    want = tp.bytes_per_step("mlp", tokens, d_in, d_out, world, bytes_per_element=8)
    counted = {"forward": 0, "backward": 0}
    for fwd, bwd in traffic.bytes.values():
        counted["forward"] += fwd
        counted["backward"] += bwd
    counted["total"] = counted["forward"] + counted["backward"]
    return {"shape": list(shape), "max_abs_error": errors, "bytes_counted": counted, "bytes_predicted": want}


def time_mlp(device: torch.device, args) -> dict:
    """Chapter 11: ms per forward+backward of this process's share of the timed MLP, and of one all-reduce."""
    world = dist.get_world_size()
    dtype = DTYPES[args.dtype]
    shape = (args.tokens, args.d_model, args.hidden, args.d_model)
    fc1, fc2, x, g = _unsplit(shape, device, dtype, args.seed)
    mlp = tp.tp_mlp(fc1, fc2, torch.nn.GELU())
    del fc1, fc2  # each process keeps its shards only
    x.requires_grad_()

    def step():
        mlp.zero_grad(set_to_none=True)
        (mlp(x) * g).sum().backward()

    act = torch.empty(args.tokens, args.d_model, device=device, dtype=dtype)
    elem = act.element_size()
    flops = 2 * 3 * args.tokens * (args.d_model * args.hidden * 2) // world  # fwd + 2 bwd GEMMs, per rank
    out = {
        "shape": {"tokens": args.tokens, "d_model": args.d_model, "hidden": args.hidden},
        "dtype": args.dtype,
        "step": slowest_ms(step, device, steps=args.time_steps, warmup=args.warmup),
        "flops_per_process": flops,
        "bytes_per_step": tp.bytes_per_step(
            "mlp", args.tokens, args.d_model, args.d_model, world, bytes_per_element=elem
        ),
    }
    if world > 1:
        reduce = lambda: dist.all_reduce(act)  # noqa: E731
        out["all_reduce"] = slowest_ms(reduce, device, steps=args.time_steps, warmup=args.warmup)
    return out


def run(args: argparse.Namespace, device: torch.device) -> dict:
    """Chapter 11: one process's part: the split checked in float64, then timed with --time-steps."""
    if device.type == "cuda":
        precision.set_fp32()  # the check is float64; the timing names its dtype
    world = dist.get_world_size()
    if CHECK_SHAPE[2] % world or args.hidden % world:
        widths = f"{CHECK_SHAPE[2]} and {args.hidden}"
        raise SystemExit(f"tp_step: the hidden widths {widths} do not split evenly over {world} processes")
    return {
        "check": compare_with_unsplit(device, seed=args.seed),
        "timing": time_mlp(device, args) if args.time_steps else None,
    }


def main(argv=None) -> None:
    """Chapter 11: one process, as torchrun starts it; process 0 writes DIR/tp-<backend>-<world>.json."""
    run_program("tp_step", parse(argv), run, prefix="tp")


if __name__ == "__main__":
    main()
