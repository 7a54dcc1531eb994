"""Objects as the sources found them: identity, origin and field positions.

Every object keeps the map from field path (``spec.template.spec.containers[1].image``)
to its 1-based line and column, so a finding can point at the exact field.
Documents that could not become objects are kept as ``InvalidDocument`` data and
turn into findings (PG001-PG003) instead of crashes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeGuard
from urllib.parse import quote

Position = tuple[int, int]
"""1-based (line, column)."""

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def join_path(parent: str, key: str | int) -> str:
    """Append a mapping key or a list index to a field path.

    Keys that are not plain identifiers are quoted: ``metadata.labels['app.kubernetes.io/name']``.
    """
    if isinstance(key, int):
        return f"{parent}[{key}]"
    if _PLAIN_KEY.match(key):
        return f"{parent}.{key}" if parent else key
    quoted = key.replace("\\", "\\\\").replace("'", "\\'")
    return f"{parent}['{quoted}']"


def path_uri(text: str) -> str:
    """A file path as poolgate writes it in a URI: bytes of a name that is not UTF-8
    (which Python keeps as lone surrogates) shown as ``\\xNN``, so every report can
    encode it. The file is still read through its real path."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a document came from.

    ``uri`` is relative to the repository root for files (``k8s/gpu.yaml``),
    ``<stdin>`` for standard input and ``cluster://<context>/...`` for live objects.
    ``line``/``column`` are the document's first position (1-based).
    """

    uri: str
    document_index: int = 0
    line: int = 1
    column: int = 1
    source_type: str = "file"
    unit: str = ""
    """The rendered output the object came from (``charts/x (rendered)``), whose
    ``document_index`` it is, or "" for a file, where ``uri`` says it: the objects
    applied together. A chart's objects carry their template's ``uri``, and two
    overlays of one base both carry the base's."""

    def __reduce__(self) -> tuple[type[Origin], tuple[str, int, int, int, str, str]]:
        """Pickled as its fields (``scanner.findings.records.Finding.__reduce__``): a helper
        process gets one with every workload it evaluates (scanner/evaluate/shipping.py)."""
        return (
            Origin,
            (self.uri, self.document_index, self.line, self.column, self.source_type, self.unit),
        )

    @property
    def applied_with(self) -> str:
        """What the object is applied together with: its rendered unit, else its file."""
        return self.unit or self.uri


LIVE: Final = "cluster"
"""The ``source_type`` of live objects (an audit, a snapshot of one) and of the cluster
itself (``scanner.model.cluster``)."""
CLUSTER_SCHEME: Final = "cluster://"
CLUSTER_SEGMENT: Final = "_cluster"
"""The path of the cluster itself in its ``cluster://`` URI (``cluster_uri``)."""


def cluster_uri(context: str) -> str:
    """``cluster://<context>/_cluster``: the cluster itself, where findings about the
    cluster as a whole (the ``cluster`` subject) point. One path segment, so it is
    never an object's URI (those have two or three, and ``_`` is not allowed in
    Kubernetes names and namespaces)."""
    return f"{CLUSTER_SCHEME}{quote(context, safe='')}/{CLUSTER_SEGMENT}"


@dataclass(frozen=True, slots=True)
class LineMap:
    """Field path -> 1-based position, for one document.

    ``prefix`` is the path of the object inside its document: items of a
    ``kind: List`` live under ``items[3]``, so their paths are looked up with
    that prefix while rules keep addressing them from the object's root.
    """

    positions: Mapping[str, Position]
    prefix: str = ""

    def __reduce__(self) -> tuple[type[LineMap], tuple[Mapping[str, Position], str]]:
        """Pickled as its fields (``Origin.__reduce__``)."""
        return (LineMap, (self.positions, self.prefix))

    def lookup(self, path: str) -> Position | None:
        """The position of ``path``, or of its nearest ancestor that has one."""
        if not self.positions:  # live objects: no lines to find
            return None
        full = _prefixed(self.prefix, path)
        while True:
            found = self.positions.get(full)
            if found is not None:
                return found
            if not full:
                return None
            full = _parent_path(full)


def _prefixed(prefix: str, path: str) -> str:
    if not prefix:
        return path
    if not path:
        return prefix
    return f"{prefix}{path}" if path.startswith("[") else f"{prefix}.{path}"


def _parent_path(path: str) -> str:
    """``a.b[2]`` -> ``a.b``; ``a.b`` -> ``a``; ``a['x.y']`` -> ``a``; ``a`` -> ``''``."""
    if path.endswith("]"):
        depth_start = path.rfind("[")
        if path[depth_start + 1 : depth_start + 2] == "'":
            # quoted key: find the opening "['" that matches the closing "']"
            depth_start = _quoted_key_start(path)
        return path[:depth_start]
    dot = path.rfind(".")
    return path[:dot] if dot >= 0 else ""


def _quoted_key_start(path: str) -> int:
    index = len(path) - 3  # before the closing "']"
    while index > 0:
        if path[index] == "'" and path[index - 1] == "[" and (index < 2 or path[index - 2] != "\\"):
            return index - 1
        index -= 1
    return 0


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The identity of a Kubernetes object, as findings and logical locations name it."""

    api_version: str
    kind: str
    namespace: str
    name: str

    def __reduce__(self) -> tuple[type[ObjectRef], tuple[str, str, str, str]]:
        """Pickled as its fields (``scanner.findings.records.Finding.__reduce__``)."""
        return (ObjectRef, (self.api_version, self.kind, self.namespace, self.name))

    @property
    def logical_name(self) -> str:
        """``namespace/Kind/name``, or ``Kind/name`` for cluster-scoped objects."""
        if self.namespace:
            return f"{self.namespace}/{self.kind}/{self.name}"
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True, slots=True)
class KubeObject:
    """One Kubernetes object with its origin and line map.

    ``body`` is the plain parsed document (dicts, lists, str, int, float, bool, None)
    and must not be mutated.
    """

    body: Mapping[str, Any]
    origin: Origin
    lines: LineMap
    context_only: bool = False
    """True for objects added with ``--context-path``: used for joins, never reported on."""
    _ref: ObjectRef | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def api_version(self) -> str:
        return _text(self.body.get("apiVersion"))

    @property
    def kind(self) -> str:
        return _text(self.body.get("kind"))

    @property
    def metadata(self) -> Mapping[str, Any]:
        meta = self.body.get("metadata")
        return as_mapping(meta)

    @property
    def name(self) -> str:
        return _text(self.metadata.get("name"))

    @property
    def namespace(self) -> str:
        return _text(self.metadata.get("namespace"))

    @property
    def ref(self) -> ObjectRef:
        """Computed once: every finding and activation on the object names it."""
        ref = self._ref
        if ref is None:
            body, metadata = self.body, self.metadata  # the properties' reads, in one place
            ref = ObjectRef(
                _text(body.get("apiVersion")),
                _text(body.get("kind")),
                _text(metadata.get("namespace")),
                _text(metadata.get("name")),
            )
            object.__setattr__(self, "_ref", ref)  # a cache; the body never changes
        return ref

    def position(self, path: str) -> Position:
        """The 1-based position of ``path`` (or its nearest present ancestor)."""
        found = self.lines.lookup(path)
        return found if found is not None else (self.origin.line, self.origin.column)


def as_mapping(value: object) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty one."""
    return value if is_mapping(value) else {}


def is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)`` with plain dicts, which every loader builds, checked
    first: the ABC check costs more, and the model runs this on every replica pod."""
    return isinstance(value, dict) or (value is not None and isinstance(value, Mapping))


def _text(value: object) -> str:
    return value if value.__class__ is str or isinstance(value, str) else ""


@dataclass(frozen=True, slots=True)
class InvalidDocument:
    """A document, file or stream that did not become a valid object.

    ``rule_id`` says which document rule it is: PG001 (does not parse or cannot
    be read), PG002 (duplicate key), PG003 (object shape invalid).
    """

    rule_id: str
    message: str
    origin: Origin
    line: int
    column: int
    ref: ObjectRef | None = None
    path: str = ""


@dataclass(frozen=True, slots=True)
class ReadError:
    """An input that was found but could not be read (permission denied, not UTF-8, ...)."""

    uri: str
    message: str
    line: int = 0
    """Where in the file, when the problem has a place (the first byte that is not
    UTF-8); 0 for the whole file. Annotations and SARIF regions point there."""


@dataclass(frozen=True, slots=True)
class SourceWarning:
    """A document that loaded, but not quite as written (a custom YAML tag ignored, a
    list of objects Kubernetes would not accept): reported, never incomplete."""

    uri: str
    message: str
    line: int = 0
    column: int = 0


@dataclass(slots=True)
class Inventory:
    """Everything the sources produced for one run."""

    objects: list[KubeObject] = field(default_factory=list)
    invalid: list[InvalidDocument] = field(default_factory=list)
    read_errors: list[ReadError] = field(default_factory=list)
    warnings: list[SourceWarning] = field(default_factory=list)
    skipped: int = 0
    """Documents that parsed but are not Kubernetes objects (no apiVersion/kind)."""
    files: int = 0
    excluded: int = 0
    """Manifest files left out by the user's exclude patterns (never read)."""

    def extend(self, other: Inventory) -> None:
        self.objects.extend(other.objects)
        self.invalid.extend(other.invalid)
        self.read_errors.extend(other.read_errors)
        self.warnings.extend(other.warnings)
        self.skipped += other.skipped
        self.files += other.files
        self.excluded += other.excluded

    def reportable(self) -> Iterator[KubeObject]:
        """Objects findings may be reported on (not ``--context-path`` ones)."""
        return (obj for obj in self.objects if not obj.context_only)


def iter_kinds(objects: Iterable[KubeObject], kinds: frozenset[str]) -> Iterator[KubeObject]:
    return (obj for obj in objects if obj.kind in kinds)
