"""The student's process as the judge starts, confines from outside and ends it (instructors' grading).

`Sandbox` spawns `python -m cudalearn.grading.sandbox` with a scrubbed
environment in a fresh folder, inside its own cgroup when the kernel lets
this process make one (`Cgroup`: memory counted over the whole process
tree, shared mappings and tmpfs files included, and a process count), drains
what it prints, and ends its whole process tree when the test is over: the
cgroup's processes, the PID namespace the sandbox made for itself (its init
takes every process with it), and, as a last resort, the orphans re-parented
to the judge. `make_private` keeps the judge's and grader's memory (the
hidden tests) away from same-user processes.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from cudalearn.grading import python_command, wire
from cudalearn.grading.linux import libc, write_text

SANDBOX_MODULE = "cudalearn.grading.sandbox"
# Bytes in one reply from the student's process: the largest array a lab's check passes at GPU sizes is
# 64 MiB (a 4096 x 4096 float32 matrix); a reply is read into the judge's memory whole, so it stays small.
MESSAGE_LIMIT = 256 << 20
# Processes and threads of one notebook: the simulator runs a thread per CUDA thread (1024 in a block).
PIDS_LIMIT = 2048
CGROUP_ENV = "CUDALEARN_CGROUP"  # the grader puts each judge in a group; the judge's sandboxes go inside
ENV_KEEP = (
    "PATH",
    "LANG",
    "LC_ALL",
    "CUDALEARN_MODE",
    "CUDA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
)


BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _status_text(returncode: int | None) -> str:
    if returncode is None:
        return "it stopped answering"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"it was killed by {name}"
    return f"it exited with code {returncode}"


# Cgroups ---------------------------------------------------------------------------


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, options) of this process's cgroup mounts."""
    found = []
    for line in _read("/proc/self/mounts").splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
            found.append((parts[1], parts[2], set(parts[3].split(","))))
    return found


def _own_paths() -> dict[str, str]:
    """This process's cgroup per v1 controller ('memory', 'pids', 'freezer') and '' for v2."""
    own = {}
    for line in _read("/proc/self/cgroup").splitlines():
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            own[c] = path
    return own


class Cgroup:
    """A cgroup holding a process tree: its memory, processes and CPU (v2, or v1's hierarchies).

    `dirs` maps a role ('v2', or 'memory', 'pids', 'freezer', 'cpu' for v1) to the group's folder. The CPU
    controller is optional: where the kernel gives none, `cpu_share` says so and CPU is shared per process.
    """

    def __init__(self, dirs: dict[str, str]) -> None:
        self.dirs = dirs

    @property
    def version(self) -> int:
        return 2 if "v2" in self.dirs else 1

    @property
    def spec(self) -> str:
        """The group as text, for CGROUP_ENV."""
        return json.dumps(self.dirs)

    @classmethod
    def from_spec(cls, text: str | None) -> Cgroup | None:
        try:
            dirs = json.loads(text or "")
        except ValueError:
            return None
        ok = isinstance(dirs, dict) and all(isinstance(v, str) and os.path.isdir(v) for v in dirs.values())
        return cls(dirs) if ok and dirs else None

    @classmethod
    def base(cls) -> Cgroup | None:
        """Where this process may make groups with a memory and a process limit; None if nowhere.

        cgroup v2: the nearest group above this process's own that hands the memory and pids
        controllers to its children and is writable (a process's own group cannot have both processes
        and limited children), else the hierarchy's root. cgroup v1: this process's own memory and pids
        groups, when they are writable.
        """
        mounts, own = _mounts(), _own_paths()
        for point, kind, _ in mounts:
            if kind != "cgroup2":
                continue
            here = os.path.join(point, own.get("", "/").lstrip("/")).rstrip("/")
            while len(here) > len(point.rstrip("/")):
                here = os.path.dirname(here)
                given = set(_read(os.path.join(here, "cgroup.subtree_control")).split())
                if {"memory", "pids"} <= given and os.access(here, os.W_OK):
                    return cls({"v2": here})
            have = _read(os.path.join(point, "cgroup.controllers")).split()
            if {"memory", "pids"} <= set(have) and os.access(point, os.W_OK):
                return cls({"v2": point})
        dirs = {}
        for point, kind, opts in mounts:
            for role in ("memory", "pids", "freezer", "cpu"):
                if kind == "cgroup" and role in opts and role in own:
                    path = os.path.join(point, own[role].lstrip("/"))
                    if os.access(path, os.W_OK):
                        dirs[role] = path
        return cls(dirs) if {"memory", "pids"} <= set(dirs) else None

    @property
    def cpu_share(self) -> bool:
        """Whether this group's CPU time can be limited (v2's cpu controller, or v1's cpu hierarchy)."""
        if "v2" in self.dirs:
            return "cpu" in _read(os.path.join(self.dirs["v2"], "cgroup.controllers")).split()
        return "cpu" in self.dirs

    def without_cpu(self) -> Cgroup:
        """The same group without its v1 cpu hierarchy (where the kernel refuses CPU limits)."""
        return Cgroup({role: path for role, path in self.dirs.items() if role != "cpu"})

    def child(
        self, name: str, memory_bytes: int | None = None, pids: int | None = None, cpus: float | None = None
    ) -> Cgroup:
        """A new group under this one with these limits (`cpus`: at most that many cores of CPU time, under
        contention an equal share with its siblings); raises OSError if the kernel refuses."""
        dirs = {role: os.path.join(path, name) for role, path in self.dirs.items()}
        made = []
        try:
            for path in dirs.values():
                os.mkdir(path)
                made.append(path)
            group = Cgroup(dirs)
            if "v2" in dirs:
                try:  # hand the cpu controller down where this group has it: children may then be limited
                    write_text(os.path.join(self.dirs["v2"], "cgroup.subtree_control"), "+cpu")
                except OSError:
                    pass
            if cpus is not None:
                _limit_cpu(self, dirs, cpus)
            if "v2" in dirs:
                write_text(os.path.join(self.dirs["v2"], "cgroup.subtree_control"), "+memory +pids")
                if memory_bytes is not None:
                    write_text(os.path.join(dirs["v2"], "memory.max"), str(memory_bytes))
                    if os.path.exists(os.path.join(dirs["v2"], "memory.swap.max")):
                        write_text(os.path.join(dirs["v2"], "memory.swap.max"), "0")
                if pids is not None:
                    write_text(os.path.join(dirs["v2"], "pids.max"), str(pids))
            else:
                if memory_bytes is not None:
                    write_text(os.path.join(dirs["memory"], "memory.limit_in_bytes"), str(memory_bytes))
                    memsw = os.path.join(dirs["memory"], "memory.memsw.limit_in_bytes")
                    if os.path.exists(memsw):
                        write_text(memsw, str(memory_bytes))  # no swap either
                if pids is not None:
                    write_text(os.path.join(dirs["pids"], "pids.max"), str(pids))
            return group
        except OSError:
            for path in reversed(made):
                try:
                    os.rmdir(path)
                except OSError:
                    pass
            raise

    def add(self, pid: int) -> None:
        """Move process `pid` (and the children it makes from now on) into this group."""
        for path in self.dirs.values():
            write_text(os.path.join(path, "cgroup.procs"), str(pid))

    def _pids(self) -> set[int]:
        """Every process in this group and the groups below it."""
        found: set[int] = set()
        for path in self.dirs.values():
            for folder, _, _ in os.walk(path):
                found |= {int(p) for p in _read(os.path.join(folder, "cgroup.procs")).split()}
        return found

    def oom_kills(self) -> int:
        """How many processes the kernel killed in this group for going over its memory limit."""
        name = "memory.events" if "v2" in self.dirs else "memory.oom_control"
        path = os.path.join(self.dirs.get("v2") or self.dirs.get("memory", ""), name)
        for line in _read(path).splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0

    def kill(self, timeout: float = 10.0) -> bool:
        """SIGKILL every process in the group and below, wait until none is left, remove it; True if so."""
        kill_file = os.path.join(self.dirs.get("v2", ""), "cgroup.kill")
        freezer = os.path.join(self.dirs.get("freezer", ""), "freezer.state")
        end = time.monotonic() + timeout
        while True:
            pids = self._pids()
            if not pids or time.monotonic() > end:
                break
            try:
                if "v2" in self.dirs and os.path.exists(kill_file):
                    # the kernel kills the whole subtree at once, forks in flight too
                    write_text(kill_file, "1")
                    pids = set()
                if "freezer" in self.dirs and pids:
                    write_text(freezer, "FROZEN")  # no fork between reading the list and the kill
            except OSError:
                pass
            sigkill(pids)
            try:
                if "freezer" in self.dirs and pids:
                    write_text(freezer, "THAWED")
            except OSError:
                pass
            time.sleep(0.02)
        emptied = not self._pids()
        for path in self.dirs.values():
            for folder, _, _ in sorted(os.walk(path), key=lambda w: -len(w[0])):
                try:
                    os.rmdir(folder)
                except OSError:
                    pass
        return emptied


CPU_PERIOD_US = 100_000


def _limit_cpu(parent: Cgroup, dirs: dict[str, str], cpus: float) -> None:
    """Cap the new group `dirs` at `cpus` cores (cpu.max, or v1's CFS quota); OSError where it cannot."""
    quota = str(max(1000, int(cpus * CPU_PERIOD_US)))
    if "v2" in dirs:
        write_text(os.path.join(dirs["v2"], "cpu.max"), f"{quota} {CPU_PERIOD_US}")
    elif "cpu" in dirs:
        write_text(os.path.join(dirs["cpu"], "cpu.cfs_period_us"), str(CPU_PERIOD_US))
        write_text(os.path.join(dirs["cpu"], "cpu.cfs_quota_us"), quota)
    else:
        raise OSError("no cpu controller")


def cgroup_for_sandbox(memory_bytes: int) -> Cgroup | None:
    """A fresh group for one student process: in the judge's group (CGROUP_ENV) or the base; None if none."""
    parent = Cgroup.from_spec(os.environ.get(CGROUP_ENV)) or Cgroup.base()
    if parent is None:
        return None
    try:
        return parent.child(f"sandbox-{os.getpid()}-{next(_SEQ)}", memory_bytes=memory_bytes, pids=PIDS_LIMIT)
    except OSError:
        return None


_SEQ = iter(range(1, 1 << 62))


# The student's process -------------------------------------------------------------


class Sandbox:
    """One confined student process and the pipes to it.

    `limits` is the job's limits (memory, files, CPU, Landlock) and `user` the OS user the student's code
    runs as (the sandbox switches to it itself, after making its namespaces as root).
    """

    def __init__(self, limits: dict, env: dict, user: str | None) -> None:
        self.workdir = tempfile.mkdtemp(prefix="cudalearn-sandbox-")
        self.cgroup = cgroup_for_sandbox(int(limits["memory_bytes"]))
        self.oom = 0
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        ids: dict[str, int] = {}
        if user:
            import pwd

            pw = pwd.getpwnam(user)
            os.chown(self.workdir, pw.pw_uid, pw.pw_gid)
            ids = {"uid": pw.pw_uid, "gid": pw.pw_gid}
        os.chmod(self.workdir, 0o700)
        env = {k: v for k, v in env.items() if k in ENV_KEEP or k.startswith("NUMBA_")}
        # One BLAS thread: OpenBLAS reserves a buffer per core when it loads (scipy, torch); on a 16-core
        # H200 host that overran the memory limit and died with SIGINT. Graders run notebooks side by side.
        env.update({k: "1" for k in BLAS_THREADS})
        env.update(
            HOME=self.workdir,
            TMPDIR=self.workdir,
            IPYTHONDIR=os.path.join(self.workdir, ".ipython"),
            MPLCONFIGDIR=os.path.join(self.workdir, ".matplotlib"),
            MPLBACKEND="Agg",
        )
        self.proc = subprocess.Popen(
            python_command(SANDBOX_MODULE, str(to_child_r), str(from_child_w)),
            pass_fds=(to_child_r, from_child_w),
            cwd=self.workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        os.set_blocking(self.to_child, False)  # a student's process that stops reading cannot block the judge
        if self.cgroup is not None:
            try:
                self.cgroup.add(self.proc.pid)  # before the header: no student code has run yet
            except OSError:
                self.cgroup.kill()
                self.cgroup = None
        self.output: collections.deque[bytes] = collections.deque(maxlen=64)
        self._drain = threading.Thread(target=self._read_output, daemon=True)
        self._drain.start()
        self.seq = 0
        self.closed = False
        try:
            wire.send(
                self.to_child,
                {**limits, **ids, "judge_pid": os.getpid(), "cgroup": self.cgroup is not None},
                deadline=time.monotonic() + 30,
            )
        except (OSError, wire.Deadline):
            pass  # it died at once: receive() reports it

    def _read_output(self) -> None:
        assert self.proc.stdout is not None
        # Large reads: a flood of output costs the judge one read per 64 KiB, and only the tail is kept.
        for chunk in iter(lambda: self.proc.stdout.read1(1 << 16), b""):
            self.output.append(chunk[-4096:])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, chars: int = 1500) -> str:
        """The last lines the student's process printed (for crash feedback), and a memory-limit kill."""
        text = b"".join(self.output).decode("utf-8", "replace")[-chars:].strip()
        oom = self.oom or (self.cgroup.oom_kills() if self.cgroup is not None and not self.closed else 0)
        if oom:
            text += (
                "\n[cudalearn grade] MemoryError: the kernel killed a process of this notebook: together its "
                "processes reached the memory limit (Cannot allocate memory)"
            )
        return text.strip()

    def receive(self, deadline: float) -> tuple[dict, memoryview, list]:
        return wire.recv(self.from_child, limit=MESSAGE_LIMIT, deadline=deadline, alive=self.alive)

    def kill(self) -> None:
        """End the student's process tree (group, namespace, cgroup, orphans), remove its folder (once)."""
        if self.closed:
            return
        self.closed = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the group outlives its leader: kill it even if it died
        except (ProcessLookupError, PermissionError):
            if self.proc.poll() is None:
                self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        if self.cgroup is not None:
            self.oom = self.cgroup.oom_kills()
            self.cgroup.kill()  # setsid'd and re-forking processes too
        _kill_orphans()
        for fd in (self.to_child, self.from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        self._drain.join(timeout=2)
        shutil.rmtree(self.workdir, ignore_errors=True)


def process_table() -> dict[int, tuple[int, int]]:
    """{pid: (parent pid, session id)} of every process /proc shows (the judge's and the sandbox's sweeps)."""
    table = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            fields = stat.rsplit(")", 1)[1].split()
            table[int(entry)] = (int(fields[1]), int(fields[3]))
        except (OSError, ValueError, IndexError):
            continue
    return table


def sigkill(pids: set[int]) -> None:
    """SIGKILL each of `pids` that still exists and may be signalled (the judge's and sandbox's sweeps)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _kill_orphans() -> None:
    """Kill processes re-parented to the judge (it is their subreaper): a student's escaped children.

    The judge's own children (its compile worker) share its session; a student's never can (sandboxes
    start in a session of their own, and a process cannot join a session it is not in).
    """
    me, session = os.getpid(), os.getsid(0)
    for pid, (ppid, sid) in process_table().items():
        if ppid == me and sid != session:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, os.WNOHANG)
            except (ProcessLookupError, ChildProcessError, PermissionError):
                pass


def make_private(subreaper: bool = False) -> None:
    """Make this process non-dumpable: no process of the same user can ptrace it or read its memory.

    With `subreaper`, orphans of its children (a student's escaped
    processes) are re-parented to it, so `_kill_orphans` can end them.
    """
    if sys.platform.startswith("linux"):
        lib = libc()
        lib.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
        if subreaper:
            lib.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
