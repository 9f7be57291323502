"""GPU probe 3 (not part of the course): FP32 GEMM tilings and LayerNorm with 8-byte accesses.

    CUDALEARN_MODE=gpu python3 .probe/probe3.py [gemm] [ln]

GEMM at N = 4096: Chapter 6's regblock_2d_prefetch at other tile sizes and register caps, and a
warp-tiled variant (each warp owns a WM x WN sub-tile of the block tile; its lanes LY x LX), every
candidate checked against cuBLAS FP32 before one `timing.measure` call with cuBLAS FP32 and Triton
FP32 in it. LayerNorm at Chapter 10's GPU shape (12,608 x 768): the package's two kernels, and
variants that read and write two float32 columns per access (the array viewed as float64), one
warp or one block a row, each checked against F.layer_norm, timed with a copy in the same call.
Under the simulator: small sizes, correctness only.
"""

import math
import sys

import numpy as np

import cudalearn

info = cudalearn.setup()
from numba import cuda, float32, float64, uint32  # noqa: E402

from cudalearn import launch, timing  # noqa: E402
from cudalearn.kernels import regblock, softmax  # noqa: E402
from cudalearn.kernels.elementwise import _pack_pair, _unpack_pair  # noqa: E402
from cudalearn.kernels.reductions import warp_sum  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

GPU = cudalearn.mode() == "gpu"
WHAT = [a for a in sys.argv[1:] if not a.startswith("-")] or ["gemm", "ln"]


def gemm():
    n = 4096 if GPU else 64
    P = regblock.make_regblock_2d_prefetch
    if GPU:
        variants = {
            "P 128x128x8 8x8 r128 (book)": ("p", dict(BM=128, BN=128, BK=8, TM=8, TN=8)),
            "P 128x128x16 8x8 r128": ("p", dict(BM=128, BN=128, BK=16, TM=8, TN=8)),
            "P 128x256x8 8x16 r255": ("p", dict(BM=128, BN=256, BK=8, TM=8, TN=16, regs=255)),
            "P 256x128x8 16x8 r255": ("p", dict(BM=256, BN=128, BK=8, TM=16, TN=8, regs=255)),
            "P 128x128x8 8x16 r255": ("p", dict(BM=128, BN=128, BK=8, TM=8, TN=16, regs=255)),
            "P 128x128x16 8x16 r255": ("p", dict(BM=128, BN=128, BK=16, TM=8, TN=16, regs=255)),
            "W 128x128x8 w32x64 8x8 r128": ("w", (128, 128, 8, 32, 64, 8, 8, 128)),
            "W 128x128x16 w64x32 8x8 r128": ("w", (128, 128, 16, 64, 32, 8, 8, 128)),
            "W 128x256x8 w64x64 8x16 r255": ("w", (128, 256, 8, 64, 64, 8, 16, 255)),
            "W 128x128x8 w64x64 8x16 r255": ("w", (128, 128, 8, 64, 64, 8, 16, 255)),
            "W 128x128x16 w64x64 8x16 r255": ("w", (128, 128, 16, 64, 64, 8, 16, 255)),
            "W 128x128x8 w64x64 16x8 r255": ("w", (128, 128, 8, 64, 64, 16, 8, 255)),
        }
    else:
        variants = {
            "P sim": ("p", dict(BM=16, BN=16, BK=4, TM=4, TN=4)),
            "W sim": ("w", (16, 32, 4, 16, 32, 4, 4, 128)),
        }
    rng = np.random.default_rng(0)
    A = rng.standard_normal((n, n), dtype=np.float32)
    B = rng.standard_normal((n, n), dtype=np.float32)
    dev = cudalearn.torch_device()
    tA, tB = torch.from_numpy(A).to(dev), torch.from_numpy(B).to(dev)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    expected = (tA.double() @ tB.double()).float().cpu().numpy()
    tC = torch.empty((n, n), dtype=torch.float32, device=dev)
    dA, dB = cuda.as_cuda_array(tA) if GPU else A, cuda.as_cuda_array(tB) if GPU else B
    fns = {}
    for name, (kind, cfg) in variants.items():
        try:
            if kind == "p":
                kern = P(**cfg)
                threads = regblock.threads_per_block("regblock_2d_prefetch", cfg)
                grid = (launch.blocks(n, cfg["BN"]), launch.blocks(n, cfg["BM"]))
            else:
                BM, BN, BK, WM, WN, TM, TN, regs = cfg
                kern = regblock.make_regblock_2d_warptile(BM, BN, BK, TM, TN, WM, WN, regs=regs)
                threads = (BM // TM) * (BN // TN)
                grid = (launch.blocks(n, BN), launch.blocks(n, BM))
            out = torch.full((n, n), float("nan"), device=dev)
            dC = cuda.as_cuda_array(out) if GPU else np.full((n, n), np.nan, np.float32)
            fn = launch.prepared(kern, grid, threads, dA, dB, dC) if GPU else (
                lambda k=kern, g=grid, t=threads, c=dC: k[g, t](A, B, c)
            )
            fn()
            got = out.cpu().numpy() if GPU else dC
            err = float(np.max(np.abs(got - expected)))
            ok = err < 1e-3 * math.sqrt(n) * 4
            if GPU:
                res = kern.get_regs_per_thread() if hasattr(kern, "get_regs_per_thread") else "?"
                spill = kern.get_local_mem_per_thread() if hasattr(kern, "get_local_mem_per_thread") else "?"
            else:
                res = spill = "-"
            print(f"{name:34s} max err {err:.2e} {'ok' if ok else 'WRONG'} regs {res} local {spill}", flush=True)
            if ok:
                fns[name] = fn
        except Exception as e:  # noqa: BLE001
            print(f"{name:34s} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
    if not GPU:
        return
    fns["cuBLAS FP32"] = lambda: torch.matmul(tA, tB, out=tC)
    try:
        from cudalearn import triton_kernels

        fns["Triton FP32"] = lambda: triton_kernels.matmul(tA, tB, precision="ieee", out=tC)
        fns["Triton FP32"]()
    except Exception as e:  # noqa: BLE001
        print("Triton:", e)
    for rep in range(2):
        print(timing.measure(f"probe.gemm{rep}", fns, baseline="cuBLAS FP32", flops=2 * n**3), flush=True)


LN_ROWS, LN_COLS = (12608, 768) if GPU else (37, 96)


def make_ln_pairs(P):
    """One warp a row; lane l holds pairs l, l + 32, ... (P of them) of the row viewed as float64."""

    @cuda.jit
    def ln_pairs(x2, g2, b2, y2, eps):
        lane = uint32(cuda.threadIdx.x)
        row = uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.y) + uint32(cuda.threadIdx.y)
        if row < uint32(x2.shape[0]):
            pairs = uint32(x2.shape[1])
            lo = cuda.local.array(P, float32)
            hi = cuda.local.array(P, float32)
            words = cuda.local.array(P, float64)
            for k in range(P):
                j = lane + uint32(32 * k)
                words[k] = x2[row, j] if j < pairs else float64(0.0)
            s = float32(0.0)
            for k in range(P):
                lo[k], hi[k] = _unpack_pair(words[k])
                s += lo[k] + hi[k]
            cols = float32(2) * float32(pairs)
            mean = warp_sum(s) / cols
            q = float32(0.0)
            for k in range(P):
                if lane + uint32(32 * k) < pairs:
                    d0 = lo[k] - mean
                    d1 = hi[k] - mean
                    q += d0 * d0 + d1 * d1
            rstd = float32(1.0) / math.sqrt(warp_sum(q) / cols + eps)
            for k in range(P):
                j = lane + uint32(32 * k)
                if j < pairs:
                    g0, g1 = _unpack_pair(g2[j])
                    c0, c1 = _unpack_pair(b2[j])
                    y2[row, j] = _pack_pair((lo[k] - mean) * rstd * g0 + c0, (hi[k] - mean) * rstd * g1 + c1)

    return ln_pairs


def make_ln_block_pairs(T, P):
    """One block of T threads a row; thread t holds pairs t, t + T, ... (P of them)."""
    NW = T // 32

    @cuda.jit
    def ln_block_pairs(x2, g2, b2, y2, eps):
        scratch = cuda.shared.array(2 * NW, float32)
        t = uint32(cuda.threadIdx.x)
        row = uint32(cuda.blockIdx.x)
        pairs = uint32(x2.shape[1])
        lo = cuda.local.array(P, float32)
        hi = cuda.local.array(P, float32)
        words = cuda.local.array(P, float64)
        for k in range(P):
            j = t + uint32(T * k)
            words[k] = x2[row, j] if j < pairs else float64(0.0)
        s = float32(0.0)
        for k in range(P):
            lo[k], hi[k] = _unpack_pair(words[k])
            s += lo[k] + hi[k]
        s = warp_sum(s)
        if t % uint32(32) == 0:
            scratch[t // uint32(32)] = s
        cuda.syncthreads()
        total = float32(0.0)
        for i in range(NW):
            total += scratch[i]
        cols = float32(2) * float32(pairs)
        mean = total / cols
        q = float32(0.0)
        for k in range(P):
            if t + uint32(T * k) < pairs:
                d0 = lo[k] - mean
                d1 = hi[k] - mean
                q += d0 * d0 + d1 * d1
        q = warp_sum(q)
        if t % uint32(32) == 0:
            scratch[NW + t // uint32(32)] = q
        cuda.syncthreads()
        qt = float32(0.0)
        for i in range(NW):
            qt += scratch[NW + i]
        rstd = float32(1.0) / math.sqrt(qt / cols + eps)
        for k in range(P):
            j = t + uint32(T * k)
            if j < pairs:
                g0, g1 = _unpack_pair(g2[j])
                c0, c1 = _unpack_pair(b2[j])
                y2[row, j] = _pack_pair((lo[k] - mean) * rstd * g0 + c0, (hi[k] - mean) * rstd * g1 + c1)

    return ln_block_pairs


def ln():
    rows, cols = LN_ROWS, LN_COLS
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((rows, cols)) * 3 + 1).astype(np.float32)
    g = rng.standard_normal(cols).astype(np.float32)
    b = rng.standard_normal(cols).astype(np.float32)
    eps = 1e-5
    dev = cudalearn.torch_device()
    tx, tg, tb = (torch.from_numpy(a).to(dev) for a in (x, g, b))
    expected = F.layer_norm(tx, (cols,), tg, tb, eps).cpu().numpy()
    ty = torch.empty_like(tx)
    tcopy = torch.empty_like(tx)

    def arr(t):
        return cuda.as_cuda_array(t) if GPU else t.numpy()

    def arr2(t):  # the float64 view: two float32 columns a word
        return cuda.as_cuda_array(t.view(torch.float64)) if GPU else t.numpy().view(np.float64)

    fns = {}
    cands = {
        "layernorm (package)": (softmax.layernorm, False, None),
        "layernorm_block (package)": (softmax.layernorm_block, False, None),
        "ln_pairs warp P12 x4 rows": (make_ln_pairs(12), True, ("warp", 4)),
        "ln_pairs warp P12 x8 rows": (make_ln_pairs(12), True, ("warp", 8)),
        "ln_pairs warp P12 x2 rows": (make_ln_pairs(12), True, ("warp", 2)),
        "ln_block_pairs T96 P4": (make_ln_block_pairs(96, 4), True, ("block", 96)),
        "ln_block_pairs T192 P2": (make_ln_block_pairs(192, 2), True, ("block", 192)),
        "ln_block_pairs T128 P3": (make_ln_block_pairs(128, 3), True, ("block", 128)),
        "ln_block_pairs T384 P1": (make_ln_block_pairs(384, 1), True, ("block", 384)),
    }
    for name, (kern, paired, how) in cands.items():
        try:
            ty.fill_(float("nan"))
            if not paired:
                fn = (softmax.prepare_rows if GPU else softmax.launch_rows)
                if GPU:
                    call = softmax.prepare_rows(kern, arr(tx), arr(ty), arr(tg), arr(tb), eps)
                else:
                    yy = ty.numpy()

                    def call(k=kern, yy=yy):
                        softmax.launch_rows(k, x, yy, g, b, eps)
            else:
                kind, size = how
                if kind == "warp":
                    grid, block = launch.blocks(rows, size), (32, size)
                else:
                    grid, block = rows, size
                args = (arr2(tx), arr2(tg), arr2(tb), arr2(ty), np.float32(eps))
                call = launch.prepared(kern, grid, block, *args)
            call()
            if GPU:
                cuda.synchronize()
            got = ty.cpu().numpy()
            err = float(np.max(np.abs(got - expected)))
            ok = err < 1e-4 * 50
            regs = kern.get_regs_per_thread() if GPU and hasattr(kern, "get_regs_per_thread") else "-"
            print(f"{name:30s} max err {err:.2e} {'ok' if ok else 'WRONG'} regs {regs}", flush=True)
            if ok:
                fns[name] = call
        except Exception as e:  # noqa: BLE001
            print(f"{name:30s} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
    if not GPU:
        return
    fns["F.layer_norm"] = lambda: F.layer_norm(tx, (cols,), tg, tb, eps, out=None)
    fns["copy"] = lambda: tcopy.copy_(tx)
    nbytes = 2 * rows * cols * 4
    for rep in range(2):
        print(timing.measure(f"probe.ln{rep}", fns, baseline="copy", nbytes=nbytes), flush=True)


if "gemm" in WHAT:
    gemm()
if "ln" in WHAT:
    ln()
