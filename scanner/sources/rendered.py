"""Rendered sources: Helm charts and Kustomizations, found by their marker files.

A directory holding ``Chart.yaml`` is a Helm chart, one holding
``kustomization.yaml`` (``.yml``, ``Kustomization``) a Kustomization, when that
marker is a regular file. Their files
are not manifests to read one by one (chart templates are not even YAML): the
directory is rendered once by its tool (``helm.py``, ``kustomize.py``) and the
output is parsed like any other manifest text. This module holds what both
renderers share: finding such directories, running the tool safely, and turning
rendered objects back into objects whose URIs name the repository file they came
from instead of a temporary path.

Positions. Rendered text is not the file in the repository, so a line of the
rendered output means nothing in the file a reviewer opens. Each renderer gives
every object a position in its source file instead (``SourceSpot``) and every
finding on that object points there: see ``helm.py`` and ``kustomize.py`` for
how each one finds it.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Final

from scanner.inventory import (
    InvalidDocument,
    Inventory,
    KubeObject,
    LineMap,
    Origin,
    ReadError,
    path_uri,
)

HELM: Final = "helm"
KUSTOMIZE: Final = "kustomize"
CHART_FILE: Final = "Chart.yaml"
KUSTOMIZATION_FILES: Final = ("kustomization.yaml", "kustomization.yml", "Kustomization")
RENDER_TIMEOUT: Final = 300.0
"""Seconds one render may take (a large chart with many subcharts renders in seconds)."""
_MESSAGE_LIMIT: Final = 300
# subprocess, shutil and tempfile are imported where a render needs them: a scan
# without charts (the pre-commit path) should not pay for them at start-up.
if TYPE_CHECKING:
    import tempfile

    from scanner.sources.files import Excluded
_KLOG = re.compile(r'^[EWIF]\d{4} [\d:.]+\s+\d+ \S+\] "[^"]*" err="(.*)"$')


@dataclass(frozen=True, slots=True)
class RenderOptions:
    """What the command line passes to the renderers (``--helm-values``, ``--helm-set``)."""

    helm_values: Sequence[str] = ()
    """Values files, in order, for every chart (``helm template -f``)."""
    helm_set: Sequence[str] = ()
    """``KEY=VAL`` overrides for every chart (``helm template --set``)."""
    helm_namespace: str = "default"
    """The release namespace (``helm template --namespace``)."""
    timeout: float = RENDER_TIMEOUT


@dataclass(frozen=True, slots=True)
class SourceSpot:
    """Where a rendered object is shown: a repository URI and a 1-based line there.

    ``lines`` optionally maps field paths to positions in that file (Kustomize
    resources are real YAML files); without it every field points at ``line``.
    """

    uri: str
    line: int = 1
    lines: LineMap | None = None


def render_kind(names: Collection[str]) -> str | None:
    """``kustomize`` or ``helm`` for a directory holding ``names``, else ``None``.

    A directory with both is built by Kustomize: the kustomization is the outer
    build (it would inflate the chart itself, given ``--enable-helm``).
    """
    if any(name in names for name in KUSTOMIZATION_FILES):
        return KUSTOMIZE
    if CHART_FILE in names:
        return HELM
    return None


MARKER_FILES: Final = frozenset({*KUSTOMIZATION_FILES, CHART_FILE})
_MARKS: Final = {CHART_FILE: "Helm chart", **dict.fromkeys(KUSTOMIZATION_FILES, "Kustomization")}


@dataclass(frozen=True, slots=True)
class Markers:
    """What the marker files of one directory say about it."""

    kind: str | None = None
    """``kustomize`` or ``helm`` when the directory is rendered; ``None`` when it
    holds no marker, or a marker that is not a regular file."""
    broken: tuple[tuple[Path, str], ...] = ()
    """Each marker that is not a regular file, with the error to report about it."""


def read_markers(directory: Path, names: Collection[str] | None = None) -> Markers:
    """The markers of ``directory`` (``names``: its entries, when the caller listed it).

    Only a regular file marks a directory. A pull request can add a *directory* named
    ``Chart.yaml``, or a dangling link named ``Kustomization``: no renderer would
    build anything from it, yet the directory would look rendered and no file in it
    would be read, while ``kubectl apply -f DIR -R`` applies them all. Such a marker
    is reported, and the directory (whatever other marker it holds) is read as plain
    manifests.
    """
    present = sorted(
        name
        for name in MARKER_FILES
        if (name in names if names is not None else os.path.lexists(directory / name))
    )
    if not present:
        return Markers()
    valid: list[str] = []
    broken: list[tuple[Path, str]] = []
    for name in present:
        path = directory / name
        what = _not_regular(path)
        if what is None:
            valid.append(name)
        else:
            message = (
                f"{what}: the directory is scanned as plain manifests, "
                f"not rendered as a {_MARKS[name]}"
            )
            broken.append((path, message))
    if broken:
        return Markers(None, tuple(broken))
    return Markers(render_kind(valid))


def _not_regular(path: Path) -> str | None:
    """What ``path`` is when it is not a regular file (never following a link), else None."""
    try:
        mode = os.lstat(path).st_mode
    except OSError as error:
        return f"cannot be examined ({error.strerror or error})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        what = "a directory"
    elif stat.S_ISLNK(mode):
        what = "a symbolic link"
    else:
        what = "a named pipe, socket or device"
    return f"{what}, not a regular file"


def directory_kind(directory: Path) -> str | None:
    """``render_kind`` of an existing directory, by its marker files (``read_markers``)."""
    return read_markers(directory).kind


@dataclass(frozen=True, slots=True)
class Enclosing:
    """The render root a file belongs to, and the broken markers met on the way up."""

    root: Path | None = None
    broken: tuple[tuple[Path, str], ...] = ()


def find_enclosing(file: Path, repo_root: Path) -> Enclosing:
    """The nearest directory at or above ``file``'s, up to ``repo_root``, that is rendered.

    A chart template or a kustomize resource named on the command line (as
    pre-commit does) is scanned by rendering its chart or kustomization: a
    template on its own is not YAML, and a resource on its own misses its overlay.
    A directory with a broken marker (``read_markers``) is passed over, as a walk
    passes over it, and reported. Files outside ``repo_root`` are never routed.
    """
    root = Path(os.path.abspath(repo_root))
    here = Path(os.path.abspath(file)).parent
    if here != root and root not in here.parents:
        return Enclosing()
    broken: list[tuple[Path, str]] = []
    for directory in (here, *here.parents):
        markers = read_markers(directory)
        broken.extend(markers.broken)
        if markers.kind is not None:
            return Enclosing(directory, tuple(broken))
        if directory == root:
            break
    return Enclosing(None, tuple(broken))


def enclosing_root(file: Path, repo_root: Path) -> Path | None:
    """``find_enclosing(file, repo_root).root``."""
    return find_enclosing(file, repo_root).root


def render_directories(
    roots: Sequence[Path],
    repo_root: Path,
    options: RenderOptions,
    *,
    max_file_size: int | None = None,
    excluded: Excluded | None = None,
) -> Inventory:
    """Render every chart and kustomization in ``roots`` (each once) into one inventory.

    Rendering a kustomization may find more charts and kustomizations inside its
    directory that its build does not reach; they are rendered here too.
    ``max_file_size`` bounds the files a kustomization's directory has scanned as
    plain manifests (``kustomize.plain_files``), and ``excluded`` names the files
    never read as manifests there (as in a walk).
    """
    from scanner.sources import helm, kustomize
    from scanner.sources.files import DEFAULT_MAX_FILE_SIZE, NOTHING_EXCLUDED

    limit = DEFAULT_MAX_FILE_SIZE if max_file_size is None else max_file_size
    session = kustomize.Session(limit, excluded or NOTHING_EXCLUDED)
    inventory = Inventory()
    pending = list(dict.fromkeys(Path(os.path.abspath(path)) for path in roots))
    done: set[Path] = set()
    while pending:
        root = pending.pop(0)
        if root in done:
            continue
        done.add(root)
        kind = directory_kind(root)
        if kind == HELM:
            inventory.extend(helm.render(root, repo_root, options))
        elif kind == KUSTOMIZE:
            inventory.extend(kustomize.render(root, repo_root, options, session))
            pending.extend(Path(os.path.abspath(path)) for path in session.nested)
            session.nested.clear()
    return inventory


def repo_uri(path: Path, repo_root: Path) -> str:
    """POSIX path relative to ``repo_root``, or absolute for a path outside it."""
    absolute = Path(os.path.abspath(path))
    for candidate, root in (
        (absolute, Path(os.path.abspath(repo_root))),
        # Renderers report resolved paths; the root may be spelled through a link.
        (Path(os.path.realpath(path)), Path(os.path.realpath(repo_root))),
    ):
        try:
            return path_uri(candidate.relative_to(root).as_posix())
        except ValueError:
            continue
    return path_uri(absolute.as_posix())


def not_installed(
    uri: str, what: str, tools: str, install_url: str, scanned: str = "scanned nothing in it"
) -> ReadError:
    """The notification for a directory that cannot be rendered here; the run is incomplete.

    ``scanned`` says what was scanned instead.
    """
    return ReadError(
        uri, f"{what} not rendered: {tools} is not installed ({install_url}); {scanned}"
    )


class RenderFailed(Exception):
    """The renderer could not be run or exited with an error; the message says why."""


def run_tool(argv: Sequence[str], env: Mapping[str, str], cwd: Path, timeout: float) -> str:
    """Run a renderer and return its standard output; ``RenderFailed`` otherwise.

    No shell; the tool is resolved on PATH by the caller. Output is text (UTF-8);
    the error message is the tool's last line of standard error, capped.
    """
    import subprocess

    try:
        done = subprocess.run(
            list(argv),
            env=dict(env),
            cwd=cwd,
            capture_output=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise RenderFailed(f"{Path(argv[0]).name} did not finish in {timeout:g} s") from None
    except OSError as error:
        raise RenderFailed(f"cannot run {argv[0]}: {error.strerror or error}") from None
    if done.returncode != 0:
        raise RenderFailed(_last_line(done.stderr) or f"exit status {done.returncode}")
    try:
        return done.stdout.decode("utf-8")
    except UnicodeDecodeError:
        raise RenderFailed("rendered output is not valid UTF-8") from None


def _last_line(stderr: bytes) -> str:
    """The tool's last line of standard error, cleaned and capped for a one-line message.

    kubectl wraps errors in a klog line (``E1129 ... run.go:72] "command failed"
    err="..."``): only the ``err`` text is kept. Kustomize nests causes, the root
    cause last, so a long message keeps its start and its end.
    """
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return ""
    text = lines[-1]
    klog = _KLOG.match(text)
    if klog:
        text = klog.group(1).replace('\\"', '"')
    text = text.removeprefix("Error: ").removeprefix("error: ")
    if len(text) <= _MESSAGE_LIMIT:
        return text
    head = _MESSAGE_LIMIT // 3
    return text[:head] + " … " + text[-(_MESSAGE_LIMIT - head - 3) :]


def which(*names: str) -> str | None:
    """The first of ``names`` found on PATH (absolute path), or ``None``."""
    import shutil

    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


def scratch_dir() -> tempfile.TemporaryDirectory[str]:
    """A temporary directory for one render (plugin homes, the kustomize wrapper)."""
    import tempfile

    return tempfile.TemporaryDirectory(prefix="poolgate-render-")


def repository_of(path: Path, default: Path) -> Path:
    """The nearest directory at or above ``path`` holding ``.git`` (a directory or, in
    worktrees and submodules, a file); else ``default``. No ``git`` subprocess: a
    pre-commit hook must start fast, and git may not be installed."""
    here = Path(os.path.abspath(path))
    for candidate in (here, *here.parents):
        if os.path.lexists(candidate / ".git"):
            return candidate
    return default


def link_escapes(top: Path, repo_root: Path) -> Path | None:
    """A symbolic link under ``top`` whose target is outside the repository ``top``
    belongs to (``repository_of``), if any.

    Renderers follow links; a link in an untrusted pull request must not pull
    files of the machine (credentials, keys) into rendered output.
    """
    allowed_real = Path(os.path.realpath(repository_of(top, repo_root)))
    for directory, subdirectories, files in os.walk(top, followlinks=False):
        for name in (*subdirectories, *files):
            path = Path(directory, name)
            if path.is_symlink():
                target = Path(os.path.realpath(path))
                if target != allowed_real and allowed_real not in target.parents:
                    return path
    return None


def remap(
    rendered: Inventory,
    spot_for: Callable[[KubeObject | None, int], SourceSpot],
    source_type: str,
) -> Inventory:
    """Objects and invalid documents of ``rendered`` re-homed to their source files.

    ``spot_for(obj, rendered_line)`` names the source file and line of an object (or,
    for an invalid document without an object, of the rendered line it starts on).
    Each keeps the rendered stream's URI as its ``unit``: what was applied together.
    ``files`` counts the distinct source files that produced something.
    """
    result = Inventory(skipped=rendered.skipped, read_errors=list(rendered.read_errors))
    by_start: dict[tuple[int, int], KubeObject] = {}
    uris: set[str] = set()
    for obj in rendered.objects:
        spot = spot_for(obj, obj.origin.line)
        origin = replace(
            obj.origin,
            uri=spot.uri,
            line=spot.line,
            column=1,
            source_type=source_type,
            unit=obj.origin.uri,
        )
        lines = spot.lines if spot.lines is not None else LineMap(positions={})
        moved = replace(obj, origin=origin, lines=lines)
        by_start[(obj.origin.document_index, obj.origin.line)] = moved
        result.objects.append(moved)
        uris.add(spot.uri)
    for document in rendered.invalid:
        owner = by_start.get((document.origin.document_index, document.origin.line))
        if owner is not None:
            line, column = owner.position(document.path)
            origin = owner.origin
        else:
            spot = spot_for(None, document.line)
            line, column = spot.line, 1
            origin = replace(
                document.origin,
                uri=spot.uri,
                line=spot.line,
                column=1,
                source_type=source_type,
                unit=document.origin.uri,
            )
        result.invalid.append(_moved_document(document, origin, line, column))
        uris.add(origin.uri)
    result.files = len(uris)
    return result


def _moved_document(
    document: InvalidDocument, origin: Origin, line: int, column: int
) -> InvalidDocument:
    return replace(document, origin=origin, line=line, column=column)
