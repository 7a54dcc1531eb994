"""An index of objects by kind and identity, so joins in the model are lookups, not pair loops."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from scanner.inventory import KubeObject


class ObjectIndex:
    """Objects grouped by kind and addressable by (kind, namespace, name)."""

    def __init__(self, objects: Iterable[KubeObject]) -> None:
        self._by_kind: dict[str, list[KubeObject]] = defaultdict(list)
        self._by_identity: dict[tuple[str, str, str], KubeObject] = {}
        for obj in objects:
            ref = obj.ref  # kind, namespace and name, read once (and cached for later joins)
            self._by_kind[ref.kind].append(obj)
            self._by_identity.setdefault((ref.kind, ref.namespace, ref.name), obj)

    def kind(self, *kinds: str) -> Sequence[KubeObject]:
        """Every object of the given kinds, in inventory order per kind."""
        if len(kinds) == 1:
            return self._by_kind.get(kinds[0], [])
        return [obj for kind in kinds for obj in self._by_kind.get(kind, [])]

    def get(self, kind: str, namespace: str, name: str) -> KubeObject | None:
        return self._by_identity.get((kind, namespace, name))
