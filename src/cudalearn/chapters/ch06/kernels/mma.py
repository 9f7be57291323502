"""Tensor cores by hand: `mma.sync` (FP16 x FP16 -> FP32) and `ldmatrix`, for Chapter 6's deep dive 06d.

One warp multiplies small matrices in one instruction: `mma.sync.aligned.m16n8k8` (sm_75: a T4) and
`m16n8k16` (sm_80 and newer) compute D = A @ B + C for a 16 x 8 tile of D, with A (16 x k) and B
(k x 8) in float16 and C, D in float32, each matrix spread over the 32 lanes' registers as the PTX ISA
defines ("Matrix Fragments for mma.m16n8k8" and "... for mma.m16n8k16 with floating point type"): a
lane holds pairs of adjacent float16 of A and B packed in 32-bit registers (`.f16x2`, the lower
element in the low half) and four float32 of C and D. `ldmatrix.sync.aligned.m8n8.x{1,2,4}` loads one,
two or four 8 x 8 float16 matrices from shared memory straight into that layout: lane 8j + r gives the
address of row r of matrix j (16 bytes), and lane 4r + w receives word w of row r (with `.trans`,
the transposed matrix's).

`FRAGMENTS` is the one table of which lane holds which element; everything else here reads it:

* `fragment(shape, operand)`: (32, elements, 2) rows and columns of every lane's elements;
* `to_registers` / `from_registers`: a matrix to the lanes' registers and back (the figures of 06d);
* `emulate_mma`, `emulate_ldmatrix`: what the instructions compute, lane by lane, on numpy arrays.

The functions a kernel calls are `mma_m16n8k8(a0, a1, b0, c0..c3)`, `mma_m16n8k16(a0..a3, b0, b1,
c0..c3)` (a tuple of the four float32 of D; the a and b operands are uint32 words holding two float16),
`pack_f16x2(lo, hi)` (two float32 rounded to float16 in one word: an epilogue's float16 output),
`ldmatrix_x1(s, off)`, `ldmatrix_x2`, `ldmatrix_x4` and their `_trans` forms (s a C-contiguous uint32
shared array, off the flat index of this lane's row: a multiple of 4 words, 16 bytes). On a GPU they
are numba-cuda intrinsics with inline PTX (as `async_copy`'s cp.async); under the simulator they are
warp instructions of `cudalearn.trace` (`trace.collective`): a kernel that calls them runs on the CPU
tracer, which meets the 32 lanes at the call, computes the results here and counts an ldmatrix's
shared-memory wavefronts (8 rows of 16 bytes a matrix). `unavailable(cc, shape)` says why they cannot
run on a GPU.

Inside the tensor core the order and width of the additions are not specified by the PTX ISA: the
emulation adds the exact products in float64 and rounds once to float32, so it can differ from a GPU
in the last bits of D.
"""

from __future__ import annotations

import numpy as np

from cudalearn.runtime import numba_backend
from cudalearn.runtime.numba_backend import SIMULATOR, cuda
from cudalearn.trace import collective, standins

WARP = 32
SHAPES = {"m16n8k8": (16, 8, 8), "m16n8k16": (16, 8, 16)}  # (m, n, k)
MIN_CC = {"m16n8k8": (7, 5), "m16n8k16": (8, 0), "ldmatrix": (7, 5)}
SIGNATURES: dict = {}  # device functions and intrinsics only: they compile inside the kernels (tc_gemm)


def _a_m16n8k8(g, t, i):
    """(row, col) of a_i, i = 0..3 (PTX ISA: row groupID for a0, a1, else groupID + 8)."""
    return g + 8 * (i >= 2), 2 * t + (i & 1)


def _a_m16n8k16(g, t, i):
    """(row, col) of a_i, i = 0..7: rows +8 for a2, a3, a6, a7; columns +8 for a4..a7."""
    return g + 8 * (i in (2, 3, 6, 7)), 2 * t + (i & 1) + 8 * (i >= 4)


def _b_m16n8k8(g, t, i):
    """(row, col) of b_i, i = 0, 1: row threadID_in_group * 2 + i, column groupID."""
    return 2 * t + i, g


def _b_m16n8k16(g, t, i):
    """(row, col) of b_i, i = 0..3: rows +8 for b2, b3."""
    return 2 * t + (i & 1) + 8 * (i >= 2), g


def _c(g, t, i):
    """(row, col) of c_i (and d_i), i = 0..3, both shapes: rows +8 for c2, c3."""
    return g + 8 * (i >= 2), 2 * t + (i & 1)


#: shape -> operand -> (elements a lane holds, (groupID, threadID_in_group, i) -> (row, col)).
#: groupID = lane >> 2, threadID_in_group = lane % 4; registers pair elements 2r and 2r + 1.
FRAGMENTS = {
    "m16n8k8": {"A": (4, _a_m16n8k8), "B": (2, _b_m16n8k8), "C": (4, _c)},
    "m16n8k16": {"A": (8, _a_m16n8k16), "B": (4, _b_m16n8k16), "C": (4, _c)},
}


def operand_shape(shape, operand):
    """(rows, columns) of operand 'A' (m x k), 'B' (k x n) or 'C' / 'D' (m x n) of an mma shape."""
    m, n, k = SHAPES[shape]
    return {"A": (m, k), "B": (k, n), "C": (m, n), "D": (m, n)}[operand]


def fragment(shape, operand) -> np.ndarray:
    """(32, elements, 2) int array: row and column of each element of each lane (Chapter 6, 06d)."""
    count, where = FRAGMENTS[shape]["C" if operand == "D" else operand]
    return np.array([[where(lane >> 2, lane % 4, i) for i in range(count)] for lane in range(WARP)])


def _pack(halves: np.ndarray) -> np.ndarray:
    """(..., 2r) float16 -> (..., r) uint32: elements 2j (low half) and 2j + 1 (high half) of a word."""
    return np.ascontiguousarray(halves, dtype=np.float16).view(np.uint32)


def _unpack(words) -> np.ndarray:
    """(..., r) uint32 -> (..., 2r) float16, the inverse of _pack."""
    return np.ascontiguousarray(np.asarray(words, dtype=np.uint64).astype(np.uint32)).view(np.float16)


def to_registers(matrix, shape, operand) -> np.ndarray:
    """The lanes' registers holding `matrix`: (32, words) uint32 for A and B, (32, 4) float32 for C."""
    rc = fragment(shape, operand)
    values = np.asarray(matrix)[rc[..., 0], rc[..., 1]]
    if operand in ("A", "B"):
        return _pack(values.astype(np.float16))
    return values.astype(np.float32)


def from_registers(registers, shape, operand) -> np.ndarray:
    """The matrix the lanes' registers hold: float16 for A and B (words unpacked), float32 for C and D."""
    rc = fragment(shape, operand)
    values = _unpack(registers) if operand in ("A", "B") else np.asarray(registers, np.float32)
    out = np.full(operand_shape(shape, operand), np.nan, values.dtype)
    out[rc[..., 0], rc[..., 1]] = values
    return out


def emulate_mma(shape, a, b, c) -> np.ndarray:
    """D = A @ B + C of one warp's mma.sync: a, b (32, words) uint32, c (32, 4) float32 -> d (32, 4)."""
    A = from_registers(a, shape, "A").astype(np.float64)  # float16 products are exact in float64
    B = from_registers(b, shape, "B").astype(np.float64)
    C = from_registers(c, shape, "C").astype(np.float64)
    return to_registers((A @ B + C).astype(np.float32), shape, "D")


def emulate_ldmatrix(rows, trans=False) -> np.ndarray:
    """(32, num) uint32 registers of ldmatrix from rows (8 * num, 4) uint32: row r of matrix j at 8j + r.

    Lane 4r + w receives word w of row r of each matrix (without .trans), or with .trans the float16
    at column r of rows 2w and 2w + 1 of each matrix (the same place of the transposed matrix).
    """
    rows = np.asarray(rows, dtype=np.uint32)
    num = rows.shape[0] // 8
    mats = rows.reshape(num, 8, 4)
    if trans:
        mats = _pack(_unpack(mats).transpose(0, 2, 1))  # (num, 8, 8) float16, transposed
    return np.ascontiguousarray(mats.reshape(num, WARP).T)  # lane = 4r + w


def unavailable(cc=None, shape="m16n8k16") -> str | None:
    """Why `shape` ('m16n8k8', 'm16n8k16' or 'ldmatrix') cannot run for compute capability cc, or None."""
    if SIMULATOR:  # the CPU tracer runs them: any compute capability
        return None
    package = numba_backend.choice().package
    if package != numba_backend.NUMBA_CUDA:
        return f"{package} takes no numba-cuda intrinsics (inline PTX)"
    need = MIN_CC[shape]
    if cc is not None and tuple(cc) < need:
        return f"{shape} needs sm_{need[0]}{need[1]} or newer; this GPU is sm_{cc[0]}{cc[1]}"
    return None


# ---- what the tracer computes for a warp at one call (trace.collective) ----


def _mma_lanes(shape):
    """The warp event of mma.sync `shape`: every lane's (a..., b..., c...) -> every lane's (d0..d3)."""
    na, nb = FRAGMENTS[shape]["A"][0] // 2, FRAGMENTS[shape]["B"][0] // 2

    def compute(args):
        regs = np.array([[int(v) & 0xFFFFFFFF for v in lane[: na + nb]] for lane in args], np.uint64)
        c = np.array([[float(v) for v in lane[na + nb :]] for lane in args], np.float32)
        d = emulate_mma(shape, regs[:, :na], regs[:, na:], c)
        return [tuple(np.float32(v) for v in row) for row in d]

    return compute


def _ldmatrix_lanes(num, trans):
    """The warp event of ldmatrix .x{num}: the 8 * num rows the tracer read -> every lane's registers."""

    def compute(rows):
        regs = emulate_ldmatrix(rows, trans)
        if num == 1:
            return [np.uint32(r[0]) for r in regs]
        return [tuple(np.uint32(v) for v in r) for r in regs]

    return compute


_ARITY = {"m16n8k8": 7, "m16n8k16": 10}


def _pack_f16x2(lo, hi):
    """Two float32 rounded to float16 in one uint32 word, lo in the low half (cvt.rn.f16.f32)."""
    return np.array([lo, hi], np.float32).astype(np.float16).view(np.uint32)[0]


if SIMULATOR:
    pack_f16x2 = cuda.jit(device=True)(_pack_f16x2)

    mma_m16n8k8, mma_m16n8k16 = (collective.Instruction(f"mma_{s}", _ARITY[s], __name__) for s in SHAPES)
    ldmatrix_x1, ldmatrix_x2, ldmatrix_x4 = (
        collective.Instruction(f"ldmatrix_x{n}", 2, __name__) for n in (1, 2, 4)
    )
    ldmatrix_x2_trans, ldmatrix_x4_trans = (
        collective.Instruction(f"ldmatrix_x{n}_trans", 2, __name__) for n in (2, 4)
    )
    ldmatrix_x4_a32 = collective.Instruction("ldmatrix_x4_a32", 2, __name__)
elif numba_backend.choice().package == numba_backend.NUMBA_CUDA:
    from cudalearn.chapters.ch06.kernels.mma_ptx import (  # noqa: E402  (numba-cuda only)
        ldmatrix_x1,
        ldmatrix_x2,
        ldmatrix_x2_trans,
        ldmatrix_x4,
        ldmatrix_x4_a32,
        ldmatrix_x4_trans,
        mma_m16n8k8,
        mma_m16n8k16,
        pack_f16x2,
    )

    standins.register(pack_f16x2, _pack_f16x2)  # traced on the CPU in gpu mode too
else:  # numba-cuda-mlir: `unavailable()` says so, and no kernel is built with these

    def _refuse(*args):
        raise RuntimeError(f"mma.sync: {unavailable()}")

    mma_m16n8k8 = mma_m16n8k16 = ldmatrix_x1 = ldmatrix_x2 = ldmatrix_x4 = pack_f16x2 = _refuse
    ldmatrix_x2_trans = ldmatrix_x4_trans = ldmatrix_x4_a32 = _refuse

for _shape, _fn in (("m16n8k8", mma_m16n8k8), ("m16n8k16", mma_m16n8k16)):
    collective.register(f"mma_{_shape}", _fn, _mma_lanes(_shape))
for _num, _trans, _fn in (
    (1, False, ldmatrix_x1),
    (2, False, ldmatrix_x2),
    (4, False, ldmatrix_x4),
    (2, True, ldmatrix_x2_trans),
    (4, True, ldmatrix_x4_trans),
):
    _name = f"ldmatrix_x{_num}" + ("_trans" if _trans else "")
    collective.register(_name, _fn, _ldmatrix_lanes(_num, _trans), rows=8 * _num)
collective.register("ldmatrix_x4_a32", ldmatrix_x4_a32, _ldmatrix_lanes(4, False), rows=32)
