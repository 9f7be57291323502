"""The sandbox's own PID, mount and IPC namespaces, when the kernel allows them (grading's sandbox).

As root, or through a user namespace otherwise: a PID namespace whose init
is a small reaper that ends when the student's process does, taking every
process the student started with it (setsid, double forks, daemons); a mount
namespace where /tmp, /var/tmp, /dev/shm and its own folder are fresh
size-limited tmpfs mounts that vanish with it, and /proc shows only its own
processes; an IPC namespace (System V shared memory and message queues
vanish too). A Python under a folder the student's user cannot enter (a
pyenv in /root) is shown to it alone, through a tmpfs over that folder.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

from cudalearn.grading.landlock import readable_roots
from cudalearn.grading.linux import libc, write_text

_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWUSER, _CLONE_NEWPID = 0x20000, 0x8000000, 0x10000000, 0x20000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_BIND, _MS_REC, _MS_PRIVATE = 2, 4, 8, 1 << 12, 1 << 14, 1 << 18
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm")  # world-writable folders: fresh tmpfs in the namespace


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when its parent dies (and at once if `parent` is already gone)."""
    libc().prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(70)


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> bool:
    enc = lambda t: None if t is None else t.encode()  # noqa: E731
    return libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) == 0


def _unshare() -> str:
    """Enter new PID, mount and IPC namespaces ('root'), via a user namespace ('user'), or '' if refused."""
    lib = libc()
    flags = _CLONE_NEWPID | _CLONE_NEWNS | _CLONE_NEWIPC
    if os.geteuid() == 0 and lib.unshare(flags) == 0:
        return "root"
    uid, gid = os.geteuid(), os.getegid()
    if lib.unshare(flags | _CLONE_NEWUSER) != 0:
        return ""
    try:  # the same user inside as outside: files it makes belong to the grader's user
        write_text("/proc/self/setgroups", "deny")
        write_text("/proc/self/uid_map", f"{uid} {uid} 1")
        write_text("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError:
        os._exit(71)  # half in a user namespace: nothing sensible to do but fail the start
    return "user"


def _private_mounts(workdir: str, cfg: dict) -> list[str]:
    """In the new mount namespace: fresh /proc, tmpfs over PRIVATE_DIRS and the workdir; the tmpfs paths."""
    _mount("none", "/", None, _MS_REC | _MS_PRIVATE)  # nothing mounted here propagates back out
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)  # only this namespace's processes
    uid, gid = int(cfg.get("uid", os.geteuid())), int(cfg.get("gid", os.getegid()))
    size = int(cfg["file_bytes"])
    made = []
    needed = [os.path.realpath(r) + "/" for r in readable_roots()]
    for folder in PRIVATE_DIRS:
        inside = any(r.startswith(os.path.realpath(folder) + "/") for r in needed)  # a venv under /tmp
        if os.path.isdir(folder) and not os.path.islink(folder) and not inside:
            if _mount("tmpfs", folder, "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={size},mode=1777"):
                made.append(folder)
    if "uid" in cfg and os.geteuid() == 0:
        _open_for(uid, gid, readable_roots())
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
    libc().prctl(1, signal.SIGKILL, 0, 0, 0)  # die with the supervisor (outside: getppid() is 0 here)
    os.close(status_r)
    private = _private_mounts(workdir, cfg)
    server = os.fork()
    if server:
        for fd in fds:
            os.close(fd)
        _init(server, status_w)
    die_with_parent(1)
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
