"""Kustomizations checked before they are built: only local files inside the repository.

``kustomize build`` clones a remote base with git (``resources: [github.com/...]``;
``file:///x?ref=--upload-pack=<command>`` made git run a shell command), fetches an
``http(s)://`` URL wherever it loads a file (generator ``files``, patches, ...) and
follows ``../`` to any directory of the machine. So before a kustomization is built,
poolgate reads it, and every kustomization it builds in, and refuses the build when

* a key is not one poolgate knows (``FIELDS``). Kustomize decodes with Go's JSON
  decoder, which matches keys regardless of case (``Resources:`` is ``resources``, and
  so is ``re\u017fources:``, with a long s), so only exact known keys pass, in the
  kustomization and in the entries that load files (``ENTRY_KEYS``);
* a field would run plugins or inflate Helm charts (``REFUSED``);
* a value that names a file or a base is no string, or not a relative path that stays
  inside the repository and out of its ``.git`` (``path_problem``);
* a kustomization does not parse, holds more than one document, is larger than
  ``MAX_BYTES``, or the build reaches more than ``MAX_KUSTOMIZATIONS`` of them.

Each refusal names the kustomization file, the field and its line. The same walk
records what the build names, so that the directory's files it does not name can be
scanned as plain manifests (``kustomize.py``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from scanner.inventory import LineMap, Position, join_path
from scanner.sources.rendered import KUSTOMIZATION_FILES, repository_of
from scanner.sources.yaml.document import parse_plain

MAX_BYTES: Final = 1024 * 1024
"""The largest kustomization file read (real ones are a few kilobytes)."""
MAX_KUSTOMIZATIONS: Final = 200
"""Kustomizations one build may reach (itself, bases, components), each read once."""
_ENTRY_SHOWN: Final = 120
_NOT_REGULAR: Final = "is not a regular file (a named pipe, socket or device would block the build)"

# What each field holds, for the check.
SAFE: Final = "safe"  # loads nothing
BASES: Final = "bases"  # kustomization directories or resource files
OBJECTS: Final = "objects"  # files of objects (crds)
INPUTS: Final = "inputs"  # data files (transformer configurations)
PATCHES: Final = "patches"  # entries with a `path`
STRATEGIC_MERGE: Final = "strategic-merge"  # inline patches or paths
REPLACEMENTS: Final = "replacements"
CONFIGMAPS: Final = "configmaps"
SECRETS: Final = "secrets"
OPENAPI: Final = "openapi"

FIELDS: Final[Mapping[str, str]] = {
    "apiVersion": SAFE,
    "kind": SAFE,
    "metadata": SAFE,
    "namePrefix": SAFE,
    "nameSuffix": SAFE,
    "namespace": SAFE,
    "commonLabels": SAFE,
    "labels": SAFE,
    "commonAnnotations": SAFE,
    "images": SAFE,
    "imageTags": SAFE,
    "replicas": SAFE,
    "vars": SAFE,
    "sortOptions": SAFE,
    "buildMetadata": SAFE,
    "generatorOptions": SAFE,
    "resources": BASES,
    "bases": BASES,
    "components": BASES,
    "crds": OBJECTS,
    "configurations": INPUTS,
    "patches": PATCHES,
    "patchesJson6902": PATCHES,
    "patchesStrategicMerge": STRATEGIC_MERGE,
    "replacements": REPLACEMENTS,
    "configMapGenerator": CONFIGMAPS,
    "secretGenerator": SECRETS,
    "openapi": OPENAPI,
}
"""Every key of a Kustomization (kustomize's api/types/kustomization.go) poolgate builds."""

REFUSED: Final[Mapping[str, str]] = {
    "generators": "generators would run plugins",
    "transformers": "transformers would run plugins",
    "validators": "validators would run plugins",
    "helmCharts": "helmCharts would inflate Helm charts (poolgate never passes --enable-helm)",
    "helmGlobals": "helmGlobals configures Helm charts (poolgate never passes --enable-helm)",
    "helmChartInflationGenerator": (
        "helmChartInflationGenerator would inflate Helm charts (poolgate never passes "
        "--enable-helm)"
    ),
}
"""Kustomization keys that are known and never built, with why."""

_GENERATOR_KEYS: Final = frozenset(
    {"name", "namespace", "behavior", "literals", "files", "envs", "env", "options"}
)
ENTRY_KEYS: Final[Mapping[str, frozenset[str]]] = {
    PATCHES: frozenset({"path", "patch", "target", "options"}),
    REPLACEMENTS: frozenset({"path", "source", "targets", "sourceValue"}),
    CONFIGMAPS: _GENERATOR_KEYS,
    SECRETS: _GENERATOR_KEYS | {"type"},
    OPENAPI: frozenset({"path", "version"}),
}
"""The exact keys of the entries that load files: any other spelling is refused."""

_SCP_USER: Final = re.compile(r"^[A-Za-z][A-Za-z0-9-]*@")
_REMOTE_HOSTS: Final = frozenset({"github.com", "gitlab.com", "bitbucket.org"})


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a kustomization is not built: the file, the line there, and what."""

    file: Path
    line: int
    message: str


@dataclass(slots=True)
class Parsed:
    """One kustomization file as read: its document and positions, or why not."""

    document: Mapping[str, Any] | None
    positions: LineMap
    problems: list[tuple[int, str]]


@dataclass(slots=True)
class Build:
    """What one kustomization's build reaches (real paths) and what is refused."""

    refusals: list[Refusal] = field(default_factory=list)
    directories: set[Path] = field(default_factory=set)
    """Kustomization directories built in, the checked one included."""
    objects: set[Path] = field(default_factory=set)
    """Files the build reads objects from (``resources``, ``crds``)."""
    inputs: set[Path] = field(default_factory=set)
    """Files the build reads as data: patches, generator sources, configurations."""


def check(directory: Path, repo_root: Path, cache: dict[Path, Parsed] | None = None) -> Build:
    """Walk the kustomization in ``directory`` and all it builds in; never raises.

    ``cache`` keeps parsed kustomization files between checks of one scan (overlays
    share their bases).
    """
    parsed = cache if cache is not None else {}
    repo = Path(os.path.realpath(repository_of(directory, repo_root)))
    build = Build()
    pending = [Path(os.path.realpath(directory))]
    while pending:
        current = pending.pop()
        if current in build.directories:
            continue
        if len(build.directories) >= MAX_KUSTOMIZATIONS:
            start = _kustomization_files(Path(os.path.realpath(directory)))
            message = f"builds in more than {MAX_KUSTOMIZATIONS} kustomizations (limit)"
            build.refusals.append(Refusal(start[0] if start else directory, 0, message))
            break
        build.directories.add(current)
        for file in _kustomization_files(current):
            _check_file(file, repo, build, pending, parsed)
    return build


def _kustomization_files(directory: Path) -> list[Path]:
    """The kustomization files Kustomize would read there (it refuses more than one):
    every marker that exists and is no directory (a named pipe would block it)."""
    return [
        directory / name
        for name in KUSTOMIZATION_FILES
        if os.path.exists(directory / name) and not os.path.isdir(directory / name)
    ]


def _check_file(
    file: Path, repo: Path, build: Build, pending: list[Path], cache: dict[Path, Parsed]
) -> None:
    real = Path(os.path.realpath(file))
    where = _outside(real, repo)
    if not where and not real.is_file():
        where = _NOT_REGULAR
    if where:
        build.refusals.append(Refusal(file, 0, f"{file.name} {where}"))
        return
    if real not in cache:
        cache[real] = read(real)
    parsed = cache[real]
    for line, problem in parsed.problems:
        build.refusals.append(Refusal(file, line, f"{file.name} {problem}"))
    if parsed.document is not None:
        _Fields(file, real.parent, repo, parsed.positions, build, pending).check(parsed.document)


def read(file: Path) -> Parsed:
    """A kustomization file parsed as manifests are (no tag honoured, bounded)."""
    empty = LineMap(positions={})
    try:
        with open(file, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as error:
        return Parsed(None, empty, [(0, f"cannot be read: {error.strerror or error}")])
    if len(data) > MAX_BYTES:
        return Parsed(None, empty, [(0, f"is larger than {MAX_BYTES // (1024 * 1024)} MiB")])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        return Parsed(None, empty, [(line, "is not valid UTF-8")])
    documents, problems = parse_plain(text)
    found = [(line, f"does not parse: {message}") for message, line, _ in problems]
    if len(documents) > 1:
        line = documents[1][1].get("", (0, 0))[0]
        found.append((line, "holds more than one YAML document"))
    if not documents:
        return Parsed(None, empty, found)
    body, positions = documents[0]
    if not isinstance(body, Mapping):
        found.append((positions.get("", (0, 0))[0], "is not a mapping"))
        return Parsed(None, empty, found)
    return Parsed(body, LineMap(positions=positions), found)


class _Fields:
    """The check of one kustomization document's fields."""

    def __init__(
        self,
        file: Path,
        directory: Path,
        repo: Path,
        positions: LineMap,
        build: Build,
        pending: list[Path],
    ) -> None:
        self._file = file
        self._directory = directory
        self._repo = repo
        self._positions = positions
        self._build = build
        self._pending = pending

    def check(self, document: Mapping[str, Any]) -> None:
        for key, value in document.items():
            path = join_path("", key)
            if key in REFUSED:
                self._refuse(path, REFUSED[key])
                continue
            kind = FIELDS.get(key)
            if kind is None:
                known = "poolgate builds only the fields it checks"
                self._refuse(path, f"unknown field {_shown(key)} ({known})")
            elif kind in (BASES, OBJECTS, INPUTS):
                for entry_path, entry in self._strings(value, path):
                    self._path(entry_path, entry, kind)
            elif kind == STRATEGIC_MERGE:
                for entry_path, entry in self._strings(value, path):
                    if not _inline_patch(entry):
                        self._path(entry_path, entry, INPUTS)
            elif kind == OPENAPI:
                self._entry(value, path, kind)
            elif kind != SAFE:
                for index, item in enumerate(self._list(value, path)):
                    self._entry(item, join_path(path, index), kind)

    def _entry(self, entry: object, path: str, kind: str) -> None:
        """One entry of a field whose entries are mappings that may load files."""
        if entry is None:
            return
        if not isinstance(entry, Mapping):
            self._refuse(path, f"{path} is not a mapping")
            return
        for key in entry:
            if key not in ENTRY_KEYS[kind]:
                self._refuse(join_path(path, key), f"{path}: unknown field {_shown(key)}")
        if "path" in entry:
            self._single(entry["path"], join_path(path, "path"))
        if kind in (CONFIGMAPS, SECRETS):
            for source_path, source in self._strings(entry.get("files"), join_path(path, "files")):
                self._file_source(source_path, source)
            for env_path, env in self._strings(entry.get("envs"), join_path(path, "envs")):
                self._path(env_path, env, INPUTS)
            if "env" in entry:
                self._single(entry["env"], join_path(path, "env"))

    def _single(self, value: object, path: str) -> None:
        if value is None:
            return
        if isinstance(value, str):
            self._path(path, value, INPUTS)
        else:
            self._refuse(path, f"{path} is not a text path")

    def _file_source(self, path: str, source: str) -> None:
        """A generator's ``files`` entry: ``PATH`` or ``KEY=PATH`` (Kustomize's
        ``ParseFileSource``; any other use of ``=`` is an error there)."""
        if "=" not in source:
            self._path(path, source, INPUTS)
            return
        key, _, file = source.partition("=")
        if not key or not file or "=" in file:
            self._refuse(path, f"{path} {_shown(source)} is not PATH or KEY=PATH")
            return
        self._path(path, file, INPUTS, written=source)

    def _path(self, path: str, entry: str, kind: str, written: str = "") -> None:
        """A value that names a file or a base (``written`` as ``entry`` unless it says
        more): checked, then recorded (or followed)."""
        if not entry:
            return  # Kustomize refuses an empty path itself, loading nothing
        problem = path_problem(entry, self._directory, self._repo)
        if problem:
            self._refuse(path, f"{path} {_shown(written or entry)} {problem}")
            return
        target = Path(os.path.realpath(os.path.join(self._directory, entry)))
        if kind == BASES and target.is_dir():
            self._pending.append(target)
        elif kind == INPUTS:
            self._build.inputs.add(target)
        else:
            self._build.objects.add(target)

    def _list(self, value: object, path: str) -> list[Any]:
        if value is None:
            return []
        if isinstance(value, list):
            return value
        self._refuse(path, f"{path} is not a list")
        return []

    def _strings(self, value: object, path: str) -> Iterator[tuple[str, str]]:
        for index, item in enumerate(self._list(value, path)):
            item_path = join_path(path, index)
            if isinstance(item, str):
                yield item_path, item
            elif item is not None:
                self._refuse(item_path, f"{item_path} is not a text path")

    def _refuse(self, path: str, message: str) -> None:
        position: Position | None = self._positions.lookup(path)
        line = position[0] if position is not None else 0
        self._build.refusals.append(Refusal(self._file, line, message))


def path_problem(entry: str, directory: Path, repo: Path) -> str:
    """Why ``entry``, a path written in the kustomization in ``directory`` (a real
    path), may not be built ("" when it may): it must be a local relative path whose
    target, symbolic links resolved, is inside ``repo`` and not inside a ``.git``."""
    if os.path.isabs(entry) or entry.startswith("\\"):
        return "is an absolute path"
    if looks_remote(entry):
        return "is a remote reference (nothing is fetched)"
    # Kustomize joins and cleans the path first (Go's filepath.Join), then follows links.
    lexical = Path(os.path.normpath(os.path.join(directory, entry)))
    real = Path(os.path.realpath(lexical))
    for target in (lexical, real):
        where = _outside(target, repo)
        if where:
            return where
    if real.exists() and not real.is_file() and not real.is_dir():
        return _NOT_REGULAR
    return ""


def looks_remote(entry: str) -> bool:
    """Whether Kustomize could take ``entry`` for something to fetch rather than a local
    path. A superset of what it fetches: a URL scheme or ``://`` anywhere (``IsRemoteFile``,
    ``NewRepoSpecFromURL``), a query (``?ref=``), the ``git::`` prefix, an SCP-style
    ``user@host:path`` or ``host:path`` (``gh:``), and well-known hosts without scheme.
    A local file whose name has a colon is written ``./name``."""
    first = entry.split("/", 1)[0]
    return (
        "://" in entry
        or "?" in entry
        or entry[:5].lower() == "git::"
        or ":" in first
        or "@" in first
        or _SCP_USER.match(entry) is not None
        or first.lower() in _REMOTE_HOSTS
    )


def _outside(target: Path, repo: Path) -> str:
    """Why ``target`` is off limits ("" if it is not): outside ``repo``, or in a ``.git``."""
    if target != repo and repo not in target.parents:
        return "leads outside the repository"
    if any(part.lower() == ".git" for part in target.relative_to(repo).parts):
        return "leads into the repository's .git"
    return ""


def _inline_patch(entry: str) -> bool:
    """Whether a ``patchesStrategicMerge`` entry is patch text rather than a path.

    Kustomize tries the text as YAML first and loads it as a path when that fails.
    Text over several lines is never loaded as a URL (Go's URL parser refuses control
    characters); a flow mapping (``{...}``) has no URL scheme. Anything else is
    checked as the path it may be.
    """
    return "\n" in entry or entry.lstrip().startswith("{")


def _shown(text: str) -> str:
    """A value from the kustomization as a message shows it: quoted, escaped, capped."""
    shown = json.dumps(text)
    if len(shown) <= _ENTRY_SHOWN:
        return shown
    return shown[: _ENTRY_SHOWN - 2] + '…"'


def describe(refusal: Refusal, directory_uri: str) -> str:
    """The notification text for a refusal of the build of ``directory_uri``."""
    return f"Kustomization {directory_uri} not rendered: {refusal.message}"
