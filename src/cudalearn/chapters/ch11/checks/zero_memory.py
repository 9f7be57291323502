"""Lab 11's third check: ZeRO's memory per GPU, model_state_bytes against Rajbhandari et al. (2020).

The bytes of each part of the model states (fp16 parameters and gradients, K bytes of optimizer state a
parameter), sharded by stage, are compared with the paper's formulas and its Figure 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from cudalearn import checks

#: ZeRO's Figure 1 (Rajbhandari et al., 2020): GB (1e9 bytes) per GPU for Ψ = 7.5e9, N_d = 64, K = 12
ZERO_FIGURE_1 = {0: 120.0, 1: 31.4, 2: 16.6, 3: 1.9}
PARTS = ("parameters", "gradients", "optimizer")


def _zero_bytes(n_params: int, world: int, stage: int, k: int = 12) -> dict[str, int]:
    """ZeRO's model states per GPU: fp16 parameters and gradients, k bytes of optimizer state a parameter."""
    shard = -(-n_params // world)  # ceil: the last shard is padded
    return {
        "parameters": 2 * (shard if stage >= 3 else n_params),
        "gradients": 2 * (shard if stage >= 2 else n_params),
        "optimizer": k * (shard if stage >= 1 else n_params),
    }


def _zero_hint(part: str, got: Any, n: int, world: int, stage: int, k: int) -> str:
    """Which usual mistake gives `got` for this part of the model states."""
    shard, floor = -(-n // world), n // world
    size = {"parameters": 2, "gradients": 2, "optimizer": k}[part]
    if isinstance(got, float):
        return (
            "that is a float: `/` divides in floating point and rounds nothing up. Count whole parameters "
            "per shard with integers, ⌈Ψ/N⌉ = -(-n_params // world), then multiply by the bytes of each."
        )
    sharded = stage >= {"parameters": 3, "gradients": 2, "optimizer": 1}[part]
    if world > 1 and shard != floor and got == size * floor:
        return (
            f"round up: with Ψ = {n} not a multiple of N = {world}, each GPU's shard holds ⌈Ψ/N⌉ = {shard} "
            "parameters' worth (the last shard is padded): -(-n_params // world) in integers."
        )
    if sharded and world > 1 and n % world == 0 and got == size * (floor + 1):
        return (
            f"N = {world} divides Ψ = {n}, so each shard holds exactly Ψ/N = {floor} parameters; "
            "n_params // world + 1 rounds up only where N does not divide Ψ, and adds one parameter "
            "where it does. The ceiling in integers is -(-n_params // world) (or (n_params + world - 1) "
            "// world)."
        )
    if world > 1 and got == -(-size * n // world) and got != size * shard:
        return "shard the parameters first, then count bytes: bytes per element times ⌈Ψ/N⌉."
    if stage == 0 and world > 1 and got in (size * shard, size * floor):
        return (
            "stage 0 is plain data parallelism (DDP): every GPU holds the whole model state, nothing is "
            "divided by N."
        )
    if part == "parameters":
        if got in (4 * n, 4 * shard):
            return "the parameters the model computes with are fp16, 2 bytes each (the fp32 copy is in K)."
        if not sharded and got == 2 * shard:
            return (
                f"stage {stage} keeps a whole fp16 copy of the parameters on every GPU: only stage 3 "
                "(P_os+g+p, what PyTorch's FSDP FULL_SHARD does) shards them."
            )
        if sharded and got == 2 * n:
            return (
                "stage 3 (P_os+g+p) shards the parameters too: each GPU keeps 2⌈Ψ/N⌉ bytes and gathers the "
                "others' shards layer by layer when it needs them."
            )
    if part == "gradients":
        if got in (4 * n, 4 * shard):
            return (
                "the gradients are fp16 in mixed-precision training, 2 bytes each (the fp32 master weights "
                "are among the optimizer states, in K)."
            )
        if not sharded and got == 2 * shard:
            return (
                "stage 1 (P_os) shards only the optimizer states; every GPU still holds all 2Ψ bytes of fp16 "
                "gradients: they are sharded from stage 2 (P_os+g) on."
            )
        if sharded and got == 2 * n:
            return (
                f"stage {stage} shards the gradients: each GPU keeps the 2⌈Ψ/N⌉ bytes of its own shard's "
                "gradients (a reduce-scatter instead of an all-reduce)."
            )
    if part == "optimizer":
        count = shard if sharded else n
        if got == 0:
            return (
                "the optimizer states take K bytes per parameter (K = 12 for mixed-precision Adam: fp32 "
                "master weights, momentum and variance, 4 bytes each); use the argument k."
            )
        if k != 12 and got == 12 * count:
            return f"use the argument k (here k = {k}), not 12."
        if k == 12 and got == 8 * count:
            return (
                "K = 12: the fp32 master weights (4 bytes) as well as Adam's momentum and variance (4 + 4)."
            )
        if got in (count, 2 * count):
            return "the optimizer states take k bytes per parameter (the argument k): multiply by k."
        if sharded and got == k * n:
            return (
                "from stage 1 (P_os) on, the optimizer states are sharded: each GPU keeps and updates the "
                "states of ⌈Ψ/N⌉ parameters."
            )
    return (
        "stage 0 replicates all three; stage 1 shards the optimizer states, stage 2 the gradients too, "
        "stage 3 the parameters too. fp16 parameters and gradients take 2 bytes per parameter, the optimizer "
        "states k; a sharded state holds ⌈Ψ/N⌉ parameters' worth on each GPU."
    )


def check_model_state_bytes(
    model_state_bytes: Callable[..., dict[str, int]],
    cases: Sequence[tuple[int, int, int, int | None]] | None = None,
) -> None:
    """Lab 11: model_state_bytes(n_params, world, stage, k) = ZeRO's bytes per GPU, by part.

    Each case is (Ψ, N, stage, K); K None leaves k to its default, 12. Default: the ZeRO paper's
    Figure 1 (7.5e9 parameters on 64 GPUs, K left out), whose totals must be 120, 31.4, 16.6 and 1.9 GB,
    then 1 000 003 parameters on 8 GPUs (shards rounded up) and 10 000 001 on 3 with K = 8, every stage.
    """
    paper = [(7_500_000_000, 64, s, None) for s in range(4)]
    cases = cases or (
        paper + [(1_000_003, 8, s, 12) for s in range(4)] + [(10_000_001, 3, s, 8) for s in range(4)]
    )
    for n, world, stage, k in cases:
        args = (n, world, stage) if k is None else (n, world, stage, k)
        call = f"model_state_bytes({n}, {world}, {stage}" + ("" if k is None else f", {k}") + ")"
        try:
            got = checks.call_student(model_state_bytes, "model_state_bytes", *args)
        except TypeError as e:
            if k is not None:
                raise
            raise AssertionError(
                f"{call}, without k, raised TypeError: {e}. Hint: K = 12 (mixed-precision Adam) is the "
                "default: keep `k=12` in the signature."
            ) from None
        if got is None:
            raise AssertionError(f"`model_state_bytes` returned None: {checks.NOT_DONE}")
        if not isinstance(got, dict) or not set(PARTS) <= set(got):
            missing = sorted(set(PARTS) - set(got)) if isinstance(got, dict) else list(PARTS)
            raise AssertionError(
                f"{call} should return a dict with the keys {list(PARTS)} (bytes per GPU, ints), got {got!r}"
                + (f"; missing: {missing}." if isinstance(got, dict) else ".")
            )
        want = _zero_bytes(n, world, stage, 12 if k is None else k)
        for part in PARTS:
            value = got[part]
            hint = (
                ""
                if value == want[part]
                else _zero_hint(part, value, n, world, stage, 12 if k is None else k)
            )
            checks.check_equal(value, want[part], name=f"{call}[{part!r}]", hint=hint, exact_types=True)
