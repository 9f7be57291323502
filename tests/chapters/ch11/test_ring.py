"""Chapter 11's simulated ranks (chapters/ch11/ring.py) and lab 11's checks (chapters/ch11/checks/)."""

import threading
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from cudalearn import checks
from cudalearn.chapters.ch11.checks import ring_allreduce as ring_checks
from cudalearn.chapters.ch11.checks import tp_mlp, zero_memory
from cudalearn.chapters.ch11.ring import CollectiveError, Ring, ThreadGroup, chunk_bounds
from cudalearn.dist import multigpu

# A ring all-reduce written here, independently of the lab's solution ---------------------------------


def ring_allreduce(ring, direction=1):
    """Reduce-scatter then all-gather, every rank sending to (r + direction) % N."""
    n = ring.world
    for phase, start in ((True, 0), (False, 1)):
        for s in range(n - 1):
            for r in range(n):
                chunk = (r - direction * (s - start)) % n
                ring.send(r, (r + direction) % n, chunk, reduce=phase)
            ring.step()


def _ring(world, n, seed=0):
    return Ring(ring_checks.ring_inputs(world, n, seed))


# Ring -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 5, 10, 17])
@pytest.mark.parametrize("world", [1, 2, 3, 4, 8])
def test_chunks_are_cut_as_array_split_cuts(world, n):
    sizes = [len(c) for c in np.array_split(np.arange(n), world)]
    bounds = chunk_bounds(n, world)
    assert [b - a for a, b in bounds] == sizes and bounds[0][0] == 0 and bounds[-1][1] == n
    ring = _ring(world, n)
    assert [ring.chunk(0, i).size for i in range(world)] == sizes


@pytest.mark.parametrize("direction", [1, -1])
@pytest.mark.parametrize("world,n", [(1, 6), (2, 5), (3, 7), (4, 10), (5, 3), (8, 100)])
def test_a_ring_all_reduce_sums_every_buffer_with_the_ring_formulas_bytes(world, n, direction):
    x = ring_checks.ring_inputs(world, n, 0)
    ring = Ring(x)
    ring_allreduce(ring, direction)
    got = ring.buffers()
    assert ring.steps == 2 * (world - 1) and ring.pending == 0
    assert all(np.array_equal(got[r], got[0]) for r in range(world))  # the same bits everywhere
    bound = checks.gamma(max(world - 1, 1)) * np.abs(x.astype(np.float64)).sum(axis=0)
    assert np.all(np.abs(got[0] - x.astype(np.float64).sum(axis=0)) <= bound)
    assert all(ring.holds(r, i) == (1,) * world for r in range(world) for i in range(world))
    formula = multigpu.allreduce_bytes(n, world, 4)
    assert all(abs(ring.bytes_sent(r) - formula) <= 8 for r in range(world))


def test_a_step_delivers_its_messages_at_once_and_logs_them():
    ring = Ring([[1.0, 2.0], [10.0, 20.0], [100.0, 200.0]])
    ring.send(0, 1, 0, reduce=True)
    ring.send(1, 2, 0, reduce=False)  # rank 1 sends chunk 0 while it is receiving into it: the old value goes
    assert ring.pending == 2 and ring.chunk(1, 0).tolist() == [10.0]  # nothing moves before the step
    assert ring.step() == 2 and ring.pending == 0 and ring.steps == 1
    assert ring.chunk(1, 0).tolist() == [11.0] and ring.chunk(2, 0).tolist() == [10.0]
    assert ring.holds(1, 0) == (1, 1, 0) and ring.holds(2, 0) == (0, 1, 0)
    assert ring.step() == 0 and ring.steps == 1  # an empty step is not counted
    m = ring.messages[1]
    assert (m.step, m.src, m.dst, m.chunk, m.nbytes, m.reduce, m.holds) == (0, 1, 2, 0, 4, False, (0, 1, 0))
    assert ring.bytes_sent(0) == 4 and ring.bytes_sent(2) == 0
    assert len(ring.history) == 2 and ring.history[0][1, 0].tolist() == [0, 1, 0]


def test_the_ring_refuses_what_a_ring_cannot_do():
    ring = _ring(4, 10)
    with pytest.raises(ValueError, match="read-only"):
        ring.chunk(0, 0)[0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        ring.buffer(1)[:] = 0.0
    with pytest.raises(ValueError, match="cannot send to itself"):
        ring.send(2, 2, 0)
    with pytest.raises(ValueError, match=r"chunk -1 does not exist.*% ring\.world"):
        ring.send(0, 1, -1)
    with pytest.raises(ValueError, match=r"dst = 4 is not a rank.*ranks are 0\.\.3"):
        ring.send(3, 4, 0)
    with pytest.raises(TypeError, match="an int rank"):
        ring.send(0.0, 1, 0)
    with pytest.raises(TypeError, match="reduce must be True"):
        ring.send(0, 1, 0, reduce="add")
    ring.send(np.int64(0), np.int64(1), np.int64(2))  # NumPy integers are ranks and chunks too
    with pytest.raises(ValueError, match=r"rank 0 already sends chunk 2 in this step.*ring\.step\(\)"):
        ring.send(0, 3, 1)
    with pytest.raises(ValueError, match="same length"):
        Ring([[1.0, 2.0], [1.0]])
    capped = Ring(np.zeros((2, 3)), max_steps=3)
    for _ in range(3):
        capped.step()
    with pytest.raises(RuntimeError, match="more than 3 times"):
        capped.step()


# ThreadGroup ----------------------------------------------------------------------------------------


def test_thread_ranks_all_reduce_to_the_same_sum_with_an_identity_backward():
    group = ThreadGroup(4, timeout=10)
    xs = [torch.full((2, 3), float(r + 1), requires_grad=True) for r in range(4)]
    outs = group.run(lambda r, all_reduce: all_reduce(xs[r] * 2))
    assert all(o.finished and o.error is None for o in outs)
    assert all(torch.equal(o.value, torch.full((2, 3), 20.0)) for o in outs)
    assert group.calls == [[(2, 3)]] * 4
    sum(o.value.sum() for o in outs).backward()
    assert all(torch.equal(x.grad, torch.full((2, 3), 2.0)) for x in xs)  # each rank's own path only


def test_a_rank_that_skips_the_all_reduce_is_named_at_once_not_after_the_timeout():
    group = ThreadGroup(3, timeout=30)
    t0 = time.monotonic()
    outs = group.run(lambda r, all_reduce: torch.zeros(2) if r == 1 else all_reduce(torch.ones(2)))
    assert time.monotonic() - t0 < 5
    assert outs[1].error is None
    for r in (0, 2):
        assert isinstance(outs[r].error, CollectiveError)
        assert "rank 1 finished after 0 all_reduce call(s)" in str(outs[r].error)


def test_shapes_that_differ_and_arguments_that_are_not_tensors_are_refused():
    group = ThreadGroup(2, timeout=10)
    outs = group.run(lambda r, all_reduce: all_reduce(torch.ones(r + 1)))
    assert all("different shapes, rank 0 (1,), rank 1 (2,)" in str(o.error) for o in outs)
    outs = ThreadGroup(1, timeout=10).run(lambda r, all_reduce: all_reduce(np.ones(2)))
    assert isinstance(outs[0].error, TypeError) and "got a ndarray" in str(outs[0].error)


def test_a_rank_that_never_returns_is_reported_and_the_group_still_returns():
    release = threading.Event()
    group = ThreadGroup(2, timeout=0.3)
    t0 = time.monotonic()
    outs = group.run(lambda r, all_reduce: release.wait(30) if r == 1 else all_reduce(torch.ones(1)))
    release.set()
    assert time.monotonic() - t0 < 5
    assert not outs[1].finished
    assert isinstance(outs[0].error, CollectiveError) and "rank(s) [1] had not made" in str(outs[0].error)


# The checks -----------------------------------------------------------------------------------------


def test_check_ring_allreduce_passes_both_directions_and_names_planted_mistakes():
    ring_checks.check_ring_allreduce(ring_allreduce)
    ring_checks.check_ring_allreduce(lambda ring: ring_allreduce(ring, -1), cases=[(1, 4), (5, 3), (8, 33)])

    def forgets_the_last_step(ring):
        n = ring.world
        for s in range(n - 1):
            for r in range(n):
                ring.send(r, (r + 1) % n, (r - s) % n)
            ring.step()
        for s in range(n - 1):
            for r in range(n):
                ring.send(r, (r + 1) % n, (r + 1 - s) % n, reduce=False)
            if s < n - 2:
                ring.step()

    with pytest.raises(AssertionError, match=r"4 message\(s\) were queued but never delivered"):
        ring_checks.check_ring_allreduce(forgets_the_last_step)
    with pytest.raises(AssertionError, match="not done yet"):
        ring_checks.check_ring_allreduce(lambda ring: (_ for _ in ()).throw(NotImplementedError()))

    def endless(ring):
        while True:
            ring.step()

    with pytest.raises(AssertionError, match="does a loop never end"):
        ring_checks.check_ring_allreduce(endless)


def _shard(fc1, fc2, rank, world):
    rows = slice(rank * fc1.out_features // world, (rank + 1) * fc1.out_features // world)
    return {"w1": fc1.weight[rows], "b1": fc1.bias[rows], "w2": fc2.weight[:, rows]}


def _forward(x, shard, b2, all_reduce):
    return all_reduce(F.gelu(x @ shard["w1"].T + shard["b1"]) @ shard["w2"].T) + b2


def test_check_tp_mlp_passes_the_megatron_split_and_matches_the_unsplit_layers():
    tp_mlp.check_tp_mlp(_shard, _forward)
    tp_mlp.check_tp_mlp(_shard, _forward, cases=[(1, 2, 5, 8, 3), (8, 2, 16, 64, 8)])


def test_check_tp_mlp_names_a_rank_that_skips_the_all_reduce_without_waiting():
    first = threading.Lock()

    def only_one_rank_reduces(x, shard, b2, all_reduce):
        partial = F.gelu(x @ shard["w1"].T + shard["b1"]) @ shard["w2"].T
        if first.acquire(blocking=False):  # the first rank to get here all-reduces, the others do not
            return all_reduce(partial) + b2
        return partial + b2

    t0 = time.monotonic()
    with pytest.raises(
        AssertionError, match=r"all_reduce failed: CollectiveError: rank \d finished after 0 all_reduce"
    ):
        tp_mlp.check_tp_mlp(_shard, only_one_rank_reduces)
    assert time.monotonic() - t0 < 5


def test_check_tp_mlp_reports_a_rank_that_never_returns(monkeypatch):
    monkeypatch.setattr(tp_mlp, "TP_TIMEOUT", 0.3)
    release = threading.Event()

    def hangs(x, shard, b2, all_reduce):
        release.wait(30)

    try:
        with pytest.raises(AssertionError, match=r"rank\(s\) \[0, 1\] had not returned after 0.3 s"):
            tp_mlp.check_tp_mlp(_shard, hangs, cases=[(2, 3, 6, 16, 10)])
    finally:
        release.set()


def test_check_tp_mlp_names_bad_answers():
    with pytest.raises(AssertionError, match=r"shard_mlp` returned None"):
        tp_mlp.check_tp_mlp(lambda *a: None, _forward)
    with pytest.raises(AssertionError, match=r"has no key 'b1'"):
        tp_mlp.check_tp_mlp(lambda *a: {"w1": _shard(*a)["w1"], "w2": _shard(*a)["w2"]}, _forward)
    with pytest.raises(AssertionError, match=r"holds rows 0 to 7 of fc1\.weight; rank 1's are rows 8 to 15"):
        tp_mlp.check_tp_mlp(lambda fc1, fc2, rank, world: _shard(fc1, fc2, 0, world), _forward)
    with pytest.raises(AssertionError, match=r"is torch\.float32.*keep"):
        tp_mlp.check_tp_mlp(lambda *a: {k: v.float() for k, v in _shard(*a).items()}, _forward)
    with pytest.raises(AssertionError, match=r"`tp_forward` returned None on rank 0"):
        tp_mlp.check_tp_mlp(_shard, lambda x, shard, b2, all_reduce: None)
    with pytest.raises(AssertionError, match="(?s)mat1 and mat2.*multiply by their transpose"):
        tp_mlp.check_tp_mlp(_shard, lambda x, s, b2, ar: ar(F.gelu(x @ s["w1"] + s["b1"]) @ s["w2"].T) + b2)
    with pytest.raises(AssertionError, match="that is ReLU"):
        tp_mlp.check_tp_mlp(_shard, lambda x, s, b2, ar: ar(F.relu(x @ s["w1"].T + s["b1"]) @ s["w2"].T) + b2)
    with pytest.raises(AssertionError, match=r"has no gradient"):
        tp_mlp.check_tp_mlp(_shard, lambda x, s, b2, ar: _forward(x, s, b2, ar).detach())


def test_zero_formulas_give_the_papers_figure_1():
    """Rajbhandari et al. (2020), Figure 1: Ψ = 7.5e9, N = 64, K = 12 -> 120, 31.4, 16.6, 1.9 GB per GPU."""
    for stage, gb in zero_memory.ZERO_FIGURE_1.items():
        assert round(sum(zero_memory._zero_bytes(7_500_000_000, 64, stage).values()) / 1e9, 1) == gb
    assert zero_memory._zero_bytes(5, 8, 3) == {
        "parameters": 2,
        "gradients": 2,
        "optimizer": 12,
    }  # padded shards


def test_check_model_state_bytes_names_bad_answers():
    zero_memory.check_model_state_bytes(zero_memory._zero_bytes)
    with pytest.raises(AssertionError, match="returned None"):
        zero_memory.check_model_state_bytes(lambda n, w, s, k=12: None)
    with pytest.raises(AssertionError, match=r"keys \['parameters', 'gradients', 'optimizer'\].*missing"):
        zero_memory.check_model_state_bytes(lambda n, w, s, k=12: {"parameters": 2 * n})
    zero_memory.check_model_state_bytes(  # the one int rule (checks.answer_types.is_int): NumPy ints pass
        lambda n, w, s, k=12: {p: np.int64(v) for p, v in zero_memory._zero_bytes(n, w, s, k).items()}
    )
    with pytest.raises(AssertionError, match=r"numpy\.float64, where an int is asked for"):
        zero_memory.check_model_state_bytes(
            lambda n, w, s, k=12: {p: np.float64(v) for p, v in zero_memory._zero_bytes(n, w, s, k).items()}
        )
    with pytest.raises(AssertionError, match=r"stage 3 \(P_os\+g\+p\) shards the parameters too"):
        zero_memory.check_model_state_bytes(
            lambda n, w, s, k=12: {**zero_memory._zero_bytes(n, w, s, k), "parameters": 2 * n},
            cases=[(64, 4, 3, 12)],
        )


# More wrong answers, checked here in one process (the graded corpus is tests/chapters/ch11/corpus.py) -------


def _ring_then(edit):
    """ring_allreduce with one change: edit(n, s, r, phase) -> (dst, chunk) or None to skip the step."""

    def answer(ring):
        n = ring.world
        for phase, start in ((True, 0), (False, 1)):
            for s in range(n - 1):
                for r in range(n):
                    dst, chunk = edit(n, s, r, phase, (r - (s - start)) % n)
                    ring.send(r, dst, chunk, reduce=phase)
                ring.step()

    return answer


def _writes_buffers(ring):
    total = sum(ring.buffer(r) for r in range(ring.world))
    for r in range(ring.world):
        ring.buffer(r)[:] = total


def _zero_with(**parts):
    """zero_memory._zero_bytes with some parts replaced by functions of (n, world, stage, k, shard)."""

    def answer(n, world, stage, k=12):
        got = zero_memory._zero_bytes(n, world, stage, k)
        shard = -(-n // world)
        return {**got, **{p: f(n, world, stage, k, shard) for p, f in parts.items()}}

    return answer


def _zero_k8(n, world, stage, k=8):
    return zero_memory._zero_bytes(n, world, stage, k)


def _zero_no_default(n, world, stage, k):
    return zero_memory._zero_bytes(n, world, stage, k)


def _zero_float(n, world, stage, k=12):
    shard = n / world
    return {
        "parameters": 2 * (shard if stage >= 3 else n),
        "gradients": 2 * (shard if stage >= 2 else n),
        "optimizer": k * (shard if stage >= 1 else n),
    }


EXTRA = {
    "ring-negative-chunk": (
        "ring",
        _ring_then(lambda n, s, r, phase, c: ((r + 1) % n, r - s if phase else c)),
        r"chunk -1 does not exist.*% ring\.world",
    ),
    "ring-writes-buffers": (
        "ring",
        _writes_buffers,
        r"(?s)read-only.*ring\.send\(\.\.\.\) and ring\.step\(\)",
    ),
    "tp-w1-transposed": (
        "tp",
        lambda fc1, fc2, rank, world: {
            **_shard(fc1, fc2, rank, world),
            "w1": _shard(fc1, fc2, rank, world)["w1"].T,
        },
        r"w1 has shape \(6, 8\), expected \(8, 6\).*transposed",
    ),
    "tp-tanh-gelu": (
        "tp-forward",
        lambda x, s, b2, ar: ar(F.gelu(x @ s["w1"].T + s["b1"], approximate="tanh") @ s["w2"].T) + b2,
        r"GELU's tanh approximation",
    ),
    "tp-detached": (
        "tp-forward",
        lambda x, s, b2, ar: ar((F.gelu(x @ s["w1"].T + s["b1"]) @ s["w2"].T).detach()) + b2,
        r"no gradient reached rank 0's w1",
    ),
    "tp-numpy-allreduce": (
        "tp-forward",
        lambda x, s, b2, ar: torch.as_tensor(
            ar((F.gelu(x @ s["w1"].T + s["b1"]) @ s["w2"].T).detach().numpy())
        ),
        r"rank 0 raised TypeError: all_reduce takes a torch tensor, got a ndarray",
    ),
    "tp-b2-missing": (
        "tp-forward",
        lambda x, s, b2, ar: ar(F.gelu(x @ s["w1"].T + s["b1"]) @ s["w2"].T),
        r"fc2's bias b2 is missing",
    ),
    "zero-k-hard-coded": (
        "zero",
        _zero_with(optimizer=lambda n, w, st, k, sh: 12 * (sh if st >= 1 else n)),
        r"use the argument k \(here k = 8\), not 12",
    ),
    "zero-no-master-weights": ("zero", _zero_k8, r"\['optimizer'\].*fp32 master weights"),
    "zero-no-default": ("zero", _zero_no_default, r"without k, raised TypeError.*k=12"),
    "zero-float-shard": ("zero", _zero_float, r"a float, where an int is asked for"),
    "zero-optimizer-unsharded": (
        "zero",
        _zero_with(optimizer=lambda n, w, st, k, sh: k * n),
        r"from stage 1 \(P_os\) on, the optimizer states are sharded",
    ),
    "zero-params-fp32": (
        "zero",
        _zero_with(parameters=lambda n, w, st, k, sh: 4 * (sh if st >= 3 else n)),
        r"parameters the model computes with are fp16",
    ),
}


@pytest.mark.parametrize("name", sorted(EXTRA))
def test_more_wrong_answers_fail_the_visible_check_naming_their_cause(name):
    kind, answer, cause = EXTRA[name]
    with pytest.raises(AssertionError, match=cause):
        if kind == "ring":
            ring_checks.check_ring_allreduce(answer)
        elif kind == "tp":
            tp_mlp.check_tp_mlp(answer, _forward)
        elif kind == "tp-forward":
            tp_mlp.check_tp_mlp(_shard, answer)
        else:
            zero_memory.check_model_state_bytes(answer)
