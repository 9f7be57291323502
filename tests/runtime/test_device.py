"""Run modes: chosen once, forced by the environment, clear errors when impossible."""

import os
import subprocess
import sys
import textwrap

import pytest

import cudalearn
from cudalearn.runtime import device, sizes


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "CUDALEARN_MODE")}
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
    )


def test_this_process_runs_the_simulator():
    assert cudalearn.mode() == "sim"
    assert os.environ["NUMBA_ENABLE_CUDASIM"] == "1"
    assert sys.getswitchinterval() == pytest.approx(device.SIM_SWITCH_INTERVAL)
    from numba import config

    assert config.ENABLE_CUDASIM


def test_setup_is_idempotent_and_refuses_a_switch():
    assert cudalearn.setup(quiet=True) is cudalearn.setup(quiet=True)
    with pytest.raises(device.ModeError, match="restart the kernel"):
        cudalearn.setup("gpu", quiet=True)


def test_sim_line_says_timings_are_not_gpu_timings(capsys):
    cudalearn.setup()
    line = capsys.readouterr().out.strip()
    assert line.startswith("cudalearn: mode=sim") and "NOT GPU timings" in line
    assert "\n" not in line


def test_forcing_gpu_without_a_gpu_gives_an_actionable_error():
    r = _run("import cudalearn; cudalearn.setup()", CUDALEARN_MODE="gpu")
    assert r.returncode != 0
    assert "ModeError" in r.stderr and "Change runtime type" in r.stderr and "CUDALEARN_MODE" in r.stderr


def test_an_unknown_mode_is_refused():
    r = _run("import cudalearn; cudalearn.setup()", CUDALEARN_MODE="fast")
    assert r.returncode != 0 and "is not a mode" in r.stderr


def test_auto_mode_without_gpu_picks_sim_and_says_why():
    r = _run("import cudalearn; cudalearn.setup()")
    assert r.returncode == 0, r.stderr
    assert "mode=sim" in r.stdout


def test_numba_cuda_imported_first_is_detected():
    r = _run(
        """
        import os; os.environ['NUMBA_ENABLE_CUDASIM'] = '1'
        from numba import cuda
        import cudalearn
        print(cudalearn.setup(quiet=True).mode)
        try:
            cudalearn.runtime.device._INFO = None
            cudalearn.setup('gpu', quiet=True)
        except cudalearn.runtime.device.ModeError as e:
            print('refused:', e)
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("sim") and "refused:" in r.stdout and "Restart the kernel" in r.stdout


def test_a_kernels_module_imported_before_setup_chooses_the_mode_first():
    if device._driver_device_count()[0]:
        pytest.skip("this machine has a GPU: auto mode is gpu here")
    r = _run(
        """
        import cudalearn.chapters.ch00.kernels
        import cudalearn
        print(cudalearn.setup(quiet=True).mode, cudalearn.runtime.numba_backend.current().label)
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "sim numba-cuda (simulator)"  # the kernel's `cuda` asked numba_backend


def test_numba_cuda_imported_before_setup_without_a_gpu_is_refused_in_words():
    if device._driver_device_count()[0]:
        pytest.skip("this machine has a GPU: the real target imported first is the right one")
    r = _run(
        """
        from numba import cuda
        import cudalearn
        cudalearn.setup()
        """
    )
    assert r.returncode != 0 and "ModeError" in r.stderr, r.stderr
    assert "imported before cudalearn.setup()" in r.stderr and "run the setup cell" in r.stderr


def test_sizes_depend_on_the_mode():
    n_sim = cudalearn.size("ch2.matmul_n")
    assert n_sim == sizes.SIZES["ch2.matmul_n"]["sim"] <= 64
    assert cudalearn.size("ch2.matmul_n", mode="gpu") > n_sim
    assert all(v["sim"] <= 64 or not k.startswith("ch2") for k, v in sizes.SIZES.items())
    with pytest.raises(KeyError, match="known sizes"):
        cudalearn.size("ch2.nope")


def test_device_count_is_zero_under_the_simulator():
    assert cudalearn.device_count() == 0
