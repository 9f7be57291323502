"""Chapter 11's book checks: no multi-GPU run stored, one FSDP group's size."""

import pytest

from cudalearn.chapters.ch11 import claims, fsdp_fit


def test_check_none_stored_passes_on_the_course_data():
    claims.check_none_stored()


def test_check_none_stored_raises_once_a_run_is_stored(monkeypatch):
    monkeypatch.setattr(claims.reference, "lookup", lambda key: ({"gpus": 2}, None))
    with pytest.raises(AssertionError, match="reread it"):
        claims.check_none_stored(("ch11.fsdp_cap",))


def test_block_params_counts_one_transformer_block():
    d = fsdp_fit.MODELS["vit-1b"]["dim"]
    assert fsdp_fit.block_params("vit-1b") == 12 * d * d + 13 * d  # attention 4d², MLP 8d², biases, norms


def test_follow_chunk_accepts_the_ring_and_names_a_broken_schedule():
    from cudalearn.chapters.ch11 import ring

    n = 4
    send = [[(r - s) % n for r in range(n)] for s in range(n - 1)]
    send += [[(r + 1 - s) % n for r in range(n)] for s in range(n - 1)]
    assert ring.follow_chunk(send, 0) == ([0, 1, 2], 3, [3, 0, 1])
    send[1] = [(r + 1) % n for r in range(n)]  # step 1 sends the wrong chunks
    with pytest.raises(AssertionError, match="not round the ring"):
        ring.follow_chunk(send, 0)
