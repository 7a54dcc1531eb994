"""Where poolgate keeps what it learned in earlier runs (validated rules, compiled CEL),
and why it may believe it.

``$POOLGATE_CACHE_DIR``, else ``$XDG_CACHE_HOME/poolgate``, else ``~/.cache/poolgate``.
What is kept changes results if it lies: a compiled program stored under a rule's
key replaces the rule (``[]`` under every key silenced every finding), and a listed
digest skips a rule file's schema check. So it is believed only when both hold:

* the directory is the user's own: a real directory (not a symbolic link) owned by
  the user, with no permissions for anyone else (0700). One that others may write
  is not used at all, with one warning; one only others may read (an older
  poolgate made it 0755) is made 0700 first, since no one else could have written it.
* every file carries an HMAC-SHA256 of its name and content, under a random key
  made once per directory and kept in it (``key``, 0600, created whole or not at
  all). A file whose tag does not verify (edited, truncated, copied from another
  cache, written by an older poolgate) is read as empty: its work is done again
  and the file rewritten.

Everything in it is best effort: a directory that cannot be made or written costs
only speed. Delete it at any time. On Windows, which has no POSIX owner and mode,
the HMAC is the only check.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
from contextlib import suppress
from pathlib import Path
from typing import Final

KEY_FILE: Final = "key"
KEY_SIZE: Final = 32
TAG_SIZE: Final = hashlib.sha256().digest_size

_keys: dict[str, bytes | None] = {}
"""Directory -> its key, or ``None`` when it is not used; checked once per process."""


def cache_dir() -> Path:
    configured = os.environ.get("POOLGATE_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "poolgate"


def read(name: str) -> bytes | None:
    """What an earlier run kept under ``name``, if the file is there and verifies."""
    directory = cache_dir()
    key = _key(directory)
    if key is None:
        return None
    try:
        data = (directory / name).read_bytes()
    except OSError:
        return None
    tag, content = data[:TAG_SIZE], data[TAG_SIZE:]
    if len(tag) != TAG_SIZE or not hmac.compare_digest(tag, _tag(key, name, content)):
        return None
    return content


def write(name: str, content: bytes) -> None:
    """Replace ``name`` with ``content`` and its tag in one step (errors ignored:
    a cache that cannot be written only costs speed)."""
    directory = cache_dir()
    key = _key(directory)
    if key is not None:
        with suppress(OSError):
            _write_new(directory, name, _tag(key, name, content) + content)


def _tag(key: bytes, name: str, content: bytes) -> bytes:
    """The name is in the tag, so one file cannot stand in for another."""
    return hmac.new(key, name.encode() + b"\0" + content, hashlib.sha256).digest()


def _key(directory: Path) -> bytes | None:
    where = str(directory)
    if where not in _keys:
        _keys[where] = _open(directory)
    return _keys[where]


def _open(directory: Path) -> bytes | None:
    """The directory's key, making both when they do not exist yet; ``None`` when
    the directory cannot be used (a warning says why when it is not private)."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        problem = _not_private(directory)
        if problem is None:
            return _read_key(directory) or _make_key(directory)
    except OSError:
        return None  # cannot be made or read: only speed is lost, as without a cache
    except _Untrusted as untrusted:
        problem = str(untrusted)
    _warn(f"cache directory {directory} {problem}; running without a cache")
    return None


class _Untrusted(Exception):
    """The key file is not the user's own private file."""


def _not_private(directory: Path) -> str | None:
    """Why others could have written to ``directory``, or ``None`` when no one could."""
    status = os.lstat(directory)
    if stat.S_ISLNK(status.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(status.st_mode):
        return "is not a directory"
    if not hasattr(os, "geteuid"):  # Windows: no POSIX owner and mode; the HMAC remains
        return None
    if status.st_uid != os.geteuid():
        return f"is owned by user id {status.st_uid}, not by this user ({os.geteuid()})"
    mode = stat.S_IMODE(status.st_mode)
    if mode & 0o022:
        return f"may be written by others (mode {mode:04o}; it must be 0700)"
    if mode & 0o077:
        os.chmod(directory, 0o700)  # readable by others only: nothing of theirs is in it
    return None


def _read_key(directory: Path) -> bytes | None:
    """The key, ``None`` when there is none yet."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        descriptor = os.open(directory / KEY_FILE, flags)
    except FileNotFoundError:
        return None
    except OSError as error:  # ELOOP: a symbolic link
        raise _Untrusted(f"holds a key file that cannot be used ({error.strerror})") from None
    with open(descriptor, "rb") as handle:
        status = os.fstat(handle.fileno())
        key = handle.read(KEY_SIZE + 1)
    if not stat.S_ISREG(status.st_mode) or len(key) != KEY_SIZE:
        raise _Untrusted(f"holds a key file that is not {KEY_SIZE} bytes")
    if hasattr(os, "geteuid") and (
        status.st_uid != os.geteuid() or stat.S_IMODE(status.st_mode) & 0o077
    ):
        raise _Untrusted("holds a key file that is not this user's alone (it must be 0600)")
    return key


def _make_key(directory: Path) -> bytes:
    """A new random key, stored whole or not at all. Two runs starting together both
    make one; the first link wins and the other reads it."""
    import tempfile  # only the first run in a directory makes a key

    descriptor, temporary = tempfile.mkstemp(dir=directory, prefix=f".{KEY_FILE}.")  # 0600
    try:
        with open(descriptor, "wb") as handle:
            handle.write(os.urandom(KEY_SIZE))
        try:
            os.link(temporary, directory / KEY_FILE)  # fails if another run made one first
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links: last writer wins
            os.replace(temporary, directory / KEY_FILE)
    finally:
        with suppress(OSError):
            os.unlink(temporary)
    key = _read_key(directory)
    if key is None:
        raise _Untrusted("lost its key file while it was made")
    return key


def _write_new(directory: Path, name: str, data: bytes) -> None:
    import tempfile  # only when something new is kept: most runs write nothing

    descriptor, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}.")
    try:
        with open(descriptor, "wb") as handle:
            handle.write(data)
        os.replace(temporary, directory / name)
    except OSError:
        with suppress(OSError):
            os.unlink(temporary)
        raise


def _warn(message: str) -> None:
    from scanner.console import warn  # only when the directory is refused

    warn(message)
