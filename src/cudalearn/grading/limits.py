"""Per-notebook limits, the OS user student code runs as, what this machine can enforce (instructors)."""

from __future__ import annotations

import dataclasses
import os
import stat
import sys
from dataclasses import dataclass

from cudalearn.grading import process
from cudalearn.grading.landlock import landlock_abi
from cudalearn.grading.namespaces import closed_folder, probe_namespaces

DEFAULT_USER = "nobody"  # student code runs as this user when the grader is root and no --user is given
JUDGE_MEMORY_MB = 4096  # the judge's own memory limit, at least (it holds the lab's arrays and a reply)
# The judge's cgroup allows this much more than its RLIMIT_DATA (its heap only): a judge whose own work grows
# too big gets a MemoryError, which costs only the cell or test running, before the cgroup's SIGKILL.
JUDGE_CGROUP_HEADROOM_MB = 1024


@dataclass(frozen=True)
class Limits:
    """Per-notebook limits: wall-clock seconds for the notebook and for one cell, memory, file size."""

    timeout: float = 600.0
    cell_timeout: float = 120.0
    memory_mb: int = 2048
    file_mb: int = 64
    landlock: bool = True
    user: str | None = None


def check_user(user: str) -> None:
    """Raise ValueError unless student code can run as `user`: it exists and can reach this Python.

    A Python in a folder closed to `user` (a pyenv under /root) is fine when the sandbox can make a mount
    namespace: there it lays a tmpfs over the closed folder holding only the Python's own folders.
    """
    import pwd

    try:
        pw = pwd.getpwnam(user)
    except KeyError:
        raise ValueError(f"no user {user!r} on this machine") from None
    if os.geteuid() != 0:
        raise ValueError("--user needs the grader to run as root")
    for target in {
        os.path.realpath(sys.executable),
        os.path.realpath(sys.prefix),
        os.path.realpath(sys.base_prefix),
    }:
        folder = closed_folder(target, pw.pw_uid, pw.pw_gid)
        if folder is not None and probe_namespaces() != "root":
            mode = stat.filemode(os.stat(folder).st_mode)
            raise ValueError(
                f"user {user!r} cannot use this Python: {folder} is closed to it (mode {mode}) and this "
                f"kernel gives the grader no mount namespace to open it; install the course in a virtual "
                f"environment {user!r} can read, pass --user NAME for a user that can, or --user root to "
                f"run student code as root with its capabilities dropped (it can then read root's files)"
            )


def student_user(limits: Limits) -> Limits:
    """The limits with the user student code runs as: --user, else DEFAULT_USER when the grader is root."""
    if limits.user == "root":
        return dataclasses.replace(limits, user=None)  # explicitly asked for: root, capabilities dropped
    if limits.user or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return limits
    return dataclasses.replace(limits, user=DEFAULT_USER)


def judge_memory(limits: Limits) -> int:
    """MiB of memory for the judge of one notebook: its checks hold copies of the sandbox's arrays."""
    return max(JUDGE_MEMORY_MB, 2 * limits.memory_mb)


def grader_cgroup() -> process.Cgroup | None:
    """A cgroup for this grading run, where each notebook gets its own; None where the kernel refuses.

    With a cpu controller each notebook's group gets a CPU share (`notebook_cpus`); without one, the
    group limits memory and processes only.
    """
    base = process.Cgroup.base()
    if base is None:
        return None
    for candidate in (base, base.without_cpu()) if "cpu" in base.dirs else (base,):
        try:
            top = candidate.child(f"cudalearn-grade-{os.getpid()}")
        except OSError:
            continue
        try:
            # limits can really be set below it (a CPU share too, where the kernel has the controller)
            cpus = 1.0 if top.cpu_share else None
            top.child("probe", memory_bytes=64 << 20, pids=8, cpus=cpus).kill()
            return top
        except OSError:
            top.kill()
    return None


def cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def notebook_cpus(jobs: int) -> float:
    """Cores of CPU time one notebook (its judge and every student process) may use at -j `jobs`: an equal
    share of this machine, at least one core."""
    return max(1.0, cores() / max(1, jobs))


def containment_notes(limits: Limits, cgroup: bool, cpu: bool | None = None) -> list[str]:
    """What this machine cannot enforce, in a student's feedback words (empty when everything holds).

    `cpu`: whether each notebook got a CPU share (None: as `cgroup`).
    """
    notes = []
    if not cgroup:
        notes.append(
            "this grading machine gave the grader no cgroup: the memory limit held for each of your "
            "notebook's processes, not for all of them together, and shared memory was not counted."
        )
    if not (cgroup if cpu is None else cpu):
        notes.append(
            "this grading machine gave the grader no CPU controller: your notebook's processes had a "
            "CPU-time limit each and ran at a lower priority than the grader, but had no fixed share of "
            "the machine."
        )
    if not probe_namespaces():
        notes.append(
            "this grading machine gave the grader no PID or mount namespace: processes your code started "
            "were ended by process group and as orphans, and /dev/shm was closed to your code."
        )
    if limits.landlock and not landlock_abi():
        notes.append("this grading machine has no Landlock: your code could read every file its OS user can.")
    return notes
