"""Checks of lab 5's forward pass (fusion), built on `checks`, the tracer and a launch counter.

* `check_linear_relu`: a fused, tiled Y = relu(X @ W + b) kernel; results
  first (a wrong one is explained: race, barrier, accumulation into the
  unzeroed Y, a known wrong formula), then the tracer: no race, and each
  output stored to global memory once and never read back (`_accesses`
  counts the tracer's loads and stores of each array, per element);
* `check_layer_forward`: the host function that runs the layer makes
  exactly one launch, of the student's kernel, and copies nothing to the
  host (`cudalearn.runtime.counting.observe` counts every Numba launch and
  copy_to_host; under `cudalearn grade` the sandbox counts them the same
  way where the student's code runs and the judge replays them here). Its
  values are always compared: when they are wrong, the student's kernel is
  run on a correct launch to say whose fault it is (exercise 1's kernel or
  this launch), and the check fails either way;
* `check_epilogue_bytes`: the bytes the fusion saves, counted by hand.

Lab 5's backward pass is checked in `coalesced_backward`. Sizes stay small
under the simulator; the tracer runs on the CPU in both modes.
"""

from __future__ import annotations

import linecache
import math
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cudalearn import checks
from cudalearn.checks.simple_kernels import _rng
from cudalearn.runtime import device, launch

UNZEROED = (
    "reads `{name}` before writing it ({where}): `{name}` is not zeroed before the launch (a new "
    "cuda.device_array holds whatever was in memory; the check fills it with NaN), so a kernel that "
    "accumulates into it (`{name}[row, col] += ...`) adds to garbage. Hint: accumulate in a register, "
    "acc = float32(0.0), and store `{name}[row, col]` once at the end."
)


@dataclass
class _ArrayAccesses:
    """The tracer's loads and stores of one global array, per element, with the lines that made them."""

    name: str
    loads: np.ndarray
    stores: np.ndarray
    early_reads: int = 0  # loads of an element not yet stored by the launch
    first_early: str = ""  # the line of the first of them
    lines: Counter = field(default_factory=Counter)  # (kind, line number, source) -> accesses

    def where(self, kind: int) -> str:
        """'line 21: `Y[row, col] = acc`' for each line making accesses of `kind` (0 load, 1 store)."""
        found = sorted((ln, src, n) for (k, ln, src), n in self.lines.items() if k == kind)
        return ", ".join(f"line {ln}: `{src}`" for ln, src, _ in found)


@contextmanager
def _accesses():
    """{argument position: _ArrayAccesses} of the global arrays of the traces run inside the block (lab 5).

    It wraps the tracer's per-access hook (`Recorder.access`) for the duration of the block; arguments
    must all be arrays (the tracer numbers global allocations in argument order).
    """
    from cudalearn.trace.model import LOAD
    from cudalearn.trace.recorder import Recorder

    seen: dict[int, _ArrayAccesses] = {}
    original = Recorder.access

    def access(rec, alloc, off, kind, frame, atomic, *rest):
        if not alloc.shared:
            acc = seen.get(alloc.id)
            if acc is None:
                size = int(np.prod(alloc.shape))
                acc = seen[alloc.id] = _ArrayAccesses(alloc.name, np.zeros(size, int), np.zeros(size, int))
            i = off // alloc.itemsize
            line = frame.f_lineno
            src = linecache.getline(frame.f_code.co_filename, line).strip()
            if kind == LOAD:
                if not acc.stores[i]:
                    acc.early_reads += 1
                    acc.first_early = acc.first_early or f"line {line}: `{src}`"
                acc.loads[i] += 1
            else:
                acc.stores[i] += 1
            acc.lines[(0 if kind == LOAD else 1, line, src)] += 1
        return original(rec, alloc, off, kind, frame, atomic, *rest)

    Recorder.access = access
    try:
        yield seen
    finally:
        Recorder.access = original


def _trace(kernel: Any, griddim: Any, blockdim: Any, *args: Any):
    """(report, {position: _ArrayAccesses}) of a traced launch; findings raise (`checks.trace_kernel`)."""
    with _accesses() as seen:
        report = checks.trace_kernel(kernel, griddim, blockdim, *args)
    return report, seen


def _check_output_accesses(seen: dict, out: int, shape: tuple[int, int], inputs: Sequence[str]) -> None:
    """Raise unless argument `out` was stored once an element and never read, and no input was written."""
    for pos, name in enumerate(inputs):
        if pos in seen and seen[pos].stores.any():
            raise AssertionError(
                f"your kernel wrote into its input `{name}` ({seen[pos].where(1)}): write only "
                f"`{seen[out].name if out in seen else 'the output'}`."
            )
    acc = seen.get(out)
    if acc is None or not acc.stores.any():
        raise AssertionError(f"the traced launch stored nothing into the output: {checks.NOT_DONE}")
    name = acc.name
    if acc.early_reads:
        raise AssertionError("your kernel " + UNZEROED.format(name=name, where=acc.first_early))
    i = int(np.argmax(acc.stores + acc.loads))
    idx = checks._fmt_index(np.unravel_index(i, shape))
    if acc.stores.max() > 1 or acc.loads.any():
        reads = f" and read {acc.loads[i]} times ({acc.where(0)})" if acc.loads.any() else ""
        raise AssertionError(
            f"your kernel stored {name}{idx} {acc.stores[i]} times ({acc.where(1)}){reads}. The fused "
            f"epilogue stores each output once and never reads it back: keep the sum, the bias and the "
            f"ReLU in a register, `{name}[row, col] = max(acc + b[col], float32(0.0))`, after the tile loop."
        )
    unwritten = int((acc.stores == 0).sum())
    if unwritten:
        first = checks._fmt_index(np.unravel_index(int(np.argmin(acc.stores)), shape))
        raise AssertionError(
            f"your kernel never stored {unwritten} element(s) of {name} (first {name}{first}): every output "
            f"is stored once, by the thread (x, y) of `cuda.grid(2)` on {name}[y, x]."
        )


def _explain_wrong(
    err: AssertionError, kernel: Any, trace_args: tuple, out: int, hint: str = "", edge: tuple = ()
) -> AssertionError:
    """A wrong result's message, with its cause from a traced small launch when the tracer finds one.

    trace_args: (griddim, blockdim, *arrays) of a small launch of the same kernel. A race, a barrier
    error, an uninitialized shared read or a read of the unzeroed output names the cause; else `hint`
    (a known wrong formula) is appended; else, on `edge` (a launch whose blocks stick out), a race, a
    barrier error or an unwritten shared read names it; an empty result stays "not done yet".
    """
    report, seen = _trace(kernel, *trace_args)  # raises on barrier errors and uninitialized reads
    if report.race_count:
        return AssertionError(report.race_message())
    acc = seen.get(out)
    if acc is not None and acc.early_reads:
        return AssertionError("your kernel " + UNZEROED.format(name=acc.name, where=acc.first_early))
    if edge and not hint:  # a known wrong formula says more than what a block sticking out shows
        report, _ = _trace(kernel, *edge)
        if report.race_count:
            return AssertionError(report.race_message())
    if not hint:
        return AssertionError(str(err))
    return AssertionError(f"{str(err).replace(_GENERIC_HINT, '')}\nHint: {hint}")


_GENERIC_HINT = " Hint: compare your indexing with the NumPy spec on a small example, element by element."


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
    m, n = Z.shape
    variants = [
        (Z + b, "it is X @ W + b without the ReLU: clamp at zero, max(v, float32(0.0)), before the store."),
        (np.maximum(Z, 0), "it is relu(X @ W), the bias is missing: add b[col] before the ReLU."),
        (
            np.maximum(Z, 0) + b,
            "the bias was added after the ReLU: relu(acc + b[col]), not relu(acc) + b[col].",
        ),
        (np.maximum(Z + 2 * b, 0), "the bias was added twice: add b[col] once, in the epilogue."),
        (Z, "it is X @ W alone: add b[col], then apply the ReLU, before the store."),
    ]
    tile_steps = [  # a tile loop of a fixed count sums only the first tiles along k
        (
            np.maximum(X[:, :j].astype(np.float64) @ W[:j] + b, 0),
            f"it sums only the first {j} values along k (of {X.shape[1]}): the tile loop runs a fixed number "
            f"of times. Loop over range(0, K, TILE), K = X.shape[1], so any k works.",
        )
        for j in range(8, X.shape[1], 8)  # whole tiles: TILE is 8 in the simulator, 16 on a GPU
    ]
    variants.extend(tile_steps)
    if m <= n:
        variants.append(
            (
                np.maximum(Z + b[:m, None], 0),
                "the bias is added along the rows, b[row]: the bias belongs to the output column, b[col].",
            )
        )
    return _known_mistake(got, variants, tol)


def _known_mistake(got: np.ndarray, variants: list[tuple[np.ndarray, str]], tol: dict) -> str:
    """The hint of the first known wrong result that `got` equals (within tol), else "" (lab 5)."""
    with np.errstate(invalid="ignore"):
        for value, hint in variants:
            if np.allclose(got, value.astype(np.float32), **tol):
                return hint
    return ""


def _small_layer(tile: int, seed: int, size: tuple[int, int, int] | None = None):
    """(m, k, n), X, W, b of the traced launch: two row and column tiles, three tile steps along k."""
    m, k, n = size or (2 * tile, 2 * tile + 3, 2 * tile)
    return (m, k, n), *_layer_problem(_rng(seed), m, k, n)


def check_linear_relu(
    kernel: Any, tile: int, sizes: Sequence[tuple[int, int, int]] | None = None, seed: int = 5
) -> None:
    """Lab 5: Y = relu(X @ W + b) in one tiled kernel, (tile, tile) blocks; sizes (m, k, n) off the tile grid.

    Checks the results first (a wrong one explained by a traced small launch), then traces the
    kernel on the CPU: a race (a missing syncthreads) fails the check even when the result came out
    right, and so does an epilogue that stores an output twice or reads it back.
    """
    rng = _rng(seed)
    if sizes is None:
        # k runs over 5 tiles in the simulator; the hidden tests run more, so a fixed tile count fails one
        sim = [(tile, tile, tile), (13, 4 * tile + 5, 9)]
        sizes = sim if device.mode() == "sim" else [(64, 64, 64), (257, 100, 31)]
    (sm, sk, sn), sX, sW, sb = _small_layer(tile, seed)
    small = (*launch.square(sm, sn, tile), sX, sW, sb, checks.empty_output((sm, sn)))
    edge_size = (tile + 5, max(1, tile - 3), tile + 1)  # blocks stick out of Y, and K < TILE
    (em, ek, en), eX, eW, eb = _small_layer(tile, seed, edge_size)
    edge = (*launch.square(em, en, tile), eX, eW, eb, checks.empty_output((em, en)))
    for m, k, n in sizes:
        X, W, b = _layer_problem(rng, m, k, n)
        griddim, blockdim = launch.square(m, n, tile)
        got = checks.run_kernel(kernel, griddim, blockdim, X, W, b, checks.empty_output((m, n)))[3]
        tol = checks.matmul_tol(k)
        try:
            checks.check_close(got, _forward_spec(X, W, b), name=f"Y (m, k, n = {m}, {k}, {n})", **tol)
        except AssertionError as err:
            hint = "" if checks.NOT_DONE in str(err) else _forward_hint(got, X, W, b, tol)
            raise _explain_wrong(err, kernel, small, 3, hint, edge) from None
    report, seen = _trace(kernel, *small)
    if report.race_count:
        raise AssertionError(report.race_message())
    _check_output_accesses(seen, 3, (sm, sn), ("X", "W", "b"))
    _check_tiled(report, tile, small, (sm, sk, sn))
    try:  # only a block that sticks out shows a barrier its outer threads skip, or a tile left unfilled
        edge_report, _ = _trace(kernel, *edge)
        problem = edge_report.race_message()
    except AssertionError as e:
        problem = str(e)
    if problem:
        raise AssertionError(
            f"your kernel's results are right, but traced on (m, k, n) = {edge_size}, where blocks stick out "
            f"of Y and K is smaller than TILE, {problem}"
        )


#: how many times the course's tiled kernel's global load sectors a student's may touch
TILED_LOAD_SLACK = 1.25


def _check_tiled(report: Any, tile: int, launch_args: tuple, size: tuple[int, int, int]) -> None:
    """Raise unless a right fused kernel reads X and W through shared tiles, as the exercise asks (lab 5).

    Its values cannot show it: a kernel that reads X and W straight from global memory gives the same Y.
    The tracer's counts can: no shared-memory request at all, or global loads touching more than
    `TILED_LOAD_SLACK` times the sectors of the course's tiled kernel traced on the same launch.
    """
    from cudalearn.chapters.ch05.kernels import linear

    m, k, n = size
    what = f"your kernel's results are right, but traced on (m, k, n) = ({m}, {k}, {n}) with TILE = {tile}"
    if report.shared_requests == 0:
        raise AssertionError(
            f"{what} it makes no shared-memory access: it reads X and W straight from global memory, a naive "
            f"product with an epilogue. The exercise is Chapter 3's tiles: each thread loads one element of "
            f"an X tile and one of a W tile into cuda.shared.array((TILE, TILE), float32), then the inner "
            f"loop reads only the shared tiles."
        )
    griddim, blockdim, *arrays = launch_args
    ref = checks.trace_kernel(linear.tiled(tile)[1], griddim, blockdim, *[a.copy() for a in arrays])
    if report.global_load_sectors > TILED_LOAD_SLACK * ref.global_load_sectors:
        raise AssertionError(
            f"{what} its global loads touch {report.global_load_sectors} sectors of 32 bytes, where the "
            f"course's tiled kernel touches {ref.global_load_sectors} on the same launch: some operands of "
            f"the inner loop still come from global memory. Load each element of the X and W tiles once "
            f"per tile step into shared memory (one element each per thread), and take the inner loop's "
            f"operands, sX[ty, k] and sW[k, tx], from the tiles."
        )


def check_linear_relu_stores_once(kernel: Any, tile: int, size: tuple[int, int, int] | None = None) -> None:
    """Lab 5 (hidden): traced on (m, k, n), no race; each output stored once, never read; inputs unwritten."""
    (m, k, n), X, W, b = _small_layer(tile, 6, size or (2 * tile, 3 * tile, 2 * tile))
    report, seen = _trace(kernel, *launch.square(m, n, tile), X, W, b, checks.empty_output((m, n)))
    if report.race_count:
        raise AssertionError(report.race_message())
    _check_output_accesses(seen, 3, (m, n), ("X", "W", "b"))
    checks.check_close(report.outputs[3], _forward_spec(X, W, b), name="Y (traced)", **checks.matmul_tol(k))


def check_layer_forward(
    layer_forward: Callable[..., Any],
    kernel: Any,
    sizes: Sequence[tuple[int, int, int]] | None = None,
    seed: int = 7,
    tile: int | None = None,
) -> None:
    """Lab 5: layer_forward(X, W, b) on device arrays returns relu(X @ W + b) on the device, in ONE launch.

    Every Numba launch made inside the call is counted (the check wraps
    the launch machinery, not your kernel object); it must be exactly one
    launch, of `kernel`, and no copy to the host. Given `tile` (the
    kernel's TILE), wrong values are blamed on the launch when `kernel` itself is right on a
    (tile, tile)-block launch that covers Y, else on the kernel; wrong values always fail.
    """
    from cudalearn.runtime import counting, numba_backend

    cuda = numba_backend.cuda_for(kernel)  # the kernel's package's arrays
    rng = _rng(seed)
    name = getattr(kernel, "__name__", None)  # a dispatcher's, a simulated kernel's or a grader handle's
    for m, k, n in sizes or ([(5, 12, 9), (16, 8, 17)] if device.mode() == "sim" else [(300, 70, 129)]):
        X, W, b = _layer_problem(rng, m, k, n)
        dX, dW, db = cuda.to_device(X), cuda.to_device(W), cuda.to_device(b)
        try:
            with counting.observe() as seen:
                Y = checks.call_student(layer_forward, "layer_forward", dX, dW, db)
        except AssertionError:
            raise
        except Exception as e:  # in the launch it made: the launch, or exercise 1's kernel?
            if tile is None or not _kernel_is_right(kernel, tile, X, W, b):
                raise
            raise AssertionError(
                f"`layer_forward` failed for (m, k, n) = ({m}, {k}, {n}): {type(e).__name__}: {e}. Your "
                f"kernel itself passes on a right launch, so look at the one layer_forward makes: blocks of "
                f"(TILE, TILE) = ({tile}, {tile}) threads, as many as the shared tiles have elements; a grid "
                f"of (math.ceil(n / TILE), math.ceil(m / TILE)) blocks; Y = cuda.device_array((m, n), "
                f"np.float32), the shape of X @ W."
            ) from None
        if seen.copies:
            raise AssertionError(
                f"`layer_forward` copied {seen.copies} array(s) to the host. Everything stays on the GPU: "
                f"launch your kernel on the device arrays it receives and return the device array Y."
            )
        if len(seen.launches) != 1 or (name and seen.launches[0] != name):
            what = (
                f"{len(seen.launches)} launches: {', '.join(seen.launches)}"
                if seen.launches
                else "no Numba kernel launch"
            )
            raise AssertionError(
                f"`layer_forward` made {what}, for (m, k, n) = ({m}, {k}, {n}); the fused layer is "
                f"exactly one launch of `{name or 'your kernel'}`: matmul, bias and ReLU all happen in it."
            )
        if Y is None:
            raise AssertionError(
                "`layer_forward` launched your kernel but returned None: return the device array Y "
                "the kernel wrote (`return Y`)."
            )
        if not hasattr(Y, "copy_to_host"):
            raise AssertionError(
                f"`layer_forward` returned a {type(Y).__name__}: return the device array your kernel "
                f"wrote (cuda.device_array), not a host copy."
            )
        try:
            checks.check_close(
                Y.copy_to_host(),
                _forward_spec(X, W, b),
                name=f"Y (m, k, n = {m}, {k}, {n})",
                **checks.matmul_tol(k),
            )
        except AssertionError as err:
            if "shape" in str(err) or "dtype" in str(err):
                raise
            if tile is not None and not _kernel_is_right(kernel, tile, X, W, b):
                raise AssertionError(  # never skipped: this exercise's values are wrong, whoever's fault
                    f"{str(err).split(' Hint: ')[0]}\nThe launch itself looks right (one launch of "
                    f"`{name or 'your kernel'}`, nothing copied to the host), but your kernel from "
                    f"exercise 1 gives wrong values even on a right launch of ({tile}, {tile}) blocks: fix "
                    f"it first (its check, check_linear_relu, says what is wrong), then run this check again."
                ) from None
            raise AssertionError(
                f"{str(err).replace(_GENERIC_HINT, '')}\nThe kernel passes check_linear_relu, so look at "
                f"the launch: Y comes from cuda.device_array, which is not zeroed, and an element no block "
                f"covers keeps garbage. "
                f"Hint: the grid must cover Y's {n} columns along x and its {m} rows along y, rounding up: "
                f"grid = (math.ceil(n / TILE), math.ceil(m / TILE)) blocks of (TILE, TILE) threads."
            ) from None


def _kernel_is_right(kernel: Any, tile: int, X: np.ndarray, W: np.ndarray, b: np.ndarray) -> bool:
    """Whether the fused kernel gives relu(X @ W + b) on a launch of (tile, tile) blocks that covers Y.

    Y starts as the sentinel, as an uninitialised cuda.device_array may: a kernel that adds into Y is wrong.
    """
    (m, k), n = X.shape, W.shape[1]
    try:
        Y = checks.run_kernel(kernel, *launch.square(m, n, tile), X, W, b, checks.empty_output((m, n)))[3]
    except AssertionError:
        return False  # it does not compile, or it indexes outside an array
    return bool(np.allclose(Y, _forward_spec(X, W, b), **checks.matmul_tol(k)))


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
        mistakes=[
            (
                lambda m, n, fused: 20 * m * n if not fused else None,
                "unfused, that is 5 accesses an element: one is missing, the matmul's store of Z or "
                "add_bias's read of b[col] (6 in all: store Z; read Z, read b[col], store; read, store A).",
            ),
            (
                lambda m, n, fused: 4 * m * n if fused else None,
                "fused, the epilogue also reads b[col] (4 bytes) before it stores A (4 bytes).",
            ),
        ],
        exact_types=True,
    )
