"""Platform facts derived once, in Python, so rules stay short CEL expressions.

Each derived fact is a plain value (dicts, lists, str, int, bool) that both CEL
engines can read. RULES.md ("Platform facts") defines every fact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scanner.inventory import InvalidDocument, Inventory, KubeObject
from scanner.model.index import ObjectIndex
from scanner.model.workloads import Workload, build_workloads


@dataclass(frozen=True, slots=True)
class Subject:
    """What a rule is evaluated on: an object, plus the facts the model derived for it.

    ``variables`` are the CEL variables particular to this subject
    (``{"workload": {...}}``); the engine always binds ``object`` to ``obj.body``.
    """

    type: str
    obj: KubeObject
    variables: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Model:
    """The derived facts of one run."""

    objects: Sequence[KubeObject]
    workloads: Sequence[Workload]
    invalid: Sequence[InvalidDocument] = field(default_factory=list)
    """Documents the model found invalid (PG003: a pod spec that is not a mapping)."""

    def subjects(self) -> dict[str, list[Subject]]:
        """Subject type -> subjects, as the engine consumes them."""
        return {
            "object": [Subject("object", obj) for obj in self.objects],
            "workload": [
                Subject("workload", workload.obj, {"workload": workload.facts})
                for workload in self.workloads
            ],
        }


def build_model(inventory: Inventory) -> Model:
    """Derive every fact once."""
    workloads, invalid = build_workloads(inventory.objects, ObjectIndex(inventory.objects))
    return Model(objects=inventory.objects, workloads=workloads, invalid=invalid)
