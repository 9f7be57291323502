"""Environment report and diagnosis of known breakages, each with its fix (Chapter 0; `cudalearn doctor`).

`collect()` reads the machine into a plain dict; `diagnose(env)` is a pure
function of that dict, so every known breakage is tested with a planted
environment. `main()` prints the report and exits non-zero when a problem
blocks the course.
"""

from __future__ import annotations

import ctypes
import re
import sys
import textwrap
from dataclasses import dataclass
from importlib.metadata import distributions
from typing import Any

from cudalearn.compile import toolchain
from cudalearn.measure.gpus import tensor_core_precisions
from cudalearn.runtime import compat, numba_backend
from cudalearn.runtime.versions import PACKAGES, driver_version, package_version, versions

PIN_NUMBA_CUDA = "0.30.4"


@dataclass(frozen=True)
class Problem:
    """One diagnosed breakage: how bad, what, why, and the command that fixes it (Chapter 0)."""

    blocking: bool
    title: str
    detail: str
    fix: str

    def __str__(self) -> str:
        tag = "BLOCKING" if self.blocking else "warning"
        return f"[{tag}] {self.title}\n    {self.detail}\n    fix: {self.fix}"


def _vtuple(v: str | None) -> tuple[int, ...]:
    """'2.5.2' -> (2, 5, 2); None or unparsable -> ()."""
    if not v:
        return ()
    return tuple(int(x) for x in re.findall(r"\d+", v.split("+")[0])[:3])


def _base(v: str | None) -> str:
    """'2.13.0+cpu' -> '2.13.0': a version without its local build tag."""
    return (v or "").split("+")[0]


def driver_cuda_version() -> tuple[int, int] | None:
    """The newest CUDA version the driver supports, e.g. (13, 0), or None (Chapter 0)."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        v = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(v)) == 0 and v.value:
            return v.value // 1000, (v.value % 1000) // 10
    return None


def toolkit_version() -> tuple[int, int] | None:
    """The CUDA toolkit (NVRTC) version Numba compiles with, e.g. (12, 9), or None (Chapter 0)."""
    try:
        from cuda.bindings import nvrtc

        status, major, minor = nvrtc.nvrtcVersion()
        return (major, minor) if int(status) == 0 else None
    except Exception:  # no NVRTC library or bindings installed
        return None


def torch_cuda_version() -> str | None:
    """The CUDA torch was built with (torch.version.cuda, e.g. '13.0'), or None: a CPU build or no torch."""
    try:
        import torch

        return torch.version.cuda
    except Exception:  # no torch, or a broken one: the versions table says which
        return None


def cuda_extra(env: dict[str, Any]) -> str:
    """The numba-cuda extra whose NVRTC/NVVM wheels match torch's CUDA: 'cu13' or 'cu12' (Chapter 0).

    The registry's Linux torch 2.13 is the CUDA 13 build (its cuda-toolkit==13.0.3 excludes the cu12
    extra); Colab's torch, PyTorch's cu12x and CPU builds go with cu12."""
    return "cu13" if _vtuple(env.get("torch_cuda"))[:1] == (13,) else "cu12"


def collect() -> dict[str, Any]:
    """Read the mode, device, driver, toolkit and package versions into a dict (Chapter 0)."""
    from cudalearn.runtime import device

    info = device.info()
    chosen = numba_backend.current()
    names = {d.metadata["Name"].lower().replace("_", "-") for d in distributions() if d.metadata["Name"]}
    found = versions(PACKAGES)
    return {
        "mode": info.mode,
        "device": info.device,
        "compute_capability": info.compute_capability,
        "sms": info.sms,
        "memory_bytes": info.memory_bytes,
        "driver": driver_version(),
        "driver_cuda": driver_cuda_version(),
        "toolkit": toolkit_version(),
        "torch_cuda": torch_cuda_version(),
        "python": found.pop("python"),
        "versions": found,
        "cuda13_wheels": sorted(
            n
            for n in names
            if n.startswith("nvidia-")
            and n.endswith("-cu13")
            or n in ("nvidia-cuda-nvrtc", "nvidia-nvjitlink", "nvidia-cuda-runtime")
        ),
        "on_colab": "google.colab" in sys.modules or package_version("google-colab") is not None,
        "compat": list(compat.APPLIED),
        "cuda_backend": toolchain.numba_cuda_backend(),
        "cuda_backend_reason": chosen.reason if chosen else None,
    }


def diagnose(env: dict[str, Any]) -> list[Problem]:
    """The known breakages present in `env` (as made by `collect()`), each with its fix (Chapter 0)."""
    problems = []
    v = env.get("versions", {})
    numpy_v, nc_v = _vtuple(v.get("numpy")), _vtuple(v.get("numba-cuda"))
    if (
        numpy_v >= (2, 5)
        and nc_v
        and nc_v <= (0, 30, 99)
        and "numpy.row_stack = numpy.vstack" in env.get("compat", ())
    ):
        problems.append(
            Problem(
                False,
                f"numpy {v['numpy']} with numba-cuda {v['numba-cuda']}: np.row_stack restored",
                "numba-cuda 0.30 registers np.row_stack, which numpy 2.5 removed; cudalearn.setup() put "
                "it back as an alias of np.vstack (cudalearn.runtime.compat), so kernels compile.",
                'nothing to do; to run the exact pinned set instead: pip install "numpy>=2.0,<2.5"',
            )
        )
    elif numpy_v >= (2, 5) and nc_v and nc_v <= (0, 30, 99):
        problems.append(
            Problem(
                True,
                f"numpy {v['numpy']} with numba-cuda {v['numba-cuda']}",
                "numba-cuda 0.30 registers np.row_stack, which numpy 2.5 removed: the first kernel "
                "compile dies with AttributeError: module 'numpy' has no attribute 'row_stack'.",
                "run cudalearn.setup() before compiling a kernel (it restores the alias), or "
                'pip install "numpy>=2.0,<2.5"',
            )
        )
    problems += _numba_cuda_mlir_problems(env)
    cp_v, cb_v = _vtuple(v.get("cuda-python")), _vtuple(v.get("cuda-bindings"))
    if cp_v and cb_v and cp_v[:2] != cb_v[:2]:
        problems.append(
            Problem(
                True,
                f"cuda-python {v['cuda-python']} beside cuda-bindings {v['cuda-bindings']}",
                "Colab preinstalls cuda-python, which pins cuda-bindings to its own version; numba-cuda "
                "needs another, and the two fight over the cuda.bindings modules.",
                f'pip uninstall -y cuda-python && pip install "numba-cuda[cu12]=={PIN_NUMBA_CUDA}"',
            )
        )
    drv_cuda, tk = env.get("driver_cuda"), env.get("toolkit")
    cuda13 = bool(env.get("cuda13_wheels")) or (cb_v[:1] == (13,))
    if env.get("mode") == "gpu" and drv_cuda and cuda13 and tuple(drv_cuda) < (13, 0):
        problems.append(
            Problem(
                True,
                f"CUDA 13 wheels on a driver below 580 (driver {env.get('driver') or '?'}, "
                f"CUDA {drv_cuda[0]}.{drv_cuda[1]})",
                "CUDA 13 libraries need driver 580 or newer; kernels will fail to load."
                + (
                    f" torch {v.get('torch')} is a CUDA {env['torch_cuda']} build too (the registry's"
                    " Linux torch): it needs PyTorch's CUDA 12 build, from PyTorch's cu126 index."
                    if cuda_extra(env) == "cu13"
                    else ""
                ),
                (
                    f'pip install "torch=={_base(v.get("torch"))}+cu126" --index-url '
                    "https://download.pytorch.org/whl/cu126 && "
                    if cuda_extra(env) == "cu13"
                    else ""
                )
                + f"pip uninstall -y {' '.join(['cuda-bindings', *(env.get('cuda13_wheels') or [])])} && "
                f'pip install "numba-cuda[cu12]=={PIN_NUMBA_CUDA}" (or update the NVIDIA driver to 580 or '
                "newer; in the repository, python3 run.py course in a new .venv picks these itself)",
            )
        )
    elif env.get("mode") == "gpu" and drv_cuda and tk and tuple(tk) > tuple(drv_cuda):
        problems.append(
            Problem(
                True,
                f"driver supports CUDA {drv_cuda[0]}.{drv_cuda[1]}, the toolkit is {tk[0]}.{tk[1]}",
                "The toolkit emits PTX newer than this driver can load "
                "(CUDA_ERROR_UNSUPPORTED_PTX_VERSION at the first launch).",
                f'pip install "cuda-toolkit[nvcc,nvrtc,cudart]=={drv_cuda[0]}.{drv_cuda[1]}.*" '
                "(or update the NVIDIA driver)",
            )
        )
    if env.get("mode") == "gpu" and not tensor_core_precisions(env.get("compute_capability"))["bf16"]:
        cc = env.get("compute_capability") or (0, 0)
        problems.append(
            Problem(
                False,
                f"no bf16 tensor cores on this GPU (sm_{cc[0]}{cc[1]})",
                "bfloat16 needs sm_80 or newer (Colab's T4 is sm_75): bf16 matmuls fall back to slow "
                "paths or fail. The course uses fp16 on such GPUs.",
                "use torch.float16 instead of torch.bfloat16 here, or a GPU of sm_80 or newer",
            )
        )
    if env.get("toolkit") is None:  # in sim mode too: book 02 and the labs compile kernels to real PTX
        extra = cuda_extra(env)
        wheel = "nvidia-cuda-nvrtc" if extra == "cu13" else "nvidia-cuda-nvrtc-cu12"
        built = (
            f"torch is built with CUDA {env['torch_cuda']}" if env.get("torch_cuda") else "torch has no CUDA"
        )
        problems.append(
            Problem(
                True,
                f"no CUDA NVRTC found for Numba (libnvrtc.so.{extra[2:]}: the {wheel} wheel)",
                "numba-cuda compiles kernels with NVRTC and libNVVM: without them every kernel fails on a "
                "GPU, and book 02's PTX cell and the labs' compile checks fail in sim mode too "
                f"(DynamicLibNotFoundError: libnvrtc.so.13 or libnvrtc.so.12). {built}: the matching wheels "
                f"come with numba-cuda's {extra} extra (cudalearn[{extra}]; run.py picks it).",
                f'pip install "numba-cuda[{extra}]=={PIN_NUMBA_CUDA}"',
            )
        )
    return problems


def _numba_cuda_mlir_problems(env: dict[str, Any]) -> list[Problem]:
    """numba-cuda-mlir without numba-cuda, or compiling the course's kernels: what works then (Chapter 0)."""
    v = env.get("versions", {})
    if v.get("numba-cuda-mlir") and not v.get("numba-cuda"):
        return [
            Problem(
                True,
                f"numba-cuda-mlir {v['numba-cuda-mlir']} without numba-cuda",
                "numba-cuda-mlir is imported as numba_cuda_mlir and provides no numba.cuda, which the "
                "simulator, every notebook's own kernels and the sm_75 compile checks need; the course "
                "runs on numba-cuda and uses numba-cuda-mlir beside it, in gpu mode.",
                f'pip install "numba-cuda[{cuda_extra(env)}]=={PIN_NUMBA_CUDA}" (numba-cuda-mlir can stay '
                "installed)",
            )
        ]
    if env.get("cuda_backend") == "numba-cuda-mlir":
        why = env.get("cuda_backend_reason")
        return [
            Problem(
                False,
                "the course's kernels are compiled by numba-cuda-mlir, not the pinned numba-cuda",
                (f"Chosen because: {why}. " if why else "")
                + f"The course is written and checked for numba-cuda {PIN_NUMBA_CUDA}; a notebook's own "
                "kernels (`from numba import cuda`) still are. " + toolchain.NUMBA_CUDA_MLIR_STATUS,
                f"nothing to do to try it; to use numba-cuda: set {numba_backend.ENV}=numba-cuda before "
                "cudalearn.setup() (restart the notebook's kernel first)",
            )
        ]
    return []


def report(env: dict[str, Any] | None = None) -> str:
    """The doctor's text report of `env` (default: this machine), problems last (Chapter 0)."""
    env = env or collect()
    cc = env.get("compute_capability")
    mem = env.get("memory_bytes")
    fmt = lambda t: ".".join(map(str, t)) if t else "not found"  # noqa: E731
    rows = [
        ("mode", env["mode"]),
        ("device", env["device"]),
        ("compute capability", fmt(cc) if cc else "-"),
        ("SMs", env.get("sms") or "-"),
        ("memory", f"{mem / 2**30:.1f} GiB" if mem else "-"),
        ("driver", f"{env.get('driver') or 'not found'} (CUDA {fmt(env.get('driver_cuda'))})"),
        ("toolkit (NVRTC)", fmt(env.get("toolkit"))),
        ("torch's CUDA", env.get("torch_cuda") or "none (a CPU build)"),
        ("python", env.get("python")),
    ]
    rows += [(name, ver or "not installed") for name, ver in env["versions"].items()]
    backend, why = env.get("cuda_backend"), env.get("cuda_backend_reason")
    rows.append(("kernel compiler", (f"{backend}; {why}" if why else backend) or "not chosen yet"))
    lines = [f"{name + ':':<20}{value}" for name, value in rows]
    if env["versions"].get("numba-cuda-mlir") and backend != "numba-cuda-mlir":
        note = "numba-cuda-mlir is installed, not used here: " + toolchain.NUMBA_CUDA_MLIR_STATUS
        lines += textwrap.wrap(
            note, 100, initial_indent=" " * 20, subsequent_indent=" " * 20, break_on_hyphens=False
        )
    if cc:
        tc = tensor_core_precisions(cc)
        lines.append(
            "tensor cores:      " + ", ".join(f"{p} {'yes' if ok else 'no'}" for p, ok in tc.items())
        )
    problems = diagnose(env)
    lines.append("")
    lines += [str(p) for p in problems] or ["no known problem found"]
    return "\n".join(lines)


def doctor() -> list[Problem]:
    """Print the report from a notebook and return the problems found (Chapter 0)."""
    env = collect()
    print(report(env))
    return diagnose(env)


def main() -> int:
    """`cudalearn doctor`: print the report; exit 1 when a problem blocks the course."""
    return 1 if any(p.blocking for p in doctor()) else 0
