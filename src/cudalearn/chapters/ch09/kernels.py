"""The patchify kernels of Chapter 9: an image batch cut into p x p patches, one token per patch.

A Vision Transformer's first step reads an image batch `(B, C, H, W)` and
writes a token sequence `(B, N, C*p*p)`: patch `n = i * (W // p) + j`
(row-major over the grid of patches) becomes a vector whose elements are
ordered (channel, row in the patch, column in the patch), the order of
`torch.nn.functional.unfold` and of a `Conv2d` weight `(D, C, p, p)`.

`patchify` is the simple kernel lab 9 has students write (one thread per
output number, p an argument); `patchify_fast(C, p)` makes the same copy
with C and p compile-time constants, one kernel per pair.
"""

import functools

from cudalearn.runtime.launch import blocks
from cudalearn.runtime.numba_backend import cuda, float32

SIGNATURES = {
    "patchify": "void(float32[:, :, :, ::1], float32[:, :, ::1], int32)",
}
# patchify_fast's kernels are made per (C, p) by a factory, none listed here: tests/chapters/ch09/test_vit.py
# compiles them for sm_75 and sm_90, signature "void(float32[:, :, :, ::1], float32[:, :, ::1])".


@cuda.jit
def patchify(img, out, p):
    """out[b, n, e] = img[b, c, i*p + r, j*p + s]; one thread per output element (Chapter 9).

    img (B, C, H, W) float32 with H and W multiples of p; out (B, N, C*p*p)
    float32 with N = (H // p) * (W // p). A 3-D launch: x runs along the
    patch vector e = (c, r, s), y over the patches n = (i, j), z over the
    images b. Neighbouring threads write neighbouring elements of `out`
    (coalesced) and read runs of p neighbouring pixels of one image row.
    """
    e, n, b = cuda.grid(3)
    if b < out.shape[0] and n < out.shape[1] and e < out.shape[2]:
        per_row = img.shape[3] // p  # patches along the width
        i = n // per_row  # patch row
        j = n - i * per_row  # patch column
        c = e // (p * p)  # channel
        rs = e - c * (p * p)
        r = rs // p  # row inside the patch
        s = rs - r * p  # column inside the patch
        out[b, n, e] = img[b, c, i * p + r, j * p + s]


def patchify_launch(shape, p: int, threads: int = 128):
    """(griddim, blockdim) covering the output (B, N, C*p*p) of `patchify` for an input shape (Chapter 9)."""
    b, c, h, w = shape
    if h % p or w % p:
        raise ValueError(f"image size {h}x{w} is not a multiple of the patch size {p}")
    n, e = (h // p) * (w // p), c * p * p
    threads = min(threads, 32 * blocks(e, 32))  # no more threads in x than a warp-rounded patch vector
    return (blocks(e, threads), n, b), (threads, 1, 1)


#: patches each thread of `patchify_fast` copies: with C channels, 2 * C loads in flight per thread
PATCHES_PER_THREAD = 2


@functools.cache
def patchify_fast(channels: int, p: int):
    """Patchify compiled for C = `channels` and p: (B, C, H, W) -> (B, N, C*p*p) (Chapter 9).

    The same float32 copy as `patchify` without its per-element arithmetic. C and
    p are compile-time constants of the kernel (one compilation per pair,
    cached), so `// P` is a shift or a multiply and the loops over
    channels unroll. Each thread owns one pixel (r, s) of a patch and
    copies it, for every channel, in PATCHES_PER_THREAD patches of one
    patch row: no division per element, and all its loads are issued
    before its stores. C is an image's channel count, small: the 2 * C
    values a thread holds stay in registers. Launch with
    `patchify_fast_launch`.
    """
    C, P, K = channels, p, PATCHES_PER_THREAD
    KC = K * C  # values a thread holds: a constant, so the local array lives in registers

    @cuda.jit
    def patchify_fast_kernel(img, out):
        s, r = cuda.threadIdx.x, cuda.threadIdx.y  # the pixel (r, s) inside the patch
        g = cuda.blockDim.z  # patches of a block side by side; a thread's K patches are g apart
        j0 = cuda.blockIdx.x * K * g + cuda.threadIdx.z  # the thread's first patch column
        i, b = cuda.blockIdx.y, cuda.blockIdx.z  # patch row, image
        per_row = img.shape[3] // P  # constant P: a shift or a multiply, once per thread
        v = cuda.local.array(KC, float32)
        for k in range(K):  # every load first: K * C requests in flight per thread
            j = j0 + k * g
            if j < per_row:
                for c in range(C):
                    v[k * C + c] = img[b, c, i * P + r, j * P + s]
        for k in range(K):
            j = j0 + k * g
            if j < per_row:
                for c in range(C):
                    out[b, i * per_row + j, c * P * P + r * P + s] = v[k * C + c]

    return patchify_fast_kernel


def patchify_fast_launch(shape, p: int, threads: int = 256):
    """(griddim, blockdim) of `patchify_fast(C, p)` on an input (B, C, H, W): blocks (p, p, g) (Chapter 9).

    A block holds g = threads // p**2 patches side by side (at least 1, at
    most 64, the limit of blockDim.z), so small patches still fill it, and
    covers PATCHES_PER_THREAD * g patch columns; the grid is (those groups,
    patch rows, images). p is at most 32: one thread per pixel of a patch.
    """
    b, c, h, w = shape
    if h % p or w % p:
        raise ValueError(f"image size {h}x{w} is not a multiple of the patch size {p}")
    if p * p > 1024:
        raise ValueError(f"patchify_fast runs one thread per pixel of a patch: p*p = {p * p} > 1024 threads")
    g = min(64, max(1, threads // (p * p)))
    return (blocks(w // p, PATCHES_PER_THREAD * g), h // p, b), (p, p, g)
