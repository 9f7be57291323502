"""Triton kernels of Chapter 6: a matrix product and a fused bias + SiLU, written in Python.

Triton programs are written per *block* of data, not per thread: a program loads a whole tile with
`tl.load`, multiplies tiles with `tl.dot`, and the compiler decides how threads, shared memory,
coalesced loads and tensor cores carry that out. On a GPU the kernels below are compiled to PTX at
their first launch (one compilation per set of `tl.constexpr` values). Without a GPU, Triton's
interpreter runs them on the CPU with NumPy, on torch CPU tensors; it reads TRITON_INTERPRET when a
kernel is defined, so importing this module outside gpu mode sets TRITON_INTERPRET=1 first. The
interpreter is slow: keep its grids to a handful of programs.

Importing this module raises ImportError where Triton is not installed (it ships with PyTorch's
Linux wheels; there is none for macOS or Windows).
"""

from __future__ import annotations

import os

from cudalearn.runtime import device
from cudalearn.runtime.launch import blocks

if device.mode() != "gpu":  # before any kernel below is defined
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402


def _interpret_language_helpers() -> None:
    """Re-create Triton's own `@triton.jit` helpers (tl.zeros, tl.cdiv, ...) for the interpreter.

    They are made when triton.language is first imported. When that happened before TRITON_INTERPRET
    was set (a PyTorch optimizer's first step imports Triton), they are compiled-only, and the
    interpreter stops at the first one a kernel calls. Reloading the two modules that define them,
    then the package, makes them again, interpreted.
    """
    import importlib

    from triton.runtime.jit import JITFunction

    if isinstance(tl.zeros, JITFunction):
        for module in (tl.standard, tl.random, tl):
            importlib.reload(module)


if os.environ.get("TRITON_INTERPRET", "0") == "1":
    _interpret_language_helpers()


def interpreted() -> bool:
    """True when Triton runs its CPU interpreter rather than compiling for a GPU (Chapter 6)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """C = A @ B: each program computes one (BLOCK_M, BLOCK_N) tile of C, accumulated in float32."""
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    # Programs run roughly in pid order. Taking the tiles of C column by column inside groups of
    # GROUP_M tile rows makes programs that run together share tiles of A and B in the L2 cache.
    group = pid // (GROUP_M * tiles_n)
    first_m = group * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_rows)
    pid_n = (pid % (GROUP_M * tiles_n)) // group_rows

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # the rows of C (and A) of this program
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # its columns of C (and B)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak  # a (BLOCK_M, BLOCK_K) tile
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn  # a (BLOCK_K, BLOCK_N) tile
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k0 < K), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] + k0 < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)  # tensor cores where the types allow
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def bias_silu_kernel(x_ptr, bias_ptr, out_ptr, n, cols, BLOCK: tl.constexpr):
    """out = silu(x + bias) for a contiguous (rows, cols) x and a (cols,) bias, in one pass."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(bias_ptr + offs % cols, mask=mask, other=0.0).to(tl.float32)
    y = x + b
    out = y / (1.0 + tl.exp(-y))  # silu(y) = y * sigmoid(y)
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


#: Tile sizes and launch options of `matmul_kernel`, per target and input type.
MATMUL_CONFIGS = {
    # sm_80 and newer: 256 threads on a 128x128 tile of C, 3 tiles of A and B in flight, 96 KB of
    # shared memory in both cases (within the 99 KB a block may have on sm_86 and sm_89 too).
    ("sm80+", "float32"): {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_warps": 8, "num_stages": 3},
    ("sm80+", "float16"): {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3},
    # sm_75 (T4: 64 KB of shared memory per SM, no asynchronous copies): smaller tiles, 2 stages.
    ("sm75", "float32"): {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2},
    ("sm75", "float16"): {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2},
    # The interpreter runs each program in NumPy, one after the other: small tiles, few programs.
    ("interpreter", "float32"): {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16},
    ("interpreter", "float16"): {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16},
}
GROUP_M = 8
SILU_BLOCK = {"gpu": 1024, "interpreter": 64}


def _target(cc) -> str:
    """The MATMUL_CONFIGS target of compute capability cc: 'interpreter', 'sm80+' or 'sm75'."""
    if interpreted():
        return "interpreter"
    return "sm80+" if tuple(cc or (0, 0)) >= (8, 0) else "sm75"


def matmul_config(dtype, cc=None) -> dict:
    """The MATMUL_CONFIGS entry for torch `dtype` (float32, float16, bfloat16) on compute capability cc."""
    kind = "float32" if str(dtype) == "torch.float32" else "float16"
    return dict(MATMUL_CONFIGS[(_target(cc), kind)])


def matmul(a, b, *, precision: str = "ieee", config: dict | None = None, out=None):
    """C = a @ b with `matmul_kernel` for 2-D torch tensors on one device (Chapter 6).

    a (M, K) and b (K, N) share a dtype (float32, float16 or bfloat16); C has it too, accumulated in
    float32. `precision` is how float32 inputs meet `tl.dot`: 'ieee' (true FP32, no tensor cores)
    or 'tf32' (tensor cores, sm_80 and newer); 16-bit inputs always use the tensor cores.
    """
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"cannot multiply shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.dtype != b.dtype or a.device != b.device:
        raise ValueError(f"a and b must share dtype and device: {a.dtype}, {a.device}; {b.dtype}, {b.device}")
    if interpreted() and str(a.dtype) == "torch.bfloat16":
        raise ValueError(
            "Triton's interpreter computes bfloat16 wrongly (NumPy has no such type): use float16"
        )
    M, K = a.shape
    N = b.shape[1]
    cc = None
    if a.device.type == "cuda":
        import torch

        cc = torch.cuda.get_device_capability(a.device)
    cfg = config or matmul_config(a.dtype, cc)
    c = out if out is not None else a.new_empty((M, N))
    grid = (blocks(M, cfg["BLOCK_M"]) * blocks(N, cfg["BLOCK_N"]),)  # one program per tile of C
    matmul_kernel[grid](
        a,
        b,
        c,
        M,
        N,
        K,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        c.stride(1),
        GROUP_M=GROUP_M,
        PRECISION=precision,
        **cfg,
    )
    return c


def bias_silu(x, bias, *, out=None):
    """silu(x + bias) with `bias_silu_kernel`: x (rows, cols) contiguous, bias (cols,), same dtype (Ch. 6)."""
    if not x.is_contiguous() or bias.ndim != 1 or x.shape[-1] != bias.shape[0]:
        raise ValueError(
            f"need contiguous x (rows, cols) and bias (cols,): {tuple(x.shape)}, {tuple(bias.shape)}"
        )
    out = out if out is not None else x.new_empty(x.shape)
    block = SILU_BLOCK["interpreter" if interpreted() else "gpu"]
    n = x.numel()
    bias_silu_kernel[(blocks(n, block),)](x, bias, out, n, x.shape[-1], BLOCK=block)
    return out
