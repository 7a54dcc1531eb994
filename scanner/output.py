"""Where reports go: ``--format``/``--output`` pairs, validated before any work,
written atomically."""

from __future__ import annotations

import os
import re
import stat
import sys
import tempfile
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from scanner.errors import OutputError, UsageError

STDOUT = "-"

_DESCRIPTOR_DIRECTORY: Final = re.compile(
    r"/dev/fd|/proc/(?:self|thread-self|\d+)(?:/task/\d+)?/fd"
)
"""Where the links to a process's open files live (``/dev/stdout`` -> ``/proc/self/fd/1``)."""

_MAX_LINKS: Final = 40  # Linux's own limit on symbolic links followed in one lookup


@dataclass(frozen=True, slots=True)
class Destination:
    format: str
    path: str
    """A file path, or ``-`` for standard output."""

    @property
    def is_stdout(self) -> bool:
        return self.path == STDOUT


def pair(formats: Sequence[str], outputs: Sequence[str], default_format: str) -> list[Destination]:
    """Pair ``--format`` and ``--output`` options (kube-linter's rule: in order, one each).

    With no ``--output`` everything goes to standard output, which takes one format.
    The same file may not be written twice, and every file must be writable.
    """
    formats = list(formats) or [default_format]
    if not outputs:
        if len(formats) > 1:
            raise UsageError(
                f"{len(formats)} formats but no --output",
                hint="only one format can go to standard output; give an --output for each",
            )
        return [Destination(formats[0], STDOUT)]
    if len(outputs) != len(formats):
        raise UsageError(
            f"--format and --output come in pairs: "
            f"{len(formats)} format(s), {len(outputs)} output(s)",
            hint="repeat --format FORMAT --output FILE for each report",
        )
    destinations = [Destination(fmt, out) for fmt, out in zip(formats, outputs, strict=True)]
    seen: set[str] = set()
    for destination in destinations:
        key = STDOUT if destination.is_stdout else str(Path(destination.path).resolve())
        if key in seen:
            where = "standard output" if destination.is_stdout else destination.path
            raise UsageError(f"--output {where} is given twice", hint="one report per file")
        seen.add(key)
        if not destination.is_stdout:
            check_writable(Path(destination.path))
    return destinations


def check_writable(path: Path, option: str = "--output") -> None:
    """Fail before scanning when ``path`` cannot be written; ``option`` names it in messages.

    What must be writable is what ``write`` writes: a device or pipe itself, else the
    directory the temporary file is made in (the link's target's, for a symbolic link).
    """
    if path.is_dir():
        raise OutputError(f"{option} {path}: is a directory", hint="name a file")
    if _written_in_place(path):
        if not os.access(path, os.W_OK):
            raise OutputError(f"{option} {path}: permission denied")
        return
    target = _link_target(path)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError(f"{option} {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise OutputError(f"{option} {path}: permission denied")


def write(destination: Destination, render: Callable[[TextIO], None]) -> None:
    """Render to standard output, or to a temporary file renamed over the target.

    A crash or a full disk mid-write never leaves a truncated report behind. A
    symbolic link stays a link: its target is replaced. A device or a pipe
    (``/dev/null``, ``/dev/stdout``, a FIFO) is written to directly, never replaced.
    An error of the file system (full, read-only) is an ``OutputError``.
    """
    try:
        if destination.is_stdout:
            render(sys.stdout)
            sys.stdout.flush()
        elif _written_in_place(Path(destination.path)):
            # Appending: /dev/stdout may be a file the shell opened, with a report
            # written before this one (``-o - -o /dev/stdout``, ``>> log``).
            with open(destination.path, "a", encoding="utf-8") as handle:
                render(handle)
        else:
            _replace(_link_target(Path(destination.path)), render)
    except BrokenPipeError:
        raise  # the reader went away: cli.run ends quietly
    except OSError as error:
        where = "standard output" if destination.is_stdout else destination.path
        raise OutputError(f"cannot write {where}: {_reason(error)}") from error


def _replace(target: Path, render: Callable[[TextIO], None]) -> None:
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with open(descriptor, "w", encoding="utf-8") as handle:
            render(handle)
        os.replace(temporary, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise
    # mkstemp creates 0600; a report is as readable as any file the user writes.
    with suppress(OSError):
        os.chmod(target, 0o666 & ~_umask())


def _written_in_place(path: Path) -> bool:
    """Whether ``path`` is written to rather than replaced: an existing device, pipe or
    socket, or an open file reached through a descriptor link (``/dev/stdout``,
    ``/dev/fd/3``), which may be a file the shell opened (``> out.json``)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) or _through_descriptor(path)


def _through_descriptor(path: Path) -> bool:
    """Whether resolving ``path`` goes through a directory of descriptor links."""
    current = os.path.abspath(path)
    for _ in range(_MAX_LINKS):
        if _DESCRIPTOR_DIRECTORY.fullmatch(os.path.realpath(os.path.dirname(current))):
            return True
        if not os.path.islink(current):
            return False
        current = os.path.join(os.path.dirname(current), os.readlink(current))
    return False


def _link_target(path: Path) -> Path:
    """The file a symbolic link leads to (``path`` itself when it is none): the one
    to replace, so the link stays."""
    return Path(os.path.realpath(path)) if os.path.islink(path) else path


def _reason(error: OSError) -> str:
    """``No space left on device`` -> ``no space left on device``."""
    if isinstance(error, PermissionError):
        return "permission denied"
    reason = error.strerror or str(error)
    return reason[:1].lower() + reason[1:]


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
