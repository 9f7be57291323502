"""Versions of the packages and the NVIDIA driver, read in one place (the doctor, stored runs)."""

from __future__ import annotations

import ctypes
import platform
import re
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version

PACKAGES = (
    "numba",
    "numba-cuda",
    "numba-cuda-mlir",
    "numpy",
    "llvmlite",
    "torch",
    "cuda-bindings",
    "cuda-python",
)


def package_version(dist: str) -> str | None:
    """The installed version of the distribution `dist`, e.g. '0.30.4', or None (Chapter 0)."""
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def versions(dists: Iterable[str] = PACKAGES, missing: str | None = None) -> dict[str, str | None]:
    """{'python': '3.12.3', dist: its version or `missing`}: what the doctor and every stored GPU run report.

    The one place versions are read (Chapter 0's doctor; `reference.run_header` for every stored figure).
    """
    return {"python": platform.python_version(), **{d: package_version(d) or missing for d in dists}}


def driver_version() -> str | None:
    """The NVIDIA driver's version string (e.g. '580.159.03'), or None without a driver (Chapter 0)."""
    try:
        text = open("/proc/driver/nvidia/version").read()
    except OSError:
        text = ""
    m = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)", text)
    if m:
        return m.group(1)
    try:  # fall back on NVML, e.g. on Windows or in containers without /proc/driver
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        if lib.nvmlInit_v2() == 0:
            buf = ctypes.create_string_buffer(96)
            if lib.nvmlSystemGetDriverVersion(buf, 96) == 0:
                return buf.value.decode()
    except (OSError, AttributeError):
        pass
    return None
