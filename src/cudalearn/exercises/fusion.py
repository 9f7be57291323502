"""Checks of lab 5 (fusion and a shallow network), built on `checks`, the tracer and a launch counter.

* `check_linear_relu`: a fused, tiled Y = relu(X @ W + b) kernel; results
  first (so an unfinished kernel says "not done yet"), then the tracer:
  no race, and (hidden tests) each output stored to global memory once;
* `check_layer_forward`: the host function that runs the layer makes
  exactly one launch, of the student's kernel, and copies nothing to the
  host (`cudalearn.nn.mlp.count_launches` counts every Numba launch);
* `check_backward_input`: dA = (dZ @ WT) * (A > 0) with the pre-transposed
  weights; results, then the tracer: every warp load coalesced;
* `check_epilogue_bytes`: the bytes the fusion saves, counted by hand.

Sizes stay small under the simulator; the tracer runs on the CPU in both modes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from cudalearn import checks, device

MAX_SECTORS_PER_LOAD = 4.0  # 32 lanes x 4 bytes = 128 bytes = 4 sectors of 32 bytes: a coalesced load


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


_trace = checks.trace_kernel


def _layer_problem(rng: np.random.Generator, m: int, k: int, n: int):
    """X (m, k), W (k, n), b (n,) float32, scaled so that about half of X @ W + b is negative."""
    X = rng.standard_normal((m, k)).astype(np.float32)
    W = (rng.standard_normal((k, n)) / math.sqrt(k)).astype(np.float32)
    b = (0.5 * rng.standard_normal(n)).astype(np.float32)
    return X, W, b


def _forward_spec(X, W, b) -> np.ndarray:
    return np.maximum(X.astype(np.float64) @ W + b, 0).astype(np.float32)


def _forward_hint(got: np.ndarray, X, W, b, tol: dict) -> str:
    """A hint when the result is a well-known wrong variant of relu(X @ W + b), else ''."""
    Z = X.astype(np.float64) @ W
    variants = [
        (Z + b, "it is X @ W + b without the ReLU: clamp at zero, max(v, float32(0.0)), before the store."),
        (np.maximum(Z, 0), "it is relu(X @ W), the bias is missing: add b[col] before the ReLU."),
        (
            np.maximum(Z, 0) + b,
            "the bias was added after the ReLU: relu(acc + b[col]), not relu(acc) + b[col].",
        ),
        (Z, "it is X @ W alone: add b[col], then apply the ReLU, before the store."),
    ]
    with np.errstate(invalid="ignore"):
        for value, hint in variants:
            if np.allclose(got, value.astype(np.float32), **tol):
                return hint
    return ""


def _grid(m: int, n: int, tile: int) -> tuple[tuple[int, int], tuple[int, int]]:
    return (math.ceil(n / tile), math.ceil(m / tile)), (tile, tile)


def check_linear_relu(
    kernel: Any, tile: int, sizes: Sequence[tuple[int, int, int]] | None = None, seed: int = 5
) -> None:
    """Lab 5: Y = relu(X @ W + b) in one tiled kernel, (tile, tile) blocks; sizes (m, k, n) off the tile grid.

    Checks the results first, then traces the kernel on the CPU: a race
    (a missing syncthreads) fails the check even when the result came out right.
    """
    rng = _rng(seed)
    if sizes is None:
        sizes = (
            [(tile, tile, tile), (13, 20, 9)] if device.mode() == "sim" else [(64, 64, 64), (257, 100, 31)]
        )
    for m, k, n in sizes:
        X, W, b = _layer_problem(rng, m, k, n)
        griddim, blockdim = _grid(m, n, tile)
        got = checks.run_kernel(kernel, griddim, blockdim, X, W, b, checks.empty_output((m, n)))[3]
        tol = checks.matmul_tol(k)
        expected = _forward_spec(X, W, b)
        try:
            checks.check_close(got, expected, name=f"Y (m, k, n = {m}, {k}, {n})", **tol)
        except AssertionError as err:
            hint = "" if checks.NOT_DONE in str(err) else _forward_hint(got, X, W, b, tol)
            raise AssertionError(f"{err}\nHint: {hint}" if hint else str(err)) from None
    m, k, n = 2 * tile, 2 * tile + 3, 2 * tile
    X, W, b = _layer_problem(rng, m, k, n)
    report = _trace(kernel, *_grid(m, n, tile), X, W, b, np.zeros((m, n), np.float32))
    if report.race_count:
        raise AssertionError(
            f"the tracer found {report.race_count} race(s) in your kernel. The first: {report.races[0]}. "
            "Hint: every thread must finish writing a tile before any thread reads it (a "
            "cuda.syncthreads() after the loads), and finish reading it before it is overwritten "
            "(a second cuda.syncthreads() at the end of the loop body)."
        )


def check_linear_relu_stores_once(kernel: Any, tile: int, size: tuple[int, int, int] | None = None) -> None:
    """Lab 5 (hidden): the fused kernel stores each output to global memory once, and nothing else.

    n must be a multiple of 8 (whole 32-byte sectors per row).
    """
    m, k, n = size or (2 * tile, 3 * tile, 2 * tile)
    X, W, b = _layer_problem(_rng(6), m, k, n)
    report = _trace(kernel, *_grid(m, n, tile), X, W, b, np.zeros((m, n), np.float32))
    checks.check_close(report.outputs[3], _forward_spec(X, W, b), name="Y (traced)", atol=1e-4 * math.sqrt(k))
    stored, ideal = 32 * report.global_store_sectors, 4 * m * n
    if stored != ideal:
        raise AssertionError(
            f"your kernel stored {stored:,} bytes to global memory for a ({m}, {n}) float32 output of "
            f"{ideal:,} bytes. A fused kernel keeps the sum, the bias and the ReLU in a register and "
            f"stores each output once: no partial sums or intermediate values in global memory."
        )
    for i, (before, after) in enumerate(zip((X, W, b), report.outputs[:3], strict=True)):
        if not np.array_equal(before, after):
            raise AssertionError(f"your kernel wrote into its input {('X', 'W', 'b')[i]}: write only Y.")


@contextmanager
def _count_host_copies():
    """Count device-to-host copies (copy_to_host) inside the block, in both modes."""
    seen = [0]
    if device.mode() == "sim":
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray as cls
    else:
        from numba.cuda.cudadrv.devicearray import DeviceNDArrayBase as cls
    original = cls.copy_to_host

    def counted(self, *args, **kwargs):
        seen[0] += 1
        return original(self, *args, **kwargs)

    cls.copy_to_host = counted
    try:
        yield seen
    finally:
        cls.copy_to_host = original


def check_layer_forward(
    layer_forward: Callable[..., Any],
    kernel: Any,
    sizes: Sequence[tuple[int, int, int]] | None = None,
    seed: int = 7,
) -> None:
    """Lab 5: layer_forward(X, W, b) on device arrays returns relu(X @ W + b) on the device, in ONE launch.

    Every Numba launch made inside the call is counted (the check wraps
    the launch machinery, not your kernel object); it must be exactly one
    launch, of `kernel`, and no copy to the host.
    """
    from numba import cuda

    from cudalearn.nn.mlp import count_launches

    rng = _rng(seed)
    name = getattr(kernel, "__name__", None)  # a dispatcher's, a simulated kernel's or a grader handle's
    for m, k, n in sizes or ([(5, 12, 9), (16, 8, 17)] if device.mode() == "sim" else [(300, 70, 129)]):
        X, W, b = _layer_problem(rng, m, k, n)
        dX, dW, db = cuda.to_device(X), cuda.to_device(W), cuda.to_device(b)
        with count_launches() as launches, _count_host_copies() as copies:
            Y = checks.call_student(layer_forward, "layer_forward", dX, dW, db)
        if copies[0]:
            raise AssertionError(
                f"`layer_forward` copied {copies[0]} array(s) to the host. Everything stays on the GPU: "
                f"launch your kernel on the device arrays it receives and return the device array Y."
            )
        if launches.count != 1 or (name and launches.names[0] != name):
            what = str(launches) if launches.count else "no Numba kernel launch"
            raise AssertionError(
                f"`layer_forward` made {what}, for (m, k, n) = ({m}, {k}, {n}); the fused layer is "
                f"exactly one launch of `{name or 'your kernel'}`: matmul, bias and ReLU all happen in it."
            )
        if Y is None:
            raise AssertionError(f"`layer_forward` returned None: {checks.NOT_DONE} (return Y)")
        if not hasattr(Y, "copy_to_host"):
            raise AssertionError(
                f"`layer_forward` returned a {type(Y).__name__}: return the device array your kernel "
                f"wrote (cuda.device_array), not a host copy."
            )
        checks.check_close(
            Y.copy_to_host(),
            _forward_spec(X, W, b),
            name=f"Y (m, k, n = {m}, {k}, {n})",
            atol=1e-4 * math.sqrt(k),
        )


def _backward_problem(rng: np.random.Generator, m: int, n: int, k: int):
    """dZ (m, n), W (k, n) and its transpose WT (n, k), A (m, k) >= 0 with about half zeros."""
    dZ = rng.standard_normal((m, n)).astype(np.float32)
    W = (rng.standard_normal((k, n)) / math.sqrt(n)).astype(np.float32)
    A = np.maximum(rng.standard_normal((m, k)), 0).astype(np.float32)
    return dZ, W, np.ascontiguousarray(W.T), A


def _backward_spec(dZ, WT, A) -> np.ndarray:
    return ((dZ.astype(np.float64) @ WT) * (A > 0)).astype(np.float32)


def check_backward_input(
    kernel: Any,
    block: tuple[int, int] | None = None,
    sizes: Sequence[tuple[int, int, int]] | None = None,
    seed: int = 8,
) -> None:
    """Lab 5: dA = (dZ @ WT) * (A > 0), thread (x, y) on dA[y, x]; then the tracer: coalesced loads.

    Sizes are (m, n, k): dZ (m, n), WT (n, k), A and dA (m, k). The traced
    launch has warps of 32 neighbouring x; every global load of a warp
    must touch at most 4 sectors on average (128 bytes: coalesced).
    """
    rng = _rng(seed)
    block = block or ((8, 8) if device.mode() == "sim" else (16, 16))
    for m, n, k in sizes or (
        [(5, 10, 12), (16, 7, 9)] if device.mode() == "sim" else [(256, 128, 64), (100, 33, 257)]
    ):
        dZ, _, WT, A = _backward_problem(rng, m, n, k)
        grid = (math.ceil(k / block[0]), math.ceil(m / block[1]))
        got = checks.run_kernel(kernel, grid, block, dZ, WT, A, checks.empty_output((m, k)))[3]
        try:
            checks.check_close(
                got,
                _backward_spec(dZ, WT, A),
                name=f"dA (m, n, k = {m}, {n}, {k})",
                rtol=1e-4,
                atol=1e-4 * math.sqrt(n),
                block=(block[1], block[0]),
            )
        except AssertionError as err:
            if checks.NOT_DONE in str(err):
                raise
            raise AssertionError(
                f"{err}\nThe launch has ceil(k / {block[0]}) blocks along x and ceil(m / {block[1]}) "
                f"along y: thread (x, y) must compute dA[y, x] (col, row = cuda.grid(2)); a kernel "
                f"that takes its row from x leaves part of dA unwritten."
            ) from None
    check_backward_coalesced(kernel)


def check_backward_coalesced(kernel: Any, size: tuple[int, int, int] = (64, 8, 64)) -> None:
    """Lab 5: traced with warps of 32 neighbouring x, every load line averages <= 4 sectors a request.

    size (m, n, k): with m = k the grid covers dA whichever of x and y a
    kernel takes for the columns, so a swapped kernel gets its result right
    and is caught by its sector count.
    """
    m, n, k = size
    dZ, _, WT, A = _backward_problem(_rng(9), m, n, k)
    block = (32, 2)
    report = _trace(
        kernel, (math.ceil(k / 32), math.ceil(m / 2)), block, dZ, WT, A, np.zeros((m, k), np.float32)
    )
    checks.check_close(
        report.outputs[3], _backward_spec(dZ, WT, A), name="dA (traced)", atol=1e-4 * math.sqrt(n)
    )
    for line, stats in report.by_line.items():
        if stats.global_load_requests:
            per = stats.global_load_sectors / stats.global_load_requests
            if per > MAX_SECTORS_PER_LOAD:
                where = line if isinstance(line, int) else f"{stats.file}:{stats.line}"
                raise AssertionError(
                    f"line {where} of your kernel, `{stats.source}`: a warp's loads touch {per:.1f} sectors "
                    f"of 32 bytes on average (at most {MAX_SECTORS_PER_LOAD:g} when 32 neighbouring threads "
                    f"read 32 neighbouring float32): neighbouring threads (neighbouring x) read addresses "
                    f"far apart. Hint: take col from x (col, row = cuda.grid(2)) so that a warp reads a row "
                    f"of WT, WT[j, col], and the same dZ[row, j] (a broadcast)."
                )


def check_epilogue_bytes(epilogue_bytes: Callable[[int, int, bool], int]) -> None:
    """Lab 5: global bytes an (m, n) float32 layer asks for after its sums, fused or not."""
    cases = []
    for m, n in [(1, 1), (2, 3), (1024, 1024), (256, 10)]:
        cases.append(((m, n, False), 24 * m * n))
        cases.append(((m, n, True), 8 * m * n))
    checks.check_function(
        epilogue_bytes,
        cases,
        name="epilogue_bytes",
        hint="count per output element, 4 bytes for each float32 access: unfused, the matmul's store of Z, "
        "add_bias's two reads and its store, relu's read and its store; fused, the read of b[col] and the "
        "store of A.",
    )
