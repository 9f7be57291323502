"""Deep dive 5c's shares of the copy: printed from the stored run, and the check its prose relies on fails."""

from dataclasses import replace

import pytest

from cudalearn.chapters.ch05.bench import dropout_chain
from cudalearn.measure import stated, timing


def test_the_stored_run_reads_as_the_prose_says_and_a_changed_rerun_raises(capsys):
    chain, copy = timing.stored_results("ch5.chain"), timing.stored_results("ch5.copy")
    copy_gbps, name, gbps = dropout_chain.vs_copy(chain, copy)
    assert copy_gbps and name in dropout_chain.FUSED and gbps <= copy_gbps * 1.05
    assert "of the copy" in capsys.readouterr().out
    # a rerun where the first fused kernel reached the copy: 5c's sentence "well below the copy" is stale
    at_copy = [r | {"gbps": copy_gbps} if r["name"] == "fused: 1 kernel" else r for r in chain.rows]
    with pytest.raises(stated.StaleProse, match="well below the copy"):
        dropout_chain.vs_copy(replace(chain, rows=at_copy), copy)
