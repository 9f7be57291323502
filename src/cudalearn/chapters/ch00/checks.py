"""Checks of lab 0 (setup): the blocks that cover an array, a round trip to the device, the global index.

Answers that are numbers must be of the type asked for (an int for a count
or a launch, by `checks.answer_types.is_int`); a usual wrong formula gets a
hint naming it. Kernels are checked as `simple_kernels` says.
"""

from __future__ import annotations

import ast
import math
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cudalearn import checks
from cudalearn.checks.simple_kernels import _check_launch, _check_no_race, _rng, _stride_hint, _threads_1d
from cudalearn.runtime import device, launch
from cudalearn.runtime.sizes import size


def check_blocks_for(blocks_for: Callable[[int, int], int]) -> None:
    """Lab 0: blocks_for(n, threads) is the fewest blocks of `threads` threads that cover n elements."""
    sizes = [(1, 32), (32, 32), (33, 32), (1000, 256), (1 << 20, 1024), (7, 3), (2**53 + 1, 2)]
    checks.check_function(
        blocks_for,
        [((n, t), launch.blocks(n, t)) for n, t in sizes],
        name="blocks_for",
        hint="round the division up with integer arithmetic: (n + threads - 1) // threads.",
        mistakes=[
            (
                lambda n, t: math.ceil(n / t),
                "n / threads is a float division, which rounds for large n (above 2**53): round up with "
                "integer arithmetic, (n + threads - 1) // threads.",
            ),
            (lambda n, t: n // t, "n // threads rounds down: the last n % threads elements get no thread."),
            (
                lambda n, t: n // t + 1,
                "one block too many when n is a multiple of threads: (n + threads - 1) // threads.",
            ),
        ],
        exact_types=True,
    )


def _swapped_launch(sources: Sequence[str]) -> str | None:
    """The line of a `scale[THREADS, blocks]` launch (threads first) in lab 0's answer cells, or None.

    Swapped, the launch still covers n elements (blocks x THREADS threads either way), so no value shows
    it: a block of more than 1,024 threads does not launch on a GPU, and the simulator does not refuse one.
    """
    for source in sources:
        try:
            tree = ast.parse(textwrap.dedent(source))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple)):
                continue
            named = isinstance(node.value, ast.Name) and node.value.id == "scale"
            if not (named and len(node.slice.elts) == 2):
                continue
            first, second = (ast.unparse(e).lower() for e in node.slice.elts)
            if "thread" in first and "thread" not in second or "block" in second and "block" not in first:
                return ast.unparse(node)
    return None


def check_round_trip(double_on_gpu: Callable[[np.ndarray], Any], sizes: Sequence[int] | None = None) -> None:
    """Lab 0: double_on_gpu(x) doubles x on the device with `scale` into a new host array; x unchanged.

    The function is called here, as any other (under `cudalearn grade` through the judge's handle): its
    result and x afterwards are compared with 2 * x computed here, and its launches are counted here
    (the grader replays the student's launches into this process), so no course function running in the
    student's process decides. The answer's code is read for a launch with blocks and threads swapped.
    """
    from cudalearn.runtime.counting import observe

    threads = size("ch0.block")
    for n in sizes or [37, 5, 2 * threads + 3]:
        x = _rng(1).standard_normal(n).astype(np.float32)
        before = x.copy()
        with observe() as seen:
            got = checks.call_student(double_on_gpu, "double_on_gpu", x)
        if hasattr(got, "copy_to_host"):
            raise AssertionError(
                "`double_on_gpu` returned a device array: copy the result back to the host with "
                "`.copy_to_host()` before returning it."
            )
        if "scale" not in seen.launches:
            what = f"launched {seen.launches}" if seen.launches else "launched no kernel"
            raise AssertionError(
                f"`double_on_gpu` {what}: it must double x on the device with the course's kernel "
                f"`scale` (scale[blocks, THREADS](d_x, np.float32(2.0))), not with NumPy on the host."
            )
        if not np.array_equal(np.asarray(x), before):
            raise AssertionError(
                "`double_on_gpu` changed its input x on the host: copy x to the device with "
                "cuda.to_device(x) and launch `scale` on the device copy."
            )
        if isinstance(got, np.ndarray) and got.shape == x.shape and not np.allclose(got, 2 * before):
            doubled = np.isclose(got, 2 * before) | (before == 0)
            first = int(np.argmin(doubled))
            if doubled[:first].all() and np.allclose(got[first:], before[first:]):
                raise AssertionError(
                    f"`double_on_gpu(x)` for {n} elements doubled only the first {first}: elements {first} "
                    f"to {n - 1} are unchanged, so the launch had too few threads ({first} = "
                    f"{first // threads} block(s) of {threads}). Hint: launch blocks_for(x.shape[0], "
                    f"THREADS) blocks of THREADS threads."
                )
        checks.check_close(got, 2 * before, name=f"double_on_gpu(x) for {n} elements")
    swapped = _swapped_launch(checks.student_sources(double_on_gpu, "double_on_gpu"))
    if swapped is not None:
        raise AssertionError(
            f"`double_on_gpu` launches `{swapped}`: blocks and threads are swapped. In kernel[a, b], a is "
            f"the number of blocks and b the threads per block. Swapped, the launch still has blocks x "
            f"THREADS threads, so the values come out right here, but a block holds at most 1,024 threads: "
            f"for more than 1,024 x THREADS elements it would not launch. Write "
            f"scale[blocks_for(x.shape[0], THREADS), THREADS](...)."
        )


def _index_hint(got: np.ndarray, threads: int) -> str | None:
    """fill_index's usual mistake: the index within the block, not the global one."""
    if got.size > threads and np.array_equal(got, np.arange(got.size) % threads):
        return (
            f"the values restart at 0 in every block of {threads} threads: you wrote the thread's index "
            f"within its block (cuda.threadIdx.x); the global index is cuda.grid(1)."
        )
    return None


def check_fill_index(kernel: Any, sizes: Sequence[int] | None = None, threads: int | None = None) -> None:
    """Lab 0: each thread writes its global index into out[i] (int32), guarded for the last block."""
    probe = (launch.blocks(45, 16), 16, checks.empty_output(45, np.int32))
    for t in _threads_1d(threads, (32, 16)):
        for n in sizes or ([31, 64, 45, 1] if device.mode() == "sim" else [31, 1000, 4097, 1]):
            expected, grid = np.arange(n, dtype=np.int32), launch.blocks(n, t)
            _check_launch(
                kernel,
                grid,
                t,
                [checks.empty_output(n, np.int32)],
                0,
                expected,
                names=["out"],
                probe=probe,
                hint=lambda got, t=t, e=expected, g=grid: _index_hint(got, t) or _stride_hint(got, e, g, t),
            )
    _check_no_race(kernel, probe, "out")
