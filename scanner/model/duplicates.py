"""PG005 duplicate-object: one identity defined twice where it is applied together.

``kubectl apply -f`` applies a file's documents in order, and a kustomization's or
chart's output as one stream: of two objects with one identity, the cluster keeps
the one applied last. A reviewer who reads the first (benign, perhaps carrying a
``poolgate.io/ignore`` annotation) does not see what runs. So within one file, or
one rendered unit (``Origin.applied_with``), each object after the first with an
identity already seen is a finding at its first line, naming the first one's line.
The same identity in separate files is normal (overlays, samples) and is not
reported; ``--context-path`` objects never count (callers pass reportable objects only).

An identity is what the API server stores an object under: API group (not
version: ``apps/v1`` and ``apps/v1beta2`` name one Deployment) and kind, namespace
and name. A namespaced object without ``metadata.namespace`` is in ``default``, where
``kubectl apply`` puts it and where every rule judges it (``namespace_of``); a
cluster-scoped one has no namespace at all (``scanner.kinds.CLUSTER_SCOPED``; other
kinds, CRDs included, are taken as namespaced, which can only miss a duplicate that
names two namespaces, never invent one). Objects without a name are PG003's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from scanner.inventory import InvalidDocument, KubeObject
from scanner.kinds import CLUSTER_SCOPED, api_group

RULE: Final = "PG005"

_Identity = tuple[str, str, str, str, str]
"""(applied with, API group, kind, namespace, name)."""


def duplicate_objects(objects: Iterable[KubeObject]) -> list[InvalidDocument]:
    """A PG005 document for every object whose identity an earlier object of its file or
    rendered unit already has; one look-up per object."""
    first: dict[_Identity, KubeObject] = {}
    found: list[InvalidDocument] = []
    for obj in objects:
        identity = _identity(obj)
        if identity is None:
            continue
        earlier = first.setdefault(identity, obj)
        if earlier is not obj:
            found.append(_document(obj, earlier, identity))
    return found


def _identity(obj: KubeObject) -> _Identity | None:
    ref = obj.ref
    if not ref.name:
        return None
    group = api_group(ref.api_version)
    namespace = "" if (group, ref.kind) in CLUSTER_SCOPED else ref.namespace or "default"
    return (obj.origin.applied_with, group, ref.kind, namespace, ref.name)


def _document(obj: KubeObject, earlier: KubeObject, identity: _Identity) -> InvalidDocument:
    _, _, kind, namespace, name = identity
    line, column = obj.position("")
    first_line, _ = earlier.position("")
    where = f"line {first_line}"
    if earlier.origin.uri != obj.origin.uri:  # another template or resource of the unit
        where = f"{earlier.origin.uri}:{first_line}"
    shown = f"{namespace}/{name}" if namespace else name
    message = (
        f"{kind} {shown} is defined again (first at {where}); "
        "the cluster keeps only the one applied last"
    )
    return InvalidDocument(RULE, message, obj.origin, line, column, ref=obj.ref)
