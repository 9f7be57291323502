"""What the usual wrong answers of lab 10 compute, emulated in NumPy, so its checks name the mistake.

Each function returns {what the student did, as the hint a check gives: the value it computes}; a
check that finds a wrong result equal to one of these values says which mistake it was. The warp
shuffles are emulated lane by lane (`lanes`), as a GPU runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from cudalearn.chapters.ch10.kernels.softmax import softmax_reference

WARP = 32


def sum_mistakes(x: np.ndarray, block: int, blocks: int) -> dict[str, float]:
    """What the usual wrong block sums give (float64, exact on integer data), by what the student did."""
    n, threads = x.shape[0], block * blocks
    acc = np.zeros(threads)
    for g in range(threads):  # each thread's grid-stride partial sum
        acc[g] = x[g::threads].astype(np.float64).sum()
    per_block = acc.reshape(blocks, block)
    z = x.astype(np.float64)
    first = z[: min(n, threads)]
    by_block = sum(z[g::block].sum() for g in range(min(n, threads)))  # step blockDim.x, not the grid's
    same = blocks * sum(z[t::threads].sum() for t in range(block))  # each block starts at threadIdx.x
    rising = per_block.copy()  # sequential addressing with the strides 1, 2, 4, ...: the wrong order
    stride = 1
    while stride < block:
        rising[:, :stride] += rising[:, stride : 2 * stride]
        stride *= 2
    mistakes = {
        f"every thread of a block added the block's total to out[0] (out[0] is {block} times the sum): "
        f"only one thread per block, e.g. `if tid == 0:`, does the cuda.atomic.add": block * acc.sum(),
        "the tree stopped one step early (stride 1 is missing: `while stride > 1`), so each block adds "
        "only the partials of its even threads. Halve the stride down to 1 included": per_block[:, ::2].sum(),
        "out[0] got only thread 0's own elements from each block: the tree did not add the other "
        "threads' partials into s[0] (is the loop over strides there, adding s[tid + stride] into s[tid]?)": (
            per_block[:, 0].sum()
        ),
        "the tree's strides run in the wrong order: with sequential addressing (the threads tid < stride "
        "add s[tid + stride] into s[tid]) the stride starts at BLOCK // 2 and halves down to 1; doubling it "
        "from 1 adds into s[0] only s[1], s[2], s[4], ..., partials that no earlier step has added up": (
            rising[:, 0].sum()
        ),
        "only block 0's sum reached out[0]: every block adds its sum, one cuda.atomic.add(out, 0, s[0]) "
        "per block, not only `cuda.blockIdx.x == 0`": per_block[0].sum(),
        f"every block added the same elements ({blocks} times the first block's share): the grid-stride "
        f"loop starts at cuda.threadIdx.x, which is the same in every block; start it at cuda.grid(1), "
        f"the thread's index in the whole grid": same,
        f"every block added the whole array (out[0] is {blocks} times the sum): the loop starts at "
        f"cuda.threadIdx.x and steps by the block's size, so each block covers all of x; start at "
        f"cuda.grid(1) and step by cuda.gridsize(1), the threads of the whole grid": blocks * z.sum(),
        "the last element, x[n - 1], is missing: range(start, stop, step) already stops before `stop`, so "
        "the bound is x.shape[0], not x.shape[0] - 1": z[:-1].sum(),
    }
    if n > block and blocks > 1:
        mistakes[
            "elements were added several times: the grid-stride loop steps by cuda.blockDim.x (one block), "
            "but the grid has cuda.gridsize(1) threads, and the next block already covers the elements a "
            "block's step lands on; step by cuda.gridsize(1)"
        ] = by_block
    if n > threads:
        last = sum(z[g + (n - 1 - g) // threads * threads] for g in range(threads))
        mistakes[
            "each thread kept only the last of its grid-stride elements: `acc = x[i]` replaces the running "
            "sum; accumulate with `acc += x[i]`"
        ] = last
        mistakes[
            f"your kernel added only the first {threads} elements (one per thread of the grid: {blocks} "
            f"blocks of {block}), of n = {n}: the check launches fewer threads than elements, so each "
            f"thread must loop with the grid's stride: `for i in range(cuda.grid(1), n, cuda.gridsize(1))`"
        ] = first.sum()
    return mistakes


def lanes(v: np.ndarray, op: str, offsets: Sequence[int], combine: Callable = np.add) -> np.ndarray:
    """Each lane's value after `v = combine(v, shfl_<op>_sync(FULL, v, o))` for o in offsets; v (..., 32).

    op: "down", "up", "xor", or "idx" (cuda.shfl_sync: every lane reads lane o).

    A lane whose source lane is outside the warp gets its own value back, as the GPU does.
    """
    v = np.array(v, dtype=np.float64)
    lanes = np.arange(WARP)
    for o in offsets:
        src = {"down": lanes + o, "up": lanes - o, "xor": lanes ^ o, "idx": np.full(WARP, o)}[op]
        inside = (src >= 0) & (src < WARP)
        v = combine(v, np.where(inside, v[..., np.clip(src, 0, WARP - 1)], v))
    return v


def warp_mistakes(warps: np.ndarray) -> dict[str, np.ndarray]:
    """What the usual wrong warp sums write per warp, by what the student did; warps (w, 32) float64."""
    tree = (16, 8, 4, 2, 1)
    down = lanes(warps, "down", tree)
    out = {
        "lane 0 wrote 32 times its own value: shfl_up_sync moves values up (lane i reads lane i - delta, "
        "and lane 0, with no lane below it, gets its own value back), so lane 0 never sees the others. Use "
        "shfl_down_sync (lane i reads lane i + delta), or shfl_xor_sync": lanes(warps, "up", tree)[:, 0],
        "each warp's sum is twice the right one: an offset of 32 reads outside the warp, so each lane adds "
        "its own value to itself. The offsets are 16, 8, 4, 2, 1": lanes(warps, "down", (32, *tree))[:, 0],
        "each warp's sum holds only its even lanes: offset 1 is missing (the loop stops at 2). The offsets "
        "are 16, 8, 4, 2, 1": lanes(warps, "down", tree[:-1])[:, 0],
        "each warp's sum holds only its lanes 0-15: offset 16 is missing (the loop starts at 8). The "
        "offsets are 16, 8, 4, 2, 1": lanes(warps, "down", tree[1:])[:, 0],
        "cuda.shfl_sync(mask, v, offset) reads lane `offset` itself (every lane gets the same value, a "
        "broadcast), not lane i ^ offset or i + offset: the tree adds "
        "cuda.shfl_xor_sync(FULL_MASK, v, offset) (or shfl_down_sync)": lanes(warps, "idx", tree)[:, 0],
    }
    for lane in range(1, WARP):
        out[
            f"the sums were written by lane {lane}: after shfl_down_sync's tree only lane 0 holds the whole "
            f"sum (lane i holds the sum of lanes i, i + 1, ... as far as the offsets reach). Write from "
            f"`cuda.laneid == 0`"
        ] = down[:, lane]
    return out


def softmax_mistakes(x: np.ndarray) -> dict[str, np.ndarray]:
    """What the usual wrong row softmaxes give (float32 where overflow matters), by what the student did."""
    rows, cols = x.shape
    z = x.astype(np.float64)
    lane = np.arange(cols) % WARP
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        e32 = np.exp(x)  # float32: overflows above 88.7
        first = z[:, :WARP].max(axis=1, keepdims=True)
        e_first = np.exp(z - first).astype(np.float32)
        lanes_max = np.full((rows, WARP), -np.inf)
        for j in range(cols):
            lanes_max[:, lane[j]] = np.maximum(lanes_max[:, lane[j]], z[:, j])
        own = np.exp(z - lanes_max[:, lane])
        lane0 = np.exp(z - lanes(lanes_max, "down", (16, 8, 4, 2, 1), np.maximum)[:, lane])
        e = np.exp(z - z.max(axis=1, keepdims=True))
        partial = np.zeros((rows, WARP))
        for j in range(cols):
            partial[:, lane[j]] += e[:, j]
        down = lanes(partial, "down", (16, 8, 4, 2, 1))
        from_zero = np.exp((z - np.maximum(z.max(axis=1, keepdims=True), 0)).astype(np.float32))
        e_no_m = np.exp(x).sum(axis=1, keepdims=True, dtype=np.float32)  # float32: overflows, or underflows
        out = {
            "exp(x) overflowed float32 (above x = 88.7) in a row of large logits: subtract the row's "
            "maximum before exp, exp(x - m), which changes nothing in exact arithmetic (softmax is the same "
            "for x and x - m) and keeps every exp at most 1": (e32 / e32.sum(axis=1, keepdims=True)),
            "exp overflowed: your m is the maximum of the first 32 columns only, and row 0's largest value "
            "lies beyond them. The max runs over all the row's columns: each lane over j = lane, lane + 32, "
            "..., then warp_max across the lanes": e_first / e_first.sum(axis=1, keepdims=True),
            "each lane subtracted the max of its own columns, so the lanes' exps are on different scales "
            "and their sum means nothing: combine the lanes' maxima with warp_max, so that every lane "
            "subtracts the row's maximum": own / own.sum(axis=1, keepdims=True),
            "the lanes subtracted different maxima: warp_max left the row's max in lane 0 only (a "
            "shfl_down_sync tree); use the shfl_xor_sync butterfly, after which every lane holds it": lane0
            / lane0.sum(axis=1, keepdims=True),
            "each lane divided by the sum of its own columns' exps only: the row's sum is the warp_sum of "
            "the lanes' partial sums, and every lane needs it": e / partial[:, lane],
            "the rows do not sum to 1 outside lane 0's columns: after warp_sum's shfl_down_sync tree only "
            "lane 0 holds the row's sum; broadcast it to every lane with cuda.shfl_sync(FULL_MASK, s, 0) "
            "before dividing": e / down[:, lane],
            "your max starts at 0 (or another value above some row's logits), not at -inf: in a row whose "
            "logits are all below -88 every exp(x - 0) underflows to 0 and 0 / 0 is NaN. Start the max at "
            "float32(-math.inf), so that m is the row's own maximum and its largest exp is 1": (
                from_zero / from_zero.sum(axis=1, keepdims=True)
            ),
            "each exp(x - m) was divided by the sum of exp(x), without m: that sum overflows float32 (inf, "
            "so y = 0) or underflows to 0 (y = inf); subtract the same row max m in the sum as in each "
            "element": np.exp(z - z.max(axis=1, keepdims=True)).astype(np.float32) / e_no_m,
            "each element was divided by the largest lane's partial sum: the lanes' partial sums are "
            "combined with warp_sum (added), not warp_max": e / partial.max(axis=1, keepdims=True),
        }
        if cols > WARP:
            out[
                "the columns beyond the first 32 are missing: a warp has 32 lanes, so each lane handles "
                "columns lane, lane + 32, lane + 64, ... (`for j in range(lane, n, 32)`) in every pass"
            ] = np.concatenate([softmax_reference(x[:, :WARP]), np.full((rows, cols - WARP), np.nan)], axis=1)
    return out


def combine_mistakes(a: tuple, b: tuple) -> dict[str, tuple[float, float]]:
    """What the usual wrong combines return for states a and b, by what the student did (float64)."""
    (ma, da), (mb, db) = a, b
    m, lo = max(ma, mb), min(ma, mb)
    with np.errstate(over="ignore", invalid="ignore"):
        ea, eb = np.exp(np.float64(ma - m)), np.exp(np.float64(mb - m))
        return {
            "the sums were added without rescaling: d_a is a sum of exp(x - m_a) and d_b of exp(x - m_b), "
            "on different scales; multiply each by exp(its m - the new m) first": (m, da + db),
            "only d_a was rescaled: d_b is a sum of exp(x - m_b), so it needs its factor exp(m_b - m) too "
            "(1 only when m_b is the larger)": (m, da * ea + db),
            "only d_b was rescaled: d_a needs its factor exp(m_a - m) too": (m, da + db * eb),
            "the rescaling factors are inverted: a sum of exp(x - m_a) becomes a sum of exp(x - m) when "
            "multiplied by exp(m_a - m), which is at most 1": (m, da / ea + db / eb),
            "the new m is not the larger of m_a and m_b (m = m_b, the newest?): the state's m is the running "
            "maximum, so that every exp(x - m) is at most 1": (mb, da * np.exp(np.float64(ma - mb)) + db),
            "the new m is the smaller of m_a and m_b: the state's m is the running maximum, max(m_a, m_b), "
            "so that no exp(x - m) overflows": (
                lo,
                da * np.exp(np.float64(ma) - lo) + db * np.exp(np.float64(mb) - lo),
            ),
            "d_b is missing: chunk b's sum of exponentials is d_b, so it adds d_b * exp(m_b - m), not "
            "exp(m_b - m) (that is the state of a single element, (v, 1))": (m, da * ea + eb),
            "the factors are exp(m_a) and exp(m_b): each sum moves to the new max's scale with "
            "exp(m_a - m) and exp(m_b - m), which are at most 1 (exp(m_a) alone overflows for logits near "
            "1000)": (m, da * np.exp(np.float64(ma)) + db * np.exp(np.float64(mb))),
            "it returns (d, m): return the pair in the order (m, d)": (da * ea + db * eb, m),
        }
