"""Chapter 11's claims tables: each quoted claim beside the figure that judges it (book 11 and 11a).

A claim on a stored multi-GPU figure (`key=`) is labelled by `measure.sources` with the run's device
and date, or reads "not measured" while no run has stored it; a `value=` claim is a count made by the
notebook's own CPU or GPU processes ("this notebook").
"""

from __future__ import annotations

from cudalearn.chapters.ch11 import ddp_scaling
from cudalearn.measure import reference
from cudalearn.measure.sources import Claim

#: The multi-GPU runs of Chapter 11 and its deep dives, none of them stored yet (the text says so).
GPU_KEYS = ("ch11.tp_mlp", "ch11.collectives", "ch11.ddp_scaling", "ch11.fsdp_cap")


def check_none_stored(keys: tuple[str, ...] = GPU_KEYS) -> None:
    """Chapters 11, 11a: raise if one of `keys` has a stored run, since the text says none does."""
    stored = [key for key in keys if reference.lookup(key)[0] is not None]
    if stored:
        raise AssertionError(f"the text says no multi-GPU run of these is stored, yet {stored} is: reread it")


def ddp_efficiency(figs: dict, row_name: str) -> tuple[int, float]:
    """(GPUs, efficiency) of the stored DDP sweep's row `row_name` at its largest world size."""
    by_world = {
        int(n): r["images_per_s"]
        for n, run in figs["worlds"].items()
        for r in run["rows"]
        if ddp_scaling.row_key(r) == row_name
    }
    most = max(by_world)
    return most, ddp_scaling.scaling_efficiency(by_world)[most]


def overlap_gain(figs: dict) -> tuple[int, float, float]:
    """(GPUs, efficiency with overlap, without) at 16 images a GPU, the largest world size stored."""
    most, with_overlap = ddp_efficiency(figs, "batch 16, bucket default")
    return most, with_overlap, ddp_efficiency(figs, "batch 16, no overlap")[1]


def largest_allreduce(figs: dict) -> tuple[str, float]:
    """(GPUs, bus bandwidth in GB/s) of the stored all-reduce of the largest message, most GPUs."""
    most = max(figs["worlds"], key=int)
    return most, [r for r in figs["worlds"][most] if r["op"] == "all_reduce"][-1]["busbw_gbs"]


def fit_verdicts(figs: dict) -> dict[str, bool]:
    """{'ddp': fits?, 'fsdp': fits?} of the stored capped run, every process agreeing."""
    return {kind: all(r["fits"] for r in ranks) for kind, ranks in figs["attempts"].items()}


def core_claims(tp_check: dict, check_procs: int) -> list[Claim]:
    """Book 11's claims: the split MLP's collectives, DDP's scaling and its overlap with backward."""
    return [
        Claim(
            "Splitting the MLP column-then-row needs one all-reduce forward and one backward",
            "Shoeybi et al., Megatron-LM (2019), section 3",
            value={"counted": tp_check["bytes_counted"], "predicted": tp_check["bytes_predicted"]},
            show=lambda v: (
                f"ring bytes of the collectives called: {v['counted']['forward']} forward, "
                f"{v['counted']['backward']} backward ({check_procs} processes, float64)"
            ),
            holds=lambda v: v["counted"] == v["predicted"],
        ),
        Claim(
            "DDP scales near-linearly",
            "Li et al., PyTorch Distributed (VLDB 2020)",
            key="ch11.ddp_scaling",
            show=lambda f: "efficiency {1:.2f} at {0} GPUs (ViT-B/16, 64 images a GPU)".format(
                *ddp_efficiency(f, "batch 64, bucket default")
            ),
            holds=lambda f: ddp_efficiency(f, "batch 64, bucket default")[1] >= 0.9,
        ),
        Claim(
            "Overlapping the all-reduce with the backward pass shortens the step",
            "Li et al., PyTorch Distributed (VLDB 2020), section 3.2",
            key="ch11.ddp_scaling",
            show=lambda f: "{} GPUs, 16 images a GPU: efficiency {:.2f} with overlap, {:.2f} without".format(
                *overlap_gain(f)
            ),
            holds=lambda f: overlap_gain(f)[1] > overlap_gain(f)[2],
        ),
    ]


def sharding_claims(held: dict) -> list[Claim]:
    """Book 11a's claims: FSDP divides the training state, and fits a model DDP cannot (stored run)."""
    return [
        Claim(
            "Sharding the training state divides each GPU's share by N",
            "Rajbhandari et al., ZeRO (SC 2020); Zhao et al., PyTorch FSDP (VLDB 2023)",
            value=held,
            show=lambda v: f"bytes held per process: DDP {v['ddp']}, FSDP {v['fsdp']}",
            holds=lambda v: sum(v["fsdp"]) == v["ddp"][0],
        ),
        Claim(
            "A model whose training state does not fit one GPU trains under FSDP",
            "Zhao et al., PyTorch FSDP (VLDB 2023)",
            key="ch11.fsdp_cap",
            show=lambda f: ", ".join(
                f"{kind}: {'fits' if ok else 'out of memory'}" for kind, ok in fit_verdicts(f).items()
            ),
            holds=lambda f: fit_verdicts(f) == {"ddp": False, "fsdp": True},
        ),
    ]


def bus_claims() -> list[Claim]:
    """Book 11b's claim: a ring all-reduce's bus bandwidth against the link's one-way speed."""
    return [
        Claim(
            "A ring all-reduce's bus bandwidth approaches the link's speed",
            "nccl-tests, doc/PERFORMANCE.md; the datasheet of the GPU that ran it (NVLink, both directions)",
            key="ch11.collectives",
            show=lambda f: "largest message, {} GPUs: {:.0f} GB/s bus bandwidth".format(
                *largest_allreduce(f)
            ),
            note="half the datasheet's NVLink figure (one way) is the link's peak, not what NCCL reaches",
        ),
    ]
