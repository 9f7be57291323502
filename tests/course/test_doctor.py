"""The doctor: a report on this machine, and each known breakage diagnosed from a planted environment."""

from planted_env import GOOD

from cudalearn.course import doctor


def plant(**changes):
    env = {**GOOD, **changes}
    env["versions"] = {**GOOD["versions"], **changes.get("versions", {})}
    return env


def titles(env):
    return [(p.blocking, p.title, p.fix) for p in doctor.diagnose(env)]


def test_a_good_environment_has_no_problem():
    assert doctor.diagnose(GOOD) == []


def test_numpy_25_with_numba_cuda_030_blocks_with_the_pin_as_fix():
    [(blocking, title, fix)] = titles(plant(versions={"numpy": "2.5.2", "numba-cuda": "0.30.4"}))
    assert blocking and "numpy 2.5.2" in title and fix.endswith('pip install "numpy>=2.0,<2.5"')
    assert "cudalearn.setup()" in fix
    assert doctor.diagnose(plant(versions={"numpy": "2.5.2", "numba-cuda": "0.31.0"})) == []


def test_numpy_25_with_the_alias_restored_is_reported_not_blocking():
    env = plant(
        versions={"numpy": "2.5.2", "numba-cuda": "0.30.4"}, compat=["numpy.row_stack = numpy.vstack"]
    )
    [(blocking, title, _)] = titles(env)
    assert not blocking and "row_stack restored" in title


def test_compat_restores_row_stack_on_a_numpy_without_it():
    import types

    import numpy as np

    from cudalearn.runtime import compat

    fake = types.SimpleNamespace(vstack=np.vstack, __version__="2.5.2")
    assert compat.apply(fake) == ["numpy.row_stack = numpy.vstack"]
    assert fake.row_stack is np.vstack and compat.apply(fake) == []
    assert compat.apply(types.SimpleNamespace(vstack=np.vstack, row_stack=np.vstack)) == []


def test_colab_cuda_python_conflict():
    [(blocking, title, fix)] = titles(plant(versions={"cuda-python": "12.6.2", "cuda-bindings": "12.9.10"}))
    assert blocking and "cuda-python" in title and fix.startswith("pip uninstall -y cuda-python")
    assert doctor.diagnose(plant(versions={"cuda-python": "12.9.0", "cuda-bindings": "12.9.10"})) == []


def test_driver_older_than_the_toolkit_ptx():
    [(blocking, title, fix)] = titles(plant(driver="535.104", driver_cuda=(12, 2), toolkit=(12, 9)))
    assert blocking and "12.2" in title and "cuda-toolkit[nvcc,nvrtc,cudart]==12.2.*" in fix


def test_cuda13_wheels_on_a_driver_below_580():
    env = plant(
        driver="550.54",
        driver_cuda=(12, 4),
        toolkit=(13, 0),
        cuda13_wheels=["nvidia-cuda-nvrtc"],
        versions={"cuda-bindings": "13.0.1"},
    )
    [(blocking, title, fix)] = titles(env)
    assert blocking and "below 580" in title and "nvidia-cuda-nvrtc" in fix and "numba-cuda[cu12]" in fix
    assert "torch==" not in fix  # torch is not a CUDA 13 build here: it stays
    [(_, _, fix)] = titles({**env, "torch_cuda": "13.0"})  # the registry's torch: CUDA 13 as well
    assert fix.startswith(
        'pip install "torch==2.13.0+cu126" --index-url https://download.pytorch.org/whl/cu126'
    )
    assert "numba-cuda[cu12]" in fix and "580" in fix


def test_bf16_below_sm80_is_a_warning_with_the_fp16_way_out():
    [(blocking, title, fix)] = titles(plant(device="Tesla T4", compute_capability=(7, 5)))
    assert not blocking and "bf16" in title and "float16" in fix


def test_precision_table():
    t4, h200 = doctor.tensor_core_precisions((7, 5)), doctor.tensor_core_precisions((9, 0))
    assert t4["fp16"] and not t4["bf16"] and not t4["tf32"]
    assert all(h200.values())


def test_report_on_this_machine_and_exit_code(capsys):
    env = doctor.collect()
    assert env["mode"] == "sim" and env["versions"]["numba-cuda"]
    text = doctor.report(env)
    for field in ("mode:", "device:", "driver:", "numba-cuda:", "numpy:", "llvmlite:", "torch:"):
        assert field in text
    assert doctor.main() == 0
    assert "no known problem found" in capsys.readouterr().out


def test_report_lists_tensor_core_precisions_for_a_gpu():
    text = doctor.report(plant(device="Tesla T4", compute_capability=(7, 5)))
    assert "fp16 yes" in text and "bf16 no" in text and "[warning]" in text


def test_versions_is_the_one_reading_of_package_versions():
    from importlib.metadata import version

    found = doctor.versions(("numba-cuda", "no-such-dist-cudalearn"), missing="not installed")
    assert found == {"python": doctor.collect()["python"], "numba-cuda": version("numba-cuda")} | {
        "no-such-dist-cudalearn": "not installed"
    }
    assert doctor.versions(("no-such-dist-cudalearn",))["no-such-dist-cudalearn"] is None
    assert doctor.collect()["versions"] == {p: doctor.package_version(p) for p in doctor.PACKAGES}


def test_a_missing_nvrtc_is_named_with_its_fix_in_either_mode():
    """A wheel-only install without the CUDA 12 wheels: book 02's PTX cell fails, even in sim mode."""
    for mode in ("gpu", "sim"):
        [(blocking, title, fix)] = titles(plant(mode=mode, toolkit=None))
        assert blocking and "NVRTC" in title and "libnvrtc.so.12" in title
        assert fix == f'pip install "numba-cuda[cu12]=={doctor.PIN_NUMBA_CUDA}"'
    report = doctor.report(plant(mode="sim", toolkit=None))
    assert "no known problem found" not in report and "[BLOCKING] no CUDA NVRTC" in report


def test_a_missing_nvrtc_beside_a_cuda_13_torch_is_fixed_with_the_cu13_extra():
    """The registry's Linux torch is a CUDA 13 build: cu12's cuda-toolkit==12.* cannot install beside it."""
    [(blocking, title, fix)] = titles(plant(mode="sim", toolkit=None, torch_cuda="13.0"))
    assert blocking and "libnvrtc.so.13" in title and "nvidia-cuda-nvrtc wheel" in title
    assert fix == f'pip install "numba-cuda[cu13]=={doctor.PIN_NUMBA_CUDA}"'
    for torch_cuda in ("12.6", None):  # PyTorch's CUDA 12 build (and Colab's), a CPU build
        [(_, title, fix)] = titles(plant(mode="sim", toolkit=None, torch_cuda=torch_cuda))
        assert "libnvrtc.so.12" in title and fix == f'pip install "numba-cuda[cu12]=={doctor.PIN_NUMBA_CUDA}"'
