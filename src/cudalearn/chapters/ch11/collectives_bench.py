"""The all-reduce and all-gather measured through torch.distributed, under torchrun (Chapter 11).

    python -m torch.distributed.run --standalone --nproc_per_node=N \\
        $(python -c 'from cudalearn.chapters.ch11 import collectives_bench as c; print(c.__file__)') --out DIR

Multi-node: the same command on each of M nodes, `torchrun --nnodes=M
--rdzv_backend=c10d --rdzv_endpoint=HOST:PORT --nproc_per_node=N ...`
(`parallel_runs.rendezvous`): the rendezvous numbers the nodes.

It ships inside the package (so Colab has it too). For each message size
(by default 1 KiB to 1 GiB by powers of 4 with NCCL on GPUs; 1 KiB to
64 KiB with gloo on CPU processes, where only the program is tested) and
each collective, every process checks the result once, runs `--warmup`
untimed calls, then times `--iters` calls one by one: barrier, start the
clock, the collective, wait for the GPU (torch.cuda.synchronize), stop. A
call's time is the slowest process's; a row holds the median and the
minimum, and nccl-tests' algorithm and bus bandwidths of the median
(`tensor_parallel.bus_bandwidth`). Process 0 writes
DIR/collectives-<backend>-<world>.json: world size, backend, device,
versions, the environment's NCCL_NVLS_ENABLE and the rows.

NVLink multicast stays off: the program sets `multigpu.MULTICAST_OFF`
(NCCL_NVLS_ENABLE=0) in its own environment before NCCL starts. Asked for
NCCL (`--backend nccl`) without a GPU for each process on the node, it
refuses, naming how many it has.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.distributed as dist

from cudalearn.chapters.ch11.tensor_parallel import bus_bandwidth
from cudalearn.dist.program import barrier, fill_unset, parser, run_program

#: Defaults per backend: (smallest bytes, largest bytes, warm-up calls, timed calls), for `DEFAULTED`.
DEFAULTS = {"nccl": (2**10, 2**30, 5, 20), "gloo": (2**10, 2**16, 2, 5)}
#: The options that take their backend's `DEFAULTS` when left unset.
DEFAULTED = ("min_bytes", "max_bytes", "warmup", "iters")
OPS = ("all_reduce", "all_gather")
ELEMENT = torch.float32
#: All-gather into one tensor: `all_gather_single` from PyTorch 2.13, `all_gather_into_tensor` before it.
_ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def sizes(smallest: int, largest: int, factor: int = 4) -> list[int]:
    """Chapter 11: message sizes in bytes, `smallest` times powers of `factor` up to `largest`."""
    if smallest < 1 or largest < smallest or factor < 2:
        raise ValueError(
            f"need 1 <= smallest <= largest and factor >= 2, got {smallest}, {largest}, {factor}"
        )
    out = [smallest]
    while out[-1] * factor <= largest:
        out.append(out[-1] * factor)
    return out


def parse(argv=None) -> argparse.Namespace:
    """Chapter 11: the command line (`argv` or sys.argv); unset sizes and counts get the backend's later."""
    p = parser(__doc__, "folder for collectives-<backend>-<world>.json")
    p.add_argument("--min-bytes", type=int, help="smallest message (default: 1 KiB)")
    p.add_argument(
        "--max-bytes", type=int, help="largest message (default: 1 GiB with NCCL, 64 KiB with gloo)"
    )
    p.add_argument("--factor", type=int, default=4, help="ratio of one size to the next")
    p.add_argument("--warmup", type=int, help="untimed calls per size (default: 5 with NCCL, 2 with gloo)")
    p.add_argument("--iters", type=int, help="timed calls per size (default: 20 with NCCL, 5 with gloo)")
    p.add_argument("--ops", default=",".join(OPS), help=f"comma-separated, of {', '.join(OPS)}")
    return p.parse_args(argv)


def _collective(op: str, nbytes: int, world: int, rank: int, device: torch.device):
    """(call, check, bytes): a collective of nccl-tests' size `nbytes` (whole float32 per rank)."""
    per_rank = max(1, nbytes // ELEMENT.itemsize // world)
    if op == "all_reduce":
        count = per_rank * world
        buf = torch.empty(count, dtype=ELEMENT, device=device)

        def check():
            buf.fill_(rank + 1)
            dist.all_reduce(buf)
            return bool((buf == world * (world + 1) / 2).all())

        return (lambda: dist.all_reduce(buf)), check, count * ELEMENT.itemsize
    if op == "all_gather":
        part = torch.full((per_rank,), float(rank + 1), dtype=ELEMENT, device=device)
        out = torch.empty(per_rank * world, dtype=ELEMENT, device=device)
        want = torch.arange(1, world + 1, dtype=ELEMENT, device=device).repeat_interleave(per_rank)

        def check():
            _ALL_GATHER(out, part)
            return bool(torch.equal(out, want))

        return (lambda: _ALL_GATHER(out, part)), check, out.numel() * ELEMENT.itemsize
    raise ValueError(f"--ops names {op!r}; the collectives measured are {', '.join(OPS)}")


def measure(op: str, nbytes: int, *, warmup: int, iters: int, device: torch.device, barrier) -> dict:
    """Chapter 11: one row: `op` on `nbytes` timed `iters` times (slowest process per call), bandwidths."""
    world, rank = dist.get_world_size(), dist.get_rank()
    call, check, actual = _collective(op, nbytes, world, rank, device)
    cuda = device.type == "cuda"
    wrong = 0.0 if check() else 1.0
    for _ in range(warmup):
        call()
    if cuda:
        torch.cuda.synchronize(device)
    times = []
    for _ in range(iters):
        barrier()
        t0 = time.perf_counter()
        call()
        if cuda:
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t0)
    slowest = torch.tensor(times + [wrong], dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)  # per call: the slowest process; last: any wrong result
    times, wrong = slowest[:-1].tolist(), int(slowest[-1].item() > 0)
    median = statistics.median(times)
    bw = bus_bandwidth(op, actual, median, world)
    return {
        "op": op,
        "bytes": actual,
        "dtype": str(ELEMENT).removeprefix("torch."),
        "median_us": median * 1e6,
        "min_us": min(times) * 1e6,
        "algbw_gbs": bw.algbw,
        "busbw_gbs": bw.busbw,
        "wrong": wrong,
    }


def run(args: argparse.Namespace, device: torch.device) -> dict:
    """Chapter 11: one process's part: every size and collective of the command line measured, in rows."""
    fill_unset(args, DEFAULTED, DEFAULTS[args.backend])
    ops = [op.strip() for op in args.ops.split(",") if op.strip()]
    rows = [
        measure(op, n, warmup=args.warmup, iters=args.iters, device=device, barrier=lambda: barrier(device))
        for n in sizes(args.min_bytes, args.max_bytes, args.factor)
        for op in ops
    ]
    return {
        "warmup": args.warmup,
        "iters": args.iters,
        "time": "median over timed calls of the slowest process's time per call",
        "rows": rows,
    }


def main(argv=None) -> None:
    """Chapter 11: one process, as torchrun starts it; process 0 writes the JSON into --out."""
    run_program("collectives_bench", parse(argv), run, prefix="collectives")


if __name__ == "__main__":
    main()
