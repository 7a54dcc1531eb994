"""Manifests from paths: files, directories (recursively) and ``-`` for standard input.

Every path is checked before any file is read, so a typo fails fast as a usage error
instead of after a long scan. Inside a directory the files ``kubectl apply -f DIR -R``
would apply count: ``.yaml``, ``.yml`` and ``.json``, hidden ones and those in hidden
directories too (``.github`` holds no objects, but a pull request could hide some
there); ``.git`` is never entered. A ``.json`` file counts only when it holds a
Kubernetes object (``jsonprobe``: other tools' JSON is not a manifest). Some files are
never manifests, walked or named (``Excluded``: the configuration), and the user's
exclude patterns (``--exclude``, ``spec.exclude``: ``scanner.config.excludes``) leave
out files and whole directories, named or walked, each file counted
(``Inventory.excluded``). A file named on the command line is otherwise read
whatever its name. Files that exist but cannot be read
become ``ReadError`` data, and the scan goes on (the run then ends "incomplete").

The scanned tree may come from an untrusted pull request, so a walk never follows a
symbolic link to a directory (no loops, no escaping the checkout) and reads a
symbolic link to a file only when its target stays inside the scanned directory or
the repository. A path named on the command line inside the repository may come from
the pull request too (the Action's ``paths``), so it is read only when it does not
lead out of the repository through a link. Named pipes, sockets and devices found in
a walk are never opened (a pipe would block the scan); one named on the command line
is read, so process substitution works (``poolgate scan <(helm template chart)``).
A marker file (``Chart.yaml``, ``kustomization.yaml``) that is not a regular file
marks nothing: it is reported and its directory read file by file
(``rendered.read_markers``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Final, TextIO

from scanner.errors import UsageError
from scanner.inventory import Inventory, ReadError, SourceWarning, path_uri
from scanner.sources import jsonprobe, parallel
from scanner.sources.rendered import MARKER_FILES, find_enclosing, read_markers, repository_of
from scanner.sources.yaml.document import STDIN_URI, collector_paused, parse_stream

if TYPE_CHECKING:
    from scanner.config.excludes import PathGlob

MANIFEST_SUFFIXES: Final = frozenset({".yaml", ".yml", ".json"})
DEFAULT_MAX_FILE_SIZE: Final = 10 * 1024 * 1024
SPECIAL_FILE: Final = "not a regular file (a named pipe, socket or device); skipped"
NEVER_WALKED: Final = ".git"
"""Git's own data: never read, nor taken for the pull request's content."""


@dataclass(frozen=True, slots=True)
class Excluded:
    """Files never read as manifests, found in a walk or named: the one place that
    decides what a scan leaves out (a walk skips ``NEVER_WALKED`` besides)."""

    names: frozenset[str] = frozenset()
    """File names, in any directory (``.poolgate.yaml`` is configuration, never an object)."""
    files: frozenset[Path] = frozenset()
    """Absolute paths (the configuration file in use, whatever its name)."""
    patterns: tuple[PathGlob, ...] = ()
    """The user's exclude patterns, over paths relative to ``root``."""
    root: Path | None = None
    """Absolute: the directory ``patterns`` are relative to (the repository root)."""

    @classmethod
    def of(
        cls,
        names: Collection[str] = (),
        files: Collection[str | Path] = (),
        patterns: Sequence[PathGlob] = (),
        root: Path | None = None,
    ) -> Excluded:
        absolute = frozenset(Path(os.path.abspath(file)) for file in files)
        where = Path(os.path.abspath(root)) if root is not None else None
        return cls(frozenset(names), absolute, tuple(patterns), where)

    def matches(self, path: Path) -> bool:
        """Whether ``path`` (absolute, as a walk builds it) is never a manifest."""
        return path.name in self.names or path in self.files

    def by_pattern(self, path: Path, is_dir: bool) -> bool:
        """Whether an exclude pattern matches ``path`` (absolute) or a directory above
        it, up to the root. Paths outside the root are never excluded by a pattern."""
        if not self.patterns or self.root is None:
            return False
        try:
            inside = path.relative_to(self.root).as_posix()
        except ValueError:
            return False
        if inside == ".":
            return False
        return any(pattern.matches(inside, is_dir) for pattern in self.patterns)


NOTHING_EXCLUDED: Final = Excluded()


class _Unreadable(Exception):
    """A found input that cannot be read; its message (and line, when it has one) go
    into a ``ReadError``."""

    def __init__(self, message: str, line: int = 0) -> None:
        super().__init__(message)
        self.line = line


def find_repo_root(start: Path, default: Path | None = None) -> Path:
    """The nearest directory at or above ``start`` holding ``.git``; else ``default``,
    the working directory unless given.

    Symbolic links in a scanned path must not leave the repository the path belongs
    to (``find_repo_root(path, repo_root)``): a checkout scanned from its parent
    directory (``actions/checkout`` with ``path: src``) is its own repository, not the
    working directory around it.
    """
    return repository_of(start, default if default is not None else Path.cwd())


def load_paths(
    paths: Sequence[str],
    repo_root: Path,
    stdin: TextIO | None = None,
    *,
    max_file_size: int = DEFAULT_MAX_FILE_SIZE,
    render_roots: list[Path] | None = None,
    excluded: Excluded = NOTHING_EXCLUDED,
) -> Inventory:
    """Read and parse every manifest under ``paths``, but what ``excluded`` names.

    With ``render_roots``, Helm charts and Kustomizations are not read file by file:
    a directory holding one (``rendered.read_markers``) is appended to the list instead
    of being walked, and so is the nearest one enclosing a file named on the command
    line (pre-commit names chart templates one by one). The caller renders them.
    A marker that is not a regular file is a read error, and its directory is read.

    URIs are POSIX paths relative to ``repo_root`` for files under it, absolute paths
    otherwise, and ``<stdin>`` for ``-``. ``inventory.files`` counts every input found,
    read or not. Raises ``UsageError`` if a path does not exist, before reading anything.
    """
    for path in paths:
        if path != "-" and not os.path.exists(path):
            raise UsageError(f"{path}: no such file or directory", hint="check the path")

    root = Path(os.path.abspath(repo_root))
    inventory = Inventory()
    seen: set[Path] = set()
    # Files in order, then loaded; standard input where it was named.
    queue: list[tuple[Path, str] | None] = []
    for path in paths:
        if path == "-":
            queue.append(None)
            continue
        target = Path(os.path.abspath(path))
        if excluded.matches(target):
            continue
        if excluded.patterns and excluded.by_pattern(target, target.is_dir()):
            inventory.excluded += _manifests_below(target) if target.is_dir() else 1
            continue
        problem = _named_link_problem(target, root)
        if problem:
            inventory.files += 1
            inventory.read_errors.append(ReadError(_uri(target, root), problem))
            continue
        if target.is_dir():
            files = _walk(target, root, inventory, render_roots, excluded, max_file_size)
        elif render_roots is not None:
            enclosing = find_enclosing(target, root)
            _report_markers(enclosing.broken, root, inventory)
            if enclosing.root is not None:
                render_roots.append(enclosing.root)
                continue
            files = [target]
        else:
            files = [target]
        for file in files:
            if file in seen:  # named twice, or named and inside a named directory
                continue
            seen.add(file)
            queue.append((file, _uri(file, root)))
    # A directory walked twice, or a marker met by several named files, says it once.
    inventory.read_errors = list(dict.fromkeys(inventory.read_errors))
    # One pause for the whole load: objects from earlier files pile up, and a
    # collection between two files would rescan all of them.
    with collector_paused():
        listed = [item for item in queue if item is not None]
        at = parallel.split(listed) if len(listed) == len(queue) else None  # no stdin
        if at is not None:
            inventory.extend(parallel.load(listed, at, max_file_size))
            return inventory
        for item in queue:
            if item is None:
                _load_stdin(stdin if stdin is not None else sys.stdin, max_file_size, inventory)
            else:
                _load_file(item[0], item[1], max_file_size, inventory)
    return inventory


def load_files(files: Sequence[tuple[Path, str]], max_file_size: int) -> Inventory:
    """``files`` (path, URI) read and parsed in order, into one inventory."""
    inventory = Inventory()
    for path, uri in files:
        _load_file(path, uri, max_file_size, inventory)
    return inventory


def _load_file(path: Path, uri: str, max_file_size: int, inventory: Inventory) -> None:
    inventory.files += 1
    try:
        text = _read(path, max_file_size)
    except _Unreadable as error:
        inventory.read_errors.append(ReadError(uri, str(error), error.line))
        return
    inventory.extend(parse_stream(text, uri))


def _load_stdin(stream: TextIO | None, max_file_size: int, inventory: Inventory) -> None:
    """Standard input, read as bytes and decoded strictly, as a file is.

    Its text layer would not do: in the C and POSIX locales Python decodes standard
    input with ``surrogateescape``, which lets invalid UTF-8 through. A stream with no
    bytes beneath (``io.StringIO``, from a library caller) is read as text. A closed
    standard input (``poolgate scan - <&-``; Python's ``sys.stdin`` is then None) is
    a read error.
    """
    inventory.files += 1
    if stream is None:
        inventory.read_errors.append(ReadError(STDIN_URI, "standard input is closed"))
        return
    source: BinaryIO | TextIO = getattr(stream, "buffer", stream)
    try:
        data = source.read(max_file_size + 1)
        if len(data) > max_file_size:
            inventory.read_errors.append(ReadError(STDIN_URI, _too_large(max_file_size)))
            return
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as error:
        inventory.read_errors.append(ReadError(STDIN_URI, _not_utf8(error)))
        return
    except OSError as error:
        inventory.read_errors.append(ReadError(STDIN_URI, _os_message(error)))
        return
    inventory.extend(parse_stream(text, STDIN_URI))


def _read(path: Path, max_file_size: int) -> str:
    """The file's text, or ``_Unreadable`` with a message fit for a notification."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > max_file_size:
                raise _Unreadable(_too_large(max_file_size))
            # Read one byte past the size, and on to one past the limit when there is
            # more: pipes and growing files have no honest size. (Asking for the limit
            # at once allocated 10 MiB per file.)
            data = handle.read(size + 1) if size else b""
            if not size or len(data) > size:
                data += handle.read(max_file_size + 1 - len(data))
    except OSError as error:
        raise _Unreadable(_os_message(error)) from error
    if len(data) > max_file_size:
        raise _Unreadable(_too_large(max_file_size))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _Unreadable(_not_utf8(error, data), data.count(b"\n", 0, error.start) + 1) from error


def rendered_directory_files(
    directory: Path,
    repo_root: Path,
    inventory: Inventory,
    nested: list[Path],
    excluded: Excluded = NOTHING_EXCLUDED,
    max_file_size: int = DEFAULT_MAX_FILE_SIZE,
) -> list[Path]:
    """The manifest files a walk of the rendered ``directory`` finds, as if it were a
    plain directory; rendered directories below it go to ``nested`` instead of being
    walked. (A kustomization's files that its build does not name are scanned as plain
    manifests: ``kustomize.plain_files``.)"""
    return _walk(directory, repo_root, inventory, nested, excluded, max_file_size, plain_top=True)


def _walk(
    top: Path,
    repo_root: Path,
    inventory: Inventory,
    render_roots: list[Path] | None = None,
    excluded: Excluded = NOTHING_EXCLUDED,
    max_file_size: int = DEFAULT_MAX_FILE_SIZE,
    *,
    plain_top: bool = False,
) -> list[Path]:
    """Manifest files under ``top`` in a stable order (sorted by path components).

    ``plain_top``: ``top`` itself is walked even when it is rendered.
    """
    allowed = [Path(os.path.realpath(top)), Path(os.path.realpath(find_repo_root(top, repo_root)))]
    found: list[Path] = []
    pending = [top]
    while pending:
        directory = pending.pop()
        try:
            with os.scandir(directory) as listing:
                entries = [entry for entry in listing if entry.name != NEVER_WALKED]
        except OSError as error:
            message = f"cannot list directory: {_os_message(error)}"
            inventory.read_errors.append(ReadError(_uri(directory, repo_root), message))
            continue
        reported: set[Path] = set()
        if render_roots is not None:
            names = {entry.name for entry in entries}
            if not names.isdisjoint(MARKER_FILES):
                markers = read_markers(directory, names)
                _report_markers(markers.broken, repo_root, inventory)
                if markers.kind is not None and not (plain_top and directory == top):
                    render_roots.append(directory)
                    continue
                reported = {path for path, _ in markers.broken}
        for entry in entries:
            path = Path(entry.path)
            if excluded.matches(path):
                continue
            if excluded.patterns and _excluded_entry(entry, excluded, inventory):
                continue
            if path in reported and not entry.is_dir(follow_symlinks=False):
                continue  # a marker that is a link or a pipe: its error says it all
            if entry.is_symlink():
                if not _is_manifest(entry.name) or os.path.isdir(path):
                    continue  # a link to a directory is never followed, whatever its name
                problem = _link_problem(path, allowed)
                if problem:
                    inventory.files += 1
                    inventory.read_errors.append(ReadError(_uri(path, repo_root), problem))
                elif _may_be_kubernetes(path, max_file_size):
                    found.append(path)
            elif entry.is_dir(follow_symlinks=False):
                pending.append(path)
            elif entry.is_file(follow_symlinks=False):
                if _is_manifest(entry.name) and _may_be_kubernetes(path, max_file_size):
                    found.append(path)
            elif _is_manifest(entry.name):  # never opened: a pipe would block the scan
                warning = SourceWarning(_uri(path, repo_root), SPECIAL_FILE)
                inventory.warnings.append(warning)
    found.sort(key=lambda file: file.parts)
    return found


def _report_markers(
    broken: Sequence[tuple[Path, str]], repo_root: Path, inventory: Inventory
) -> None:
    for path, message in broken:
        inventory.read_errors.append(ReadError(_uri(path, repo_root), message))


def _excluded_entry(entry: os.DirEntry[str], excluded: Excluded, inventory: Inventory) -> bool:
    """Whether an exclude pattern leaves out a walk's ``entry``; its manifest files are
    counted when it does."""
    is_dir = entry.is_dir(follow_symlinks=False)
    if not excluded.by_pattern(Path(entry.path), is_dir):
        return False
    path = Path(entry.path)
    inventory.excluded += _manifests_below(path) if is_dir else int(_is_manifest(entry.name))
    return True


def _manifests_below(directory: Path) -> int:
    """The manifest file names under an excluded ``directory``, to count them: listed,
    never read, links never followed, errors passed over (nothing there is scanned)."""
    count = 0
    for _, directories, names in os.walk(directory):
        directories[:] = [name for name in directories if name != NEVER_WALKED]
        count += sum(1 for name in names if _is_manifest(name))
    return count


def _is_manifest(name: str) -> bool:
    return os.path.splitext(name)[1].lower() in MANIFEST_SUFFIXES


def _may_be_kubernetes(path: Path, max_file_size: int) -> bool:
    """Whether a file found in a walk is read: YAML always (a document that is no
    Kubernetes object is skipped as it is parsed); JSON when it may hold a Kubernetes
    object (``jsonprobe``). A repository's other JSON (a ``tsconfig.json`` with
    comments, a 14 MB ``package-lock.json``) would otherwise fail every scan of ``.``
    as input that could not be read."""
    if not path.name.lower().endswith(".json"):
        return True
    return jsonprobe.may_be_manifest(path, max_file_size)


def _link_problem(link: Path, allowed: list[Path]) -> str:
    """Why a symbolic link found in a walk is not read ("" if it is fine).

    Its target must be a regular file inside the scanned directory or the repository:
    a link in a pull request must not make the scanner read (and report on) files of
    the machine it runs on.
    """
    target = Path(os.path.realpath(link))  # a loop resolves to some path that is no file
    if not target.is_file():
        return "symbolic link to a missing or special file; skipped"
    if not _inside(target, allowed):
        return "symbolic link points outside the scanned directory; skipped"
    return ""


def _named_link_problem(path: Path, repo_root: Path) -> str:
    """Why a path named on the command line is not read ("" if it is fine).

    One inside the repository may have come with a pull request (the Action scans the
    files one changed), so it must not lead out of the repository through a symbolic
    link, itself or in a directory above it, just as a link found in a walk must not.
    A path outside the repository is the user's own choice: ``poolgate scan
    <(helm template chart)`` names ``/dev/fd/63``, a link to a pipe.
    """
    checkout = find_repo_root(path, repo_root)
    roots = [checkout, Path(os.path.realpath(checkout))]
    if not _inside(path, roots) or _inside(Path(os.path.realpath(path)), roots[1:]):
        return ""
    return "symbolic link points outside the repository; skipped"


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _uri(path: Path, repo_root: Path) -> str:
    try:
        return path_uri(path.relative_to(repo_root).as_posix())
    except ValueError:
        return path_uri(path.as_posix())


def _too_large(limit: int) -> str:
    mib = 1024 * 1024
    size = f"{limit // mib} MiB" if limit % mib == 0 else f"{limit:,} bytes"
    return f"file is larger than {size}; skipped"


def _not_utf8(error: UnicodeDecodeError, data: bytes | None = None) -> str:
    """Where the first bad byte is, when the whole input is at hand (not for streams)."""
    if data is None:
        return "not valid UTF-8; skipped"
    line = data.count(b"\n", 0, error.start) + 1
    return f"not valid UTF-8 at line {line} (byte offset {error.start}); skipped"


def _os_message(error: OSError) -> str:
    if isinstance(error, PermissionError):
        return "permission denied"
    return error.strerror or str(error)
