"""Checks of lab 11 (beyond two GPUs): the ring all-reduce, the tensor-parallel MLP, ZeRO's memory per GPU.

Everything runs in one process on the CPU, in seconds, with no GPU and no
socket. The ring all-reduce runs on a `cudalearn.chapters.ch11.ring.Ring`, whose messages
the check reads back: neighbours only, one chunk per rank and step,
2(N - 1) steps, the bytes of the ring formula (`multigpu.allreduce_bytes`),
and every rank's buffer against a float64 sum. The tensor-parallel MLP runs
its N ranks as threads (`cudalearn.chapters.ch11.ring.ThreadGroup`), with an all-reduce
the check provides and counts; outputs and gradients are compared with the
unsplit layers in float64. ZeRO's memory is compared with the formulas of
Rajbhandari et al. (2020) and their Figure 1.

The student's functions run through `checks.student_side` experiments
(module-level functions here), so under `cudalearn grade` the ring and the
threads live in the student's process and only plain data comes back; the
reference is computed here from the same seeds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from cudalearn import checks
from cudalearn.chapters.ch11 import tensor_parallel
from cudalearn.chapters.ch11.ring import CollectiveError, Message, Ring, ThreadGroup, chunk_bounds
from cudalearn.checks.torch_answers import _compare, _one_thread
from cudalearn.dist import multigpu


def _type_name(v: Any) -> str:
    """'NoneType', 'list', 'numpy.ndarray': the type of a student's answer as a message names it."""
    t = type(v)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__.split('.')[0]}.{t.__name__}"


def _error_text(e: BaseException) -> str:
    """'ValueError: ...': an exception of the student's code as a message quotes it."""
    return f"{type(e).__name__}: {e}"


# Exercise 1: the ring all-reduce --------------------------------------------------------------------


def ring_inputs(world: int, n: int, seed: int) -> np.ndarray:
    """Lab 11: the `world` ranks' buffers of a ring problem, (world, n) float32 drawn from `seed`."""
    return np.random.default_rng(seed).standard_normal((world, n)).astype(np.float32)


def ring_experiment(ring_allreduce: Callable, world: int, n: int, seed: int) -> dict:
    """Lab 11, in the student's process: ring_allreduce on a seeded `Ring`; its buffers and log come back."""
    ring = Ring(ring_inputs(world, n, seed), max_steps=16 * world + 16)  # ends a loop that never would
    error = None
    try:
        checks.call_student(ring_allreduce, "ring_allreduce", ring)
    except AssertionError:
        raise
    except Exception as e:  # noqa: BLE001 - the student's error, described to the check
        error = _error_text(e)
    return {
        "error": error,
        "buffers": ring.buffers(),
        "pending": ring.pending,
        "steps": ring.steps,
        "messages": [[*m[:6], list(m.holds)] for m in ring.messages],
        "history": np.stack(ring.history),
    }


def _ring_error_hint(error: str) -> str:
    """What to do about an exception ring_allreduce raised, from its text."""
    if "read-only" in error:
        return (
            "the arrays ring.chunk and ring.buffer return are read-only views, as another GPU's memory is "
            "out of a rank's reach: change a rank's data only with ring.send(...) and ring.step()."
        )
    if "already sends" in error:
        return "each step is N sends, one per rank, then one ring.step() that delivers them."
    if "to itself" in error:
        return (
            "each rank sends to its neighbour (r + 1) % ring.world; with one rank there is nothing to send, "
            "and loops over range(ring.world - 1) run zero times."
        )
    return (
        "use ring.world, ring.chunk(rank, i), ring.send(src, dst, i, reduce=...) and ring.step(); ranks "
        "and chunk indices go from 0 to ring.world - 1 (take them % ring.world)."
    )


def _holders(counts: np.ndarray) -> str:
    """'ranks [0, 2]' (each once), or with the ranks counted more than once named."""
    once = [q for q, c in enumerate(counts) if c == 1]
    more = [f"rank {q} {c} times" for q, c in enumerate(counts) if c > 1]
    return f"ranks {once}" + (f" and {', '.join(more)}" if more else "")


def _ring_value_hint(out: dict, msgs: list[Message], world: int) -> str:
    """Why the buffers are wrong, from which ranks' values each chunk held after each step."""
    history = np.asarray(out["history"])
    final = history[-1]
    if world > 2 and msgs and all((m.dst - m.src) % world == world - 1 for m in msgs):
        return (
            "your messages go to the left neighbour, (r - 1) % N. That ring works too, but the chunk indices "
            "turn round with it: (r + s) % N in the reduce-scatter, (r - 1 + s) % N in the all-gather. Or "
            "send to (r + 1) % N, as the text does."
        )
    if world > 1 and len(history) >= world:
        after_rs = history[world - 1]  # after the N - 1 reduce-scatter steps
        for r in range(world):
            if not any((after_rs[r, i] == 1).all() for i in range(world)):
                nxt = (r + 1) % world
                return (
                    f"after the {world - 1} reduce-scatter steps no chunk of rank {r} adds up every rank's "
                    f"values once (its chunk {nxt} should, and holds {_holders(after_rs[r, nxt])}). In "
                    "reduce-scatter step s, rank r sends chunk (r - s) % N, the chunk it received and added "
                    "to in the step before, so that each partial sum travels on round the ring."
                )
    twice = np.argwhere(final > 1)
    if twice.size:
        r, i, q = (int(v) for v in twice[0])
        late = [m for m in msgs if m.step >= world - 1 and m.reduce]
        why = (
            f" The all-gather's messages (steps {world - 1} to {2 * world - 3}) were sent with reduce=True."
            if late
            else ""
        )
        return (
            f"rank {r}'s chunk {i} ends with rank {q}'s values {final[r, i, q]} times instead of once."
            f"{why} In the all-gather the receiver overwrites its copy with the reduced chunk (reduce=False)."
        )
    for m in msgs:
        if not m.reduce and any(c != 1 for c in m.holds):
            return (
                f"in step {m.step} (counting from 0) rank {m.src} sent chunk {m.chunk} with reduce=False, "
                f"but it held only {_holders(m.holds)}'s values, so rank {m.dst} lost the sum it had. The "
                "all-gather passes on the chunks already complete: after the reduce-scatter rank r holds "
                "the whole sum of chunk (r + 1) % N, and in all-gather step s it sends chunk (r + 1 - s) % N."
            )
    return (
        "in the reduce-scatter the receiver adds (reduce=True) and rank r sends chunk (r - s) % N at step s; "
        "in the all-gather the receiver overwrites (reduce=False) and rank r sends chunk (r + 1 - s) % N."
    )


def _ring_steps_hint(steps: int, world: int) -> str:
    """Why a ring all-reduce took `steps` steps instead of 2(N - 1)."""
    if steps == world - 1:
        return (
            "that is the reduce-scatter alone: after it, rank r holds the sum of one chunk only, "
            "(r + 1) % N. The all-gather's N - 1 more steps pass each reduced chunk on round the ring, the "
            "receiver overwriting its copy (reduce=False)."
        )
    if steps in (2 * world, 2 * world - 1):
        return (
            "each phase has N - 1 steps (range(ring.world - 1)), not N: after N - 1 steps a chunk has "
            "visited every rank, and one more step brings it back to a rank that already added its values."
        )
    return (
        "each phase, the reduce-scatter and the all-gather, has N - 1 steps, and in each step every rank "
        "sends one chunk, then one ring.step() delivers them all."
    )


def _verify_ring(out: dict, world: int, n: int, seed: int) -> None:
    """One problem of check_ring_allreduce, from the data ring_experiment returned."""
    name = f"ring_allreduce on a ring of {world} ranks of {n} float32 each"
    if out["error"]:
        raise AssertionError(f"{name} raised {out['error']}\nHint: {_ring_error_hint(out['error'])}")
    if out["pending"]:
        raise AssertionError(
            f"{name}: {out['pending']} message(s) were queued but never delivered: call ring.step() after "
            "each step's sends, the last step's too (a send only queues the message)."
        )
    msgs = [Message(*m[:6], tuple(m[6])) for m in out["messages"]]
    for m in msgs:
        if (m.dst - m.src) % world not in (1, world - 1):
            raise AssertionError(
                f"{name}: in step {m.step} (counting from 0) rank {m.src} sent chunk {m.chunk} to rank "
                f"{m.dst}, which is not its neighbour in the ring. In a ring each rank sends only to the "
                "next one, (r + 1) % N, and every link carries the same load; gathering at one rank (a "
                "star) makes that rank receive N - 1 whole buffers, and its link the bottleneck."
            )
    seen: dict[tuple[int, int], int] = {}
    for m in msgs:
        seen[(m.step, m.src)] = seen.get((m.step, m.src), 0) + 1
        if seen[(m.step, m.src)] > 1:
            raise AssertionError(
                f"{name}: rank {m.src} sent more than one chunk in step {m.step}: a rank sends one chunk "
                "per step."
            )
    want = 2 * (world - 1)
    if out["steps"] != want:
        raise AssertionError(
            f"{name}: {out['steps']} steps, expected 2(N - 1) = {want}. Hint: "
            + _ring_steps_hint(out["steps"], world)
        )
    x = ring_inputs(world, n, seed).astype(np.float64)
    expected = x.sum(axis=0)
    got = np.asarray(out["buffers"], dtype=np.float32)
    # each element is the float32 sum of N values, in the ring's order: within gamma_(N-1) * sum |x|
    tol = checks.gamma(max(world - 1, 1)) * np.abs(x).sum(axis=0) + 1e-30
    bad = np.abs(got.astype(np.float64) - expected) > tol
    if bad.any():
        r, k = (int(v) for v in np.argwhere(bad)[0])
        i = next(c for c, (start, stop) in enumerate(chunk_bounds(n, world)) if start <= k < stop)
        raise AssertionError(
            f"{name}: rank {r} is wrong at element {k} (in chunk {i}): expected {expected[k]:.7g}, the sum "
            f"of the {world} ranks' values, got {got[r, k]:.7g} ({int(bad.sum())} of {bad.size} elements of "
            f"the {world} buffers are wrong).\nHint: {_ring_value_hint(out, msgs, world)}"
        )
    for r in range(1, world):
        if not np.array_equal(got[r], got[0]):
            k = int(np.argwhere(got[r] != got[0])[0][0])
            raise AssertionError(
                f"{name}: ranks 0 and {r} end with different float32 values at element {k} ({got[0, k]!r} "
                f"and {got[r, k]!r}). Hint: in the all-gather each rank copies the one reduced chunk "
                "(reduce=False), so every rank ends with the same bits."
            )
    formula = multigpu.allreduce_bytes(n, world, 4)
    for r in range(world):
        sent = sum(m.nbytes for m in msgs if m.src == r)
        if abs(sent - formula) > 2 * 4:
            raise AssertionError(
                f"{name}: rank {r} sent {sent} bytes; the ring sends 2(N - 1)/N of the buffer per rank, "
                f"multigpu.allreduce_bytes({n}, {world}) = {formula} bytes (give or take one element per "
                "phase, the chunks being uneven). Hint: every rank sends one chunk in each of the 2(N - 1) "
                "steps."
            )


def check_ring_allreduce(
    ring_allreduce: Callable[[Ring], None], cases: Sequence[tuple[int, int]] | None = None, seed: int = 0
) -> None:
    """Lab 11: ring_allreduce(ring) leaves every rank with the sum, by the ring's neighbour sends.

    Each case is (ranks, elements per rank). Default: 4 ranks of 10 float32, 3 of 7 and 2 of 5, so
    the chunks are uneven. Checked: no error, every message delivered, neighbour sends only, one
    chunk per rank and step, 2(N - 1) steps, every rank's buffer against the float64 sum (within the
    rounding of N - 1 float32 additions), the same bits on every rank, and the ring formula's bytes.
    """
    for world, n in cases or [(4, 10), (3, 7), (2, 5)]:
        out = checks.student_side(ring_experiment, ring_allreduce, world, n, seed)
        _verify_ring(out, world, n, seed)
        seed += 1


# Exercise 2: the tensor-parallel MLP ----------------------------------------------------------------

SHARD_KEYS = ("w1", "b1", "w2")
#: seconds the ranks of tp_forward have, all together, before a missing or endless rank is reported
TP_TIMEOUT = 20.0


def tp_problem(tokens: int, d_in: int, hidden: int, d_out: int, seed: int) -> tuple:
    """Lab 11: float64 fc1 (d_in -> hidden), fc2 (hidden -> d_out), x (tokens, d_in), g (tokens, d_out).

    g weighs the outputs in the loss (y * g).sum(). All are drawn from a generator of their own, so the
    notebook's global random state is left alone.
    """
    gen = torch.Generator().manual_seed(seed)
    fc1 = torch.nn.Linear(d_in, hidden, dtype=torch.float64)
    fc2 = torch.nn.Linear(hidden, d_out, dtype=torch.float64)
    with torch.no_grad():
        for layer in (fc1, fc2):
            w = torch.randn(layer.weight.shape, generator=gen, dtype=torch.float64)
            layer.weight.copy_(w / layer.in_features**0.5)
            layer.bias.copy_(torch.randn(layer.bias.shape, generator=gen, dtype=torch.float64))
    x = torch.randn(tokens, d_in, generator=gen, dtype=torch.float64)
    g = torch.randn(tokens, d_out, generator=gen, dtype=torch.float64)
    return fc1, fc2, x, g


def _rows(hidden: int, world: int, rank: int) -> slice:
    """Rank's hidden features: rank·h/N up to (rank+1)·h/N (`tensor_parallel.shard_size` is h/N)."""
    size = tensor_parallel.shard_size(hidden, world)
    return slice(rank * size, (rank + 1) * size)


def _reference_shard(fc1: torch.nn.Linear, fc2: torch.nn.Linear, rank: int, world: int) -> dict:
    """Rank's w1 (h/N, d_in), b1 (h/N,) and w2 (d_out, h/N), detached copies."""
    rows = _rows(fc1.out_features, world, rank)
    parts = {"w1": fc1.weight[rows], "b1": fc1.bias[rows], "w2": fc2.weight[:, rows]}
    return {k: v.detach().clone() for k, v in parts.items()}


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
            return {"error": _error_text(e), "rank": rank, "shards": shards}
        if not isinstance(got, dict):
            return {"type": _type_name(got), "rank": rank, "shards": shards}
        shard = {}
        for key in SHARD_KEYS:
            if key not in got:
                shard[key] = {"type": "missing"}
            elif isinstance(got[key], torch.Tensor):
                shard[key] = got[key].detach().clone()
            else:
                shard[key] = {"type": _type_name(got[key])}
        shards.append(shard)
    return {"shards": shards}


def _shape_hint(key: str, shape: tuple, rank: int, world: int, d_in: int, hidden: int, d_out: int) -> str:
    """Which usual mistake gives rank's `key` this shape."""
    hn = hidden // world
    own = f"rank·h/N = {rank * hn} up to (rank + 1)·h/N = {(rank + 1) * hn}"
    short = f"its share starts at rank·h/N = rank * (h // N), not rank * h; rank {rank}'s are {own}."
    sliced = shape[1] if key == "w2" and len(shape) == 2 else shape[0] if shape else None
    if world > 1 and sliced != hn and sliced in (world, d_in // world):
        return (
            f"rank {rank}'s {key} has {sliced} where h/N = {hn} belong: torch.split(t, size) cuts pieces of "
            f"`size` each and torch.chunk(t, n) cuts n pieces. Split the hidden features (h = {hidden}) into "
            f"N = {world} pieces: torch.chunk(t, world, dim)[rank], or the slice {own}."
        )
    if key == "w1":
        if len(shape) == 2 and shape[0] == hidden and shape[1] < d_in:
            return (
                f"w1 should hold h/N rows of fc1.weight (h/N, d_in) = ({hn}, {d_in}); yours is {shape}: that "
                "is a row-parallel split, whose outputs are partial sums GELU cannot be applied to. Split "
                "fc1 by its output features, the rows of its weight."
            )
        if shape == (d_in, hn):
            return "that is transposed: nn.Linear stores its weight as (out_features, in_features)."
        if shape == (hidden, d_in):
            return f"that is the whole of fc1.weight: each rank keeps h/N = {hn} of its rows, {own}."
        if len(shape) == 2 and shape[1] == d_in and shape[0] < hn:
            return f"rank {rank} got {shape[0]} rows of fc1.weight instead of h/N = {hn}: {short}"
        return f"rank {rank}'s w1 is rows {own} of fc1.weight, all its columns: (h/N, d_in) = ({hn}, {d_in})."
    if key == "b1":
        if shape == (hidden,):
            return (
                "b1 is fc1's whole bias: a column-parallel layer keeps the bias entries of its own output "
                f"features, the same h/N = {hn} as w1's rows."
            )
        if len(shape) == 1 and shape[0] < hn:
            return f"rank {rank} got {shape[0]} entries of fc1.bias instead of h/N = {hn}: {short}"
        return f"rank {rank}'s b1 is entries {own} of fc1.bias: (h/N,) = ({hn},)."
    if len(shape) == 2 and shape[1] == hidden and shape[0] < d_out:
        return (
            f"w2 should hold h/N columns of fc2.weight, (d_out, h/N) = ({d_out}, {hn}); yours is {shape}, "
            "rows of fc2.weight, which split fc2 by its outputs. fc2 is split by its input features: the h/N "
            "columns that multiply this rank's slice of the hidden layer, fc2.weight[:, a:b]."
        )
    if shape == (hn, d_out):
        return "that is transposed: nn.Linear stores its weight as (out_features, in_features)."
    if shape == (d_out, hidden):
        return f"that is the whole of fc2.weight: each rank keeps h/N = {hn} of its columns, {own}."
    if len(shape) == 2 and shape[0] == d_out and shape[1] < hn:
        return f"rank {rank} got {shape[1]} columns of fc2.weight instead of h/N = {hn}: {short}"
    return f"rank {rank}'s w2 is columns {own} of fc2.weight, all its rows: (d_out, h/N) = ({d_out}, {hn})."


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


def _verify_shards(out: dict, world: int, d_in: int, hidden: int, d_out: int, seed: int) -> None:
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
        want = _reference_shard(fc1, fc2, rank, world)
        for key in SHARD_KEYS:
            got = shard[key]
            if isinstance(got, dict):
                what = "has no key" if got["type"] == "missing" else f"holds a {got['type']} under"
                raise AssertionError(
                    f"{call} {what} {key!r}: return a dict with the torch tensors 'w1', 'b1' and 'w2'."
                )
            shape = tuple(got.shape)
            if shape != tuple(want[key].shape):
                raise AssertionError(
                    f"{call}: rank {rank}'s {key} has shape {shape}, expected {tuple(want[key].shape)}. "
                    + f"Hint: {_shape_hint(key, shape, rank, world, d_in, hidden, d_out)}"
                )
            if got.dtype != want[key].dtype:
                raise AssertionError(
                    f"{call}: rank {rank}'s {key} is {got.dtype}, the layers are {want[key].dtype}: keep "
                    "their tensors as they are (slices, no conversion)."
                )
            if torch.equal(got, want[key]):
                continue
            whole = {
                "w1": (fc1.weight, 0, "rows"),
                "b1": (fc1.bias, 0, "entries"),
                "w2": (fc2.weight, 1, "columns"),
            }
            tensor, dim, unit = whole[key]
            found = _located(got, tensor.detach(), dim)
            layer = "fc1.weight" if key == "w1" else "fc1.bias" if key == "b1" else "fc2.weight"
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


def _grad(t: torch.Tensor) -> torch.Tensor | None:
    """A copy of t's gradient, or None when none reached it."""
    return None if t.grad is None else t.grad.detach().clone()


@_one_thread
def forward_experiment(
    tp_forward: Callable,
    world: int,
    tokens: int,
    d_in: int,
    hidden: int,
    d_out: int,
    seed: int,
    timeout: float = TP_TIMEOUT,
) -> dict:
    """Lab 11, in the student's process: tp_forward on `world` thread ranks, then one backward pass.

    Each rank gets its own leaf copies of x, of its (correct) shard and of b2, and the all_reduce of a
    `ThreadGroup`. Returns each rank's output (or error, or type), the shapes each rank all-reduced,
    and, when every output is a tensor of the right shape with a gradient, every rank's gradients of
    L = sum over ranks of (y_r * g).sum().
    """
    fc1, fc2, x, g = tp_problem(tokens, d_in, hidden, d_out, seed)
    shards = [
        {k: v.requires_grad_() for k, v in _reference_shard(fc1, fc2, r, world).items()} for r in range(world)
    ]
    xs = [x.clone().requires_grad_() for _ in range(world)]
    b2s = [fc2.bias.detach().clone().requires_grad_() for _ in range(world)]
    group = ThreadGroup(world, timeout)
    outcomes = group.run(
        lambda r, all_reduce: checks.call_student(
            tp_forward, "tp_forward", xs[r], shards[r], b2s[r], all_reduce
        )
    )
    for o in outcomes:
        if isinstance(o.error, AssertionError):  # not done yet
            raise o.error
    ranks: list[dict] = []
    for o in outcomes:
        if not o.finished:
            ranks.append({"stuck": True})
        elif o.error is not None:
            ranks.append({"error": _error_text(o.error), "collective": isinstance(o.error, CollectiveError)})
        elif isinstance(o.value, torch.Tensor):
            ranks.append({"y": o.value.detach().clone(), "requires_grad": bool(o.value.requires_grad)})
        else:
            ranks.append({"type": _type_name(o.value)})
    out: dict[str, Any] = {
        "ranks": ranks,
        "calls": [[list(s) for s in c] for c in group.calls],
        "grads": None,
        "backward_error": None,
        "timeout": timeout,
    }
    ys = [o.value for o in outcomes]
    usable = all(
        isinstance(y, torch.Tensor) and y.requires_grad and tuple(y.shape) == (tokens, d_out) for y in ys
    )
    if usable:
        try:
            sum((y * g).sum() for y in ys).backward()
        except Exception as e:  # noqa: BLE001 - the student's graph failed: described to the check
            out["backward_error"] = _error_text(e)
        else:
            out["grads"] = [
                {**{k: _grad(shards[r][k]) for k in SHARD_KEYS}, "b2": _grad(b2s[r]), "x": _grad(xs[r])}
                for r in range(world)
            ]
    return out


def _forward_error_hint(error: str) -> str:
    """What to do about an exception tp_forward raised, from its text."""
    if "shapes cannot be multiplied" in error or "size of tensor" in error:
        return (
            "x is (tokens, d_in) and w1 (h/N, d_in), so x @ w1.T + b1 is (tokens, h/N); with w2 "
            "(d_out, h/N), that times w2.T is (tokens, d_out). nn.Linear's weights are (out, in): "
            "multiply by their transpose, or use F.linear(x, w, b)."
        )
    return (
        "x is (tokens, d_in); shard['w1'] is (h/N, d_in), shard['b1'] (h/N,), shard['w2'] (d_out, h/N); "
        "b2 is (d_out,); all_reduce(t) returns the sum of every rank's t (a torch tensor of the same shape)."
    )


def _forward_value_hint(y: torch.Tensor, fc1, fc2, x, world: int) -> str:
    """The usual mistake whose output y is, recognised by computing each on the unsplit layers."""
    h = fc1(x)
    w2, b2 = fc2.weight, fc2.bias
    expected = fc2(F.gelu(h))
    gelu_after = (
        "GELU was applied after the all-reduce: GELU is not linear (gelu(a + b) is not gelu(a) + gelu(b)), "
        "so it must act on each rank's own hidden slice, before fc2; that is why fc1 is split by its outputs."
    )
    known = [
        (
            expected + (world - 1) * b2,
            f"the output is off by (N-1)·b2: add fc2's bias once, after the all-reduce (added before it, the "
            f"{world} ranks' copies of b2 are summed with the partial outputs).",
        ),
        (expected - b2, "fc2's bias b2 is missing: add it once, after the all-reduce."),
        (fc2(F.gelu(x @ fc1.weight.T)), "fc1's bias is missing: the hidden layer is gelu(x @ w1.T + b1)."),
        (F.gelu(h @ w2.T) + b2, gelu_after),
        (F.gelu(h @ w2.T + b2), gelu_after),
        (
            fc2(F.gelu(h, approximate="tanh")),
            "that is GELU's tanh approximation: use F.gelu(h), the exact (erf) form and nn.GELU()'s default, "
            "which the unsplit MLP uses.",
        ),
        (fc2(h), "there is no activation: apply F.gelu to x @ w1.T + b1, before fc2."),
        (fc2(F.relu(h)), "that is ReLU: the MLP's activation is GELU, F.gelu."),
    ]
    for candidate, hint in known:
        if torch.allclose(y.to(torch.float64), candidate, rtol=1e-9, atol=1e-12):
            return hint
    return (
        "each rank computes gelu(x @ w1.T + b1) @ w2.T, a partial output (tokens, d_out); all_reduce sums "
        "the N of them; then b2 is added once."
    )


def _verify_forward(
    out: dict, world: int, tokens: int, d_in: int, hidden: int, d_out: int, seed: int
) -> None:
    """One problem of check_tp_mlp's second half: calls, outputs and gradients against the unsplit MLP."""
    call = (
        f"tp_forward on {world} ranks (x ({tokens}, {d_in}), fc1 {d_in} -> {hidden}, fc2 {hidden} -> {d_out})"
    )
    ranks = out["ranks"]
    errors = [(r, d) for r, d in enumerate(ranks) if "error" in d]
    own = [(r, d) for r, d in errors if not d["collective"]]
    if own:
        r, d = own[0]
        raise AssertionError(f"{call}: rank {r} raised {d['error']}\nHint: {_forward_error_hint(d['error'])}")
    if errors:
        r, d = errors[0]
        raise AssertionError(f"{call}: rank {r}'s all_reduce failed: {d['error']}")
    stuck = [r for r, d in enumerate(ranks) if d.get("stuck")]
    if stuck:
        raise AssertionError(
            f"{call}: rank(s) {stuck} had not returned after {out['timeout']:g} s (such a thread keeps "
            "running: restart the kernel to stop it). Hint: is there an endless loop, or a wait for "
            "something the other ranks never do?"
        )
    for r, d in enumerate(ranks):
        if "type" in d:
            if d["type"] == "NoneType":
                raise AssertionError(
                    f"`tp_forward` returned None on rank {r}: {checks.NOT_DONE} (Did you `return` it?)"
                )
            raise AssertionError(
                f"{call}: rank {r} returned a {d['type']}: return a torch tensor (tokens, d_out)."
            )
    want = [tokens, d_out]
    for r, shapes in enumerate(out["calls"]):
        if not shapes:
            raise AssertionError(
                f"{call}: rank {r} never called all_reduce. Hint: each rank's gelu(x @ w1.T + b1) @ w2.T is "
                "only a partial sum, over its h/N hidden features; all_reduce sums the N partial outputs, "
                "then b2 is added."
            )
        if len(shapes) > 1:
            raise AssertionError(
                f"{call}: rank {r} called all_reduce {len(shapes)} times, on {[tuple(s) for s in shapes]}. "
                f"Hint: Megatron-LM's MLP needs one all-reduce in the forward pass, of fc2's partial output "
                f"(tokens, d_out) = {tuple(want)}; fc1's output needs none, since each rank applies GELU to "
                "its own hidden slice."
            )
        if list(shapes[0]) != want:
            raise AssertionError(
                f"{call}: rank {r} all-reduced a tensor of shape {tuple(shapes[0])}. Hint: the one "
                f"all-reduce sums fc2's partial outputs, (tokens, d_out) = {tuple(want)}: GELU and fc2's "
                "product come before it, b2 after."
            )
    fc1, fc2, x, g = tp_problem(tokens, d_in, hidden, d_out, seed)
    x_ref = x.clone().requires_grad_()
    expected = fc2(F.gelu(fc1(x_ref)))
    for r, d in enumerate(ranks):
        y = d["y"]
        name = f"rank {r}'s output ({world} ranks, x ({tokens}, {d_in}), {d_in} -> {hidden} -> {d_out})"
        if tuple(y.shape) != tuple(want):
            raise AssertionError(
                f"{name} has shape {tuple(y.shape)}, expected (tokens, d_out) = {tuple(want)}."
            )
        if y.dtype != torch.float64:
            raise AssertionError(f"{name} is {y.dtype}: keep the input's dtype, float64 here (no .float()).")
        with torch.no_grad():
            _compare(
                y,
                expected.detach(),
                name=name,
                rtol=1e-9,
                atol=1e-12,
                hint=_forward_value_hint(y, fc1, fc2, x, world),
            )
        if not d["requires_grad"]:
            raise AssertionError(
                f"{name} has no gradient: compute it with autograd on (no .detach(), .data, no_grad())."
            )
    if out["backward_error"]:
        raise AssertionError(f"{call}: the backward pass through your output raised {out['backward_error']}")
    (expected * g).sum().backward()
    grads = out["grads"]
    for r in range(world):
        rows = _rows(hidden, world, r)
        ref = {
            "w1": fc1.weight.grad[rows],
            "b1": fc1.bias.grad[rows],
            "w2": fc2.weight.grad[:, rows],
            "b2": fc2.bias.grad,
        }
        for key, want_grad in ref.items():
            got = grads[r][key]
            what = f"the gradient of rank {r}'s {key}"
            if got is None:
                raise AssertionError(
                    f"{call}: no gradient reached rank {r}'s {key}: compute the output from the shard's "
                    "tensors with autograd on (no .detach(), .data, .numpy() or torch.no_grad())."
                )
            _compare(
                got,
                want_grad,
                name=what,
                rtol=1e-9,
                atol=1e-12 * (float(want_grad.abs().max()) or 1.0),
                hint="the output is right but this gradient is not: build the output from the shard's "
                "tensors with differentiable torch operations, and let the all_reduce you are given sum.",
            )
    if any(grads[r]["x"] is None for r in range(world)):
        raise AssertionError(
            f"{call}: no gradient reached x: compute the output from x itself, not a detached copy."
        )
    summed = sum(grads[r]["x"] for r in range(world))
    _compare(
        summed,
        x_ref.grad,
        name="the input's gradient, summed over the ranks",
        rtol=1e-9,
        atol=1e-12 * (float(x_ref.grad.abs().max()) or 1.0),
        hint="use x as it is: each rank's share of its gradient flows back through w1; the shares add up.",
    )


def check_tp_mlp(
    shard_mlp: Callable[[torch.nn.Linear, torch.nn.Linear, int, int], dict],
    tp_forward: Callable[..., torch.Tensor],
    cases: Sequence[tuple[int, int, int, int, int]] | None = None,
    seed: int = 0,
) -> None:
    """Lab 11: shard_mlp's shards and tp_forward's outputs and gradients against the unsplit MLP.

    Each case is (ranks, tokens, d_in, hidden, d_out), hidden a multiple of the ranks. First every
    rank's shard is compared with its slices of fc1 and fc2 (shapes, then values); then tp_forward
    runs on every rank as a thread, with the correct shards and an all_reduce that sums the ranks'
    tensors (forward) and passes the gradient on unchanged (backward, Megatron-LM's g); its output,
    its one all-reduce of (tokens, d_out) per rank, and the gradients of every shard, of b2 and of x
    are compared with the unsplit fc2(gelu(fc1(x))) in float64.
    Default: 2 ranks (3 tokens, 6 -> 16 -> 10) and 4 ranks (5 tokens, 12 -> 32 -> 20).
    """
    for world, tokens, d_in, hidden, d_out in cases or [(2, 3, 6, 16, 10), (4, 5, 12, 32, 20)]:
        shards = checks.student_side(shard_experiment, shard_mlp, world, d_in, hidden, d_out, seed)
        _verify_shards(shards, world, d_in, hidden, d_out, seed)
        out = checks.student_side(
            forward_experiment, tp_forward, world, tokens, d_in, hidden, d_out, seed, TP_TIMEOUT
        )
        _verify_forward(out, world, tokens, d_in, hidden, d_out, seed)
        seed += 1


# Exercise 3: ZeRO's memory per GPU ------------------------------------------------------------------

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
