"""Where reports go: ``--format``/``--output`` pairs, validated before any work,
written atomically."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from scanner.errors import OutputError, UsageError

STDOUT = "-"


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


def check_writable(path: Path) -> None:
    """Fail before scanning when ``path`` cannot be written."""
    if path.is_dir():
        raise OutputError(f"--output {path}: is a directory", hint="name a file")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError(f"--output {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise OutputError(f"--output {path}: permission denied")


def write(destination: Destination, render: Callable[[TextIO], None]) -> None:
    """Render to standard output, or to a temporary file renamed over the target.

    A crash mid-write never leaves a truncated report behind.
    """
    if destination.is_stdout:
        render(sys.stdout)
        sys.stdout.flush()
        return
    target = Path(destination.path)
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


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
