"""A student's one-output-per-thread kernel launched, and why it is wrong (labs 0 and 2).

A kernel check launches with two block shapes (so a hard-coded block size
fails), sizes where rows != columns and the grid stops covering the output
when x and y are swapped, and checks that the inputs are left unchanged and
the output is not read before it is written; then it traces a small launch
on the CPU (`cudalearn.trace`): a race (several threads writing one element,
e.g. every thread looping over the whole array) fails, and a wrong result or
an access outside an array is explained by the tracer's findings (which
thread, which array, which line).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cudalearn import checks


def _rng(seed: int = 0) -> np.random.Generator:
    """The seeded generator of a check's random inputs (labs 0-5)."""
    return np.random.default_rng(seed)


def _race_message(report: Any, out: str) -> str:
    """A trace's first race as a message: each output element must have one thread (labs 0 and 2)."""
    race = report.races[0]
    (b1, t1), (b2, t2) = race.first, race.second
    threads = int(np.prod(report.blockdim))
    warps = int(np.prod(report.griddim)) * -(-threads // 32)
    stores = report.by_line.get(race.second_line)
    looped = stores is not None and stores.global_store_requests > warps  # each thread stores several
    if b1 != b2 and t1 == t2 and looped:
        hint = (
            "the same thread of two different blocks wrote one element, and each thread writes several: "
            "a grid-stride loop must step over the whole grid, cuda.gridsize(1) = cuda.blockDim.x * "
            "cuda.gridDim.x elements, so that no two threads of the launch meet (a step of blockDim.x "
            "makes the next block's threads redo this one's elements)."
        )
    elif b1 != b2 and t1 == t2:
        hint = (
            "the same thread of two different blocks wrote one element: your index ignores the block. "
            "The global index is cuda.grid(1) = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x "
            "(cuda.grid(2) in 2-D)."
        )
    else:
        hint = (
            f"several threads wrote the same element of `{out}`: each element needs exactly one thread. "
            f"Does every thread loop over the whole array? Write only the element(s) of your own global "
            f"index (cuda.grid), or a grid-stride loop that starts at it."
        )
    return report.race_message(hint)


def _trace_findings(kernel: Any, probe: tuple, out: str, required: bool = False) -> str | None:
    """The tracer's finding on a small launch (grid, block, *args): a race, out of bounds, or None.

    A kernel the tracer cannot run has no finding, unless `required` (the race check itself): then the
    check fails saying what the tracer could not run, never passes unchecked.
    """
    grid, block, *args = probe
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    try:
        report = checks.trace_kernel(kernel, grid, block, *args)
    except AssertionError as e:  # a finding (out of bounds, a barrier skipped), unless it could not trace
        if "could not run your kernel" not in str(e):
            return str(e)
        if not required:
            return None
        raise AssertionError(
            f"the race check could not run your kernel on the tracer, so it cannot tell that each element "
            f"of `{out}` is written by one thread; it fails rather than pass unchecked. {e}. Write the "
            f"kernel with what the tracer runs: element or slice stores, `cuda.*` and `math.*` calls, in "
            f"a plain `@cuda.jit` `def` at the top of its exercise cell."
        ) from None
    return _race_message(report, out) if report.race_count else None


def _reads_output(kernel: Any, grid: Any, block: Any, args: Sequence[Any], out: int, expected) -> bool:
    """Whether the kernel is right only on a zeroed `args[out]`: it reads out (`+=`) before writing it.

    Run on an output of zeros and on one of ones: right on zeros, and every element wrong on ones was
    written (holds neither the expected value nor the 1 it started with).
    """
    tol = {"rtol": 1e-4, "atol": 1e-4} if np.asarray(expected).dtype.kind == "f" else {"rtol": 0, "atol": 0}
    runs = []
    for fill in (0, 1):
        start = list(args)
        start[out] = np.full_like(args[out], fill)
        try:
            runs.append(checks.run_kernel(kernel, grid, block, *start)[out])
        except AssertionError:
            return False
    zeros, ones = runs
    wrong = ~np.isclose(ones, expected, **tol)
    return bool(np.allclose(zeros, expected, **tol) and wrong.any() and not np.isclose(ones[wrong], 1).any())


def _check_launch(
    kernel: Any,
    grid: Any,
    block: Any,
    args: Sequence[Any],
    out: int,
    expected: np.ndarray,
    *,
    names: Sequence[str],
    probe: tuple,
    tol: dict | None = None,
    hint: Callable[[np.ndarray], str | None] = lambda got: None,
) -> None:
    """Launch a student's kernel and raise naming the cause (labs 0 and 2).

    `args[out]` is the output (filled with the sentinel), `names` the arguments' names in messages.
    In order: an access outside an array (explained by the tracer on the small launch `probe`), an input
    changed, the output read before written (`+=` into an array nobody zeroed), a wrong result (the
    tracer's race or out-of-bounds access if it finds one, else `hint(got)`, else check_close's own).
    """
    try:
        host = checks.run_kernel(kernel, grid, block, *args)
    except AssertionError as e:
        bounds = any(w in str(e) for w in ("outside", "past the end", "before the start", "crashed"))
        found = _trace_findings(kernel, probe, names[out]) if bounds else None
        raise AssertionError(found or str(e)) from None
    for i, (before, after) in enumerate(zip(args, host, strict=True)):
        if i != out and isinstance(before, np.ndarray) and not np.array_equal(before, after, equal_nan=True):
            raise AssertionError(
                f"your kernel changed its input `{names[i]}`: the kernel must only read the inputs and write "
                f"its result into `{names[out]}` (`{names[out]}[...] = ...`). Check which array is on the "
                f"left of the `=`."
            )
    got = host[out]
    try:
        checks.check_close(got, expected, name=names[out], **(tol or {}), block=_block_of(block, got))
        return
    except AssertionError as e:
        failure = str(e)
    if _reads_output(kernel, grid, block, args, out, expected):
        raise AssertionError(
            f"`{names[out]}` is only right when it starts zeroed: your kernel reads `{names[out]}` before "
            f"writing it (e.g. `{names[out]}[...] += ...`), and on a GPU a new output array holds garbage, "
            f"not zeros (the check fills it with {checks.sentinel(got.dtype)}). Sum into a local variable "
            f"(acc = float32(0.0); acc += ...) and store it once: `{names[out]}[...] = acc`."
        ) from None
    found = _trace_findings(kernel, probe, names[out])
    specific = None if found else hint(np.asarray(got))
    if specific:
        raise AssertionError(f"{failure.split(' Hint: ')[0]} Hint: {specific}") from None
    raise AssertionError(found or failure) from None


def _block_of(block: Any, got: Any) -> tuple[int, ...] | None:
    """check_close's `block` for a launch block (x[, y]) over an output of got's shape: (rows, cols) order."""
    b = (block,) if isinstance(block, int) else tuple(block)
    return b[::-1] if np.ndim(got) == len(b) else None


def _check_no_race(kernel: Any, probe: tuple, out: str) -> None:
    """Trace the small launch `probe`: every output element must be written by one thread (labs 0 and 2)."""
    found = _trace_findings(kernel, probe, out, required=True)
    if found:
        raise AssertionError(f"your kernel gives the right result, but {found}")


def _stride_hint(got: np.ndarray, expected: np.ndarray, grid: int, threads: int) -> str | None:
    """A 1-D kernel's usual mistakes: a guard one short, a block size typed in (blockIdx.x * 32)."""
    written = np.isclose(got, expected)
    n = got.shape[0]
    if n > 1 and written[1:].all() and not written[0]:
        return (
            "only the first element, [0], is wrong: does your index start at 1 (`cuda.grid(1) + 1`)? "
            "Thread 0 of block 0 computes element 0: i = cuda.grid(1), with nothing added."
        )
    if n > 1 and written[:-1].all() and not written[-1]:
        return (
            f"only the last element, [{n - 1}], is wrong: does your guard stop one short "
            f"(`i < out.shape[0] - 1`, or `<=` one element early)? Every i < out.shape[0] has an element."
        )
    for step in (8, 16, 32, 64, 128, 256, 512, 1024):
        idx = (np.arange(grid)[:, None] * step + np.arange(threads)[None, :]).ravel()
        covered = np.zeros(n, bool)
        covered[idx[idx < n]] = True
        # blocks `step` apart: with step > threads gaps stay unwritten, with step < threads (a GPU's
        # larger blocks) the blocks overlap and only a prefix of (grid - 1) * step + threads is written
        short = step < threads and n - ((grid - 1) * step + threads) <= threads  # a guard's mistake's size
        if (
            step != threads
            and grid > 1
            and not short
            and not written.all()
            and np.array_equal(written, covered)
        ):
            return (
                f"the elements written are those of blocks {step} elements apart, but this launch has "
                f"blocks of {threads} threads: did you type the block size into the index (blockIdx.x * "
                f"{step})? Use cuda.blockDim.x, or cuda.grid(1), so the kernel works with any block size."
            )
    return None


def _threads_1d(threads: int | None, default: Sequence[int]) -> list[int]:
    """The block sizes a 1-D kernel check launches with: `threads` if given, else `default`."""
    return [threads] if threads else list(default)
