"""Chapter 8's claims table: each quoted claim beside the figure that judges it (the book's last cell).

The values a claim needs come from the notebook (`value=` figures computed there, labelled "this
notebook") or from the stored GPU run (`key=`, labelled with its device and date by `measure.sources`).
"""

from __future__ import annotations

from cudalearn.measure.sources import Claim

ARTICLE = '"Tensor Cores, Triton, redes residuales..." (article), sec. 2'


def order(x: float) -> str:
    """A ratio to one significant digit, the precision these claims need."""
    return f"{x:.1g}"


def _step_overhead(f: dict) -> float:
    """The residual training step's time over the plain one's, minus 1 (stored `ch8.skip_cost`)."""
    return f["rows"][1]["median_ms"] / f["rows"][0]["median_ms"] - 1


def gradient_claims(fc_ratio: dict, deep_ratio: float, deep_layers: int) -> list[Claim]:
    """The claims about gradients at initialisation and about training depth (Chapter 8)."""
    ratio = {"plain": fc_ratio["plain"], "plain + BN": fc_ratio["plain + BatchNorm"]}
    return [
        Claim(
            "A deeper plain network has a higher training error (the article: past about 20 layers)",
            f"He et al., CVPR 2016, Fig. 1 (56 layers against 20); {ARTICLE}",
            key="ch8.train",
            show=lambda f: "train loss {:.3f} ({} layers), {:.3f} ({} layers)".format(
                *(f[k][v] for k in ("shallow plain", "deep plain") for v in ("train_loss", "layers"))
            ),
            holds=lambda f: f["deep plain"]["train_loss"] > f["shallow plain"]["train_loss"],
        ),
        Claim(
            "Plain nets with BatchNorm: degradation unlikely to be caused by vanishing gradients",
            "He et al., CVPR 2016, sec. 4.1",
            value={"ratio": deep_ratio, "layers": deep_layers},
            show=lambda f: (
                f"first/last layer gradient {order(f['ratio'])} at init ({f['layers']} layers, BN)"
            ),
            holds=lambda f: f["ratio"] > 1e-2,
            note="no vanishing; it grows towards the input at init",
        ),
        Claim(
            "Multiplied layer after layer, the gradient shrinks towards zero",
            ARTICLE,
            value=ratio,
            show=lambda f: f"first/last layer gradient {order(f['plain'])} (102 layers, no BN)",
            holds=lambda f: f["plain"] < 1e-6,
            note="without normalisation only",
        ),
        Claim(
            "Deep plain BatchNorm nets have exploding gradients at initialisation",
            "Yang et al., ICLR 2019",
            value=ratio,
            show=lambda f: f"first/last layer gradient {order(f['plain + BN'])} (102 layers)",
            holds=lambda f: f["plain + BN"] > 1e3,
        ),
    ]


def shortcut_claims(jacobian_error: float, very_deep_ratio: dict, n_params: list, flops: list) -> list[Claim]:
    """The claims about the shortcut itself: its `+ 1`, a thousand layers, and its cost (Chapter 8)."""
    return [
        Claim(
            "dy/dx = dF/dx + 1 through an identity shortcut",
            f"He et al., ECCV 2016, eq. 5; {ARTICLE}",
            value={"err": jacobian_error},
            show=lambda f: (
                "max abs(dy/dx - dF/dx - I) " + ("< 1e-12" if f["err"] < 1e-12 else f"{f['err']:.2g}")
            ),
            holds=lambda f: f["err"] < 1e-12,
        ),
        Claim(
            "Gradients pass unaltered through more than 1,000 layers",
            f"He et al., ECCV 2016 (1,001 layers); {ARTICLE}",
            value={k: very_deep_ratio[k] for k in ("residual", "residual + BatchNorm")},
            show=lambda f: "first/last " + ", ".join(f"{order(r)} ({k})" for k, r in f.items()),
            holds=lambda f: None,
            note="they pass, at the same order of magnitude; not unaltered",
        ),
        Claim(
            "The identity shortcut adds neither parameters nor FLOPs",
            "He et al., CVPR 2016, sec. 3.2",
            value={"params": list(n_params), "flops": list(flops)},
            show=lambda f: (
                f"parameters {f['params'][0]:,} and {f['params'][1]:,}; FLOPs equal: "
                f"{f['flops'][0] == f['flops'][1]}"
            ),
            holds=lambda f: f["params"][0] == f["params"][1] and f["flops"][0] == f["flops"][1],
        ),
        Claim(
            "Its elementwise addition is negligible",
            "He et al., CVPR 2016, sec. 3.2",
            key="ch8.skip_cost",
            show=lambda f: f"training step {_step_overhead(f):+.1%} with the skips",
            holds=lambda f: _step_overhead(f) < 0.1,
        ),
    ]
