"""Where reports go: ``--format``/``--output`` pairs, validated before any work,
written atomically."""

from __future__ import annotations

import os
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

_SYSTEM_DIRECTORIES: Final = ("/dev/", "/proc/")
"""Where a symbolic link named as the output is followed (``/dev/stdout``)."""


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


def check_apart(destinations: Sequence[Destination], option: str, path: Path | None) -> None:
    """Fail when ``option``'s file (a baseline) is also a report's ``--output``: the
    report would silently replace it."""
    if path is None:
        return
    resolved = path.resolve()
    for destination in destinations:
        if not destination.is_stdout and Path(destination.path).resolve() == resolved:
            raise UsageError(
                f"{option} {path} is also an --output", hint="write the report to another file"
            )


def check_writable(path: Path, option: str = "--output") -> None:
    """Fail before scanning when ``path`` cannot be written; ``option`` names it in messages.

    What must be writable is what ``write`` writes: a device or pipe itself, else the
    directory the temporary file is made in.
    """
    if path.is_dir():
        raise OutputError(f"{option} {path}: is a directory", hint="name a file")
    if _block_device(path):
        raise OutputError(f"{option} {path}: is a block device", hint="name a file")
    if _written_in_place(path):
        if not os.path.exists(path):
            raise OutputError(f"{option} {path}: leads to no open file (a closed descriptor?)")
        if not os.access(path, os.W_OK):
            raise OutputError(f"{option} {path}: permission denied")
        return
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError(f"{option} {path}: directory {parent} does not exist")
    refuse_link_out_of_checkout(path, option)
    regular = path.exists() and not path.is_symlink()
    if not os.access(parent, os.W_OK) or (regular and not os.access(path, os.W_OK)):
        raise OutputError(f"{option} {path}: permission denied")


def refuse_link_out_of_checkout(path: Path, option: str) -> None:
    """Fail when ``path``'s directory is reached through a symbolic link inside a git
    checkout that leads out of it (``_link_out_of_checkout``)."""
    escape = _link_out_of_checkout(path.parent if str(path.parent) else Path("."))
    if escape is not None:
        link, checkout = escape
        raise UsageError(
            f"{option} {path}: {link} is a symbolic link out of the checkout {checkout}",
            hint="write to a directory of the checkout itself, or outside it ($RUNNER_TEMP)",
        )


def _link_out_of_checkout(directory: Path) -> tuple[Path, Path] | None:
    """(the link, the checkout) when ``directory``, as the system resolves it, is
    reached through a symbolic link inside a git checkout that leads out of it.

    A pull request can commit a link (``reports -> ~/.ssh``), and a workflow that
    writes ``reports/poolgate.sarif`` would then write outside the checkout. Links
    outside any checkout (``/tmp`` on macOS, a working directory reached through a
    link) are the user's own, and ones that stay inside the checkout are harmless.
    The path is followed one name at a time, as the system follows it, so ``..``
    after a link leaves the link's target; checkouts are looked for only where a
    link is met."""
    absolute = directory.is_absolute()
    current = Path(os.path.realpath(directory.anchor if absolute else "."))
    crossed: list[tuple[Path, Path]] = []
    names = directory.parts[1:] if absolute else directory.parts
    for index, name in enumerate(names, 1 if absolute else 0):
        if name == "..":
            current = current.parent
            continue
        step = current / name
        if os.path.islink(step):
            checkout = _checkout_of(current)
            if checkout is not None:
                crossed.append((Path(*directory.parts[: index + 1]), checkout))
            step = Path(os.path.realpath(step))
        current = step
    for link, checkout in crossed:
        if not current.is_relative_to(checkout):
            return link, checkout
    return None


def _checkout_of(directory: Path) -> Path | None:
    """The git checkout ``directory`` (a resolved path) is in: the nearest directory
    at or above it holding ``.git`` (a directory, or a file in a worktree)."""
    for candidate in (directory, *directory.parents):
        if os.path.lexists(candidate / ".git"):
            return candidate
    return None


def write(
    destination: Destination, render: Callable[[TextIO], None], *, private: bool = False
) -> None:
    """Render to standard output, or to a temporary file renamed over the target.

    A crash or a full disk mid-write never leaves a truncated report behind. A
    character device or pipe (``/dev/null``, a FIFO) and the system's descriptor
    paths (``/dev/stdout``, ``/dev/fd/3``) are written into, never replaced. A
    symbolic link anywhere else is replaced like a file, never written through: the
    report may be written inside a pull request's checkout, where a link
    (``results.sarif -> ~/.bashrc``) must not redirect it. An error of the file
    system (full, read-only) is an ``OutputError``. ``private``: the file is created
    readable and writable by its owner only (0600, a snapshot of a cluster), whatever
    the umask.
    """
    try:
        if destination.is_stdout:
            if sys.stdout is None:  # ``>&-``: Python has no standard output then
                raise OutputError("cannot write standard output: it is closed")
            render(sys.stdout)
            sys.stdout.flush()
        elif _written_in_place(Path(destination.path)):
            # Appending: /dev/stdout may be a file the shell opened, with a report
            # written before this one (``-o - -o /dev/stdout``, ``>> log``). Never
            # creating: a dangling link (a closed descriptor) is an error.
            descriptor = os.open(destination.path, os.O_WRONLY | os.O_APPEND)
            with open(descriptor, "a", encoding="utf-8") as handle:
                render(handle)
        else:
            _replace(Path(destination.path), render, private)
    except BrokenPipeError:
        raise  # the reader went away: cli.run ends quietly
    except OSError as error:
        where = "standard output" if destination.is_stdout else destination.path
        raise OutputError(f"cannot write {where}: {_reason(error)}") from error


def _replace(target: Path, render: Callable[[TextIO], None], private: bool = False) -> None:
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with open(descriptor, "w", encoding="utf-8") as handle:
            render(handle)
        os.replace(temporary, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise
    if private:
        return  # mkstemp created it 0600
    # mkstemp creates 0600; a report is as readable as any file the user writes.
    with suppress(OSError):
        os.chmod(target, 0o666 & ~_umask())


def _written_in_place(path: Path) -> bool:
    """Whether ``path`` is written into rather than replaced: a character device, pipe
    or socket named as itself, or a symbolic link in ``/dev`` or ``/proc`` (the
    descriptor paths ``/dev/stdout``, ``/dev/fd/3``, ``/proc/self/fd/1``, which may
    lead to a file the shell opened: ``> out.json``). Any other link is replaced."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return False
    if stat.S_ISLNK(mode):  # even dangling (/dev/stdout of a closed descriptor): an error
        return os.path.abspath(path).startswith(_SYSTEM_DIRECTORIES)
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _block_device(path: Path) -> bool:
    try:
        return stat.S_ISBLK(os.stat(path).st_mode)
    except OSError:
        return False


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
