"""Cluster snapshots: what ``poolgate snapshot`` writes and ``poolgate audit --snapshot`` reads.

A snapshot is a ``v1`` ``List`` (JSON), so ``kubectl`` and ``jq`` read it too.
poolgate records what it knows about the capture in the List's
``metadata.annotations``:

* ``poolgate.io/context``: the kubeconfig context (``in-cluster`` inside a pod);
* ``poolgate.io/captured-at``: when the listing started (RFC 3339, UTC); the audit
  of a snapshot judges durations (a pod Pending for 10 minutes) as of this time;
* ``poolgate.io/listed``: every kind that was listed to the end, as ``Kind.group``
  (``Pod``, ``Deployment.apps``), so an audit knows which kinds are complete;
* ``poolgate.io/kinds-revision``: the revision of poolgate's table of listable kinds
  (``scanner.kinds.resources.REVISION``) when the snapshot was written: a kind the
  writer's table did not have is not in ``listed`` for that reason alone;
* ``poolgate.io/unavailable``: JSON list of the kinds that could not be read
  (``{"kind", "group", "status", "message", "namespace"}``, status ``forbidden`` or
  ``failed``), so auditing the snapshot says exactly what the live audit said;
* ``poolgate.io/omitted``: JSON object of what the snapshot left out because no
  rule it was taken with reads it (``scanner.audit.redaction``: ``env-values``,
  ``last-applied``), each with the kinds it was left out of, so an audit with other
  rules knows which of them cannot run on it.

``poolgate snapshot`` writes the file readable by its owner only (mode 0600).

Any other ``List`` works too (``kubectl get nodes,pods -A -o yaml``, or a
``PodList`` straight from the API, whose items lack ``kind``): without the
annotations the context is ``--context`` (or ``snapshot``) and the audit time is now.
Such a file does not say what was listed, so the audit takes the objects of each kind
it holds as all there are, and a kind it does not hold as unknown, never as none
(``scanner.audit.run.coverage``: a rule that ``needs`` it does not run, and ``--compare``
calls earlier findings of the rules that read it unverified, not resolved).

A file with no List and no object (empty: what a failed ``kubectl get ... > FILE``
leaves), or whose top level holds anything else (``42``, ``null``, an object without
``kind``, a List whose ``items`` is not a list) is a usage error: an audit of it would
say "clean" about a cluster it never saw.

Objects become inventory objects with ``cluster://<context>/<namespace>/<Kind>/<name>``
URIs (source type ``cluster``) and no line map, exactly like live objects, so an
audit of a snapshot reports the same findings as the live audit it came from.
The context is percent-encoded: EKS context names are ARNs holding ``/`` and ``:``.
Findings about the cluster as a whole point at ``cluster://<context>/_cluster``.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from scanner.errors import UsageError
from scanner.inventory import (
    CLUSTER_SCHEME,
    LIVE,
    Inventory,
    KubeObject,
    LineMap,
    ObjectRef,
    Origin,
    is_mapping,
)
from scanner.kinds.resources import REVISION
from scanner.sources.yaml import numbers, surrogates
from scanner.sources.yaml.document import collector_paused

DEFAULT_CONTEXT = "snapshot"
"""Context of a snapshot that names none (a ``kubectl`` dump) when ``--context`` is not given."""

ANNOTATION_CONTEXT = "poolgate.io/context"
ANNOTATION_CAPTURED_AT = "poolgate.io/captured-at"
ANNOTATION_LISTED = "poolgate.io/listed"
ANNOTATION_UNAVAILABLE = "poolgate.io/unavailable"
ANNOTATION_REVISION = "poolgate.io/kinds-revision"
ANNOTATION_OMITTED = "poolgate.io/omitted"

_NO_LINES = LineMap({})
"""Live objects have no file: one shared empty line map (positions fall back to 1:1)."""

KindKey = tuple[str, str]
"""(API group, kind)."""

Omitted = dict[str, frozenset[str]]
"""What a snapshot left out (``scanner.audit.redaction.WHAT``) -> the kinds it left it out of."""


@dataclass(frozen=True, slots=True)
class Unavailable:
    """A kind the capture could not read: ``forbidden`` (403) or ``failed`` (after retries)."""

    group: str
    kind: str
    status: str
    message: str
    namespace: str = ""

    @property
    def key(self) -> KindKey:
        return (self.group, self.kind)


@dataclass(slots=True)
class Capture:
    """Objects read from one cluster at one time, and what could not be read."""

    context: str
    captured_at: datetime.datetime
    objects: list[dict[str, Any]] = field(default_factory=list)
    listed: frozenset[KindKey] | None = None
    """Kinds listed to the end; None when unknown (a snapshot from another tool)."""
    unavailable: list[Unavailable] = field(default_factory=list)
    revision: int = REVISION
    """The revision of the kinds table that wrote ``listed`` (``resources.REVISION``):
    1 for a snapshot from before the annotation."""
    omitted: Omitted = field(default_factory=dict)
    """What the objects lack because no rule the capture was taken for reads it."""


def object_uri(context: str, ref: ObjectRef) -> str:
    """``cluster://<context>/<namespace>/<Kind>/<name>`` (``.../<Kind>/<name>`` when
    cluster-scoped); the context percent-encoded so it is one URI segment."""
    return f"{CLUSTER_SCHEME}{quote(context, safe='')}/{ref.logical_name}"


def kind_label(key: KindKey) -> str:
    group, kind = key
    return f"{kind}.{group}" if group else kind


def parse_kind_label(label: str) -> KindKey:
    kind, _, group = label.partition(".")
    return (group, kind)


def api_group(api_version: str) -> str:
    group, slash, _ = api_version.rpartition("/")
    return group if slash else ""


def format_time(moment: datetime.datetime) -> str:
    """RFC 3339 in UTC with seconds, as Kubernetes writes timestamps."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime.datetime:
    """RFC 3339 -> aware datetime; ``ValueError`` when it is not one."""
    moment = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone")
    try:
        moment.astimezone(datetime.UTC)  # 0001-01-01T00:00:00+01:00 has no UTC time
    except OverflowError:
        raise ValueError(f"{text!r} is out of range") from None
    return moment


# -- inventory -----------------------------------------------------------------------


def to_inventory(capture: Capture) -> Inventory:
    """Inventory objects with ``cluster://`` origins; items without kind or name are skipped."""
    with collector_paused():
        return _inventory(capture)


def _inventory(capture: Capture) -> Inventory:
    inventory = Inventory()
    prefix = f"{CLUSTER_SCHEME}{quote(capture.context, safe='')}/"  # object_uri, hoisted
    append = inventory.objects.append
    for body in capture.objects:
        meta = body.get("metadata")
        kind, api_version = body.get("kind"), body.get("apiVersion")
        if (
            not isinstance(kind, str)
            or not isinstance(api_version, str)
            or not is_mapping(meta)
            or not isinstance(meta.get("name"), str)
        ):
            inventory.skipped += 1
            continue
        namespace = meta.get("namespace")
        name = meta["name"]
        if isinstance(namespace, str) and namespace:
            uri = f"{prefix}{namespace}/{kind}/{name}"
        else:
            uri = f"{prefix}{kind}/{name}"
        append(KubeObject(body, Origin(uri, line=0, column=0, source_type=LIVE), _NO_LINES))
    return inventory


# -- writing -------------------------------------------------------------------------


def write(capture: Capture, stream: TextIO) -> None:
    """The capture as one ``v1`` ``List``, one item per line (diff-friendly, streamable)."""
    annotations: dict[str, str] = {
        ANNOTATION_CONTEXT: capture.context,
        ANNOTATION_CAPTURED_AT: format_time(capture.captured_at),
    }
    if capture.listed is not None:
        annotations[ANNOTATION_LISTED] = ",".join(sorted(kind_label(k) for k in capture.listed))
        annotations[ANNOTATION_REVISION] = str(capture.revision)
    if capture.unavailable:
        annotations[ANNOTATION_UNAVAILABLE] = json.dumps(
            [
                {
                    "kind": item.kind,
                    "group": item.group,
                    "status": item.status,
                    "message": item.message,
                    "namespace": item.namespace,
                }
                for item in capture.unavailable
            ],
            sort_keys=True,
        )
    if capture.omitted:
        annotations[ANNOTATION_OMITTED] = json.dumps(
            {what: sorted(kinds) for what, kinds in capture.omitted.items()}, sort_keys=True
        )
    head = {"apiVersion": "v1", "kind": "List", "metadata": {"annotations": annotations}}
    stream.write(json.dumps(head, sort_keys=True)[:-1] + ',\n"items": [\n')
    for index, item in enumerate(capture.objects):
        stream.write(("" if index == 0 else ",\n") + json.dumps(item, separators=(",", ":")))
    stream.write("\n]}\n")


# -- reading -------------------------------------------------------------------------


def read(path: str, context: str | None = None) -> Capture:
    """A snapshot file (JSON or YAML, one ``List`` or several documents) as a ``Capture``.

    ``context`` names the cluster when the file does not. A file that cannot be read
    or parsed is a usage error with its position: the whole audit rests on it.
    """
    if not os.path.isfile(path):
        raise UsageError(f"--snapshot {path}: no such file", hint="check the path")
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise UsageError(f"--snapshot {path}: cannot read: {error.strerror or error}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise UsageError(f"{path}:{line}: not valid UTF-8 (byte offset {error.start})") from None
    # A snapshot of a large cluster is millions of dicts that all survive: without the
    # pause the collector rescans the growing heap on every allocation burst.
    with collector_paused():
        documents = _parse(path, text, data)
        if surrogates.may_hold(text):
            try:
                documents = surrogates.replaced(documents)
            except RecursionError:
                raise UsageError(f"{path}: nested too deeply") from None
        return _capture(path, context, documents)


def _capture(path: str, context: str | None, documents: list[Any]) -> Capture:
    objects: list[dict[str, Any]] = []
    annotations: dict[str, Any] = {}
    if not documents:
        # What `kubectl get ... -o json > FILE` leaves when kubectl fails.
        raise UsageError(
            f"--snapshot {path}: empty: no List and no objects to audit",
            hint="write one with `poolgate snapshot -o FILE` or `kubectl get ... -o json`",
        )
    for number, document in enumerate(documents, 1):
        kind = document.get("kind") if isinstance(document, dict) else None
        if isinstance(document, dict) and isinstance(document.get("items"), list):
            meta = document.get("metadata")
            if isinstance(meta, Mapping) and isinstance(meta.get("annotations"), Mapping):
                annotations.update(meta["annotations"])
            objects.extend(_list_items(document))
        elif isinstance(document, dict) and isinstance(kind, str) and kind.endswith("List"):
            items = document.get("items")
            what = "missing" if "items" not in document else f"{json_type(items)}, not a list"
            raise UsageError(f"--snapshot {path}: {kind} (entry {number}): its items is {what}")
        elif isinstance(document, dict) and isinstance(kind, str) and kind:
            objects.append(document)
        else:
            what = "an object without kind" if isinstance(document, dict) else json_type(document)
            raise UsageError(
                f"--snapshot {path}: entry {number} is {what}, not a Kubernetes List or object",
                hint="give a `poolgate snapshot` file or a `kubectl get -o json|yaml` dump",
            )
    recorded = annotations.get(ANNOTATION_CONTEXT)
    name = context or (recorded if isinstance(recorded, str) and recorded else DEFAULT_CONTEXT)
    capture = Capture(name, _captured_at(path, annotations), objects)
    listed = annotations.get(ANNOTATION_LISTED)
    if isinstance(listed, str):
        capture.listed = frozenset(parse_kind_label(x) for x in listed.split(",") if x.strip())
        capture.revision = _revision(path, annotations.get(ANNOTATION_REVISION))
    capture.unavailable = _unavailable(path, annotations.get(ANNOTATION_UNAVAILABLE))
    capture.omitted = _omitted(path, annotations.get(ANNOTATION_OMITTED))
    return capture


def json_type(value: object) -> str:
    """How a JSON value is named in messages (``null``, ``a string``, ``an object``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def _parse(path: str, text: str, data: bytes) -> list[Any]:
    """``data`` is ``text`` encoded (UTF-8, no BOM): JSON is decoded from it."""
    if text.lstrip()[:1] in ("{", "["):
        try:
            value = numbers.loads(text, raw=data)
        except RecursionError:
            raise UsageError(f"{path}: nested too deeply") from None
        except json.JSONDecodeError as error:
            where = f"{path}:{error.lineno}:{error.colno}"
            raise UsageError(f"{where}: invalid JSON: {error.msg}") from None
        return value if isinstance(value, list) else [value]
    return _parse_yaml(path, text)


def _parse_yaml(path: str, text: str) -> list[Any]:
    """Read exactly as manifests are (``parse_plain``, scanner/sources/yaml/walk.py):
    the same safety (no tag is ever honoured, alias expansion and nesting are bounded)
    and the same values, those the API server would store and CEL can hold. A
    document that does not parse or is refused is a usage error with its position; a
    duplicate key keeps the last value, as the API server's decoding does."""
    from scanner.sources.yaml.document import DUPLICATE_KEY, parse_plain
    from scanner.sources.yaml.limits import MAX_NODES

    # A kubectl List is one document holding every object: its node count is bounded
    # by the text's length (aliases aside, whose expansion parse_plain bounds), not by
    # the per-document limit meant for manifests.
    documents, problems = parse_plain(text, max_nodes=max(MAX_NODES, len(text)))
    for message, line, column in sorted(problems, key=lambda problem: problem[1:]):
        if not message.startswith(DUPLICATE_KEY):
            raise UsageError(f"{path}:{line}:{column}: {message}")
    # A document that is a list holds documents, as a JSON file whose top level is one.
    found: list[Any] = []
    for body, _ in documents:
        if isinstance(body, list):
            found.extend(body)
        else:
            found.append(body)
    return found


def _list_items(document: Mapping[str, Any]) -> Iterable[dict[str, Any]]:
    """Items of a ``List`` or a typed list (``PodList``: items lack kind and apiVersion)."""
    list_kind = document.get("kind")
    item_kind = ""
    if isinstance(list_kind, str) and list_kind.endswith("List") and list_kind != "List":
        item_kind = list_kind[: -len("List")]
    api_version = document.get("apiVersion")
    for item in document["items"]:
        if not isinstance(item, dict):
            continue
        if item_kind and "kind" not in item:
            item["kind"] = item_kind
            if isinstance(api_version, str):
                item.setdefault("apiVersion", api_version)
        yield item


def _captured_at(path: str, annotations: Mapping[str, Any]) -> datetime.datetime:
    recorded = annotations.get(ANNOTATION_CAPTURED_AT)
    if recorded is None:
        return datetime.datetime.now(datetime.UTC)
    try:
        return parse_time(str(recorded))
    except ValueError:
        raise UsageError(
            f"{path}: annotation {ANNOTATION_CAPTURED_AT} is not an RFC 3339 time: {recorded!r}"
        ) from None


def _revision(path: str, recorded: object) -> int:
    """The kinds-table revision a snapshot was written at: 1 before it was recorded."""
    if recorded is None:
        return 1
    text = str(recorded)
    if not (text.isascii() and text.isdigit() and 0 < len(text) < 10 and int(text) > 0):
        raise UsageError(f"{path}: annotation {ANNOTATION_REVISION} is not a revision: {text!r}")
    return int(text)


def _unavailable(path: str, recorded: object) -> list[Unavailable]:
    if recorded is None:
        return []
    try:
        entries = json.loads(str(recorded))
        return [
            Unavailable(
                str(entry.get("group", "")),
                str(entry["kind"]),
                str(entry.get("status", "failed")),
                str(entry.get("message", "")),
                str(entry.get("namespace", "")),
            )
            for entry in entries
        ]
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        raise UsageError(f"{path}: annotation {ANNOTATION_UNAVAILABLE} is not valid") from None


def _omitted(path: str, recorded: object) -> Omitted:
    if recorded is None:
        return {}
    try:
        entries = json.loads(str(recorded))
        if not isinstance(entries, dict) or not all(
            isinstance(kinds, list) and all(isinstance(kind, str) for kind in kinds)
            for kinds in entries.values()
        ):
            raise ValueError(recorded)
    except (ValueError, RecursionError):
        raise UsageError(f"{path}: annotation {ANNOTATION_OMITTED} is not valid") from None
    return {str(what): frozenset(kinds) for what, kinds in entries.items() if kinds}


def kinds_present(objects: Sequence[Mapping[str, Any]]) -> frozenset[KindKey]:
    """The (group, kind) of every object: what a snapshot without ``listed`` covers."""
    keys = set()
    for body in objects:
        kind, api_version = body.get("kind"), body.get("apiVersion")
        if isinstance(kind, str) and isinstance(api_version, str):
            keys.add((api_group(api_version), kind))
    return frozenset(keys)
