"""A wrong answer run by the visible-check corpus in this process leaves the course's checks as written."""

import numpy as np
from mutations import runner

from cudalearn.chapters.ch01 import checks as lab1_checks


def test_an_answer_that_patches_a_check_leaves_it_as_written_for_the_next_test():
    original, allclose = lab1_checks._loops_only, np.allclose
    m = next(m for m in runner.corpus("01") if m.name == "ml-patch-the-check")
    outcome = runner.VisibleRun("01").run(m)
    assert outcome.error is not None  # the answer's own check still caught it ...
    assert lab1_checks._loops_only is original  # ... and its setattr did not outlive its run
    assert np.allclose is allclose


def test_a_visible_run_keeps_the_compile_worker_it_started():
    """The run's compile process stays the module's (one per worker process), not an orphan per answer."""
    from cudalearn.compile import ptx

    runner.VisibleRun("02").run(None, number=1)  # lab 2's first kernel exercise, with its compile check
    worker = ptx._WORKER
    assert worker is not None and worker.alive()  # the check compiled for a real GPU through it
    runner.VisibleRun("02").run(None, number=1)
    assert ptx._WORKER is worker  # reused, not replaced by a second process
