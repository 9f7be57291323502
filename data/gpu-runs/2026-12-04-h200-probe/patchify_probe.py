"""GPU probe for issue 17: chapter 9's patchify kernels against the copy bandwidth (run on an H200).

    CUDALEARN_MODE=gpu python3 .probe/patchify_probe.py      (PYTHONPATH=src if cudalearn is not installed)

Builds the chapter's GPU input (ch9.bench_batch x 3 x ch9.bench_image^2, float32), checks every
candidate against torch's reshape + permute (exact equality), then times each with
cudalearn.timing.gpu_time and prints GB/s (one read and one write of every pixel) and the share of a
torch copy of the same bytes, for p = ch9.bench_patch (16), 8, 4, 2 and a 1-channel batch at p = 16.
Candidates: the torch copy, reshape + permute, the simple kernel (plain launch as the book times it,
and through launch.prepared), patchify_fast (plain launch, and prepared as the book times it, with
128/256/512 threads a block), two variants defined here only (1 and 4 patches a thread instead of
PATCHES_PER_THREAD = 2) and a plain Numba copy (1 and 4 elements a thread) as a ceiling for scalar
Numba code. Under the simulator (CUDALEARN_MODE=sim) it runs the checks on the simulator's sizes,
untimed. About 10 s on an H200 (compiles included).

Seen on an H200 (issue 17's session, p = 16, copy = 100%): torch copy 3,674 GB/s; reshape + permute
55%; simple kernel 19%; patchify_fast prepared 96% (plain launch 52-68%: host-bound); 1 patch a
thread 87%, 4 patches 94%; Numba copy 1/thread 66%, 4/thread 95%.
"""

import functools
import sys
import time

import cudalearn

info = cudalearn.setup()

import numpy as np  # noqa: E402
import torch  # noqa: E402
from numba import cuda, float32  # noqa: E402

from cudalearn import launch, timing  # noqa: E402
from cudalearn.kernels import patchify as pk  # noqa: E402
from cudalearn.nn import vit  # noqa: E402

ON_GPU = cudalearn.mode() == "gpu"
T0 = time.perf_counter()


# ---- variants defined here only ------------------------------------------------------------------
@functools.cache
def fast_k_tokens(channels: int, p: int, k: int):
    """pk.patchify_fast with k (not PATCHES_PER_THREAD) patches a thread: k * C loads in flight."""
    C, P, K = channels, p, k
    CK = C * K

    @cuda.jit
    def kernel(img, out):
        s, r, g = cuda.threadIdx.x, cuda.threadIdx.y, cuda.threadIdx.z
        G = cuda.blockDim.z
        j0 = cuda.blockIdx.x * G * K + g
        i, b = cuda.blockIdx.y, cuda.blockIdx.z
        per_row = img.shape[3] // P
        e = r * P + s
        v = cuda.local.array(CK, float32)
        for k in range(K):
            j = j0 + k * G
            if j < per_row:
                for c in range(C):
                    v[k * C + c] = img[b, c, i * P + r, j * P + s]
        for k in range(K):
            j = j0 + k * G
            if j < per_row:
                for c in range(C):
                    out[b, i * per_row + j, c * P * P + e] = v[k * C + c]

    return kernel


def fast_k_launch(shape, p, k, threads=256):
    b, c, h, w = shape
    g = min(64, max(1, threads // (p * p)))
    return (launch.blocks(w // p, g * k), h // p, b), (p, p, g)


@functools.cache
def numba_copy(k: int):
    """A plain Numba copy of a flat float32 array, k elements a thread (stride = all threads): the ceiling."""
    K = k

    @cuda.jit
    def kernel(src, dst):
        t = cuda.grid(1)
        stride = cuda.gridsize(1)
        v = cuda.local.array(K, float32)
        for q in range(K):
            idx = t + q * stride
            if idx < src.shape[0]:
                v[q] = src[idx]
        for q in range(K):
            idx = t + q * stride
            if idx < src.shape[0]:
                dst[idx] = v[q]

    return kernel


# ---- the candidates ------------------------------------------------------------------------------
def arrays(*ts):
    """Tensors as a Numba launch takes them: CUDA tensors through the array interface, CPU ones as NumPy."""
    return tuple(cuda.as_cuda_array(t) if t.is_cuda else t.numpy() for t in ts)


def candidates(x, p):
    """name -> (launch callable, output tensor to check, or None)."""
    b, c, h, w = x.shape
    shape_out = (b, vit.num_patches(h, w, p), c * p * p)
    cands = {}
    dst = torch.empty_like(x)
    cands["torch copy (same bytes)"] = (lambda: dst.copy_(x), None)
    holder = {}

    def reshape():
        holder["r"] = vit.patchify_reshape(x, p)

    cands[f"torch reshape+permute, p={p}"] = (reshape, holder)
    go, out = vit.patchify_numba_launch(x, p)
    cands[f"simple kernel, p={p}"] = (go, out)
    out_sp = torch.empty(shape_out, device=x.device)
    g, bl = pk.patchify_launch(x.shape, p, 128)
    cands[f"simple kernel prepared, p={p}"] = (
        launch.prepared(pk.patchify, g, bl, *arrays(x, out_sp), np.int32(p)),
        out_sp,
    )
    kern = pk.patchify_fast(c, p)
    g, bl = pk.patchify_fast_launch(x.shape, p)
    out_f = torch.empty(shape_out, device=x.device)
    args_f = arrays(x, out_f)
    cands[f"patchify_fast, p={p}"] = (lambda: kern[g, bl](*args_f), out_f)
    out_fp = torch.empty(shape_out, device=x.device)
    cands[f"patchify_fast prepared, p={p}"] = (launch.prepared(kern, g, bl, *arrays(x, out_fp)), out_fp)
    for threads in (128, 512):
        if p * p <= threads and threads // (p * p) <= 64:
            g2, bl2 = pk.patchify_fast_launch(x.shape, p, threads)
            o = torch.empty(shape_out, device=x.device)
            cands[f"patchify_fast prepared {threads} thr, p={p}"] = (
                launch.prepared(kern, g2, bl2, *arrays(x, o)),
                o,
            )
    for k in (1, 4):  # the package kernel copies pk.PATCHES_PER_THREAD patches a thread
        kk = fast_k_tokens(c, p, k)
        g3, bl3 = fast_k_launch(x.shape, p, k)
        o = torch.empty(shape_out, device=x.device)
        cands[f"variant {k} patches/thread prepared, p={p}"] = (
            launch.prepared(kk, g3, bl3, *arrays(x, o)),
            o,
        )
    flat_in, flat_out = x.reshape(-1), torch.empty(x.numel(), device=x.device)
    for k in (1, 4):
        kc = numba_copy(k)
        threads = 256
        grid = launch.blocks(x.numel(), threads * k)
        cands[f"Numba scalar copy, {k}/thread prepared"] = (
            launch.prepared(kc, grid, threads, *arrays(flat_in, flat_out)),
            None,
        )
    return cands


def check(name, fn, out, expected):
    fn()
    if ON_GPU:
        torch.cuda.synchronize()
    if isinstance(out, dict):
        out = out["r"]
    if out is not None:
        if not torch.equal(out.cpu(), expected):
            bad = (out.cpu() != expected).nonzero()[:3].tolist()
            sys.exit(f"WRONG: {name} differs from reshape+permute at {bad}")


def main():
    bb, bi = cudalearn.size("ch9.bench_batch"), cudalearn.size("ch9.bench_image")
    bp = cudalearn.size("ch9.bench_patch")
    dev = cudalearn.torch_device()
    torch.manual_seed(0)
    x = torch.rand(bb, 3, bi, bi, device=dev)
    print(f"input {tuple(x.shape)} float32, {2 * 4 * x.numel() / 1e6:.1f} MB moved per call")
    # the chapter's patch first; smaller ones for the record; a 1-channel image for C != 3
    cases = [(x, q) for q in dict.fromkeys((bp, 8, 4, 2))]
    if ON_GPU:
        cases.append((torch.rand(bb, 1, bi, bi, device=dev), bp))
    for xx, p in cases:
        if xx.shape[2] % p:
            continue
        expected = vit.patchify_reshape(xx, p).cpu()
        cands = candidates(xx, p)
        for name, (fn, out) in cands.items():
            check(name, fn, out, expected)
        print(
            f"\n--- {tuple(xx.shape)}, p = {p}: all {len(cands)} candidates checked against reshape+permute"
        )
        if not ON_GPU:
            continue
        rates = {}
        for name, (fn, _) in cands.items():
            t = timing.gpu_time(fn, repeat=15)
            rates[name] = (t.median_ms, 2 * 4 * xx.numel() / (t.median_ms * 1e-3) / 1e9)
        copy = rates["torch copy (same bytes)"][1]
        for name, (ms, gbps) in rates.items():
            print(f"{name:44s} {ms * 1e3:9.2f} us {gbps:8.0f} GB/s {gbps / copy:7.1%} of the copy")
    print(f"\nprobe took {time.perf_counter() - T0:.1f} s")


main()
