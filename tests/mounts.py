"""Private mounts for one subprocess: a read-only directory, a tiny file system.

Tests of what a file system refuses (read-only, full) cannot use file modes when
they run as root, who writes whatever the modes say. Here the child enters a mount
namespace of its own before ``exec`` (with a user namespace of its own when not
root, mapped to the same user), so the mounts exist for it alone and vanish with
it. Linux only; ``unavailable()`` says why a machine does not allow it, for
``pytest.skip``.
"""

from __future__ import annotations

import ctypes
import functools
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 32, 1024, 2048, 4096
MS_REC, MS_PRIVATE, MS_RELATIME = 1 << 14, 1 << 18, 1 << 21
# A bind remount must keep these flags of the mount beneath (the kernel refuses
# to clear them inside a user namespace); statvfs reports them with the same bits.
KEPT = MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME


def read_only(directory: Path) -> Callable[[], None]:
    """A ``preexec`` that makes ``directory`` read-only for the child."""
    path = os.fsencode(directory)

    def enter() -> None:
        libc = _private_mounts()
        kept = os.statvfs(directory).f_flag & KEPT
        _check(libc.mount(path, path, None, MS_BIND, None))
        _check(libc.mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept, None))

    return enter


def tiny_file_system(directory: Path, size: str = "4k") -> Callable[[], None]:
    """A ``preexec`` that mounts an empty tmpfs of ``size`` on ``directory`` for the child."""
    path = os.fsencode(directory)

    def enter() -> None:
        libc = _private_mounts()
        _check(libc.mount(b"tmpfs", path, b"tmpfs", 0, f"size={size}".encode()))

    return enter


@functools.cache
def unavailable() -> str:
    """Why private mounts cannot be made here ("" when they can)."""
    if sys.platform != "linux":
        return "private mounts need Linux mount namespaces"
    with tempfile.TemporaryDirectory() as directory:
        try:
            subprocess.run(
                [sys.executable, "-c", ""],
                preexec_fn=tiny_file_system(Path(directory)),
                check=True,
                timeout=60,
            )
        except (OSError, subprocess.SubprocessError) as error:
            return (
                f"cannot make private mounts (needs root or unprivileged user namespaces): {error}"
            )
    return ""


def _private_mounts() -> ctypes.CDLL:
    """Child side: a mount namespace of its own, nothing shared back to the parent's."""
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        _check(libc.unshare(CLONE_NEWNS))
    else:
        _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS))
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None))
    return libc


def _check(result: int) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))
