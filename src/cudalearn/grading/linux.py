"""The Linux calls the grader's processes make themselves: libc through ctypes, kernel files (grading)."""

from __future__ import annotations

import ctypes


def libc() -> ctypes.CDLL:
    """This process's C library, with errno kept for ctypes.get_errno() (prctl, mount, unshare, capset)."""
    return ctypes.CDLL(None, use_errno=True)


def write_text(path: str, text: str) -> None:
    """Write `text` to a kernel file (a cgroup setting, /proc/self/uid_map); raises OSError if refused."""
    with open(path, "w") as f:
        f.write(text)
