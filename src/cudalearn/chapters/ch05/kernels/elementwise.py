"""Elementwise kernels of Chapter 5: the naive network's bias, ReLU, loss and SGD steps, and a fusion chain.

Two groups, all float32 unless stated:

* the pieces of the **naive shallow network** (`cudalearn.chapters.ch05.model.NaiveMLP`):
  one kernel per operation, each reading its inputs from global memory
  and writing its result back there (`add_bias`, `relu`, `relu_backward`,
  `bias_grad`, `sgd_update`, `sgd_update_2d`), the softmax cross-entropy
  loss and its gradient (`softmax_xent`, shared by both networks), and the
  row gathers that shuffle the training set on the device each epoch;
* the **memory-bound chain** of the chapter's last section: bias, ReLU, a
  dropout mask and the dropout scale, as four kernels (`chain_bias`,
  `chain_relu`, `chain_mask`, `chain_scale`) or as one
  (`bias_relu_dropout`), and the copy kernel whose bandwidth they are
  compared with (`copy_2d`). Each of their threads handles EPT elements of a
  row (`launch_chain(shape)` gives the launch). The same fused kernel with
  8-byte accesses is `chain_pairs`'s, its constant `PAIRS` and its words'
  halves (`_unpack_pair`, `_pack_pair`) are here with the chain's.

2-D kernels use the course's convention (Chapter 2): thread (x, y) of
`cuda.grid(2)` handles element [y, x], so a warp runs along a row.
`launch_2d(shape)` gives the launch configuration of the network's kernels.
"""

import math

import numpy as np

from cudalearn.runtime import launch
from cudalearn.runtime.numba_backend import SIMULATOR, cuda, float32, libdevice

SIGNATURES = {
    "add_bias": "void(float32[:, ::1], float32[::1], float32[:, ::1])",
    "relu": "void(float32[:, ::1], float32[:, ::1])",
    "relu_backward": "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])",
    "bias_grad": "void(float32[:, ::1], float32[::1])",
    "sgd_update": "void(float32[::1], float32[::1], float32)",
    "sgd_update_2d": "void(float32[:, ::1], float32[:, ::1], float32)",
    "softmax_xent": "void(float32[:, ::1], int32[::1], float32[:, ::1], float32[::1], int64, float32)",
    "gather_rows": "void(float32[:, ::1], int32[::1], float32[:, ::1])",
    "gather": "void(int32[::1], int32[::1], int32[::1])",
    "chain_bias": "void(float32[:, ::1], float32[::1], float32[:, ::1])",
    "chain_relu": "void(float32[:, ::1])",
    "chain_mask": "void(float32[:, ::1], uint8[:, ::1])",
    "chain_scale": "void(float32[:, ::1], float32)",
    "bias_relu_dropout": "void(float32[:, ::1], float32[::1], uint8[:, ::1], float32, float32[:, ::1])",
    "copy_2d": "void(float32[:, ::1], float32[:, ::1])",
    "empty_kernel": "void(float32[::1])",
}

#: Block of the 2-D elementwise launches: 32 threads along a row (one warp), 8 rows.
BLOCK_2D = (32, 8)
#: Threads per block of the 1-D launches.
BLOCK_1D = 256


def launch_2d(shape, block=BLOCK_2D):
    """(griddim, blockdim) covering a (rows, cols) array with thread (x, y) on element [y, x] (Chapter 5)."""
    rows, cols = shape
    return launch.grid_2d(rows, cols, block)


def launch_1d(n, block=BLOCK_1D):
    """(griddim, blockdim) covering n elements, one thread each; small n get a smaller block (Chapter 5)."""
    block = min(block, 32 * max(1, launch.blocks(n, 32)))  # whole warps, no more than n needs
    return max(1, launch.blocks(n, block)), block


# The naive network's steps: one operation per kernel ----------------------------------------


@cuda.jit
def add_bias(Z, b, Y):
    """Y[i, j] = Z[i, j] + b[j]; Z, Y (m, n), b (n,) float32; Y may be Z itself (Chapter 5)."""
    col, row = cuda.grid(2)
    if row < Z.shape[0] and col < Z.shape[1]:
        Y[row, col] = Z[row, col] + b[col]


@cuda.jit
def relu(Z, A):
    """A = max(Z, 0) elementwise; Z, A (m, n) float32, A may be Z itself (Chapter 5)."""
    col, row = cuda.grid(2)
    if row < Z.shape[0] and col < Z.shape[1]:
        A[row, col] = max(Z[row, col], float32(0.0))


@cuda.jit
def relu_backward(dA, A, dZ):
    """dZ = dA where A > 0, else 0: the gradient through a ReLU from its output A; all (m, n) (Chapter 5)."""
    col, row = cuda.grid(2)
    if row < dA.shape[0] and col < dA.shape[1]:
        dZ[row, col] = dA[row, col] if A[row, col] > float32(0.0) else float32(0.0)


@cuda.jit
def bias_grad(dZ, db):
    """db[j] = sum over rows of dZ[:, j]; one thread per column walks down it; dZ (m, n), db (n,) (Chapter 5).

    Neighbouring threads read neighbouring columns of one row at each
    step, so the reads are coalesced; but only n threads work, one column
    each, which leaves most of a large GPU idle when n is small.
    """
    col = cuda.grid(1)
    if col < dZ.shape[1]:
        acc = float32(0.0)
        for row in range(dZ.shape[0]):
            acc += dZ[row, col]
        db[col] = acc


@cuda.jit
def sgd_update(p, g, lr):
    """p -= lr * g for a vector (a bias); p, g (n,) float32, lr float32 (Chapter 5)."""
    i = cuda.grid(1)
    if i < p.shape[0]:
        p[i] -= lr * g[i]


@cuda.jit
def sgd_update_2d(P, G, lr):
    """P -= lr * G for a matrix (a weight matrix); P, G (m, n) float32, lr float32 (Chapter 5)."""
    col, row = cuda.grid(2)
    if row < P.shape[0] and col < P.shape[1]:
        P[row, col] -= lr * G[row, col]


@cuda.jit
def softmax_xent(logits, labels, dlogits, losses, step, inv_batch):
    """Softmax cross-entropy of each row and its gradient; one thread per row (Chapter 5).

    logits (m, c) float32, labels (m,) int32 in [0, c). Writes
    dlogits = (softmax(logits) - onehot(labels)) * inv_batch, the gradient
    of the batch's mean loss, and adds each row's loss * inv_batch to
    losses[step] with an atomic add, so the mean loss of every step stays
    on the device until the epoch ends (no copy, no synchronisation).
    """
    i = cuda.grid(1)
    if i < logits.shape[0]:
        c = logits.shape[1]
        top = logits[i, 0]
        for j in range(1, c):
            top = max(top, logits[i, j])
        total = float32(0.0)
        for j in range(c):
            total += math.exp(logits[i, j] - top)
        y = labels[i]
        for j in range(c):
            p = math.exp(logits[i, j] - top) / total
            if j == y:
                p -= float32(1.0)
            dlogits[i, j] = p * inv_batch
        loss = top + math.log(total) - logits[i, y]  # log-sum-exp minus the true class's logit
        cuda.atomic.add(losses, step, loss * inv_batch)


@cuda.jit
def gather_rows(src, idx, dst):
    """dst[i, :] = src[idx[i], :]: shuffles the rows of a data set on the device (Chapter 5)."""
    col, row = cuda.grid(2)
    if row < dst.shape[0] and col < dst.shape[1]:
        dst[row, col] = src[idx[row], col]


@cuda.jit
def gather(src, idx, dst):
    """dst[i] = src[idx[i]] for int32 labels (Chapter 5)."""
    i = cuda.grid(1)
    if i < dst.shape[0]:
        dst[i] = src[idx[i]]


# The memory-bound chain: bias, ReLU, dropout mask, scale -------------------------------------
#
# These kernels give each thread EPT elements of a row, a grid's width apart, in two loops: the first
# reads, the second writes. With one element per thread, a thread has a single 4-byte load
# outstanding, and the bytes in flight per SM are too few to keep HBM busy (Chapter 2's vector
# addition stayed below PyTorch's own that way: deep dive 5c prints the stored ratio). Where the first
# loop only loads (chain_relu, chain_scale, copy_2d), the compiled code issues all EPT loads before it
# waits for any. Where it also computes with what it loaded (chain_bias and chain_mask,
# bias_relu_dropout and its paired kernel: the bias added, the mask converted), each element's
# arithmetic waits for that element's loads, and the next element's loads come after it, behind the
# branch of their guard: a thread waits for one element's data before it requests the next's (sm_90
# SASS from numba-cuda 0.30.4 and ptxas 12.9). bias_relu_dropout_pairs_u32 keeps its first loop to
# loads.

#: Elements of a row each thread of the chain's kernels handles.
EPT = 4


def launch_chain(shape, block=BLOCK_2D):
    """(griddim, blockdim) of the chain's kernels: each thread takes EPT columns of one row (Chapter 5)."""
    rows, cols = shape
    (x, y), block = launch.grid_2d(rows, cols, block, per_thread=(EPT, 1))
    return (max(1, x), y), block


def _map_rows(op):
    """A device function dst = op(src, s), EPT columns a thread, all loads before the stores (Chapter 5).

    chain_relu, chain_scale and copy_2d are each one call of it; `op(v, s)` is an inlined device
    function of an element and the scalar.
    """

    @cuda.jit(device=True, inline="always")
    def map_rows(src, dst, s):
        """dst[row, col] = op(src[row, col], s) for this thread's EPT columns of its row."""
        x, row = cuda.grid(2)
        width = cuda.gridsize(2)[0]
        if row < src.shape[0]:
            v = cuda.local.array(EPT, float32)
            for e in range(EPT):
                col = x + e * width
                if col < src.shape[1]:
                    v[e] = src[row, col]
            for e in range(EPT):
                col = x + e * width
                if col < src.shape[1]:
                    dst[row, col] = op(v[e], s)

    return map_rows


@cuda.jit(device=True, inline="always")
def _relu(v, s):
    """max(v, 0): chain_relu's element (s unused) (Chapter 5)."""
    return max(v, float32(0.0))


@cuda.jit(device=True, inline="always")
def _scale(v, s):
    """v * s: chain_scale's element (Chapter 5)."""
    return v * s


@cuda.jit(device=True, inline="always")
def _same(v, s):
    """v: copy_2d's element (s unused) (Chapter 5)."""
    return v


_relu_rows, _scale_rows, _copy_rows = _map_rows(_relu), _map_rows(_scale), _map_rows(_same)


@cuda.jit
def chain_bias(Z, b, Y):
    """Y = Z + b[col]; Z, Y (m, n), b (n,) float32, EPT columns a thread (Chapter 5)."""
    x, row = cuda.grid(2)
    width = cuda.gridsize(2)[0]
    if row < Z.shape[0]:
        v = cuda.local.array(EPT, float32)
        for e in range(EPT):  # each element's add waits for its loads (see above)
            col = x + e * width
            if col < Z.shape[1]:
                v[e] = Z[row, col] + b[col]
        for e in range(EPT):
            col = x + e * width
            if col < Z.shape[1]:
                Y[row, col] = v[e]


@cuda.jit
def chain_relu(Y):
    """Y = max(Y, 0) in place; Y (m, n) float32, EPT columns a thread (Chapter 5)."""
    _relu_rows(Y, Y, float32(0.0))


# teaching copy: the book shows chain_mask whole, beside bias_relu_dropout
@cuda.jit
def chain_mask(Y, mask):
    """Y *= mask in place (dropout's keep mask, uint8 0/1); Y, mask (m, n); EPT columns a thread."""
    x, row = cuda.grid(2)
    width = cuda.gridsize(2)[0]
    if row < Y.shape[0]:
        v = cuda.local.array(EPT, float32)
        for e in range(EPT):
            col = x + e * width
            if col < Y.shape[1]:
                v[e] = Y[row, col] * float32(mask[row, col])
        for e in range(EPT):
            col = x + e * width
            if col < Y.shape[1]:
                Y[row, col] = v[e]


@cuda.jit
def chain_scale(Y, s):
    """Y *= s in place (dropout's 1 / (1 - p)); Y (m, n) float32, s float32; EPT columns a thread."""
    _scale_rows(Y, Y, s)


# teaching copy: the book shows bias_relu_dropout whole, its loops as the chain kernels' own
@cuda.jit
def bias_relu_dropout(Z, b, mask, s, Y):
    """Y = relu(Z + b) * mask * s in one pass: each element read once, written once (Chapter 5).

    Z, Y (m, n) float32; b (n,) float32; mask (m, n) uint8 0 or 1; s float32.
    The unfused chain (chain_bias, chain_relu, chain_mask, chain_scale)
    computes the same with four kernels, each reading and writing the
    whole array. Same launch: EPT columns a thread, read in a first loop
    and written in a second.
    """
    x, row = cuda.grid(2)
    width = cuda.gridsize(2)[0]
    if row < Z.shape[0]:
        z = cuda.local.array(EPT, float32)
        keep = cuda.local.array(EPT, float32)
        # Z, b and the mask of each element, then its add and its mask's conversion
        for e in range(EPT):
            col = x + e * width
            if col < Z.shape[1]:
                z[e] = Z[row, col] + b[col]
                keep[e] = float32(mask[row, col])
        for e in range(EPT):
            col = x + e * width
            if col < Z.shape[1]:
                Y[row, col] = max(z[e], float32(0.0)) * keep[e] * s


@cuda.jit
def copy_2d(src, dst):
    """dst = src with the chain's launch (EPT columns a thread): the chain's bandwidth ceiling (Chapter 5)."""
    _copy_rows(src, dst, float32(0.0))


#: Pairs of columns each thread of the paired kernel handles (2 was the fastest of 2, 4, 8 on the H200).
PAIRS = 2

#: {name: (value, meaning)} of the chain kernels' launch constants, as Chapter 5 prints them.
CONSTANTS = {
    "BLOCK_2D": (BLOCK_2D, "threads of a block (x, y): one warp along a row, 8 rows"),
    "EPT": (EPT, "elements of a row each thread of the 4-byte chain kernels handles"),
    "PAIRS": (PAIRS, "pairs of columns (8 bytes each) each thread of the paired kernel handles"),
}

if SIMULATOR:  # the simulator runs device code as Python: NumPy reinterprets the bits

    def _unpack_pair(d):
        """(low, high) float32 halves of a float64-sized word: columns 2j and 2j + 1 (Chapter 5)."""
        halves = np.array([d], np.float64).view(np.float32)
        return halves[0], halves[1]

    def _pack_pair(lo, hi):
        """The float64-sized word holding float32 `lo` (column 2j) and `hi` (column 2j + 1) (Chapter 5)."""
        return np.array([lo, hi], np.float32).view(np.float64)[0]

else:

    @cuda.jit(device=True, inline="always")
    def _unpack_pair(d):
        """(low, high) float32 halves of a float64-sized word: columns 2j and 2j + 1 (Chapter 5)."""
        return libdevice.int_as_float(libdevice.double2loint(d)), libdevice.int_as_float(
            libdevice.double2hiint(d)
        )

    @cuda.jit(device=True, inline="always")
    def _pack_pair(lo, hi):
        """The float64-sized word holding float32 `lo` (column 2j) and `hi` (column 2j + 1) (Chapter 5)."""
        return libdevice.hiloint2double(libdevice.float_as_int(hi), libdevice.float_as_int(lo))


@cuda.jit
def empty_kernel(x):
    """Does nothing (no thread has a negative index): its launches time the cost of launching (Chapter 5)."""
    if cuda.grid(1) < 0:
        x[0] = float32(0.0)


# Bytes, inputs and specification of the chain -------------------------------------------------


def chain_bytes(rows, cols):
    """Bytes each kernel of the chain asks global memory for, unfused and fused (Chapter 5).

    Every float32 element read or written costs 4 bytes, every mask byte
    1, and b[col] is read once per element (4 bytes): a warp of 32 threads
    along a row reads 32 neighbouring bias values, 4 sectors, so the
    tracer counts exactly these bytes. Returns a dict of ints:
    'chain_bias', 'chain_relu', 'chain_mask', 'chain_scale', 'unfused' (their sum),
    'fused', 'saved' (unfused - fused) and 'dram_min' (each array once:
    Z, mask and Y once and b once, what the fused kernel needs from DRAM).
    """
    e = rows * cols
    out = {
        "chain_bias": e * (4 + 4 + 4),  # read Z and b[col], write Y
        "chain_relu": e * (4 + 4),  # read Y, write Y
        "chain_mask": e * (4 + 1 + 4),  # read Y and the mask byte, write Y
        "chain_scale": e * (4 + 4),  # read Y, write Y
        "fused": e * (4 + 4 + 1 + 4),  # read Z, b[col] and the mask, write Y
    }
    out["unfused"] = out["chain_bias"] + out["chain_relu"] + out["chain_mask"] + out["chain_scale"]
    out["saved"] = out["unfused"] - out["fused"]
    out["dram_min"] = e * (4 + 1 + 4) + 4 * cols
    return out


def chain_inputs(rows, cols, p=0.1, seed=0):
    """(Z (rows, cols) float32, b (cols,) float32, mask (rows, cols) uint8, scale float32) for the chain."""
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((rows, cols), dtype=np.float32)
    b = rng.standard_normal(cols, dtype=np.float32)
    mask = (rng.random((rows, cols)) >= p).astype(np.uint8)
    return Z, b, mask, np.float32(1.0 / (1.0 - p))


def chain_reference(Z, b, mask, s):
    """relu(Z + b) * mask * s in NumPy, float32: the chain's specification (Chapter 5)."""
    return (np.maximum(Z + b, np.float32(0.0)) * mask.astype(np.float32) * np.float32(s)).astype(np.float32)
