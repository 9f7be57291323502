"""Chapter 9's claims tables: each quoted claim beside the figure that judges it (book 9 and 9a-9d).

Figures the notebook computed (an equality of two layers, a receptive field, FLOP shares) are `value=`
claims, labelled "this notebook"; stored GPU figures are `key=` claims, labelled with device and date.
"""

from __future__ import annotations

from cudalearn.measure.sources import Claim

# The overview the chapter starts from: its copy names no author, outlet or date (history only).
ARTICLE = '"Tensor Cores, Triton, redes residuales..." (unsigned overview, undated), sec. 3'
VIT_PAPER = "Dosovitskiy et al., ICLR 2021"


def without_divisions(f: dict) -> float | None:
    """The speed of patchify_fast over the simple kernel at the stored run's patch size (None: absent)."""
    ms = {row["name"]: row.get("median_ms") for row in f["rows"]}
    p = f["size"]["patch"]
    simple, fast = ms.get(f"Numba kernel, p={p}"), ms.get(f"patchify_fast, p={p}")
    return simple / fast if simple and fast else None


def core_claims(embed_error: float) -> list[Claim]:
    """Book 9's claim: the patch embedding is one linear map of the flattened patches."""
    return [
        Claim(
            "A patch embedding is one linear map of the flattened patches (a Conv2d of stride p)",
            f"{VIT_PAPER}, sec. 3.1, eq. 1",
            value={"err": embed_error},
            show=lambda f: (
                "Linear on patches = Conv2d, max difference "
                + ("< 1e-4" if f["err"] < 1e-4 else f"{f['err']:.2g}")
            ),
            holds=lambda f: f["err"] < 1e-4,
        ),
    ]


def comparison_claims(seen: dict, flop_share: float) -> list[Claim]:
    """Book 9d's claims: the overview's CNN-against-ViT table, row by row, and the ViT paper's."""
    return [
        Claim(
            "CNN: local first; ViT: every patch connected to every other from layer 1",
            ARTICLE,
            value=seen,
            show=lambda f: f"pixels seen after layer 1: CNN {f['cnn']}, ViT {f['vit']} of {f['all']}",
            holds=lambda f: f["cnn"] == 9 and f["vit"] == f["all"],
        ),
        Claim(
            "A CNN's built-in assumptions help it learn from smaller data sets",
            f"{ARTICLE}; {VIT_PAPER}, sec. 1",
            key="ch9.little_data",
            show=lambda f: (
                "test accuracy CNN / ViT, fewest images: "
                + ", ".join(
                    f"{d} ({n}) {c['CNN'][n]:.2f} / {c['ViT'][n]:.2f}"
                    for d, c in f["accuracy"].items()
                    for n in list(c["CNN"])[:1]
                )
            ),
            holds=lambda f: all(c["CNN"][n] > c["ViT"][n] for c in f["accuracy"].values() for n in c["CNN"]),
        ),
        Claim(
            "With 14M-300M images, large-scale training trumps inductive bias",
            f"{VIT_PAPER}, sec. 1",
            value={},
            show=lambda f: "not measured: needs pre-training on millions of images",
            holds=lambda f: None,
            note="beyond a notebook",
        ),
        Claim(
            "A ViT relies almost entirely on dense matrix products: its FLOPs",
            ARTICLE,
            value={"share": flop_share},
            show=lambda f: f"{f['share']:.0%} of the counted FLOPs of a training step in GEMMs",
            holds=lambda f: f["share"] > 0.99,
            note="of the FLOPs PyTorch's counter sees: it gives norms, softmax and GELU none",
        ),
        Claim(
            "... and its time",
            ARTICLE,
            key="ch9.time_shares",
            show=lambda f: (
                f"{f['ViT']['matmul']:.0%} of the GPU time in GEMMs, {f['ViT']['other']:.0%} elsewhere"
            ),
            holds=lambda f: f["ViT"]["matmul"] > 0.9,
            note="small ViT, attention written out",
        ),
    ]


def division_claims() -> list[Claim]:
    """Book 9a's claim: integer divisions cost instructions (patchify vs patchify_fast: confounded)."""
    return [
        Claim(
            "Integer division and modulo are costly: up to 20 instructions each",
            "NVIDIA, CUDA C++ Programming Guide, Arithmetic Instructions",
            key="ch9.patchify",
            show=lambda f: (
                f"patchify_fast x{without_divisions(f):.1f} the simple kernel's, p = {f['size']['patch']}"
                if without_divisions(f)
                else "patchify_fast is not in the stored run"
            ),
            # A speed ratio cannot isolate the divisions: no verdict while it is consistent with the
            # claim, "does not hold" when patchify_fast is not clearly faster.
            holds=lambda f: None if (without_divisions(f) or 0) > 2 else False,
            note="consistent with it, not isolated: patchify's divisions are 64-bit, and patchify_fast "
            "also has 6 loads in flight (not 1) and another block shape; exercises 1 and 2 separate "
            "the causes",
        ),
    ]


def attention_claims(counted_bmm: dict[int, int]) -> list[Claim]:
    """Book 9b's claim: attention's FLOPs (PyTorch's counter, {tokens: bmm FLOPs}) and a block's time."""

    def flops(f: dict) -> tuple[float, float]:
        small, large = sorted(f)[-2:]
        return f[large] / f[small], large / small

    def growth(f: dict) -> tuple[float, float]:
        tokens = [int(r["name"].split("N=")[1]) for r in f["rows"][-2:]]
        return f["rows"][-1]["median_ms"] / f["rows"][-2]["median_ms"], tokens[1] / tokens[0]

    return [
        Claim(
            "Self-attention's cost grows with the square of the number of tokens",
            "Vaswani et al., NeurIPS 2017, Table 1",
            value=counted_bmm,
            show=lambda f: "FLOP counter: attention's products x{:g} for x{:g} tokens".format(*flops(f)),
            holds=lambda f: flops(f)[0] == flops(f)[1] ** 2,
        ),
        Claim(
            "... and its time (a whole block: projections, MLP and attention)",
            "Vaswani et al., NeurIPS 2017, Table 1",
            key="ch9.attention",
            show=lambda f: "x{:.1f} block time for x{:g} tokens at the largest N".format(*growth(f)),
            holds=lambda f: None,
            note="an observation, not a test of the claim: faster than N, not yet N squared",
        ),
    ]


def kernel_claims() -> list[Claim]:
    """Book 9c's claim: cuDNN ran the bf16 patch embedding on a tensor-core kernel (stored profile)."""
    return [
        Claim(
            "cuDNN can run a convolution as an implicit GEMM on tensor cores: this patch embedding's did",
            "NVIDIA cuDNN API, cudnnConvolutionFwdAlgo_t; CUTLASS, Implicit GEMM Convolution",
            key="ch9.embed_kernels",
            show=lambda f: "top Conv2d kernel: " + f["Conv2d"][0]["name"].split("<")[-1].split(">")[0][:40],
            holds=lambda f: "tensorop" in f["Conv2d"][0]["name"] and "fprop" in f["Conv2d"][0]["name"],
            note="one bf16 Conv2d of stride p, profiled",
        ),
    ]
