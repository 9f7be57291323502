"""GPU probe 2 (not part of the course): LayerNorm block-per-row, vector add with ILP, chain u32.

    CUDALEARN_MODE=gpu python3 .probe/probe2.py [--ncu]
"""

import math
import sys

import numpy as np
from numba import cuda, float32, uint16, uint32

import cudalearn
from cudalearn import launch, timing
from cudalearn.kernels.elementwise import _pack_pair, _unpack_pair
from cudalearn.kernels.reductions import warp_sum

info = cudalearn.setup()
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

NCU = "--ncu" in sys.argv
K8 = 8
K12 = 12
MAXW = 32
MAXW2 = 64


def _specialise(src, name, **consts):
    g = dict(globals())
    g.update(consts)
    exec(src, g)
    return cuda.jit(g[name])


LN_BLK_SRC = """
def ln_blk(x, gamma, beta, y, eps):
        scratch = cuda.shared.array(MAXW2, float32)
        lane = uint32(cuda.threadIdx.x)
        w = uint32(cuda.threadIdx.y)
        nw = uint32(cuda.blockDim.y)
        row = uint32(cuda.blockIdx.x)
        t = w * uint32(32) + lane
        nt = nw * uint32(32)
        cols = uint32(x.shape[1])
        mine = (cols + nt - uint32(1) - t) // nt
        vals = cuda.local.array(K, float32)
        s = float32(0.0)
        for k in range(K):
            vals[k] = x[row, t + nt * uint32(k)] if uint32(k) < mine else float32(0.0)
            s += vals[k]
        s = warp_sum(s)
        if lane == 0:
            scratch[w] = s
        cuda.syncthreads()
        total = float32(0.0)
        for i in range(nw):
            total += scratch[i]
        mean = total / float32(cols)
        q = float32(0.0)
        for k in range(K):
            dv = vals[k] - mean if uint32(k) < mine else float32(0.0)
            q += dv * dv
        q = warp_sum(q)
        if lane == 0:
            scratch[MAXW + w] = q
        cuda.syncthreads()
        total = float32(0.0)
        for i in range(nw):
            total += scratch[MAXW + i]
        rstd = float32(1.0) / math.sqrt(total / float32(cols) + eps)
        for k in range(K):
            if uint32(k) < mine:
                j = t + nt * uint32(k)
                y[row, j] = (vals[k] - mean) * rstd * gamma[j] + beta[j]
"""


def make_ln_blk(K):
    return _specialise(LN_BLK_SRC, "ln_blk", K=K)


ln_blk8 = make_ln_blk(K8)
ln_blk12 = make_ln_blk(K12)


VA_U32 = """
def va(a, b, out):
    i = uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.x) + uint32(cuda.threadIdx.x)
    stride = uint32(cuda.gridDim.x) * uint32(cuda.blockDim.x)
    n = uint32(out.shape[0])
    av = cuda.local.array(ILP, float32)
    bv = cuda.local.array(ILP, float32)
    for k in range(ILP):
        j = i + uint32(k) * stride
        if j < n:
            av[k] = a[j]
            bv[k] = b[j]
    for k in range(ILP):
        j = i + uint32(k) * stride
        if j < n:
            out[j] = av[k] + bv[k]
"""

VA_I64 = """
def va(a, b, out):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    av = cuda.local.array(ILP, float32)
    bv = cuda.local.array(ILP, float32)
    for k in range(ILP):
        j = i + k * stride
        if j < out.shape[0]:
            av[k] = a[j]
            bv[k] = b[j]
    for k in range(ILP):
        j = i + k * stride
        if j < out.shape[0]:
            out[j] = av[k] + bv[k]
"""


def make_va(ilp, u32):
    return _specialise(VA_U32 if u32 else VA_I64, "va", ILP=ilp)


PAIRS_SRC = """
def pairs(Z2, b2, mask2, s, Y2):
    x = uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.x) + uint32(cuda.threadIdx.x)
    row = uint32(cuda.blockIdx.y) * uint32(cuda.blockDim.y) + uint32(cuda.threadIdx.y)
    width = uint32(cuda.gridDim.x) * uint32(cuda.blockDim.x)
    n = uint32(Z2.shape[1])
    if row < uint32(Z2.shape[0]):
        lo = cuda.local.array(P, float32)
        hi = cuda.local.array(P, float32)
        keep = cuda.local.array(P, uint16)
        for e in range(P):
            col = x + uint32(e) * width
            if col < n:
                z_lo, z_hi = _unpack_pair(Z2[row, col])
                b_lo, b_hi = _unpack_pair(b2[col])
                lo[e] = z_lo + b_lo
                hi[e] = z_hi + b_hi
                keep[e] = mask2[row, col]
        for e in range(P):
            col = x + uint32(e) * width
            if col < n:
                y_lo = max(lo[e], float32(0.0)) * float32(keep[e] & 0xFF) * s
                y_hi = max(hi[e], float32(0.0)) * float32(keep[e] >> 8) * s
                Y2[row, col] = _pack_pair(y_lo, y_hi)
"""


def make_pairs(P):
    return _specialise(PAIRS_SRC, "pairs", P=P)


def main():
    ln_r, ln_c = cudalearn.size("ch10.ln_rows"), cudalearn.size("ch10.ln_cols")
    xl = torch.randn(ln_r, ln_c, device="cuda") * 3 + 1
    yl = torch.empty_like(xl)
    g = 1 + 0.1 * torch.randn(ln_c, device="cuda")
    bb = 0.1 * torch.randn(ln_c, device="cuda")
    refl = F.layer_norm(xl, (ln_c,), g, bb, 1e-5)
    eps = np.float32(1e-5)
    cands = {"copy (torch)": lambda: yl.copy_(xl), "F.layer_norm": lambda: F.layer_norm(xl, (ln_c,), g, bb, 1e-5)}
    for name, k, w in (
        ("ln_blk8 w4", ln_blk8, 4),
        ("ln_blk8 w8", ln_blk8, 8),
        ("ln_blk12 w2", ln_blk12, 2),
        ("ln_blk12 w4", ln_blk12, 4),
    ):
        fn = launch.prepared(k, ln_r, (32, w), xl, g, bb, yl, eps)
        yl.fill_(float("nan"))
        fn()
        print(f"{name}: max err vs torch {(yl - refl).abs().max().item():.2e}")
        cands[name] = fn
    if NCU:
        return
    print(timing.measure("probe.layernorm2", cands, baseline="copy (torch)", nbytes=8 * xl.numel()))

    n = cudalearn.size("ch2.vector_n")
    a = torch.rand(n, device="cuda")
    b2 = torch.rand(n, device="cuda")
    o = torch.empty_like(a)
    ref = a + b2
    cands = {"torch.add": lambda: torch.add(a, b2, out=o), "copy (torch)": lambda: o.copy_(a)}
    for ilp in (2, 4, 8):
        for u32 in (False, True):
            k = make_va(ilp, u32)
            for threads in (256,):
                fn = launch.prepared(k, launch.blocks(n, threads * ilp), threads, a, b2, o)
                o.fill_(float("nan"))
                fn()
                assert torch.equal(o, ref), (ilp, u32)
                cands[f"va ilp{ilp} {'u32' if u32 else 'i64'} t{threads}"] = fn
    print(timing.measure("probe.vector_add2", cands, baseline="torch.add", nbytes=12 * n))

    from cudalearn.bench.dropout_chain import PAIRED, chain_candidates
    from cudalearn.kernels import elementwise as ew

    rows, cols = cudalearn.size("ch5.chain_rows"), cudalearn.size("ch5.chain_cols")
    copies, chain, _ = chain_candidates(rows, cols)
    Z, bias, mask, s = ew.chain_inputs(rows, cols, 0.1, 0)
    dZ, db, dm = cuda.to_device(Z), cuda.to_device(bias), cuda.to_device(mask)
    dY = cuda.device_array_like(dZ)
    Z2, b2v, m2, Y2 = ew.pair_views(dZ, db, dm, dY)
    expected = ew.chain_reference(Z, bias, mask, s)
    cands = {"copy (torch)": copies["copy (torch)"], PAIRED: chain[PAIRED]}
    for P in (2, 4):
        k = make_pairs(P)
        for block in ((32, 8), (64, 4), (128, 2)):
            (gx, gy), bl = launch.grid_2d(rows, cols, block, per_thread=(2 * P, 1))
            fn = launch.prepared(k, (gx, gy), bl, Z2, b2v, m2, np.float32(s), Y2)
            fn()
            got = dY.copy_to_host()
            assert np.allclose(got, expected, rtol=1e-6, atol=1e-6), P
            cands[f"pairs{P} u32 {block}"] = fn
    dram = ew.chain_bytes(rows, cols)["dram_min"]
    res = timing.measure("probe.chain2", cands, baseline="copy (torch)", nbytes=dram)
    print(res)
    print("copy GB/s counted as 8 bytes/element:", 8 * rows * cols / (res.row("copy (torch)")["median_ms"] * 1e6))


main()
