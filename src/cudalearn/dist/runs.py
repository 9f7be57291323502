"""Chapter 11's launches: one of its torchrun programs at one or several world sizes, its JSON read back.

Each program of the chapter (`tp_step`, `collectives_bench`, `ddp_scaling`,
`fsdp_fit`) writes one file, DIR/<prefix>-<backend>-<world>.json, from its
process 0. `launch` runs one world size in a fresh folder and returns that
file's contents; `sweep` runs the world sizes a machine allows (1, 2, 4, 8
... up to its GPU count), for a figure whose baseline (one process) comes
from the same run.
"""

from __future__ import annotations

import json
import socket
import tempfile
from pathlib import Path

from cudalearn.dist import multigpu

#: torchrun's rendezvous back-end for a job of several nodes (c10d: a TCP store on the endpoint's host).
RDZV_BACKEND = "c10d"


def worlds(gpus: int) -> list[int]:
    """Chapter 11: the world sizes a sweep on `gpus` GPUs launches: 1, 2, 4, ... up to `gpus`."""
    out = [1]
    while out[-1] * 2 <= gpus:
        out.append(out[-1] * 2)
    return out


def rendezvous(host: str, port: int, nodes: int, job: str = "cudalearn") -> list[str]:
    """Chapter 11: torchrun's flags for a job of `nodes` nodes meeting at `host`:`port` (c10d).

    Every node runs the same command with these flags; the c10d rendezvous
    gives each node its rank (torchrun's `--node_rank` serves only the
    static rendezvous, and is ignored with c10d). `host` is the address of
    one node that all can reach, where the first node to arrive serves the store.
    """
    if nodes < 1:
        raise ValueError(f"a job needs at least one node, not {nodes}")
    return [
        f"--nnodes={nodes}",
        f"--rdzv_backend={RDZV_BACKEND}",
        f"--rdzv_endpoint={host}:{port}",
        f"--rdzv_id={job}",
    ]


def free_port() -> int:
    """Chapter 11: a TCP port of this machine that no program listens on now (for a rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(
    script,
    prefix: str,
    nproc: int,
    *args,
    backend: str = "auto",
    timeout: float = 600,
    rendezvous: list[str] | None = None,
) -> dict:
    """Chapter 11: `script` in `nproc` processes under torchrun; the JSON its process 0 wrote.

    `backend` is passed as `--backend` ('auto': NCCL with a GPU per process,
    else gloo on the CPU); `rendezvous` (flags of `rendezvous()`) replaces
    the one-node default. Raises with the program's output if it fails, or
    if it wrote no DIR/<prefix>-<backend>-<world>.json.
    """
    out = Path(tempfile.mkdtemp(prefix=f"cudalearn-{prefix}-"))
    meet = {"rendezvous": rendezvous} if rendezvous else {}
    multigpu.torchrun(script, "--out", out, "--backend", backend, *args, nproc=nproc, timeout=timeout, **meet)
    found = sorted(out.glob(f"{prefix}-*.json"))
    if len(found) != 1:
        raise RuntimeError(f"{Path(script).name} in {nproc} processes wrote {found or 'nothing'} in {out}")
    return json.loads(found[0].read_text())


def sweep(script, prefix: str, *args, gpus: int, timeout: float = 600) -> dict[int, dict]:
    """Chapter 11: {world: `launch`'s JSON} with NCCL for every world of `worlds(gpus)`, smallest first."""
    return {n: launch(script, prefix, n, *args, backend="nccl", timeout=timeout) for n in worlds(gpus)}
