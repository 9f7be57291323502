"""Launch grids: how many blocks cover an array, the one rule every chapter's launch uses (Chapters 2-9);
`run`, the launch of a kernel that may use warp intrinsics, on the tracer under the simulator (Chapter 10)."""

from __future__ import annotations


def blocks(n: int, per_block: int) -> int:
    """Blocks of `per_block` threads (or tiles) that cover n elements: the ceiling of n / per_block."""
    if per_block <= 0:
        raise ValueError(f"a block must hold at least one thread or element, got {per_block}")
    return -(-n // per_block)


def grid_2d(m: int, n: int, block: tuple[int, int], per_thread: tuple[int, int] = (1, 1)):
    """(griddim, blockdim) over an (m, n) output: x along its n columns, y along its m rows.

    `per_thread` is the (x, y) outputs each thread computes (a register-blocked kernel's (tn, tm)):
    a block then covers (block[0] * per_thread[0]) columns and (block[1] * per_thread[1]) rows.
    """
    bx, by = block
    return (blocks(n, bx * per_thread[0]), blocks(m, by * per_thread[1])), (bx, by)


def square(m: int, n: int, tile: int):
    """(griddim, blockdim) of a kernel with (tile, tile) blocks, one output per thread (Chapters 3-5)."""
    return grid_2d(m, n, (tile, tile))


_TRACED: set = set()  # kernels whose "ran on the tracer" line was printed


def run(kernel, griddim, blockdim, *args) -> None:
    """kernel[griddim, blockdim](*args), the launch of a kernel that may use warp intrinsics (Chapter 10).

    On a GPU it is that launch and nothing else. Under the simulator a kernel that calls what the
    simulator lacks (`cudalearn.trace.simulator_lacks`: the warp shuffles, votes, syncwarp) runs on the
    CPU through `cudalearn.trace.run` instead, its results written back into the arguments, with one
    printed line per kernel saying so.
    """
    from cudalearn import device

    if device.mode() != "sim":
        kernel[griddim, blockdim](*args)
        return
    from cudalearn import trace

    lacks = trace.simulator_lacks(kernel)
    if lacks is None:
        kernel[griddim, blockdim](*args)
        return
    name = trace.execute._python_function(kernel).__name__
    if name not in _TRACED:
        _TRACED.add(name)
        print(
            f"{name} calls {lacks}, which Numba's simulator does not implement: cudalearn.trace ran it on"
            " the CPU, the 32 lanes of each warp in lockstep."
        )
    trace.run(kernel, griddim, blockdim, *args)
