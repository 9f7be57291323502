"""How the sandbox confines itself before any student code runs, in order (grading's sandbox).

- namespaces, when the kernel allows them (`namespaces`);
- it switches to the unprivileged user the judge names (the grader runs as
  root: `nobody` by default), so file permissions keep it out of root's
  files;
- resource limits: RLIMIT_DATA (memory), RLIMIT_CPU, RLIMIT_FSIZE,
  RLIMIT_NOFILE, no core dumps, and a lower priority (nice NICE) than the
  grader and the judges; it dies with the judge (PR_SET_PDEATHSIG);
- when it still runs as root (`--user root`), it drops every capability,
  so it cannot raise its limits again or bypass file permissions;
- Landlock (`landlock`), when the kernel has it. The solutions, the hidden
  tests and the instructor's files are then out of its reach even for the
  same OS user.
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys

from cudalearn.grading.landlock import apply_landlock
from cudalearn.grading.linux import libc
from cudalearn.grading.namespaces import die_with_parent, namespaces

OPEN_FILES = 1024
NICE = 10  # student processes yield the CPU to the judges' own work (where no cgroup gives a CPU share)


def _drop_bounding_set(lib: ctypes.CDLL) -> None:
    """Remove every capability from the bounding set: none can ever be gained again, even by exec."""
    for cap in range(64):
        lib.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP


def drop_capabilities() -> None:
    """Drop every Linux capability of this process (it runs as root): it can no longer raise limits."""
    lib = libc()
    _drop_bounding_set(lib)
    lib.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [
            ("effective", ctypes.c_uint32),
            ("permitted", ctypes.c_uint32),
            ("inheritable", ctypes.c_uint32),
        ]

    data = (Data * 2)()
    if lib.capset(ctypes.byref(Header(0x20080522, 0)), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def become(cfg: dict) -> bool:
    """Switch to the unprivileged user the judge named (uid/gid in `cfg`), with no extra groups."""
    if "uid" not in cfg or os.geteuid() != 0:
        return False
    lib = libc()
    _drop_bounding_set(lib)  # while it still may: no capability ever comes back
    os.setgroups([])
    os.setgid(int(cfg["gid"]))
    os.setuid(int(cfg["uid"]))
    lib.prctl(4, 1, 0, 0, 0)  # dumpable again, as after exec: its own /proc entries stay its own
    return True


def confine(cfg: dict, workdir: str, fds: tuple[int, int] = ()) -> dict:
    """Namespaces, the student's user, limits, capabilities and Landlock, in that order; what was applied."""
    if sys.platform.startswith("linux"):
        die_with_parent(int(cfg.get("judge_pid", os.getppid())))
    made = namespaces(cfg, workdir, fds)
    user = become(cfg)
    mem = int(cfg["memory_bytes"])
    cpu = int(cfg["cpu_seconds"])
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(cfg["file_bytes"]),) * 2)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_DATA, (mem, mem))
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))
    os.setpriority(os.PRIO_PROCESS, 0, max(os.getpriority(os.PRIO_PROCESS, 0), NICE))
    applied = {
        "landlock": 0,
        "capabilities_dropped": False,
        "user": user,
        "uid": os.geteuid(),
        "namespaces": made["namespaces"],
        "private_tmp": made["private"],
        "cgroup": bool(cfg.get("cgroup")),
    }
    if sys.platform.startswith("linux") and (os.geteuid() == 0 or user or made["namespaces"] == "user"):
        drop_capabilities()  # as root, after leaving root, or the full set a user namespace gives
        applied["capabilities_dropped"] = True
    if cfg.get("landlock", True):
        applied["landlock"] = apply_landlock(workdir, extra=tuple(made["private"]))
    return applied
