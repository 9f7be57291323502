"""The process that runs one submission's code, confined, and answers the judge in data only (instructors).

Started by the judge as `python -I -B -m cudalearn.grading.sandbox IN OUT`
(two pipe descriptors), in an empty temporary folder, with a minimal
environment, inside its cgroup when the judge could make one. Before it runs
any student code it confines itself:

- namespaces, when the kernel allows them (as root, or through a user
  namespace otherwise): a PID namespace whose init is a small reaper that
  ends when the student's process does, taking every process the student
  started with it (setsid, double forks, daemons); a mount namespace where
  /tmp, /var/tmp, /dev/shm and its own folder are fresh size-limited tmpfs
  mounts that vanish with it, and /proc shows only its own processes; an
  IPC namespace (System V shared memory and message queues vanish too);
- it switches to the unprivileged user the judge names (the grader runs as
  root: `nobody` by default), so file permissions keep it out of root's
  files;
- resource limits: RLIMIT_DATA (memory), RLIMIT_CPU, RLIMIT_FSIZE,
  RLIMIT_NOFILE, no core dumps; it dies with the judge (PR_SET_PDEATHSIG);
- when it still runs as root (`--user root`), it drops every capability,
  so it cannot raise its limits again or bypass file permissions;
- Landlock (Linux 5.13+), when the kernel has it: the process can read only
  the Python installation, the imported packages' folders, system folders
  and /proc, write only its temporary folder, its own /proc entries (the
  CUDA driver names its threads there) and the GPU's device files, cannot
  ptrace or signal processes outside itself (ABI 6+ for signals) and
  cannot open TCP connections (ABI 4+). The solutions, the hidden tests and
  the instructor's files are out of its reach even for the same OS user.

Then it loops: receive a request, run it, reply with a value that is data
(see `wire`) or a numbered handle on an object that stays here. Processes
that a cell or a call of the student's code leaves running are ended when it
returns (`end_leftovers`): a fork storm's sleepers would otherwise hold the
cgroup's process count, and the next cell could not start a thread.
"""

from __future__ import annotations

import base64
import ctypes
import glob
import importlib
import inspect
import itertools
import linecache
import os
import pickle
import resource
import signal
import sys
import threading
import traceback
from typing import Any

from cudalearn import counting
from cudalearn.grading import process, wire

MESSAGE_LIMIT = 256 << 20  # bytes in one request from the judge (a check's input arrays)
OPEN_FILES = 1024
THREAD_STACK = 512 << 10  # bytes of stack per thread


# Confinement --------------------------------------------------------------------

_FS_V1 = (1 << 13) - 1  # execute, read/write file, read dir, remove, make-*
_REFER, _TRUNCATE = 1 << 13, 1 << 14
_READ = 1 | 4 | 8  # execute, read file, read dir
_FILE_RIGHTS = 1 | 2 | 4 | _TRUNCATE  # rights that apply to a file (not a directory)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when it has none (or this is not Linux)."""
    if not sys.platform.startswith("linux"):
        return 0
    abi = _libc().syscall(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, VERSION)
    return max(int(abi), 0)


def _readable_roots() -> list[str]:
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
    libc = _libc()
    fs = _FS_V1 | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(fs, 3 if net and abi >= 4 else 0, scope if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = libc.syscall(444, ctypes.byref(attr), ctypes.c_size_t(size), 0)
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
            libc.syscall(445, ruleset, 1, ctypes.byref(rule), 0)
        finally:
            os.close(fd)

    for root in _readable_roots():
        allow(root, _READ)
    # The CUDA driver names its threads through /proc/self/task/*/comm: writing its own /proc entries is
    # harmless, while /proc/sys (kernel settings) stays read-only.
    allow(os.path.realpath("/proc/self"), _READ | 2 | (_TRUNCATE if abi >= 3 else 0))
    for dev in _device_files():
        allow(dev, _READ | 2 | (_TRUNCATE if abi >= 3 else 0))
    for rw in (workdir, *extra):
        allow(rw, fs)
    libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    ok = libc.syscall(446, ruleset, 0) == 0  # landlock_restrict_self
    os.close(ruleset)
    return abi if ok else 0


def drop_capabilities() -> None:
    """Drop every Linux capability of this process (it runs as root): it can no longer raise limits."""
    libc = _libc()
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP
    libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [
            ("effective", ctypes.c_uint32),
            ("permitted", ctypes.c_uint32),
            ("inheritable", ctypes.c_uint32),
        ]

    data = (Data * 2)()
    if libc.capset(ctypes.byref(Header(0x20080522, 0)), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWUSER, _CLONE_NEWPID = 0x20000, 0x8000000, 0x10000000, 0x20000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_BIND, _MS_REC, _MS_PRIVATE = 2, 4, 8, 1 << 12, 1 << 14, 1 << 18
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm")  # world-writable folders: fresh tmpfs in the namespace


def _die_with_parent(parent: int) -> None:
    """SIGKILL this process when its parent dies (and at once if `parent` is already gone)."""
    _libc().prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(70)


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> bool:
    enc = lambda t: None if t is None else t.encode()  # noqa: E731
    return _libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) == 0


def _unshare() -> str:
    """Enter new PID, mount and IPC namespaces ('root'), via a user namespace ('user'), or '' if refused."""
    libc = _libc()
    flags = _CLONE_NEWPID | _CLONE_NEWNS | _CLONE_NEWIPC
    if os.geteuid() == 0 and libc.unshare(flags) == 0:
        return "root"
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(flags | _CLONE_NEWUSER) != 0:
        return ""
    try:  # the same user inside as outside: files it makes belong to the grader's user
        _write_text("/proc/self/setgroups", "deny")
        _write_text("/proc/self/uid_map", f"{uid} {uid} 1")
        _write_text("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError:
        os._exit(71)  # half in a user namespace: nothing sensible to do but fail the start
    return "user"


def _write_text(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _private_mounts(workdir: str, cfg: dict) -> list[str]:
    """In the new mount namespace: fresh /proc, tmpfs over PRIVATE_DIRS and the workdir; the tmpfs paths."""
    _mount("none", "/", None, _MS_REC | _MS_PRIVATE)  # nothing mounted here propagates back out
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)  # only this namespace's processes
    uid, gid = int(cfg.get("uid", os.geteuid())), int(cfg.get("gid", os.getegid()))
    size = int(cfg["file_bytes"])
    made = []
    needed = [os.path.realpath(r) + "/" for r in _readable_roots()]
    for folder in PRIVATE_DIRS:
        inside = any(r.startswith(os.path.realpath(folder) + "/") for r in needed)  # a venv under /tmp
        if os.path.isdir(folder) and not os.path.islink(folder) and not inside:
            if _mount("tmpfs", folder, "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={size},mode=1777"):
                made.append(folder)
    if "uid" in cfg and os.geteuid() == 0:
        _open_for(uid, gid, _readable_roots())
    os.makedirs(workdir, exist_ok=True)  # under the fresh /tmp: the same path, now empty
    opts = f"size={4 * size},mode=0700,uid={uid},gid={gid}"
    if _mount("tmpfs", workdir, "tmpfs", _MS_NOSUID | _MS_NODEV, opts):
        made.append(workdir)
    os.chdir(workdir)
    for sub in (".ipython", ".matplotlib"):
        os.makedirs(os.path.join(workdir, sub), exist_ok=True)
        os.chown(os.path.join(workdir, sub), uid, gid)
    return made


def closed_folder(path: str, uid: int, gid: int) -> str | None:
    """The first folder on the way to `path` that user uid/gid may not enter (None: it can reach it)."""
    import stat

    here = "/"
    for part in [p for p in os.path.realpath(path).split("/") if p] + [None]:
        st = os.stat(here)
        mine = st.st_uid == uid and st.st_mode & stat.S_IXUSR
        group = st.st_gid == gid and st.st_mode & stat.S_IXGRP
        if not (mine or group or st.st_mode & stat.S_IXOTH):
            return here
        if part is None:
            return None
        here = os.path.join(here, part)
    return None


def _open_for(uid: int, gid: int, roots: list[str]) -> None:
    """Let user uid/gid reach `roots` (a Python under /root): over each closed folder on the way, a tmpfs
    that holds only bind mounts of the roots below it, so the rest of that folder stays out of sight."""
    closed: dict[str, list[str]] = {}
    for root in roots:
        folder = closed_folder(root, uid, gid)
        if folder is not None and folder != root and not folder.startswith(("/proc", "/sys")):
            closed.setdefault(folder, []).append(os.path.realpath(root))
    for folder, inside in sorted(closed.items(), key=lambda kv: -len(kv[0])):
        fds = {p: os.open(p, os.O_PATH | os.O_CLOEXEC) for p in inside}
        if not _mount("tmpfs", folder, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=0755"):
            continue
        for p, fd in fds.items():
            os.makedirs(p, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", p, None, _MS_BIND | _MS_REC)
            os.close(fd)


def _end_like(status: int) -> None:
    """End this process the way a child with wait status `status` ended: the same signal or exit code."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _init(server: int, status_w: int) -> None:
    """PID 1 of the namespace: reap every orphan until the server ends, then tell the supervisor how."""
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            status = 1 << 8
            break
        except InterruptedError:
            continue
        if pid == server:
            break
    os.write(status_w, status.to_bytes(4, "little"))
    os._exit(0)  # init's exit: the kernel SIGKILLs every process left in the namespace


def namespaces(cfg: dict, workdir: str, fds: tuple[int, int]) -> dict:
    """Put the rest of this sandbox in its own PID, mount and IPC namespaces, when the kernel allows it.

    This process stays outside as the supervisor the judge watches; its child is the namespace's init,
    whose child, in turn, serves the judge (PID 2, so signals the student sends itself still kill it).
    Returns what was made: {"namespaces": "root" | "user" | "", "private": [tmpfs folders]}.
    """
    if not sys.platform.startswith("linux") or not cfg.get("namespaces", True):
        return {"namespaces": "", "private": []}
    how = _unshare()
    if not how:
        return {"namespaces": "", "private": []}
    status_r, status_w = os.pipe()
    init = os.fork()
    if init:  # the supervisor: outside the namespace, holds no channel, mirrors the server's end
        for fd in (*fds, status_w):
            os.close(fd)
        data = b""
        while len(data) < 4:
            chunk = os.read(status_r, 4 - len(data))
            if not chunk:
                os._exit(73)  # init died without a word (killed from outside)
            data += chunk
        _end_like(int.from_bytes(data, "little"))
    _libc().prctl(1, signal.SIGKILL, 0, 0, 0)  # die with the supervisor (outside: getppid() is 0 here)
    os.close(status_r)
    private = _private_mounts(workdir, cfg)
    server = os.fork()
    if server:
        for fd in fds:
            os.close(fd)
        _init(server, status_w)
    _die_with_parent(1)
    os.close(status_w)
    return {"namespaces": how, "private": private}


def probe_namespaces() -> str:
    """What `namespaces` would get here ('root', 'user' or ''), tried in a throwaway child (grader)."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return ""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.write(w, _unshare().encode() or b"-")
        finally:
            os._exit(0)
    os.close(w)
    answer = os.read(r, 16).decode()
    os.close(r)
    os.waitpid(pid, 0)
    return "" if answer in ("", "-") else answer


def become(cfg: dict) -> bool:
    """Switch to the unprivileged user the judge named (uid/gid in `cfg`), with no extra groups."""
    if "uid" not in cfg or os.geteuid() != 0:
        return False
    libc = _libc()
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP while it still may: no capability ever comes back
    os.setgroups([])
    os.setgid(int(cfg["gid"]))
    os.setuid(int(cfg["uid"]))
    _libc().prctl(4, 1, 0, 0, 0)  # dumpable again, as after exec: its own /proc entries stay its own
    return True


def confine(cfg: dict, workdir: str, fds: tuple[int, int] = ()) -> dict:
    """Namespaces, the student's user, limits, capabilities and Landlock, in that order; what was applied."""
    if sys.platform.startswith("linux"):
        _die_with_parent(int(cfg.get("judge_pid", os.getppid())))
    made = namespaces(cfg, workdir, fds)
    user = become(cfg)
    mem = int(cfg["memory_bytes"])
    cpu = int(cfg["cpu_seconds"])
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(cfg["file_bytes"]),) * 2)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_DATA, (mem, mem))
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))
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


# Running requests -----------------------------------------------------------------


def without_magics(source: str) -> str:
    """A cell's text with IPython magics and shell lines (`%pip`, `!ls`) made `pass` (IPython is absent)."""
    lines = []
    for line in source.split("\n"):
        stripped = line.lstrip()
        lines.append(line[: len(line) - len(stripped)] + "pass" if stripped.startswith(("%", "!")) else line)
    return "\n".join(lines)


def _safe_str(e: BaseException) -> str:
    try:
        text = str(e)
    except BaseException:  # a student-defined __str__ that raises
        text = f"<{type(e).__name__} whose message cannot be printed>"
    return text[:4000]


def describe(e: BaseException) -> dict:
    """A student's exception as data: type, message and where in the student's cells it was raised."""
    where = ""
    if isinstance(e, SyntaxError):
        where = f"{(e.filename or 'cell').strip('<>')}, line {e.lineno}: {(e.text or '').strip()[:200]}"
        message = str(e.msg)
    else:
        message = _safe_str(e)
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename.startswith("<")]
        if frames:
            f = frames[-1]
            where = f"{f.filename.strip('<>')}, line {f.lineno}" + (
                f": {f.line.strip()[:200]}" if f.line else ""
            )
    last = traceback.extract_tb(e.__traceback__)[-3:]  # where it was raised, student's cell or not
    return {
        "type": type(e).__name__[:100],
        "module": str(type(e).__module__)[:100],
        "message": message,
        "where": where,
        "at": " <- ".join(f"{os.path.basename(f.filename)}:{f.lineno} {f.name}" for f in reversed(last))[
            :600
        ],
    }


def _signature(obj: Any) -> list | None:
    try:
        sig = inspect.signature(obj)
    except BaseException:
        return None
    return [[str(p.name)[:100], int(p.kind)] for p in list(sig.parameters.values())[:64]]


def _host(x: Any) -> Any:
    """A host numpy copy of an array argument after a call, or None if `x` is not an array."""
    import numpy as np

    if isinstance(x, np.ndarray):
        return x
    if wire._is_device_array(x):
        return x.copy_to_host()
    tensor = wire._torch_tensor_type()
    if tensor is not None and isinstance(x, tensor):
        return (
            x.detach().cpu().float().numpy() if str(x.dtype) == "torch.bfloat16" else x.detach().cpu().numpy()
        )
    return None


def _guard(a: Any) -> tuple[Any, Any]:
    """A copy of device array `a` inside the course's guard zones (`cudalearn.guard`): (view, guard)."""
    from cudalearn.guard import Guarded

    g = Guarded(a.copy_to_host())
    return g.view, g


def _check_guard(label: str, shape: tuple, guard: Any) -> None:
    """Raise IndexError if a kernel wrote into the guard zones around an argument (a GPU does not raise)."""
    before, after = guard.overwritten()
    if before or after:
        where = "past the end" if after else "before the start"
        raise IndexError(
            f"your kernel wrote {where} of {label} (shape {shape}): an index is out of bounds for the array"
        )


def _parameter_names(obj: Any) -> list[str]:
    """The parameter names of a kernel launch (`kernel[grid, block]`) or function, if they can be found."""
    fn = getattr(getattr(obj, "dispatcher", obj), "py_func", None) or obj
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def _guard_arguments(obj: Any, args: list, kwargs: dict) -> list:
    """On a GPU, give the kernel guarded copies of its device-array arguments; return what to check."""
    from cudalearn import device

    if device.mode() != "gpu":
        return []  # the simulator raises IndexError itself
    names = _parameter_names(obj)
    checks = []
    for key in [*range(len(args)), *kwargs]:
        holder = args if isinstance(key, int) else kwargs
        a = holder[key]
        if wire._is_device_array(a) and getattr(a, "size", 0):
            holder[key], guard = _guard(a)
            if isinstance(key, int):
                label = f"`{names[key]}`" if key < len(names) else f"argument {key + 1}"
            else:
                label = f"`{key}`"
            checks.append((label, tuple(a.shape), guard))
    return checks


class Server:
    """Runs the judge's requests in one namespace, like a notebook kernel."""

    def __init__(self) -> None:
        self.objects: dict[int, Any] = {}
        self.ids = itertools.count(1)
        self.ns, self.transform = self._namespace()

    @staticmethod
    def _namespace() -> tuple[dict, Any]:
        try:
            from IPython.core.inputtransformer2 import TransformerManager
            from IPython.core.interactiveshell import InteractiveShell
            from traitlets.config import Config
        except ImportError:  # no IPython: plain Python cells, magics skipped
            return {"__name__": "__main__", "__builtins__": __builtins__}, without_magics
        config = Config()
        config.HistoryManager.enabled = False
        shell = InteractiveShell.instance(config=config)
        return shell.user_ns, TransformerManager().transform_cell

    def to_ref(self, obj: Any) -> dict:
        rid = next(self.ids)
        self.objects[rid] = obj
        try:
            name = str(getattr(obj, "__name__", ""))[:100]
        except BaseException:
            name = ""
        return {
            "$": "r",
            "id": rid,
            "type": type(obj).__name__[:100],
            "name": name,
            "call": callable(obj),
            "sig": _signature(obj) if callable(obj) else None,
        }

    def from_ref(self, node: dict) -> Any:
        if isinstance(node.get("pickle"), str):  # an object the instructor's cells built in the judge
            return pickle.loads(base64.b64decode(node["pickle"]))
        try:
            return self.objects[node["id"]]
        except (KeyError, TypeError):
            raise wire.ProtocolError("unknown handle") from None

    def encode(self, value: Any, extra: dict | None = None) -> tuple[dict, list[bytes]]:
        enc = wire.Encoder(self.to_ref)
        reply = {"value": enc.encode(value)}
        for key, v in (extra or {}).items():
            reply[key] = enc.encode(v)
        return reply, enc.buffers

    def handle(self, req: dict, payload: memoryview, spans: list) -> tuple[dict, list[bytes]]:
        op = req.get("op")
        dec = wire.Decoder(payload, spans, self.from_ref)
        if op == "exec":
            name = str(req["name"])[:60]
            code = self.transform(str(req["code"]))
            filename = f"<{name}>"
            linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
            exec(compile(code, filename, "exec"), self.ns)
            return {"value": None}, []
        if op == "get":
            name = str(req["name"])
            if name not in self.ns:
                raise NameError(f"name {name!r} is not defined")
            return self.encode(self.ns[name])
        if op == "ping":
            return {"value": None}, []
        obj = self.from_ref({"id": req.get("id")})
        if op == "call":
            args = dec.decode(req.get("args"))
            kwargs = dec.decode(req.get("kwargs"))
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                raise wire.ProtocolError("malformed call")
            guards = _guard_arguments(obj, args, kwargs)
            with counting.observe() as seen:
                result = obj(*args, **kwargs)
            for label, shape, guard in guards:
                _check_guard(label, shape, guard)
            back = [[i, h] for i, a in enumerate(args) if (h := _host(a)) is not None]
            back += [[k, h] for k, a in kwargs.items() if (h := _host(a)) is not None]
            return self.encode(result, {"back": back, "events": [seen.launches[:1000], seen.copies]})
        if op == "experiment":  # checks.student_side: the package's function, run on the student's object
            module = str(req.get("module"))
            if not module.startswith("cudalearn."):
                raise wire.ProtocolError("an experiment must be a cudalearn function")
            experiment = getattr(importlib.import_module(module), str(req.get("function")))
            args = dec.decode(req.get("args"))
            kwargs = dec.decode(req.get("kwargs"))
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                raise wire.ProtocolError("malformed experiment")
            with counting.observe() as seen:
                result = experiment(obj, *args, **kwargs)
            return self.encode(result, {"events": [seen.launches[:1000], seen.copies]})
        if op == "getattr":
            return self.encode(getattr(obj, str(req["name"])))
        if op == "getitem":
            return self.encode(obj[dec.decode(req.get("key"))])
        if op == "len":
            return self.encode(len(obj))
        if op == "list":
            return self.encode(list(itertools.islice(iter(obj), wire.MAX_ITEMS)))
        if op == "array":
            import numpy as np

            return self.encode(np.asarray(obj))
        if op == "repr":
            return self.encode(repr(obj)[:1000])
        if op == "bool":
            return self.encode(bool(obj))
        if op == "num":
            return self.encode(float(obj) if req.get("kind") == "float" else int(obj))
        raise wire.ProtocolError(f"unknown request {op!r}")


STUDENT_OPS = ("exec", "call", "experiment")  # the requests that run the student's code


def end_leftovers(in_namespace: bool, rounds: int = 50) -> int:
    """SIGKILL the processes the student's code left running and reap them; how many (grading, every lab).

    In the PID namespace that is every process but its init (1) and this one; without a namespace, this
    process's descendants (an escaped orphan is left to the judge's cgroup and subreaper).
    """
    me, ended = os.getpid(), set()
    for _ in range(rounds):
        table = process.process_table()
        if in_namespace:
            found = set(table) - {1, me}
        else:
            found, frontier = set(), {me}
            while frontier:
                frontier = {pid for pid, (ppid, _) in table.items() if ppid in frontier} - found
                found |= frontier
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        ended |= found
        _reap()
    _reap()
    return len(ended)


def _reap() -> None:
    """Collect this process's ended children, so they no longer count in the cgroup's process limit."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(argv: list[str]) -> None:
    """Entry point: confine, say hello, then serve the judge's requests until the channel closes."""
    fd_in, fd_out = int(argv[0]), int(argv[1])
    header, _, _ = wire.recv(fd_in, limit=1 << 20)
    workdir = os.getcwd()
    applied = confine(header, workdir, (fd_in, fd_out))
    # The simulator runs a Python thread per CUDA thread (1024 in a 32x32 block): with the default 8 MiB
    # stacks, RLIMIT_DATA would count 8 GiB of address space for one block.
    threading.stack_size(THREAD_STACK)
    import cudalearn

    cudalearn.setup(quiet=True)
    server = Server()
    wire.send(fd_out, {"hello": True, "pid": os.getpid(), **applied})
    while True:
        try:
            req, payload, spans = wire.recv(fd_in, limit=MESSAGE_LIMIT)
        except wire.ChannelClosed:
            os._exit(0)
        seq = req.get("seq")
        try:
            reply, buffers = server.handle(req, payload, spans)
        except BaseException as e:  # the student's error (or SystemExit): reported, never fatal here
            reply, buffers = {"error": describe(e)}, []
        if req.get("op") in STUDENT_OPS:
            end_leftovers(bool(applied.get("namespaces")))
        reply["seq"] = seq
        wire.send(fd_out, reply, buffers)
        if "error" in reply and reply["error"]["type"] in ("CudaAPIError", "CudaDriverError"):
            os._exit(3)  # the CUDA context is lost (an illegal address...): the judge starts a new process


if __name__ == "__main__":
    main(sys.argv[1:])
