"""The first half of lab 11's tensor-parallel MLP check: every rank's shard_mlp(fc1, fc2, rank, world)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from cudalearn import checks
from cudalearn.chapters.ch11.checks._errors import error_text
from cudalearn.chapters.ch11.checks._tp_problem import SHARD_KEYS, reference_shard, tp_problem
from cudalearn.checks.torch_answers import _one_thread


@_one_thread
def shard_experiment(shard_mlp: Callable, world: int, d_in: int, hidden: int, d_out: int, seed: int) -> dict:
    """Lab 11, in the student's process: shard_mlp(fc1, fc2, rank, world) for every rank; copies come back."""
    fc1, fc2, _, _ = tp_problem(1, d_in, hidden, d_out, seed)
    shards: list[dict] = []
    for rank in range(world):
        try:
            got = checks.call_student(shard_mlp, "shard_mlp", fc1, fc2, rank, world)
        except AssertionError:
            raise
        except Exception as e:  # noqa: BLE001 - the student's error, described to the check
            return {"error": error_text(e), "rank": rank, "shards": shards}
        if not isinstance(got, dict):
            return {"type": checks.type_name(got), "rank": rank, "shards": shards}
        shard = {}
        for key in SHARD_KEYS:
            if key not in got:
                shard[key] = {"type": "missing"}
            elif isinstance(got[key], torch.Tensor):
                shard[key] = got[key].detach().clone()
            else:
                shard[key] = {"type": checks.type_name(got[key])}
        shards.append(shard)
    return {"shards": shards}


#: each key of a shard: the tensor of the unsplit layers it is cut from, the axis of its hidden features
#: in it, what one index along that axis is, and its shape as the text writes it
_LAYOUT = {
    "w1": ("fc1.weight", 0, "rows", "(h/N, d_in)"),
    "b1": ("fc1.bias", 0, "entries", "(h/N,)"),
    "w2": ("fc2.weight", 1, "columns", "(d_out, h/N)"),
}
#: a weight cut along its other axis ({want}: the shape asked for, {shape}: the student's): why it is wrong
_OTHER_AXIS = {
    "w1": "w1 should hold h/N rows of fc1.weight (h/N, d_in) = {want}; yours is {shape}: that is a "
    "row-parallel split, whose outputs are partial sums GELU cannot be applied to. Split fc1 by its output "
    "features, the rows of its weight.",
    "w2": "w2 should hold h/N columns of fc2.weight, (d_out, h/N) = {want}; yours is {shape}, rows of "
    "fc2.weight, which split fc2 by its outputs. fc2 is split by its input features: the h/N columns that "
    "multiply this rank's slice of the hidden layer, fc2.weight[:, a:b].",
}


def _shape_hint(
    key: str, shapes: list[tuple], rank: int, world: int, d_in: int, hidden: int, d_out: int
) -> str:
    """Which usual mistake gives rank's `key` its shape; shapes: every rank's shape of `key`."""
    shape = shapes[rank]
    hn = hidden // world
    own = f"rank·h/N = {rank * hn} up to (rank + 1)·h/N = {(rank + 1) * hn}"
    short = f"its share starts at rank·h/N = rank * (h // N), not rank * h; rank {rank}'s are {own}."
    layer, axis, unit, form = _LAYOUT[key]
    sliced = shape[1] if key == "w2" and len(shape) == 2 else shape[0] if shape else None
    other_widths = {
        d_in // world: f"d_in // N = {d_in} // {world}: fc1.in_features, the width of x",
        d_out // world: f"d_out // N = {d_out} // {world}: fc2.out_features, the width of the output",
    }
    if world > 1 and sliced != hn and sliced != world and sliced in other_widths:
        return (
            f"rank {rank}'s {key} has {sliced} {unit} where h/N = {hn} belong: that is "
            f"{other_widths[sliced]}. Both layers are split over the hidden features, h = fc1.out_features "
            f"= fc2.in_features = {hidden}: size = h // N = {hn}, and rank r's slice is r·size to "
            f"(r + 1)·size ({own})."
        )
    if world > 1 and sliced != hn and sliced == world:
        return (
            f"rank {rank}'s {key} has {sliced} {unit} where h/N = {hn} belong: torch.split(t, size) cuts "
            f"pieces of `size` each and torch.chunk(t, n) cuts n pieces. Split the hidden features "
            f"(h = {hidden}) into N = {world} pieces: torch.chunk(t, world, dim)[rank], or the slice {own}."
        )
    want = {"w1": (hn, d_in), "b1": (hn,), "w2": (d_out, hn)}[key]
    if key in _OTHER_AXIS:
        other = 1 - axis
        if len(shape) == 2 and shape[axis] == hidden and shape[other] < want[other]:
            return _OTHER_AXIS[key].format(want=want, shape=shape)
        if shape == want[::-1]:
            return "that is transposed: nn.Linear stores its weight as (out_features, in_features)."
    if shape == tuple(hidden if i == axis else n for i, n in enumerate(want)):
        if key == "b1":
            return (
                "b1 is fc1's whole bias: a column-parallel layer keeps the bias entries of its own output "
                f"features, the same h/N = {hn} as w1's rows."
            )
        whole = f"that is the whole of {layer}: each rank keeps h/N = {hn} of its {unit}, {own}"
        other = 1 - axis
        cut = [r for r, sh in enumerate(shapes) if len(sh) == 2 and sh[other] != shape[other]]
        if key in _OTHER_AXIS and cut:
            index = f"{layer}[a:b]" if axis == 0 else f"{layer}[:, a:b]"
            wrong_index = f"{layer}[:, a:b]" if axis == 0 else f"{layer}[a:b]"
            return (
                f"{whole}. Yours slices the other axis: rank {cut[0]}'s {key} is {shapes[cut[0]]}. A slice "
                f"{wrong_index} of the {('columns', 'rows')[axis]} keeps them all once it runs past the "
                f"{shape[other]} there are (so rank {rank} got the whole tensor); {key} takes {unit} of "
                f"{layer}: {index}."
            )
        return whole + "."
    fewer = len(shape) == len(want) and shape[axis] < hn
    if fewer and all(n == want[i] for i, n in enumerate(shape) if i != axis):
        return f"rank {rank} got {shape[axis]} {unit} of {layer} instead of h/N = {hn}: {short}"
    rest = {"w1": ", all its columns", "w2": ", all its rows"}.get(key, "")
    return f"rank {rank}'s {key} is {unit} {own} of {layer}{rest}: {form} = {want}."


def _located(got: torch.Tensor, whole: torch.Tensor, dim: int) -> tuple[int, int] | None:
    """(first, last): the slices of `whole` along `dim` that got's are, if consecutive; else None."""
    picks = []
    for j in range(got.shape[dim]):
        part = got.select(dim, j)
        hits = [i for i in range(whole.shape[dim]) if torch.equal(whole.select(dim, i), part)]
        if not hits:
            return None
        picks.append(hits[0])
    if picks and picks == list(range(picks[0], picks[0] + len(picks))):
        return picks[0], picks[-1]
    return None


def verify_shards(out: dict, world: int, d_in: int, hidden: int, d_out: int, seed: int) -> None:
    """One problem of check_tp_mlp's first half: every rank's shard, shapes then values."""
    sizes = f"fc1 {d_in} -> {hidden}, fc2 {hidden} -> {d_out}"
    if "error" in out:
        raise AssertionError(
            f"shard_mlp(fc1, fc2, {out['rank']}, {world}) ({sizes}) raised {out['error']}\nHint: slice the "
            f"layers' tensors: fc1.weight is ({hidden}, {d_in}), fc1.bias ({hidden},), fc2.weight "
            f"({d_out}, {hidden}); rank r keeps hidden features r·h/N to (r+1)·h/N."
        )
    if "type" in out:
        if out["type"] == "NoneType":
            raise AssertionError(f"`shard_mlp` returned None: {checks.NOT_DONE} (Did you `return` the dict?)")
        raise AssertionError(
            f"shard_mlp(fc1, fc2, {out['rank']}, {world}) returned a {out['type']}: return a dict "
            "{'w1': ..., 'b1': ..., 'w2': ...} of torch tensors."
        )
    fc1, fc2, _, _ = tp_problem(1, d_in, hidden, d_out, seed)
    for rank, shard in enumerate(out["shards"]):
        call = f"shard_mlp(fc1, fc2, {rank}, {world}) ({sizes})"
        want = reference_shard(fc1, fc2, rank, world)
        for key in SHARD_KEYS:
            got = shard[key]
            if isinstance(got, dict):
                what = "has no key" if got["type"] == "missing" else f"holds a {got['type']} under"
                raise AssertionError(
                    f"{call} {what} {key!r}: return a dict with the torch tensors 'w1', 'b1' and 'w2'."
                )
            shape = tuple(got.shape)
            if shape != tuple(want[key].shape):
                shapes = [tuple(getattr(s[key], "shape", ())) for s in out["shards"]]
                raise AssertionError(
                    f"{call}: rank {rank}'s {key} has shape {shape}, expected {tuple(want[key].shape)}. "
                    + f"Hint: {_shape_hint(key, shapes, rank, world, d_in, hidden, d_out)}"
                )
            if got.dtype != want[key].dtype:
                raise AssertionError(
                    f"{call}: rank {rank}'s {key} is {got.dtype}, the layers are {want[key].dtype}: keep "
                    "their tensors as they are (slices, no conversion)."
                )
            if torch.equal(got, want[key]):
                continue
            layer, dim, unit, _ = _LAYOUT[key]
            tensor = {"w1": fc1.weight, "b1": fc1.bias, "w2": fc2.weight}[key]
            found = _located(got, tensor.detach(), dim)
            hn = hidden // world
            where = (
                f"it holds {unit} {found[0]} to {found[1]} of {layer}"
                if found
                else f"its values are not consecutive {unit} of {layer}"
            )
            raise AssertionError(
                f"{call}: rank {rank}'s {key} has the right shape but not the right values: {where}; rank "
                f"{rank}'s are {unit} {rank * hn} to {(rank + 1) * hn - 1}. Hint: rank r keeps {unit} "
                f"r·h/N to (r+1)·h/N - 1 of {layer}, unchanged."
            )
