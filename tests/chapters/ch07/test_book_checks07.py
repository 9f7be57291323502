"""Chapter 7's book checks: the OOM message read as fragmentation, the ReLU/tanh ratio's band."""

import pytest

from cudalearn.chapters.ch07 import activations, step_memory

ERROR = (
    "CUDA out of memory. Tried to allocate 548.00 MiB. GPU 0 has a total capacity of 139.80 GiB ... "
    "Of the allocated memory 3.69 GiB is allocated by PyTorch, and {cached} is reserved by PyTorch but "
    "unallocated."
)


CAPPED = (
    "CUDA out of memory. Tried to allocate 548.00 MiB. GPU 0 has a total capacity of 139.80 GiB of which "
    "134.23 GiB is free. Including non-PyTorch memory, this process has {in_use} memory in use. 4.94 GiB "
    "allowed; Of the allocated memory 3.69 GiB is allocated by PyTorch, and {cached} is reserved by PyTorch "
    "but unallocated."
)


def test_check_over_cap_reads_the_process_above_its_cap_and_the_sum_above_it():
    step_memory.check_over_cap(CAPPED.format(in_use="5.56 GiB", cached="1.13 GiB"))
    with pytest.raises(AssertionError, match="reread the paragraph on the error"):
        step_memory.check_over_cap(CAPPED.format(in_use="4.00 GiB", cached="1.13 GiB"))
    with pytest.raises(AssertionError, match="reread the paragraph on the error"):
        step_memory.check_over_cap(CAPPED.format(in_use="5.56 GiB", cached="10.00 MiB"))


def test_check_fragmented_passes_when_the_cache_exceeds_the_request():
    step_memory.check_fragmented(ERROR.format(cached="1.13 GiB"))


def test_check_fragmented_raises_when_the_cache_is_smaller_than_the_request():
    with pytest.raises(AssertionError, match="reread the paragraph on fragmentation"):
        step_memory.check_fragmented(ERROR.format(cached="20.00 MiB"))


def test_check_fragmented_raises_when_the_message_changes():
    with pytest.raises(AssertionError, match="no longer matches"):
        step_memory.check_fragmented("CUDA out of memory.")


@pytest.mark.parametrize(
    ("ratio", "words"),
    [(0.49, "fewer steps than ReLU"), (1.0, "1 to 2 times"), (3.9, "2 to 4 times"), (6.0, "4 or more")],
)
def test_ratio_band(ratio, words):
    assert words in activations.ratio_band(ratio)


def test_batch_make_ms_takes_each_pass_median():
    from cudalearn.chapters.ch07 import input_pipeline

    def one(*spans):
        return {"batches": [{"made": [0.0, s]} for s in spans]}

    timeline = {"serial": one(1.0, 2.0, 9.0), "overlapped": one(5.0, 6.0, 7.0)}
    assert input_pipeline.batch_make_ms(timeline) == (6.0, 2.0)
