"""A register tile's steps along k: 128-bit shared reads and outer products (Chapter 6's register
blocking, which Chapter 5's tuned network borrows for its products; defined here so both can use it).

Chapter 6's register-blocked kernels (`chapters/ch06/kernels/regblock.py`) and Chapter 5's tuned
products (`tuned.make_blocked_vec`) take their inner loop from here: each thread reads its rows and
columns of the shared tiles four at a time (`vec_offset`) and accumulates their outer product.
"""

import linecache

from cudalearn.runtime.numba_backend import SIMULATOR, cuda

VEC = 4  # float32 values per 128-bit load
#: device functions only: they compile inside the kernels that call them (tuned, regblock)
SIGNATURES: dict[str, str] = {}


@cuda.jit(device=True, inline="always")
def vec_offset(i, first, R):
    """Offset in its block tile of a thread's i-th row (or column) (Chapter 6; Chapter 5's tuned products).

    Groups of four neighbours: the thread's first group starts at `first`, the next R * 4 further
    on, where R threads share that direction (in `regblock_2d_vec`, thread t along it has its first
    group at 4 * t, so a warp's groups are side by side; in the warp-tiled kernel R counts the lanes
    of one warp along it).
    """
    return (i // VEC) * R * VEC + first + i % VEC


def make_outer_product(TM, TN, RX, RY):
    """The inner step of Chapter 6's last kernels: TM + TN 128-bit shared reads, TM * TN FMAs.

    (r0, c0) is the first row and column of the thread's outputs in the block tile, RY and RX the
    threads whose groups of four interleave along each (`vec_offset`). A device function, inlined
    into the kernel by Numba (`inline="always"`), so calling it four times in a row unrolls the
    loop along k by hand.
    """

    @cuda.jit(device=True, inline="always")
    def outer_product(sAt, sB, k, c0, r0, a, b, acc):
        """acc += sAt[k, our rows] (outer) sB[k, our columns]; rows and columns four at a time."""
        for i in range(TM):  # rows r0 + (0..3), then RY * 4 further on: one 128-bit load each
            a[i] = sAt[k, vec_offset(i, r0, RY)]
        for j in range(TN):
            b[j] = sB[k, vec_offset(j, c0, RX)]
        for i in range(TM):
            for j in range(TN):
                acc[i, j] += a[i] * b[j]

    return outer_product


def _inlined(fn):
    """A device function LLVM inlines into its callers (forceinline); a plain one under the simulator."""
    return cuda.jit(device=True)(fn) if SIMULATOR else cuda.jit(device=True, forceinline=True)(fn)


def make_tile_steps(BK, TM, TN, RX, RY, colsum=False):
    """steps(sAt, sB, q, c0, r0, a, b, acc): the BK steps along k of the tile from row q (Chapters 5-6).

    Each step is `make_outer_product`'s, called BK times in straight-line code. Numba unrolls a loop
    over k only by two, and its own inliner (`inline="always"`) takes minutes on sixteen calls, so
    the step is compiled as a device function LLVM inlines (`forceinline`) and the text of `steps` is
    generated here, with its lines in `linecache` for tracebacks and the tracer. With `colsum`
    (Chapter 5's weight gradient, whose bias gradient sums B's rows) `steps` takes two more
    arguments, (sums, dbacc), and adds each step's b into dbacc where `sums` is true.
    """
    head = "def steps(sAt, sB, q, c0, r0, a, b, acc" + (", sums, dbacc):\n" if colsum else "):\n")
    body = "    step(sAt, sB, q + {k}, c0, r0, a, b, acc)\n"
    if colsum:
        body += "    if sums:\n        add_cols(b, dbacc)\n"
    source = head + "".join(body.format(k=k) for k in range(BK))
    kind = ", colsum" if colsum else ""
    filename = f"<tile_steps: the {BK} steps of a tile, TM={TM} TN={TN} RX={RX} RY={RY}{kind}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)

    def add_cols(b, dbacc):
        """dbacc += b: a step's row of B summed into the bias gradient."""
        for j in range(TN):
            dbacc[j] += b[j]

    names = {"step": _inlined(make_outer_product(TM, TN, RX, RY).py_func), "add_cols": _inlined(add_cols)}
    exec(compile(source, filename, "exec"), names)
    return _inlined(names["steps"])
