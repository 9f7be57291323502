"""GPU probe (not part of the course): row-kernel variants, launch paths, vector add and the chain.

    CUDALEARN_MODE=gpu python3 .probe/rows_probe.py [--ncu]
"""

import math
import sys
import time

import numpy as np
from numba import cuda, float32, int32, uint32

import cudalearn
from cudalearn import launch, timing
from cudalearn.kernels import softmax
from cudalearn.kernels.reductions import warp_max, warp_sum
from cudalearn.kernels.softmax import LN_VALS, NEG_INF, SOFTMAX_VALS, warp_welford

info = cudalearn.setup()
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

NCU = "--ncu" in sys.argv


@cuda.jit
def sm_u32(x, y):
    lane = uint32(cuda.threadIdx.x)
    row = uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.y) + uint32(cuda.threadIdx.y)
    if row < uint32(x.shape[0]):
        cols = uint32(x.shape[1])
        vals = cuda.local.array(SOFTMAX_VALS, float32)
        for k in range(SOFTMAX_VALS):
            j = lane + uint32(32 * k)
            vals[k] = x[row, j] if j < cols else NEG_INF
        m = NEG_INF
        for k in range(SOFTMAX_VALS):
            m = max(m, vals[k])
        m = warp_max(m)
        d = float32(0.0)
        for k in range(SOFTMAX_VALS):
            vals[k] = math.exp(vals[k] - m)
            d += vals[k]
        inv = float32(1.0) / warp_sum(d)
        for k in range(SOFTMAX_VALS):
            j = lane + uint32(32 * k)
            if j < cols:
                y[row, j] = vals[k] * inv


@cuda.jit
def ln_twopass(x, gamma, beta, y, eps):
    lane = uint32(cuda.threadIdx.x)
    row = uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.y) + uint32(cuda.threadIdx.y)
    if row < uint32(x.shape[0]):
        cols = uint32(x.shape[1])
        vals = cuda.local.array(LN_VALS, float32)
        s = float32(0.0)
        for k in range(LN_VALS):
            j = lane + uint32(32 * k)
            vals[k] = x[row, j] if j < cols else float32(0.0)
        for k in range(LN_VALS):
            s += vals[k]
        mean = warp_sum(s) / float32(cols)
        q = float32(0.0)
        for k in range(LN_VALS):
            j = lane + uint32(32 * k)
            if j < cols:
                dv = vals[k] - mean
                q += dv * dv
        rstd = float32(1.0) / math.sqrt(warp_sum(q) / float32(cols) + eps)
        for k in range(LN_VALS):
            j = lane + uint32(32 * k)
            if j < cols:
                y[row, j] = (vals[k] - mean) * rstd * gamma[j] + beta[j]


@cuda.jit
def ln_chan(x, gamma, beta, y, eps):
    lane = uint32(cuda.threadIdx.x)
    row = uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.y) + uint32(cuda.threadIdx.y)
    if row < uint32(x.shape[0]):
        cols = uint32(x.shape[1])
        vals = cuda.local.array(LN_VALS, float32)
        s = float32(0.0)
        n = float32(0.0)
        for k in range(LN_VALS):
            j = lane + uint32(32 * k)
            vals[k] = x[row, j] if j < cols else float32(0.0)
        for k in range(LN_VALS):
            if lane + uint32(32 * k) < cols:
                s += vals[k]
                n += float32(1.0)
        mean = s / n if n > float32(0.0) else float32(0.0)
        m2 = float32(0.0)
        for k in range(LN_VALS):
            if lane + uint32(32 * k) < cols:
                dv = vals[k] - mean
                m2 += dv * dv
        n, mean, m2 = warp_welford(n, mean, m2)
        rstd = float32(1.0) / math.sqrt(m2 / n + eps)
        for k in range(LN_VALS):
            j = lane + uint32(32 * k)
            if j < cols:
                y[row, j] = (vals[k] - mean) * rstd * gamma[j] + beta[j]


@cuda.jit
def ln_i(x, gamma, beta, y, eps):
    lane = cuda.threadIdx.x
    row = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    if row < x.shape[0]:
        cols = x.shape[1]
        mine = int32((cols - lane + 31) // 32)  # columns lane, lane + 32, ... inside the row
        vals = cuda.local.array(LN_VALS, float32)
        s = float32(0.0)
        for k in range(LN_VALS):
            vals[k] = x[row, lane + 32 * k] if k < mine else float32(0.0)
            s += vals[k]
        mean = warp_sum(s) / float32(cols)
        q = float32(0.0)
        for k in range(LN_VALS):
            dv = vals[k] - mean if k < mine else float32(0.0)
            q += dv * dv
        rstd = float32(1.0) / math.sqrt(warp_sum(q) / float32(cols) + eps)
        for k in range(LN_VALS):
            if k < mine:
                j = lane + 32 * k
                y[row, j] = (vals[k] - mean) * rstd * gamma[j] + beta[j]
@cuda.jit
def ln_j(x, gamma, beta, y, eps):
    lane = uint32(cuda.threadIdx.x)
    row = uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.y) + uint32(cuda.threadIdx.y)
    if row < uint32(x.shape[0]):
        cols = uint32(x.shape[1])
        mine = (cols + uint32(31) - lane) // uint32(32)
        vals = cuda.local.array(LN_VALS, float32)
        s = float32(0.0)
        for k in range(LN_VALS):
            vals[k] = x[row, lane + uint32(32 * k)] if uint32(k) < mine else float32(0.0)
            s += vals[k]
        mean = warp_sum(s) / float32(cols)
        q = float32(0.0)
        for k in range(LN_VALS):
            dv = vals[k] - mean if uint32(k) < mine else float32(0.0)
            q += dv * dv
        rstd = float32(1.0) / math.sqrt(warp_sum(q) / float32(cols) + eps)
        for k in range(LN_VALS):
            if uint32(k) < mine:
                j = lane + uint32(32 * k)
                y[row, j] = (vals[k] - mean) * rstd * gamma[j] + beta[j]
@cuda.jit
def sm_j(x, y):
    lane = uint32(cuda.threadIdx.x)
    row = uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.y) + uint32(cuda.threadIdx.y)
    if row < uint32(x.shape[0]):
        cols = uint32(x.shape[1])
        mine = (cols + uint32(31) - lane) // uint32(32)
        vals = cuda.local.array(SOFTMAX_VALS, float32)
        for k in range(SOFTMAX_VALS):
            vals[k] = x[row, lane + uint32(32 * k)] if uint32(k) < mine else NEG_INF
        m = NEG_INF
        for k in range(SOFTMAX_VALS):
            m = max(m, vals[k])
        m = warp_max(m)
        d = float32(0.0)
        for k in range(SOFTMAX_VALS):
            vals[k] = math.exp(vals[k] - m)
            d += vals[k]
        inv = float32(1.0) / warp_sum(d)
        for k in range(SOFTMAX_VALS):
            if uint32(k) < mine:
                y[row, lane + uint32(32 * k)] = vals[k] * inv


@cuda.jit
def ln_full(x, gamma, beta, y, eps):
    # rows of exactly 32 * LN_VALS columns only: no guards (an upper bound, not a candidate)
    lane = uint32(cuda.threadIdx.x)
    row = uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.y) + uint32(cuda.threadIdx.y)
    if row < uint32(x.shape[0]):
        cols = uint32(x.shape[1])
        vals = cuda.local.array(LN_VALS, float32)
        s = float32(0.0)
        for k in range(LN_VALS):
            vals[k] = x[row, lane + uint32(32 * k)]
            s += vals[k]
        mean = warp_sum(s) / float32(cols)
        q = float32(0.0)
        for k in range(LN_VALS):
            dv = vals[k] - mean
            q += dv * dv
        rstd = float32(1.0) / math.sqrt(warp_sum(q) / float32(cols) + eps)
        for k in range(LN_VALS):
            j = lane + uint32(32 * k)
            y[row, j] = (vals[k] - mean) * rstd * gamma[j] + beta[j]


@cuda.jit
def ln_jc(x, gamma, beta, y, eps):
    # lane's own (n, mean, M2) by two passes over its registers, lanes merged by Chan (warp_welford)
    lane = uint32(cuda.threadIdx.x)
    row = uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.y) + uint32(cuda.threadIdx.y)
    if row < uint32(x.shape[0]):
        cols = uint32(x.shape[1])
        mine = (cols + uint32(31) - lane) // uint32(32)
        vals = cuda.local.array(LN_VALS, float32)
        s = float32(0.0)
        for k in range(LN_VALS):
            vals[k] = x[row, lane + uint32(32 * k)] if uint32(k) < mine else float32(0.0)
            s += vals[k]
        n = float32(min(mine, uint32(LN_VALS)))
        mean = s / n if n > float32(0.0) else float32(0.0)
        m2 = float32(0.0)
        for k in range(LN_VALS):
            dv = vals[k] - mean if uint32(k) < mine else float32(0.0)
            m2 += dv * dv
        n, mean, m2 = warp_welford(n, mean, m2)
        rstd = float32(1.0) / math.sqrt(m2 / n + eps)
        for k in range(LN_VALS):
            if uint32(k) < mine:
                j = lane + uint32(32 * k)
                y[row, j] = (vals[k] - mean) * rstd * gamma[j] + beta[j]


def host_us(fn, n=300):
    fn()
    cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    cuda.synchronize()
    return (t1 - t0) / n * 1e6


def rows_launch(rows, wpb):
    return launch.blocks(rows, wpb), (32, wpb)


def main():
    sm_r, sm_c = cudalearn.size("ch10.softmax_rows"), cudalearn.size("ch10.softmax_cols")
    ln_r, ln_c = cudalearn.size("ch10.ln_rows"), cudalearn.size("ch10.ln_cols")
    rng = np.random.default_rng(0)
    x = (4 * rng.standard_normal((sm_r, sm_c))).astype(np.float32)
    tx = torch.from_numpy(x).cuda()
    ty = torch.empty_like(tx)
    dx, dy = cuda.as_cuda_array(tx), cuda.as_cuda_array(ty)
    ref = torch.softmax(tx, 1)
    cands = {"copy (torch)": lambda: ty.copy_(tx), "torch.softmax": lambda: torch.softmax(tx, 1)}
    kernels = {
        "softmax_registers plain": (softmax.softmax_registers, 4, False),
        "softmax_registers prepared": (softmax.softmax_registers, 4, True),
        "sm_u32 w4 prepared": (sm_u32, 4, True),
        "sm_u32 w8 prepared": (sm_u32, 8, True),
        "sm_u32 w2 prepared": (sm_u32, 2, True),
        "sm_j w4 prepared": (sm_j, 4, True),
        "sm_j w8 prepared": (sm_j, 8, True),
    }
    for name, (k, wpb, prep) in kernels.items():
        g, b = rows_launch(sm_r, wpb)
        fn = launch.prepared(k, g, b, dx, dy) if prep else (lambda k=k, g=g, b=b: k[g, b](dx, dy))
        ty.fill_(float("nan"))
        fn()
        err = (ty - ref).abs().max().item()
        print(f"{name}: max err vs torch {err:.2e}; host {0 if NCU else host_us(fn):.1f} us/call")
        cands[name] = fn
    if not NCU:
        print(timing.measure("probe.softmax", cands, baseline="copy (torch)", nbytes=8 * x.size))

    xl = torch.randn(ln_r, ln_c, device="cuda")
    yl = torch.empty_like(xl)
    g = 1 + 0.1 * torch.randn(ln_c, device="cuda")
    bb = 0.1 * torch.randn(ln_c, device="cuda")
    refl = F.layer_norm(xl, (ln_c,), g, bb, 1e-5)
    dxl, dyl, dg, db = (cuda.as_cuda_array(t) for t in (xl, yl, g, bb))
    cands = {
        "copy (torch)": lambda: yl.copy_(xl),
        "F.layer_norm": lambda: F.layer_norm(xl, (ln_c,), g, bb, 1e-5),
    }
    kernels = {
        "layernorm plain": (softmax.layernorm, 4, False),
        "layernorm prepared": (softmax.layernorm, 4, True),
        "ln_twopass w4 prepared": (ln_twopass, 4, True),
        "ln_twopass w8 prepared": (ln_twopass, 8, True),
        "ln_twopass w2 prepared": (ln_twopass, 2, True),
        "ln_chan w4 prepared": (ln_chan, 4, True),
        "ln_j w4 prepared": (ln_j, 4, True),
        "ln_j w8 prepared": (ln_j, 8, True),
        "ln_jc w4 prepared": (ln_jc, 4, True),
        "ln_i w4 prepared": (ln_i, 4, True),
        "ln_full w4 prepared (768 only)": (ln_full, 4, True),
    }
    eps = np.float32(1e-5)
    for name, (k, wpb, prep) in kernels.items():
        gr, bl = rows_launch(ln_r, wpb)
        fn = (
            launch.prepared(k, gr, bl, dxl, dg, db, dyl, eps)
            if prep
            else (lambda k=k, gr=gr, bl=bl: k[gr, bl](dxl, dg, db, dyl, eps))
        )
        yl.fill_(float("nan"))
        fn()
        err = (yl - refl).abs().max().item()
        print(f"{name}: max err vs torch {err:.2e}; host {0 if NCU else host_us(fn):.1f} us/call")
        cands[name] = fn
    if not NCU:
        print(timing.measure("probe.layernorm", cands, baseline="copy (torch)", nbytes=8 * xl.numel()))

    if NCU:
        return
    # vector add, ch2 size
    from cudalearn.kernels.basics import vector_add

    n = cudalearn.size("ch2.vector_n")
    a = torch.rand(n, device="cuda")
    b2 = torch.rand(n, device="cuda")
    o = torch.empty_like(a)
    da, db2, do = (cuda.as_cuda_array(t) for t in (a, b2, o))
    grid = launch.blocks(n, 256)
    va_plain = lambda: vector_add[grid, 256](da, db2, do)  # noqa: E731
    va_prep = launch.prepared(vector_add, grid, 256, da, db2, do)
    print(f"vector_add host plain {host_us(va_plain):.1f} us, prepared {host_us(va_prep):.1f} us")
    print(
        timing.measure(
            "probe.vector_add",
            {
                "torch.add": lambda: torch.add(a, b2, out=o),
                "vector_add plain": va_plain,
                "vector_add prepared": va_prep,
                "copy (torch)": lambda: o.copy_(a),
            },
            baseline="torch.add",
            nbytes=12 * n,
        )
    )
    # chain
    from cudalearn.bench.dropout_chain import chain_candidates

    rows, cols = cudalearn.size("ch5.chain_rows"), cudalearn.size("ch5.chain_cols")
    from cudalearn.kernels import elementwise as ew

    copies, chain, _ = chain_candidates(rows, cols)
    print(timing.measure("probe.copy", copies, nbytes=8 * rows * cols))
    print(timing.measure("probe.chain", chain, nbytes=ew.chain_bytes(rows, cols)["dram_min"]))


main()
