"""Kernels run side by side (site build, progress) share the cores out instead of each spinning on all."""

from cudalearn.course import kernel_env


def test_cores_are_divided_among_the_kernels_run_at_once():
    assert kernel_env.threads_each(2, cores=2) == 1
    assert kernel_env.threads_each(1, cores=2) == 2
    assert kernel_env.threads_each(4, cores=16) == 4
    assert kernel_env.threads_each(8, cores=2) == 1  # never zero


def test_a_thread_count_the_user_set_is_kept():
    env = kernel_env.side_by_side(64, {"OMP_NUM_THREADS": "3", "PATH": "/bin"})
    assert env["OMP_NUM_THREADS"] == "3" and env["PATH"] == "/bin"
    assert env["MKL_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "1"
