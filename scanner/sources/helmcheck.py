"""Helm charts checked before they are rendered, and the private copy Helm renders.

``helm template`` reads the chart's files (templates, ``.Files``), its vendored
subcharts (``charts/``: directories or ``.tgz`` archives) and validates the values
against each chart's ``values.schema.json``. A pull request could make it read or
fetch more than the chart, so a chart is refused, before Helm starts, when

* a dependency that ``Chart.yaml`` (or ``requirements.yaml``) declares is not vendored
  in ``charts/`` (Helm would need a repository; poolgate never downloads a chart);
* a ``values.schema.json`` (the chart's or any subchart's, inside archives too) has a
  ``$ref`` (``$dynamicRef``, ``$recursiveRef``) that does not point inside the schema
  (``#...``): a validator resolves others by reading files or fetching URLs; or a
  ``$schema`` that is not a draft of JSON Schema validators know without a download;
* a symbolic link in the chart leads outside the chart (``.Files`` follows links).

Then Helm renders a private copy (``private_copy``): the chart's regular files, links
inside the chart resolved, no ``.git``, so nothing but the chart is there to read
(a chart at the repository root would otherwise hand ``.git/config``, which holds
the checkout's token on a CI runner, to ``.Files.Get``). Every input-driven cost is
bounded (``MAX_FILES``, ``MAX_BYTES``, ``MAX_SCHEMA_BYTES``, ``MAX_NESTING``).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import tarfile
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Final

from scanner.inventory import LineMap, join_path
from scanner.sources.rendered import CHART_FILE
from scanner.sources.yaml.document import parse_plain

SCHEMA_FILE: Final = "values.schema.json"
MAX_FILES: Final = 10_000
"""Files a chart (subcharts included) may hold to be rendered."""
MAX_BYTES: Final = 100 * 1024 * 1024
"""Bytes a chart may hold, archives counted unpacked (Helm's own limit for an archive)."""
MAX_SCHEMA_BYTES: Final = 4 * 1024 * 1024
"""The largest ``values.schema.json`` or ``Chart.yaml`` read."""
MAX_NESTING: Final = 8
"""Archives inside archives that are opened."""
REFERENCE_KEYWORDS: Final = ("$ref", "$dynamicRef", "$recursiveRef")
KNOWN_SCHEMAS: Final = frozenset(
    {
        "json-schema.org/draft-04/schema",
        "json-schema.org/draft-06/schema",
        "json-schema.org/draft-07/schema",
        "json-schema.org/draft/2019-09/schema",
        "json-schema.org/draft/2020-12/schema",
    }
)
"""Meta-schemas every validator Helm has used carries built in (http or https, with or
without the empty fragment)."""


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a chart is not rendered: the file, the line there (0: none), and what."""

    path: Path
    line: int
    message: str


class Refused(Exception):
    """The chart cannot be copied for rendering; the message says why."""


def problems(chart: Path) -> list[Problem]:
    """Everything that keeps ``chart`` from being rendered (see the module docstring)."""
    found = list(_links_out(chart))
    vendored: set[str] = set()
    budget = _Budget()
    for path in _tree_files(chart, budget):
        relative = path.relative_to(chart).parts
        if path.name == SCHEMA_FILE:
            text = _read_limited(path)
            if text is None:
                found.append(Problem(path, 0, f"{SCHEMA_FILE} {_TOO_LARGE}"))
                continue
            found.extend(Problem(path, line, message) for line, message in _schema_problems(text))
        elif path.name.endswith(".tgz") and "charts" in relative[:-1]:
            try:
                names = _archive(path, path.read_bytes(), budget, found, 0)
            except (OSError, EOFError, zlib.error, tarfile.TarError) as error:
                message = f"{path.name} cannot be read as a chart archive: {error}"
                found.append(Problem(path, 0, message))
                continue
            except Refused as error:
                found.append(Problem(path, 0, str(error)))
                continue
            if relative[:-1] == ("charts",):
                vendored.update(names)
        elif path.name == CHART_FILE and relative[:1] == ("charts",) and len(relative) == 3:
            name = _chart_name(_read_limited(path) or "")
            if name:
                vendored.add(name)
    if budget.exceeded and all(problem.message != budget.exceeded for problem in found):
        found.append(Problem(chart, 0, budget.exceeded))
    found.extend(_missing_dependencies(chart, vendored))
    return found


_TOO_LARGE: Final = f"is larger than {MAX_SCHEMA_BYTES // 2**20} MiB"


def _links_out(chart: Path) -> Iterator[Problem]:
    """Symbolic links under ``chart`` whose target is outside it or in a ``.git``."""
    root = Path(os.path.realpath(chart))
    for directory, subdirectories, files in os.walk(chart, followlinks=False):
        for name in (*subdirectories, *files):
            path = Path(directory, name)
            if not path.is_symlink():
                continue
            target = Path(os.path.realpath(path))
            if target != root and root not in target.parents:
                yield Problem(path, 0, "symbolic link points outside the chart")
            elif _in_git(target, root):
                yield Problem(path, 0, "symbolic link points into .git")


def _tree_files(chart: Path, budget: _Budget) -> Iterator[Path]:
    """Regular files under ``chart`` (links not followed, ``.git`` left out), within the
    budget."""
    for directory, subdirectories, files in os.walk(chart, followlinks=False):
        subdirectories[:] = sorted(name for name in subdirectories if not _is_git(name))
        for name in sorted(files):
            path = Path(directory, name)
            if path.is_symlink() or not path.is_file():
                continue
            if not budget.spend(files=1, size=path.stat().st_size):
                return
            yield path


def _archive(
    path: Path, data: bytes, budget: _Budget, found: list[Problem], depth: int
) -> set[str]:
    """Check the schemas inside a chart archive (and archives in it); the names of the
    charts at its top (``<dir>/Chart.yaml``)."""
    names: set[str] = set()
    stream = _Limited(gzip.GzipFile(fileobj=io.BytesIO(data)), budget)
    with tarfile.open(fileobj=stream, mode="r|") as archive:
        for member in archive:
            if not member.isfile():
                continue
            if not budget.spend(files=1):
                raise Refused(budget.exceeded)
            parts = PurePosixPath(member.name).parts
            name = parts[-1] if parts else ""
            nested = name.endswith(".tgz")
            if name != SCHEMA_FILE and not nested and (name, len(parts)) != (CHART_FILE, 2):
                continue
            where = f"{path.name} ({member.name})"
            if member.size > MAX_SCHEMA_BYTES and not nested:
                raise Refused(f"{where} {_TOO_LARGE}")
            if nested and depth + 1 >= MAX_NESTING:
                raise Refused(f"{where} nests archives more than {MAX_NESTING} deep")
            handle = archive.extractfile(member)
            content = handle.read() if handle is not None else b""
            if nested:
                _archive(path, content, budget, found, depth + 1)
            elif name == SCHEMA_FILE:
                text = content.decode("utf-8", "replace")
                found.extend(Problem(path, 0, f"{where}: {m}") for _, m in _schema_problems(text))
            elif chart_name := _chart_name(content.decode("utf-8", "replace")):
                names.add(chart_name)
    return names


def _schema_problems(text: str) -> list[tuple[int, str]]:
    """(line, message) for every reference that leaves ``values.schema.json``."""
    documents, parse_problems = parse_plain(text)
    if parse_problems:
        message, line, _ = parse_problems[0]
        return [(line, f"does not parse: {message}")]
    found: list[tuple[int, str]] = []
    for body, positions in documents:
        lines = LineMap(positions=positions)
        for path, keyword, value in _references(body, ""):
            position = lines.lookup(path)
            line = position[0] if position is not None else 0
            if keyword == "$schema":
                found.append((line, f"$schema {_shown(value)} is not a known JSON Schema draft"))
            else:
                found.append((line, f"{keyword} {_shown(value)} points outside the schema"))
    return found


def _references(value: Any, path: str) -> Iterator[tuple[str, str, object]]:
    """(field path, keyword, value) of each reference a validator would resolve outside."""
    if isinstance(value, list):
        for index, item in enumerate(value):
            yield from _references(item, join_path(path, index))
        return
    if not isinstance(value, Mapping):
        return
    for key, item in value.items():
        here = join_path(path, key)
        if key in REFERENCE_KEYWORDS and isinstance(item, str):
            if not item.startswith("#") and not _known_schema(item):
                yield here, key, item
        elif key == "$schema" and not (isinstance(item, str) and _known_schema(item)):
            yield here, key, item
        else:
            yield from _references(item, here)


def _known_schema(uri: str) -> bool:
    rest = uri.removesuffix("#")
    for scheme in ("http://", "https://"):
        if rest.startswith(scheme) and rest[len(scheme) :] in KNOWN_SCHEMAS:
            return True
    return False


def _missing_dependencies(chart: Path, vendored: set[str]) -> Iterator[Problem]:
    """Dependencies declared in ``Chart.yaml`` (v2) or ``requirements.yaml`` (v1) that no
    chart in ``charts/`` provides (Helm matches them by chart name)."""
    for name in (CHART_FILE, "requirements.yaml"):
        path = chart / name
        if not path.is_file() or path.is_symlink():
            continue
        documents, _ = parse_plain(_read_limited(path) or "")
        if not documents or not isinstance(documents[0][0], Mapping):
            continue
        body, positions = documents[0]
        dependencies = body.get("dependencies")
        if not isinstance(dependencies, list):
            continue
        lines = LineMap(positions=positions)
        for index, dependency in enumerate(dependencies):
            wanted = dependency.get("name") if isinstance(dependency, Mapping) else None
            if isinstance(wanted, str) and wanted not in vendored:
                position = lines.lookup(f"dependencies[{index}]")
                message = (
                    f"dependency {_shown(wanted)} is not vendored in charts/ "
                    "(poolgate never downloads charts: commit them, `helm dependency build`)"
                )
                yield Problem(path, position[0] if position else 0, message)


def _chart_name(text: str) -> str:
    documents, _ = parse_plain(text)
    body = documents[0][0] if documents else None
    name = body.get("name") if isinstance(body, Mapping) else None
    return name if isinstance(name, str) else ""


def _read_limited(path: Path) -> str | None:
    """The file's text ("" when unreadable: Helm will say why), or None past the limit."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_SCHEMA_BYTES + 1)
    except OSError:
        return ""
    if len(data) > MAX_SCHEMA_BYTES:
        return None
    return data.decode("utf-8", "replace")


def private_copy(chart: Path, destination: Path) -> None:
    """Copy ``chart``'s regular files to the new directory ``destination``: links (all
    inside the chart, ``problems``) resolved, ``.git`` and special files left out.
    ``Refused`` past ``MAX_FILES`` or ``MAX_BYTES``, or on a link loop."""
    budget = _Budget()
    root = Path(os.path.realpath(chart))
    try:
        _copy_directory(root, destination, budget, (), root)
    except OSError as error:
        raise Refused(f"cannot copy the chart: {error.strerror or error}") from None
    if budget.exceeded:
        raise Refused(budget.exceeded)


def _copy_directory(
    source: Path, destination: Path, budget: _Budget, above: tuple[Path, ...], root: Path
) -> None:
    if source in above:
        raise Refused(f"a symbolic link loops back to {source.name}")
    destination.mkdir()
    with os.scandir(source) as listing:
        entries = sorted(listing, key=lambda entry: entry.name)
    for entry in entries:
        if _is_git(entry.name):
            continue
        real = Path(os.path.realpath(entry.path))
        if (real != root and root not in real.parents) or _in_git(real, root):
            continue  # refused by ``problems`` already
        target = destination / entry.name
        if real.is_dir():
            _copy_directory(real, target, budget, (*above, source), root)
        elif real.is_file():
            if not budget.spend(files=1, size=real.stat().st_size):
                return
            shutil.copyfile(real, target)


def _is_git(name: str) -> bool:
    return name.lower() == ".git"


def _in_git(path: Path, root: Path) -> bool:
    return any(_is_git(part) for part in path.relative_to(root).parts)


class _Budget:
    """Files and bytes left to read or copy; ``exceeded`` says which limit ran out."""

    def __init__(self) -> None:
        self.files = MAX_FILES
        self.bytes = MAX_BYTES
        self.exceeded = ""

    def spend(self, *, files: int = 0, size: int = 0) -> bool:
        """Charge ``files`` and ``size`` bytes; whether the budget still holds."""
        self.files -= files
        self.bytes -= size
        if not self.exceeded and self.files < 0:
            self.exceeded = f"the chart holds more than {MAX_FILES:,} files (limit)"
        elif not self.exceeded and self.bytes < 0:
            self.exceeded = f"the chart holds more than {MAX_BYTES // 2**20} MiB (limit)"
        return not self.exceeded


class _Limited(io.RawIOBase):
    """A read-only stream that charges what it yields to a budget (an archive's unpacked
    bytes: a small ``.tgz`` can unpack to gigabytes)."""

    def __init__(self, inner: gzip.GzipFile, budget: _Budget) -> None:
        self._inner = inner
        self._budget = budget

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._inner.read(len(buffer))
        if not self._budget.spend(size=len(data)):
            raise Refused(self._budget.exceeded)
        buffer[: len(data)] = data
        return len(data)


def _shown(value: object) -> str:
    """A value from the chart as a message shows it: quoted, escaped, capped."""
    text = json.dumps(value) if isinstance(value, str) else repr(value)
    return text if len(text) <= 120 else text[:118] + '…"'
