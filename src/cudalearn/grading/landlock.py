"""Landlock: what files the student's process may read and write, TCP and signals (grading's sandbox).

With Landlock (Linux 5.13+) the process can read only the Python
installation, the imported packages' folders, system folders and /proc,
write only its temporary folder, its own /proc entries (the CUDA driver
names its threads there) and the GPU's device files, cannot ptrace or
signal processes outside itself (ABI 6+ for signals) and cannot open TCP
connections (ABI 4+).
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys

from cudalearn.grading.linux import libc

_FS_V1 = (1 << 13) - 1  # execute, read/write file, read dir, remove, make-*
_REFER, _TRUNCATE = 1 << 13, 1 << 14
_READ = 1 | 4 | 8  # execute, read file, read dir
_FILE_RIGHTS = 1 | 2 | 4 | _TRUNCATE  # rights that apply to a file (not a directory)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when it has none (or this is not Linux)."""
    if not sys.platform.startswith("linux"):
        return 0
    abi = libc().syscall(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, VERSION)
    return max(int(abi), 0)


def readable_roots() -> list[str]:
    """Folders the confined process may read: Python, imported packages, system folders."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    roots |= {p for p in sys.path if p and os.path.isdir(p)}
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if isinstance(f, str) and os.path.isabs(f):
            top = mod.__name__.partition(".")[0]
            pkg = sys.modules.get(top)
            pf = getattr(pkg, "__file__", None)
            if isinstance(pf, str):
                roots.add(os.path.dirname(pf) if pf.endswith("__init__.py") else pf)
    roots |= {"/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/sys", "/opt/conda"}
    # /proc: the CUDA driver reads /proc/devices and /proc/driver; other processes' memory and environment
    # stay closed (Landlock denies ptrace-mode access outside the sandbox, and capabilities are dropped).
    roots.add("/proc")
    roots |= set(glob.glob("/usr/local/cuda*"))
    kept: list[str] = []
    for r in sorted(os.path.realpath(r) for r in roots if os.path.exists(r)):
        if not kept or not r.startswith(kept[-1].rstrip("/") + "/"):
            kept.append(r)  # one rule per tree: drop paths inside a folder already allowed
    return kept


def _device_files() -> list[str]:
    names = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"]
    return [p for p in names + glob.glob("/dev/nvidia*") if os.path.exists(p)]


def apply_landlock(workdir: str, *, net: bool = True, scope: int = 3, extra: tuple[str, ...] = ()) -> int:
    """Confine this process's files, ptrace, TCP (`net`) and signals/abstract sockets (`scope`) with Landlock.

    Returns the ABI used (0: none). `extra` folders are readable and writable too (the private tmpfs
    folders of the mount namespace; without one, /dev/shm stays closed, since what it holds outlives us).
    """
    abi = landlock_abi()
    if abi < 1:
        return 0
    lib = libc()
    fs = _FS_V1 | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(fs, 3 if net and abi >= 4 else 0, scope if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = lib.syscall(444, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        return 0

    def allow(path: str, rights: int) -> None:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if not os.path.isdir(path):
                rights &= _FILE_RIGHTS
            rule = _PathBeneath(rights & fs, fd)
            lib.syscall(445, ruleset, 1, ctypes.byref(rule), 0)
        finally:
            os.close(fd)

    for root in readable_roots():
        allow(root, _READ)
    # The CUDA driver names its threads through /proc/self/task/*/comm: writing its own /proc entries is
    # harmless, while /proc/sys (kernel settings) stays read-only.
    allow(os.path.realpath("/proc/self"), _READ | 2 | (_TRUNCATE if abi >= 3 else 0))
    for dev in _device_files():
        allow(dev, _READ | 2 | (_TRUNCATE if abi >= 3 else 0))
    for rw in (workdir, *extra):
        allow(rw, fs)
    lib.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    ok = lib.syscall(446, ruleset, 0) == 0  # landlock_restrict_self
    os.close(ruleset)
    return abi if ok else 0
