"""The timing cases of the speed-graded exercises: inputs, answers, launches, bytes and FLOPs (labs 2-10).

`case(name)` is the `measure.bench.Case` a `# SPEED: case=NAME` line names, at
the GPU size (`small=True`: a few hundred elements, for the tests' fake device
and the simulator). Each launch is the one the lab's checks use, from the
kernel's own constants (TILE, BLOCK, BM...), which the grader reads from the
student's process and from the solution for the reference.
"""

from __future__ import annotations

import numpy as np

from cudalearn.measure.bench import Case
from cudalearn.runtime.launch import blocks

F32 = np.float32
POISON = None  # an output starts as fresh random values, so no "already computed" marker survives
# GPU sizes are no multiple of 16 (nor of any power-of-two tile or block from 16 to 256), yet multiples of 8
# (rows stay 32-byte aligned): the last block has threads past the data, so a kernel that stores past its
# output at the timed size (a missing guard, or one on purpose) writes into the harness's guard zones.
SURPLUS = 40


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Fresh uniform float32 values in [-1, 1) (a fast generator: inputs are made for every run)."""
    x = rng.random(shape, dtype=F32)
    x *= 2
    x -= 1
    return x


def _vector_add(small: bool) -> Case:
    n = 300 if small else (1 << 23) + SURPLUS
    return Case(
        "vector_add",
        ("a", "b", "out"),
        lambda rng: {"a": _rand(rng, n), "b": _rand(rng, n)},
        lambda h: {"out": ((n,), F32, POISON)},
        lambda h: {"out": h["a"] + h["b"]},
        lambda c: ((blocks(n, 256),), (256,)),
        nbytes=12 * n,
        flops=n,
    )


def _matmul(name: str, small: bool, tiled: bool) -> Case:
    m = k = n = 40 if small else 1000
    args = ("A", "B", "C")

    def launch(c: dict):
        t = c["TILE"] if tiled else 16
        return (blocks(n, t), blocks(m, t)), (t, t)

    return Case(
        name,
        args,
        lambda rng: {"A": _rand(rng, m, k), "B": _rand(rng, k, n)},
        lambda h: {"C": ((m, n), F32, POISON)},
        lambda h: {"C": h["A"] @ h["B"]},
        launch,
        nbytes=4 * (m * k + k * n + m * n),
        flops=2 * m * n * k,
        consts=("TILE",) if tiled else (),
        rtol=1e-3,
        atol=1e-3,
    )


def _transpose(small: bool) -> Case:
    m, n = (45, 70) if small else (4096 + SURPLUS, 2048 + SURPLUS)
    return Case(
        "transpose_no_conflict",
        ("src", "dst"),
        lambda rng: {"src": _rand(rng, m, n)},
        lambda h: {"dst": ((n, m), F32, POISON)},
        lambda h: {"dst": np.ascontiguousarray(h["src"].T)},
        lambda c: ((blocks(n, c["TILE"]), blocks(m, c["TILE"])), (c["TILE"], c["TILE"])),
        nbytes=8 * m * n,
        flops=0,
        consts=("TILE",),
        rtol=0,
        atol=0,
    )


def _linear_relu(small: bool) -> Case:
    m = k = n = 40 if small else 1000
    return Case(
        "linear_relu_tiled",
        ("X", "W", "b", "Y"),
        lambda rng: {"X": _rand(rng, m, k), "W": _rand(rng, k, n), "b": _rand(rng, n)},
        lambda h: {"Y": ((m, n), F32, POISON)},
        lambda h: {"Y": np.maximum(h["X"] @ h["W"] + h["b"], F32(0))},
        lambda c: ((blocks(n, c["TILE"]), blocks(m, c["TILE"])), (c["TILE"], c["TILE"])),
        nbytes=4 * (m * k + k * n + n + m * n),
        flops=2 * m * n * k,
        consts=("TILE",),
        rtol=1e-3,
        atol=1e-3,
    )


def _regblock(small: bool) -> Case:
    m = k = n = 70 if small else 1000

    def launch(c: dict):
        threads = (c["BM"] // c["TM"]) * (c["BN"] // c["TN"])
        return (blocks(n, c["BN"]), blocks(m, c["BM"])), (threads,)

    return Case(
        "matmul_regblock",
        ("A", "B", "C"),
        lambda rng: {"A": _rand(rng, m, k), "B": _rand(rng, k, n)},
        lambda h: {"C": ((m, n), F32, POISON)},
        lambda h: {"C": h["A"] @ h["B"]},
        launch,
        nbytes=4 * (m * k + k * n + m * n),
        flops=2 * m * n * k,
        consts=("BM", "BN", "TM", "TN"),
        rtol=1e-3,
        atol=1e-3,
    )


def _array_sum(small: bool) -> Case:
    n = 3000 if small else (1 << 23) + SURPLUS
    return Case(
        "array_sum",
        ("x", "out"),
        lambda rng: {"x": rng.random(n, dtype=F32)},
        lambda h: {"out": ((1,), F32, 0.0)},  # the kernel adds to out[0]
        lambda h: {"out": np.array([h["x"].sum(dtype=np.float64)], dtype=F32)},
        lambda c: ((4 if small else 1024,), (c["BLOCK"],)),
        nbytes=4 * n,
        flops=n,
        consts=("BLOCK",),
        rtol=1e-4,
        atol=1e-3,
    )


def _warp_sums(small: bool) -> Case:
    n = 1000 if small else (1 << 23) + SURPLUS
    return Case(
        "warp_sums",
        ("x", "out"),
        lambda rng: {"x": _rand(rng, n)},
        lambda h: {"out": ((blocks(n, 32),), F32, POISON)},
        lambda h: {"out": np.pad(h["x"], (0, -n % 32)).reshape(-1, 32).sum(1, dtype=F32)},
        lambda c: ((blocks(n, 256),), (256,)),
        nbytes=4 * n + 4 * blocks(n, 32),
        flops=n,
        rtol=1e-4,
        atol=1e-4,
    )


def _softmax_rows(small: bool) -> Case:
    rows, cols = (10, 70) if small else (8192 + SURPLUS // 8, 1024)

    def softmax(x: np.ndarray) -> np.ndarray:
        e = np.exp(x - x.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    return Case(
        "softmax_rows",
        ("x", "y"),
        lambda rng: {"x": 4 * _rand(rng, rows, cols)},
        lambda h: {"y": ((rows, cols), F32, POISON)},
        lambda h: {"y": softmax(h["x"])},
        lambda c: ((blocks(rows * 32, 256),), (256,)),
        nbytes=8 * rows * cols,
        flops=4 * rows * cols,
        rtol=1e-4,
        atol=1e-6,
    )


CASES = {
    "vector_add": _vector_add,
    "matmul_naive": lambda small: _matmul("matmul_naive", small, tiled=False),
    "matmul_tiled": lambda small: _matmul("matmul_tiled", small, tiled=True),
    "matmul_bt_no_conflict": lambda small: _matmul("matmul_bt_no_conflict", small, tiled=True),
    "transpose_no_conflict": _transpose,
    "linear_relu_tiled": _linear_relu,
    "matmul_regblock": _regblock,
    "array_sum": _array_sum,
    "warp_sums": _warp_sums,
    "softmax_rows": _softmax_rows,
}


def case(name: str, small: bool = False) -> Case:
    """The timing case `name` (a key of CASES) at the GPU size, or a small one for tests."""
    return CASES[name](small)
