"""Chapter 11's simulated ranks in one process: a ring that passes chunks, and threads that all-reduce.

`Ring` holds N ranks' float32 buffers joined in a ring, as NCCL joins GPUs
for its ring all-reduce (Patarasuk and Yuan, "Bandwidth optimal all-reduce
algorithms for clusters of workstations", 2009). Each buffer is cut into N
chunks by `np.array_split` (the sizes need not divide evenly). A rank
changes another rank's memory only by a message: `send(src, dst, i,
reduce)` queues chunk i of `src`'s buffer for `dst`, which adds it to its
own chunk i (`reduce=True`) or overwrites it (`reduce=False`), and `step()`
delivers every message queued since the last step at once, as the sends of
one step travel at the same time on real links (so a chunk read or sent
during a step is the one from before the step). A rank sends at most one
chunk per step. Every delivered message is logged (`messages`, `bytes_sent`),
and the ring tracks which ranks' values each chunk holds and how many times
(`holds`), so a double-counted or missing contribution can be named.

`ThreadGroup` runs N ranks as threads of this process, each given an
`all_reduce(t)` that returns the sum of the N ranks' tensors: Megatron-LM's
"g" (`tensor_parallel.reduce_from_parallel`: all-reduce forward, identity
backward) without `torch.distributed`, so tensor parallelism runs on a laptop,
without sockets. A rank that calls it a different number of times than the
others, or never returns, is named instead of hanging the caller.
"""

from __future__ import annotations

import operator
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch


def follow_chunk(send: Sequence[Sequence[int]], c: int) -> tuple[list[int], int, list[int]]:
    """Chapter 11: chunk c through a ring schedule (`send[s][r]`: the chunk r sends at step s).

    Returns (the processes that add to it, the one where it ends complete,
    the processes that copy it on); raises unless each sender passes on what
    it received the step before, as the book's ring prints it.
    """
    n = len(send[0])
    adders = [list(send[s]).index(c) for s in range(n - 1)]
    owner = (adders[-1] + 1) % n  # the last receiver: the chunk has visited every process once
    copiers = [list(send[s]).index(c) for s in range(n - 1, 2 * n - 2)]
    if adders != [(c + k) % n for k in range(n - 1)] or owner != (c - 1) % n:
        raise AssertionError(f"chunk {c} is summed along {adders}, not round the ring from process {c}")
    if copiers != [(owner + k) % n for k in range(n - 1)]:
        raise AssertionError(f"chunk {c} is copied along {copiers}, not round the ring from process {owner}")
    return adders, owner, copiers


class Message(NamedTuple):
    """One delivered send of a `Ring` (Chapter 11): step (from 0), ranks, chunk, bytes, and what it carried.

    `holds[q]` is how many times rank q's original values were in the chunk sent.
    """

    step: int
    src: int
    dst: int
    chunk: int
    nbytes: int
    reduce: bool
    holds: tuple[int, ...]


def chunk_bounds(n: int, world: int) -> list[tuple[int, int]]:
    """Chapter 11: (start, stop) of each of the `world` chunks of n elements, cut as np.array_split cuts."""
    small, extra = divmod(n, world)  # the first `extra` chunks get one element more
    edges = [i * small + min(i, extra) for i in range(world + 1)]
    return [(edges[i], edges[i + 1]) for i in range(world)]


class Ring:
    """Chapter 11: N ranks' float32 buffers (n,) in a ring; chunks pass between ranks a step at a time.

    `max_steps` (None: no limit) makes `step()` raise once called more often: a loop that never ends.
    """

    def __init__(self, buffers: Sequence[Any], max_steps: int | None = None) -> None:
        arrays = [np.array(b, dtype=np.float32) for b in buffers]
        if not arrays:
            raise ValueError("a ring needs at least one rank's buffer")
        if any(a.ndim != 1 for a in arrays) or len({a.size for a in arrays}) != 1:
            raise ValueError(
                f"every rank needs a 1-D buffer of the same length, got shapes {[a.shape for a in arrays]}"
            )
        self._buffers = arrays
        self.world = len(arrays)
        self.size = arrays[0].size
        self._bounds = chunk_bounds(self.size, self.world)
        # _holds[r, i, q]: how many times rank q's original values are in rank r's chunk i
        self._holds = np.zeros((self.world, self.world, self.world), dtype=np.int64)
        for r in range(self.world):
            self._holds[r, :, r] = 1
        self.history = [self._holds.copy()]  # the holds before the first step and after each one
        self._queue: list[tuple[int, int, int, bool, np.ndarray, tuple[int, ...]]] = []
        self.messages: list[Message] = []
        self.steps = 0
        self.max_steps = max_steps  # None: no limit; else step() raises past that many calls
        self._step_calls = 0

    def _index(self, value: Any, not_int: str, out_of_range: Callable[[int], str]) -> int:
        """`value` as an int in 0..world-1, else a TypeError (`not_int`) or a ValueError that says why."""
        try:
            i = operator.index(value)
        except TypeError:
            raise TypeError(f"{not_int}, got {value!r}") from None
        if not 0 <= i < self.world:
            raise ValueError(out_of_range(i))
        return i

    def _rank(self, rank: Any, what: str) -> int:
        """`rank` as an int in 0..world-1, else a ValueError that says why."""
        return self._index(
            rank,
            f"{what} must be an int rank",
            lambda r: (
                f"{what} = {r} is not a rank of this ring: ranks are 0..{self.world - 1} "
                f"(the neighbour of rank r is (r + 1) % ring.world)"
            ),
        )

    def _chunk_index(self, i: Any) -> int:
        """`i` as an int in 0..world-1, else a ValueError that says why."""
        return self._index(
            i,
            "a chunk index must be an int",
            lambda c: (
                f"chunk {c} does not exist: a buffer has {self.world} chunks, 0..{self.world - 1} "
                f"(take the index modulo ring.world, e.g. (r - s) % ring.world)"
            ),
        )

    def bounds(self, i: int) -> tuple[int, int]:
        """Chapter 11: (start, stop) of chunk i in every rank's buffer (np.array_split's cut)."""
        return self._bounds[self._chunk_index(i)]

    def chunk(self, rank: int, i: int) -> np.ndarray:
        """Chapter 11: a read-only view of chunk i of `rank`'s buffer, float32."""
        start, stop = self.bounds(i)
        view = self._buffers[self._rank(rank, "rank")][start:stop]
        view.flags.writeable = False
        return view

    def buffer(self, rank: int) -> np.ndarray:
        """Chapter 11: a read-only view of `rank`'s whole buffer (n,), float32."""
        view = self._buffers[self._rank(rank, "rank")][:]
        view.flags.writeable = False
        return view

    def holds(self, rank: int, i: int) -> tuple[int, ...]:
        """Chapter 11: how many times each rank's original values are in `rank`'s chunk i (1 each: summed)."""
        return tuple(int(v) for v in self._holds[self._rank(rank, "rank"), self._chunk_index(i)])

    @property
    def pending(self) -> int:
        """Chapter 11: messages queued by `send` and not yet delivered by `step`."""
        return len(self._queue)

    def send(self, src: int, dst: int, i: int, reduce: bool = True) -> None:
        """Chapter 11: queue chunk i of `src`'s buffer for `dst`, added there (reduce) or copied over it.

        The chunk travels as it is now; `step()` delivers it. A rank sends one chunk per step.
        """
        src, dst = self._rank(src, "src"), self._rank(dst, "dst")
        i = self._chunk_index(i)
        if src == dst:
            raise ValueError(f"rank {src} cannot send to itself: a message goes to another rank")
        if not isinstance(reduce, (bool, np.bool_)):
            raise TypeError(f"reduce must be True (add) or False (overwrite), got {reduce!r}")
        busy = [q for q in self._queue if q[0] == src]
        if busy:
            raise ValueError(
                f"rank {src} already sends chunk {busy[0][2]} in this step: a rank sends one chunk per "
                f"step. Call ring.step() to deliver this step's messages before the next step's sends."
            )
        start, stop = self._bounds[i]
        payload = self._buffers[src][start:stop].copy()
        self._queue.append((src, dst, i, bool(reduce), payload, tuple(int(v) for v in self._holds[src, i])))

    def step(self) -> int:
        """Chapter 11: deliver every queued message at once; return how many (an empty step is not one)."""
        self._step_calls += 1
        if self.max_steps is not None and self._step_calls > self.max_steps:
            raise RuntimeError(
                f"ring.step() called more than {self.max_steps} times on a ring of {self.world} ranks: does "
                f"a loop never end? (a ring all-reduce takes 2(N - 1) = {2 * (self.world - 1)} steps)"
            )
        queue, self._queue = self._queue, []
        if not queue:
            return 0
        for src, dst, i, reduce, payload, held in queue:
            start, stop = self._bounds[i]
            target = self._buffers[dst][start:stop]
            if reduce:
                target += payload  # float32 addition, as a GPU's reduction kernel does
                self._holds[dst, i] += held
            else:
                target[...] = payload
                self._holds[dst, i] = held
            self.messages.append(Message(self.steps, src, dst, i, payload.nbytes, reduce, held))
        self.steps += 1
        self.history.append(self._holds.copy())
        return len(queue)

    def bytes_sent(self, rank: int) -> int:
        """Chapter 11: bytes that `rank` has sent in delivered messages."""
        r = self._rank(rank, "rank")
        return sum(m.nbytes for m in self.messages if m.src == r)

    def buffers(self) -> np.ndarray:
        """Chapter 11: a copy of every rank's buffer, (world, n) float32."""
        return np.stack(self._buffers) if self.size else np.zeros((self.world, 0), np.float32)


# Ranks as threads ----------------------------------------------------------------------------------


class CollectiveError(RuntimeError):
    """Chapter 11: the ranks' all_reduce calls do not match (a rank missing, late or with another shape)."""


class Outcome(NamedTuple):
    """What one rank of `ThreadGroup.run` did (Chapter 11): its return value, or its exception, or neither."""

    value: Any
    error: BaseException | None
    finished: bool  # False: still running when the group's time was up


def _ordinal(k: int) -> str:
    """'1st', '2nd', '11th': call k of an all_reduce, as a message names it."""
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


class ThreadGroup:
    """Chapter 11: `world` ranks as threads of this process, with a summing all-reduce (no sockets).

    `run(fn)` calls fn(rank, all_reduce) in one thread per rank and returns one
    `Outcome` per rank; `all_reduce(t)` returns the sum of the ranks' tensors t
    (the same shape on every rank), added in rank order so that every rank gets
    the same bits, with an identity backward (Megatron-LM's g). `calls[r]` lists
    the shapes rank r all-reduced. A rank that returns or raises before its
    peers' k-th call, or that does not arrive within `timeout` seconds, makes
    the others raise `CollectiveError` naming it, and `run` returns within
    `timeout` seconds (and a second's grace) whatever the ranks do.
    """

    def __init__(self, world: int, timeout: float = 20.0) -> None:
        if world < 1:
            raise ValueError(f"a group needs at least one rank, got {world}")
        self.world, self.timeout = world, timeout
        self.calls: list[list[tuple[int, ...]]] = [[] for _ in range(world)]
        self._values: dict[tuple[int, int], Any] = {}
        self._done = [False] * world
        self._cond = threading.Condition()
        self._deadline = time.monotonic() + timeout

    def _sum(self, rank: int, t: Any) -> Any:
        """The rendezvous: wait for every rank's k-th tensor, return their sum (a new tensor)."""
        with self._cond:
            k = len(self.calls[rank])
            self.calls[rank].append(tuple(t.shape))
            self._values[(k, rank)] = t.detach().clone()
            self._cond.notify_all()

            def ready() -> bool:
                arrived = all(len(c) > k for c in self.calls)
                gone = any(self._done[q] and len(self.calls[q]) <= k for q in range(self.world))
                return arrived or gone

            self._cond.wait_for(ready, timeout=max(0.0, self._deadline - time.monotonic()))
            missing = [q for q in range(self.world) if len(self.calls[q]) <= k]
            if missing:
                gone = [q for q in missing if self._done[q]]
                if gone:
                    made = len(self.calls[gone[0]])
                    raise CollectiveError(
                        f"rank {gone[0]} finished after {made} all_reduce call(s), while rank {rank} made "
                        f"its {_ordinal(k + 1)}: every rank must call all_reduce the same number of times, "
                        f"as NCCL's collectives require (otherwise the ranks wait for each other for ever)"
                    )
                raise CollectiveError(
                    f"rank(s) {missing} had not made their {_ordinal(k + 1)} all_reduce call after "
                    f"{self.timeout:g} s, while rank {rank} had: every rank must call all_reduce the same "
                    f"number of times"
                )
            shapes = [self.calls[q][k] for q in range(self.world)]
            if len(set(shapes)) > 1:
                raise CollectiveError(
                    f"the ranks' {_ordinal(k + 1)} all_reduce calls have different shapes, "
                    + ", ".join(f"rank {q} {s}" for q, s in enumerate(shapes))
                    + ": an all-reduce sums tensors of one shape, the same on every rank"
                )
            parts = [self._values[(k, q)] for q in range(self.world)]
        total = parts[0].clone()
        for p in parts[1:]:
            total += p
        return total

    def all_reduce(self, rank: int, t: Any) -> Any:
        """Chapter 11: rank's tensor t summed over the group; backward passes the gradient on unchanged."""
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"all_reduce takes a torch tensor, got a {type(t).__name__}")
        return _AllReduce.apply(t, self, rank)

    def run(self, fn: Callable[[int, Callable[[Any], Any]], Any]) -> list[Outcome]:
        """Chapter 11: fn(rank, all_reduce) in a thread per rank; an `Outcome` per rank, within `timeout`."""
        results: list[Outcome] = [Outcome(None, None, False)] * self.world
        self.calls = [[] for _ in range(self.world)]
        self._values, self._done = {}, [False] * self.world
        self._deadline = time.monotonic() + self.timeout

        def body(rank: int) -> None:
            value, error = None, None
            try:
                value = fn(rank, lambda t: self.all_reduce(rank, t))
            except BaseException as e:  # noqa: BLE001 - reported per rank, never lost in a thread
                error = e
            finally:
                results[rank] = Outcome(value, error, True)
                with self._cond:
                    self._done[rank] = True
                    self._cond.notify_all()

        threads = [
            threading.Thread(target=body, args=(r,), name=f"rank-{r}", daemon=True) for r in range(self.world)
        ]
        for t in threads:
            t.start()
        grace = min(1.0, self.timeout)  # for the ranks that stop waiting at the deadline to say so
        for t in threads:
            t.join(max(0.0, self._deadline + grace - time.monotonic()))
        return list(results)


class _AllReduce(torch.autograd.Function):
    """Chapter 11: Megatron-LM's g over threads: the group's sum forward, the gradient as is backward."""

    @staticmethod
    def forward(ctx, t, group, rank):
        return group._sum(rank, t)

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None
