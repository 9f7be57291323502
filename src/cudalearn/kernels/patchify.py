"""The patchify kernel of Chapter 9: an image batch cut into p x p patches, one token per patch.

A Vision Transformer's first step reads an image batch `(B, C, H, W)` and
writes a token sequence `(B, N, C*p*p)`: patch `n = i * (W // p) + j`
(row-major over the grid of patches) becomes a vector whose elements are
ordered (channel, row in the patch, column in the patch), the order of
`torch.nn.functional.unfold` and of a `Conv2d` weight `(D, C, p, p)`.
"""

from numba import cuda

from cudalearn.launch import blocks

SIGNATURES = {
    "patchify": "void(float32[:, :, :, ::1], float32[:, :, ::1], int32)",
}


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
