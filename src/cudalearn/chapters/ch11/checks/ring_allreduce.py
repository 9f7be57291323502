"""Lab 11's first check: the ring all-reduce, run on a `cudalearn.chapters.ch11.ring.Ring`.

The check reads the ring's messages back: neighbours only, one chunk per rank and step, 2(N - 1) steps,
the bytes of the ring formula (`multigpu.allreduce_bytes`), and every rank's buffer against a float64
sum. Everything runs in one process on the CPU; under `cudalearn grade` the ring lives in the student's
process (`ring_experiment`) and only its buffers and log come back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from cudalearn import checks
from cudalearn.chapters.ch11.checks._errors import error_text
from cudalearn.chapters.ch11.ring import Message, Ring, chunk_bounds
from cudalearn.dist import multigpu


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
        error = error_text(e)
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
