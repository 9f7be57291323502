"""Planted speed submissions: cheating kernels (with the cause of their zero), naive answers, solutions.

Each entry replaces one answer cell of a lab's solution notebook (by cell id). A cheat must get zero speed
points with a message matching `cause`; a naive answer must reach a tier below the last; the solution
every speed point. `build(folder)` writes every submission as folder/LAB/NAME/NAME.ipynb (one subfolder
per student), so `cudalearn grade LAB folder/LAB` grades them; speed.sh (data/gpu-runs) does that on a GPU
and `check.py` compares its grade tables with what is written here.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

VA_HEAD = '''@cuda.jit
def vector_add(a, b, out):
    """Lab 2: out[i] = a[i] + b[i], one thread per element; a, b, out (n,) float32."""
    i = cuda.grid(1)
'''


@dataclass(frozen=True)
class Plant:
    """A planted submission: the lab, the answer cell it replaces, its code, and what its speed must be."""

    name: str
    lab: str
    cell: str  # the cell id of the answer it replaces ("" for the solution itself)
    code: str
    trick: str
    cause: str = ""  # regex the speed message of a cheat must match (zero speed points)
    kind: str = "cheat"  # "cheat" | "naive" | "solution"


CHEATS = [
    Plant(
        "first-call-only",
        "02",
        "s02-04",
        VA_HEAD
        + "    if i < out.shape[0]:\n        a[i] = a[i] + b[i]  # a second call on the same a gives a + 2b\n"
        "        out[i] = a[i]\n",
        "correct on the first call, wrong later: it keeps its result in an input",
        r"changed its input `a`|test above failed",
    ),
    Plant(
        "zeroes-input",
        "02",
        "s02-04",
        VA_HEAD + "    if i < out.shape[0]:\n        out[i] = a[i] + b[i]\n        b[i] = float32(0.0)\n",
        "changes its inputs",
        r"changed its input `b`|test above failed",
    ),
    Plant(
        "skips-written-output",
        "02",
        "s02-04",
        VA_HEAD
        + "    if i < out.shape[0]:\n        if out[i] == out[i]:  # not NaN: a warm-up run wrote it, skip\n"
        "            return\n        out[i] = a[i] + b[i]\n",
        "fast only on repeated runs: it skips an output a previous run left",
        r"output `out` is wrong",
    ),
    Plant(
        "less-work-when-large",
        "02",
        "s02-04",
        VA_HEAD + "    if i < out.shape[0] and i < (1 << 20):  # the tests' sizes are small\n"
        "        out[i] = a[i] + b[i]\n",
        "correct at the tests' sizes, does a sixteenth of the work at the timed size",
        r"output `out` is wrong",
    ),
    Plant(
        "writes-outside",
        "02",
        "s02-04",
        VA_HEAD + "    if i < out.shape[0]:\n        out[i] = a[i] + b[i]\n"
        "    elif out.shape[0] > (1 << 20) and i < out.shape[0] + 64:\n        out[i] = float32(0.0)\n",
        "writes outside its output (only at large sizes, where the tests do not look)",
        r"outside `out` were written",
    ),
    Plant(
        "other-stream",
        "02",
        "s02-04",
        '''@cuda.jit
def _add(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] + b[i]


class _Launcher:
    """vector_add[grid, block](...) launches on a stream of its own and returns at once."""

    def __getitem__(self, config):
        stream = cuda.stream()
        return lambda *args: _add[config[0], config[1], stream](*args)


vector_add = _Launcher()
''',
        "launches on another stream (the work leaves the clock's stream)",
        r"not timed|not a function|test above failed",
    ),
    Plant(
        "sleeps",
        "02",
        "s02-04",
        VA_HEAD + "    if i < out.shape[0]:\n        out[i] = a[i] + b[i]\n"
        "    if out.shape[0] > (1 << 20):\n        cuda.nanosleep(1000000)\n",
        "sleeps in the kernel",
        r"not timed|nanosleep|test above failed",
    ),
    Plant(
        "spins-beside",
        "02",
        "s02-04",
        """import threading

import numpy as np  # the lab's cells import no numpy: without it the thread dies at once (NameError)


@cuda.jit
def _spin(x):
    acc = float32(0.0)
    for k in range(1 << 24):
        acc += float32(k)
    x[0] = acc


def _busy():
    x = cuda.device_array(1, dtype=np.float32)
    while True:  # keeps the GPU busy while anything else is timed
        _spin[80, 1024](x)


threading.Thread(target=_busy, daemon=True).start()


"""
        + VA_HEAD
        + "    if i < out.shape[0]:\n        out[i] = a[i] + b[i]\n",
        "spins the GPU from a thread to distort the reference's timing",
        r"test above failed|not timed",
    ),
    Plant(
        "over-the-limit",
        "02",
        "s02-04",
        VA_HEAD + "    if i < out.shape[0]:\n        v = a[i] + b[i]\n        if out.shape[0] > (1 << 20):\n"
        "            for k in range(1 << 30):  # hours of work, only at the timed size\n"
        "                v += float32(1e-30) * float32(k)  # too small to change v: the output stays right\n"
        "        out[i] = v\n",
        "exceeds the time limit",
        r"past the time limit",
    ),
    Plant(
        "tiled-wrong-later",
        "03",
        "s03-07",
        "",  # built from the solution: see _tiled_wrong_later
        "matmul_tiled zeroes A's tile after loading it: right once, zeros on a second call with the same A",
        r"changed its input `A`|test above failed",
    ),
]

NAIVE = [
    Plant(
        "naive-strided",
        "02",
        "s02-04",
        VA_HEAD.replace(
            "    i = cuda.grid(1)\n",
            "    i = cuda.blockIdx.x + cuda.threadIdx.x * cuda.gridDim.x  # uncoalesced\n",
        )
        + "    if i < out.shape[0]:\n        out[i] = a[i] + b[i]\n",
        "a warp's 32 threads read 32 addresses a grid apart",
        kind="naive",
    ),
    Plant(
        "naive-sync-per-k",
        "03",
        "s03-07",
        "",
        "the solution with a needless cuda.syncthreads() after every multiply-add of the inner k loop: "
        "correct, race-free and as frugal with global memory, but 16 barriers a tile instead of 2 stall "
        "the block's 8 warps between shared reads (other resident blocks hide part of it), so on an H100 "
        "it should run at about half the solution's speed: tier 1 or 2 (ratio 0.25-0.9)",
        kind="naive",
    ),
]

SOLUTIONS = {
    "02": "02-first-kernels",
    "03": "03-tiling",
    "04": "04-bank-conflicts",
    "05": "05-fusion-shallow-net",
    "06": "06-tensor-cores-triton",
    "10": "10-softmax-reductions",
}
REPEATS = 3  # the same honest submission (the solution) graded three times: the same tier each time


def _notebook(lab: str) -> dict:
    return json.loads((ROOT / "solutions" / f"{SOLUTIONS[lab]}.ipynb").read_text())


def _cell(nb: dict, cell_id: str) -> dict:
    return next(c for c in nb["cells"] if c.get("id") == cell_id)


def _source(nb: dict, plant: Plant) -> str:
    """The answer cell's code for `plant` (solution cells changed textually where `code` is empty)."""
    old = "".join(_cell(nb, plant.cell)["source"])
    for marker in ("    ### BEGIN SOLUTION\n", "    ### END SOLUTION\n", "    ### END SOLUTION"):
        old = old.replace(marker, "")
    if plant.name == "tiled-wrong-later":
        return old.replace(
            "            a = A[row, k0 + tx]\n",
            "            a = A[row, k0 + tx]\n            A[row, k0 + tx] = float32(0.0)\n",
        )
    if plant.name == "naive-sync-per-k":
        return old.replace(
            "            acc += sA[ty, k] * sB[k, tx]\n",
            "            acc += sA[ty, k] * sB[k, tx]\n"
            "            cuda.syncthreads()  # needless: a barrier per step\n",
        )
    return plant.code


def build(folder: Path) -> list[Plant]:
    """Write every planted submission under folder/LAB/NAME/; return them (solutions included)."""
    plants = list(CHEATS) + list(NAIVE)
    plants += [
        Plant(f"solution-{i}", lab, "", "", "the solution", kind="solution")
        for lab in SOLUTIONS
        for i in range(1, 1 + (REPEATS if lab == "02" else 1))
    ]
    for plant in plants:
        nb = _notebook(plant.lab)
        if plant.cell:
            code = _source(nb, plant)
            assert code and code != "".join(_cell(nb, plant.cell)["source"]), plant.name
            _cell(nb, plant.cell)["source"] = code.splitlines(keepends=True)
        where = folder / plant.lab / plant.name
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir(parents=True)
        (where / f"{plant.name}.ipynb").write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return plants


if __name__ == "__main__":
    import sys

    for p in build(Path(sys.argv[1])):
        print(p.lab, p.name, p.kind)
