"""chapters.ch00.launch_costs: the shape Chapter 0's prose reads in the launch costs, checked on figures."""

from cudalearn.chapters.ch00.launch_costs import cheap_in_a_row, lines

STORED_SHAPE = {
    "after_long_kernel_us": 180.0,
    "long_kernel_ms": 86.0,
    "pauses_ms": [0, 0.1, 1, 10, 100],
    "after_pause_us": [29.0, 28.0, 36.0, 198.0, 261.0],
    "in_a_row_us": 19.0,
    "repeat": 15,
}


def test_the_prose_shape_holds_and_fails_when_a_rerun_breaks_it():
    assert cheap_in_a_row(STORED_SHAPE)
    flat = STORED_SHAPE | {"after_pause_us": [29.0, 28.0, 36.0, 60.0, 261.0]}  # 10 ms pause not dear
    assert not cheap_in_a_row(flat)
    queued_dear = STORED_SHAPE | {"in_a_row_us": 30.0}  # in a row no longer the cheapest
    assert not cheap_in_a_row(queued_dear)
    assert max(len(line) for line in lines(STORED_SHAPE).splitlines()) <= 100
