"""Chapter 6's claims from its sources, each judged by a measurement (the core notebook, 6a and 6b).

`core` holds the claims the core notebook tests (tensor cores against CUDA cores, Triton against
cuBLAS, the formats' mantissa bits); `warp_tiling` those of deep dive 6a (the worklog's share of
cuBLAS, cheaper shared loads with a warp tile); `autocast_and_autotuning` those of deep dive
6b (cuDNN's algorithm search and its TF32 default). A value computed from stored figures is read
through `key=` and labelled with its run; a value the notebook computed on the CPU says so (`on=`).
"""

from __future__ import annotations

from typing import Any

from cudalearn.measure import gpus, timing
from cudalearn.measure.sources import Claim

ARTICLE = '"Tensor Cores, Triton, redes residuales y transformadores de visión"'
BOEHM = "S. Boehm, How to Optimize a CUDA Matmul Kernel for cuBLAS-like Performance (2022)"
WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"


def rows_of(f: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{name: row} of a stored timing.measure figure."""
    return {r["name"]: r for r in f["rows"]}


def wavefronts_per_fma(prof: dict[str, Any], kernel: str, n: int) -> float:
    """Shared-load wavefronts per warp-wide FFMA of `kernel` in a stored Nsight Compute profile (6a).

    An n x n x n product does n**3 multiply-adds, n**3 / 32 warp-wide FFMA instructions.
    """
    return prof[kernel][WAVEFRONTS] / (n**3 / 32)


def wavefronts_per_load(prof: dict[str, Any], kernel: str) -> float:
    """Shared-load wavefronts per warp's shared load of `kernel` in a stored Nsight Compute profile (6a)."""
    return prof[kernel][WAVEFRONTS] / prof[kernel]["smsp__sass_inst_executed_op_shared_ld.sum"]


def _triton_shares(f: dict[str, Any]) -> str:
    rows = rows_of(f)
    return ", ".join(
        f"{p} {rows[f'Triton {p}']['gflops'] / rows[f'cuBLAS {p}']['gflops']:.0%}"
        for p in ("FP32", "TF32", "FP16")
        if f"Triton {p}" in rows and f"cuBLAS {p}" in rows
    )


def core(input_error: dict[str, float]) -> list[Claim]:
    """The core notebook's claims: tensor cores' speed, Triton against cuBLAS, the formats' bits."""
    fp16_over_fp32 = lambda f: f["formats"]["FP16"]["tflops"] / f["formats"]["FP32"]["tflops"]  # noqa: E731
    return [
        Claim(
            "Tensor cores give an order of magnitude over CUDA cores on matrix products",
            ARTICLE,
            key="ch6.precision",
            show=lambda f: f"cuBLAS FP16 {fp16_over_fp32(f):.1f}x cuBLAS FP32",
            holds=lambda f: fp16_over_fp32(f) >= 10,
        ),
        Claim(
            "Triton kernels often match or beat hand-tuned CUDA C++ (here: cuBLAS, one fixed-tile kernel)",
            ARTICLE,
            key="ch6.triton",
            show=lambda f: f"Triton as a share of cuBLAS: {_triton_shares(f)}",
            holds=lambda f: rows_of(f)["Triton FP16"]["gflops"] >= 0.95 * rows_of(f)["cuBLAS FP16"]["gflops"],
            note="one Triton kernel, fixed tiles (an exercise autotunes it)",
        ),
        Claim(
            "TF32 keeps FP16's 10 mantissa bits, BF16 only 7 (about 8x the rounding error)",
            "NVIDIA A100 Tensor Core GPU Architecture whitepaper",
            value=input_error,
            on="this notebook, NumPy on the CPU (no GPU figure)",
            show=lambda f: (
                f"input rounding, TF32/FP16 {f['TF32'] / f['FP16']:.2f}, "
                f"BF16/FP16 {f['BF16'] / f['FP16']:.1f}"
            ),
            holds=lambda f: 0.5 < f["TF32"] / f["FP16"] < 2 and f["BF16"] > 4 * f["FP16"],
        ),
    ]


def warp_tiling(n: int) -> list[Claim]:
    """Deep dive 6a's claims: the worklog's share of cuBLAS FP32, and what a warp tile's loads cost."""

    def best(f):
        rows = rows_of(f)
        return (
            max(r["gflops"] for name, r in rows.items() if name.startswith("regblock"))
            / rows["cuBLAS FP32"]["gflops"]
        )

    step4, step5 = "regblock_2d_prefetch", "regblock_2d_warptile"
    return [
        Claim(
            "Register blocking, 128-bit loads and warp tiling reach about 94% of cuBLAS FP32 (A6000)",
            BOEHM,
            key="ch6.regblock",
            show=lambda f: f"best Numba step {best(f):.0%} of cuBLAS FP32, same run",
            holds=lambda f: best(f) >= 0.85,
            note="another GPU (an H100); our best step keeps step 4's layout (no warp tiling) and "
            "adds cp.async",
        ),
        Claim(
            "A large warp tile maximizes data reuse within the warp",
            "NVIDIA CUTLASS documentation, Efficient GEMM in CUDA",
            key=f"bench.gemm.N{n}.ncu",
            show=lambda f: (
                f"shared-load wavefronts a 128-bit load: step 4 {wavefronts_per_load(f, step4):.2f}, "
                f"step 5 {wavefronts_per_load(f, step5):.2f} (a warp FFMA: "
                f"{wavefronts_per_fma(f, step4, n):.3f}, {wavefronts_per_fma(f, step5, n):.3f}, "
                "from step 5's larger micro-tile)"
            ),
            holds=None,
            note="no verdict: steps 4 and 5 differ in micro-tile and BK too (the controls' cell times "
            "the layout alone); step 5's loads read fewer distinct bytes, yet cost more "
            "wavefronts on average (more of them read B)",
        ),
    ]


def autocast_and_autotuning(device_name: str | None) -> list[Claim]:
    """Deep dive 6b's claims: cuDNN's per-shape algorithm search, and TF32 convolutions by default."""

    def tflops(f):
        return timing.gflops(f["flops"], f["benchmark on"]["median_ms"]) / 1e3

    spec = gpus.spec_for(device_name) if device_name else None
    return [
        Claim(
            "Frameworks time several algorithms for the exact tensor shape and keep the fastest",
            ARTICLE,
            key="ch6.cudnn_benchmark",
            show=lambda f: (
                f"first call {f['benchmark on']['first_call_ms']:.0f} ms with the search, "
                f"{f['benchmark off']['first_call_ms']:.0f} ms without; then "
                f"{f['benchmark off']['median_ms'] / f['benchmark on']['median_ms']:.2f}x"
            ),
            holds=lambda f: f["benchmark on"]["first_call_ms"] > f["benchmark off"]["first_call_ms"],
        ),
        Claim(
            "cuDNN convolutions on float32 may use TF32 tensor cores by default",
            "PyTorch docs, CUDA semantics (TF32)",
            key="ch6.cudnn_benchmark",
            show=lambda f: (
                f"{tflops(f):.0f} TFLOP/s, FP32 peak " + (f"{spec.fp32_tflops:.0f}" if spec else "unknown")
            ),
            holds=lambda f: None if spec is None else tflops(f) > spec.fp32_tflops,
            note="" if spec else "no datasheet entry for the stored run's GPU",
        ),
    ]
