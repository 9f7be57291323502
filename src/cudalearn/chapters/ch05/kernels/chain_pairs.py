"""The dropout chain's fused kernel with 8-byte accesses: two float32 columns a load and a store (Chapter 5).

On the H200 the fused kernel (`elementwise.bias_relu_dropout`) stays well below the copy's
bandwidth although it moves only 9/8 of the copy's bytes, and Nsight Compute shows neither its DRAM
(55% of peak) nor its SMs (68%, the copy's own share) saturated (stored as `ch5.ncu_chain`,
data/reference/h200-ncu-chain.json). Each element costs three loads (Z, b, the mask byte), a store,
and the index arithmetic of four 2-D accesses. Numba has no float2 loads, but viewing a float32
array as float64 makes every load and store move two neighbouring columns: twice the bytes per
memory instruction, 64% of the instructions in all.

`bias_relu_dropout_pairs` (launched by `fused_chain_pairs`) is that kernel, `PAIRS` pairs a thread;
`bias_relu_dropout_pairs_u32(pairs)` (a cached factory) the same with its loads first, unsigned
indices and a compile-time number of pairs a thread. `pair_views` makes the views, `launch_pairs`
the launch. The words are split and joined by `elementwise`'s `_unpack_pair` and `_pack_pair`.
"""

import functools

import numpy as np

from cudalearn.chapters.ch05.kernels.elementwise import BLOCK_2D, PAIRS, _pack_pair, _unpack_pair
from cudalearn.runtime import launch
from cudalearn.runtime.numba_backend import cuda, float32, float64, uint16, uint32, uint64

SIGNATURES = {
    "bias_relu_dropout_pairs": (
        "void(float64[:, ::1], float64[::1], uint16[:, ::1], float32, float64[:, ::1])"
    ),
}
# bias_relu_dropout_pairs_u32's kernels are made per number of pairs by a factory, so none is listed
# here: tests/chapters/ch05/test_fusion.py compiles them for sm_75 and sm_90 (the paired signature).


def launch_pairs(shape, block=BLOCK_2D, pairs=PAIRS):
    """(griddim, blockdim) of a paired kernel on a (rows, cols) float32 array: `pairs` pairs a thread."""
    rows, cols = shape
    (x, y), block = launch.grid_2d(rows, cols, block, per_thread=(2 * pairs, 1))
    return (max(1, x), y), block


@cuda.jit
def bias_relu_dropout_pairs(Z2, b2, mask2, s, Y2):
    """The fused chain with 8-byte accesses: a load or store moves two float32 columns (Chapter 5).

    Z2, Y2 (m, n/2) and b2 (n/2,) are float32 arrays viewed as float64, so
    element [i, j] holds columns 2j and 2j + 1; mask2 (m, n/2) is the uint8
    mask viewed as uint16, its low byte column 2j (little-endian). Computes
    exactly what `bias_relu_dropout` computes; `fused_chain_pairs` makes the
    views and the launch.
    """
    x, row = cuda.grid(2)
    width = cuda.gridsize(2)[0]
    if row < Z2.shape[0]:
        lo = cuda.local.array(PAIRS, float32)
        hi = cuda.local.array(PAIRS, float32)
        keep = cuda.local.array(PAIRS, uint16)
        for e in range(PAIRS):  # each pair's loads, then its unpacking and its add
            col = x + e * width
            if col < Z2.shape[1]:
                z_lo, z_hi = _unpack_pair(Z2[row, col])
                b_lo, b_hi = _unpack_pair(b2[col])
                lo[e] = z_lo + b_lo
                hi[e] = z_hi + b_hi
                keep[e] = mask2[row, col]
        for e in range(PAIRS):
            col = x + e * width
            if col < Z2.shape[1]:
                y_lo = max(lo[e], float32(0.0)) * float32(keep[e] & 0xFF) * s
                y_hi = max(hi[e], float32(0.0)) * float32(keep[e] >> 8) * s
                Y2[row, col] = _pack_pair(y_lo, y_hi)


@functools.cache
def bias_relu_dropout_pairs_u32(pairs: int):
    """`bias_relu_dropout_pairs`, loads first, unsigned indices, `pairs` pairs a thread (Chapter 5).

    The same views (`pair_views`), arithmetic and result, bit for bit; one
    kernel per value of `pairs` (cached), launched with
    `launch_pairs(shape, block, pairs)`. Three changes. Its first loop only
    loads, keeping each 8-byte word as it arrives, and the second unpacks,
    computes and stores: the paired kernel adds each pair's bias right
    after its loads, so a thread waits for one pair's data before it issues
    the next pair's loads (each pair's loads sit behind a branch, its
    guard). Its indices are built from `uint32` values (Numba widens them
    to unsigned 64-bit integers): Numba's signed indices may be negative,
    as in Python, so every access with one the compiler cannot prove
    non-negative carries wrap-around code, which an unsigned index does not
    need (Chapter 10). And the pairs a thread are a compile-time constant:
    with 4, a thread can have twice the paired kernel's bytes in flight.
    """
    if not isinstance(pairs, int) or pairs < 1:
        raise ValueError(f"pairs must be a positive int, got {pairs!r}")
    P = pairs

    @cuda.jit
    def bias_relu_dropout_pairs_u32_kernel(Z2, b2, mask2, s, Y2):
        x = uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.x) + uint32(cuda.threadIdx.x)
        row = uint32(cuda.blockIdx.y) * uint32(cuda.blockDim.y) + uint32(cuda.threadIdx.y)
        width = uint32(cuda.gridDim.x) * uint32(cuda.blockDim.x)
        n = uint64(Z2.shape[1])  # unsigned as the indices: no mixed-sign comparison
        if row < uint64(Z2.shape[0]):
            z = cuda.local.array(P, float64)  # the loaded words as they are: two float32 columns
            b = cuda.local.array(P, float64)
            keep = cuda.local.array(P, uint16)
            for e in range(P):  # loads only: none waits for one before the next pair's are issued
                col = x + uint32(e) * width
                if col < n:
                    z[e] = Z2[row, col]
                    b[e] = b2[col]
                    keep[e] = mask2[row, col]
            for e in range(P):
                col = x + uint32(e) * width
                if col < n:
                    z_lo, z_hi = _unpack_pair(z[e])
                    b_lo, b_hi = _unpack_pair(b[e])
                    y_lo = max(z_lo + b_lo, float32(0.0)) * float32(keep[e] & 0xFF) * s
                    y_hi = max(z_hi + b_hi, float32(0.0)) * float32(keep[e] >> 8) * s
                    Y2[row, col] = _pack_pair(y_lo, y_hi)

    return bias_relu_dropout_pairs_u32_kernel


def pair_views(Z, b, mask, Y):
    """(Z2, b2, mask2, Y2): the chain's arrays viewed for `bias_relu_dropout_pairs`, checked (Chapter 5).

    Z, Y (m, n) float32 C-contiguous, b (n,) float32, mask (m, n) uint8, n
    even (a row must be whole pairs), each starting at an address that its
    paired load's size divides (an array allocated whole does); host or device arrays. A view costs
    host time (a new array object), so code that launches many times makes
    the views once.
    """
    rows, cols = Z.shape
    want = {
        "Z": (Z, np.float32, 2),
        "b": (b, np.float32, 1),
        "mask": (mask, np.uint8, 2),
        "Y": (Y, np.float32, 2),
    }
    for name, (a, dtype, ndim) in want.items():
        if a.dtype != dtype or a.ndim != ndim:
            raise TypeError(
                f"{name}: expected a {ndim}-D {np.dtype(dtype).name} array, got {a.ndim}-D {a.dtype}"
            )
    if Y.shape != Z.shape or mask.shape != Z.shape or b.shape != (cols,):
        raise ValueError(
            f"shapes: Z {Z.shape}, Y {Y.shape} and mask {mask.shape} must agree, b {b.shape} be ({cols},)"
        )
    if cols % 2:
        raise ValueError(
            f"the paired kernel needs an even number of columns (whole pairs in every row), got {cols}; "
            "use bias_relu_dropout for odd widths"
        )
    for name, a, size in (("Z", Z, 8), ("b", b, 8), ("mask", mask, 2), ("Y", Y, 8)):
        interface = _interface(a)
        if not _c_contiguous(interface):
            raise ValueError(
                f"{name} is not C-contiguous (a slice of a wider array?): its rows would not be whole "
                "pairs at aligned addresses; pass a contiguous array (np.ascontiguousarray), or use "
                "bias_relu_dropout"
            )
        if interface is not None and interface["data"][0] % size:
            raise ValueError(
                f"{name} starts at an address that is not a multiple of {size} bytes (a view that begins "
                f"at an odd column?), so its pairs cannot be read as {size}-byte values: pass an array "
                "allocated as a whole (or a copy), or use bias_relu_dropout"
            )
    return Z.view(np.float64), b.view(np.float64), mask.view(np.uint16), Y.view(np.float64)


def _interface(a) -> dict | None:
    """A host or device array's array interface (CUDA's or NumPy's), or None (Chapter 5)."""
    return getattr(a, "__cuda_array_interface__", None) or getattr(a, "__array_interface__", None)


def _c_contiguous(interface: dict | None) -> bool:
    """Whether an array's elements lie row after row, from its array interface (Chapter 5)."""
    if interface is None or interface.get("strides") is None:  # None: C-contiguous, by the protocol
        return True
    step, want = np.dtype(interface["typestr"]).itemsize, []
    for n in reversed(interface["shape"]):
        want.insert(0, step)
        step *= n
    strides, shape = interface["strides"], interface["shape"]
    return all(s == w for s, w, n in zip(strides, want, shape, strict=True) if n > 1)


def fused_chain_pairs(Z, b, mask, s, Y, block=BLOCK_2D):
    """Y = relu(Z + b) * mask * s by `bias_relu_dropout_pairs`: the views, the launch (Chapter 5)."""
    Z2, b2, mask2, Y2 = pair_views(Z, b, mask, Y)
    grid, block = launch_pairs(Z.shape, block)
    bias_relu_dropout_pairs[grid, block](Z2, b2, mask2, np.float32(s), Y2)
