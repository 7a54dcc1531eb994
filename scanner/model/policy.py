"""Cluster-wide policy facts joined onto workloads: RuntimeClasses and signature coverage.

* ``workload.runtimeClass``: ``name`` (``runtimeClassName``, or ``""``),
  ``known`` (any RuntimeClass object is in scope: RuntimeClasses are
  cluster-scoped and managed together, so seeing one is taken as seeing the
  set), ``exists`` (one of that name is in scope) and ``handler`` (its handler,
  or ``""``).
* ``workload.signaturePoliciesKnown``: any ClusterImagePolicy or Kyverno
  ``verifyImages`` rule is in scope; ``containers[i].signature``: see
  ``scanner.model.signatures.signature_facts``.

RBAC facts live in ``scanner.model.rbac``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scanner.model.index import ObjectIndex
from scanner.model.namespaces import Namespaces
from scanner.model.signatures import Target, collect_policies, signature_facts
from scanner.model.workloads import Join, Workload, join_complete


def attach_runtime_classes(workloads: Sequence[Workload], index: ObjectIndex) -> Join:
    """Set ``workload.runtimeClass`` on every workload (``join_complete``)."""
    handlers: dict[str, str] = {}
    for obj in index.kind("RuntimeClass"):
        if obj.name:
            handler = obj.body.get("handler")
            handlers.setdefault(obj.name, handler if isinstance(handler, str) else "")
    known = bool(handlers)

    def join(workload: Workload) -> None:
        name = workload.facts["runtimeClassName"]
        workload.facts["runtimeClass"] = {
            "name": name,
            "known": known,
            "exists": name in handlers,
            "handler": handlers.get(name, ""),
        }

    return join_complete(workloads, join)


def attach_signatures(
    workloads: Sequence[Workload], index: ObjectIndex, namespaces: Namespaces
) -> Join:
    """Set ``workload.signaturePoliciesKnown`` and ``signature`` on every container
    (``join_complete``)."""
    policies = collect_policies(index)
    # Many pods share few images: when a verdict depends only on image, namespace and
    # kind, it is computed once and the (read-only) facts are shared.
    shared: dict[tuple[object, object, str], dict[str, Any]] = {}
    known = policies.known

    def join(workload: Workload) -> None:
        facts = workload.facts
        facts["signaturePoliciesKnown"] = known
        ns = namespaces.get(facts["namespace"])
        target: Target | None = None
        for container in facts["containers"]:
            image = container.get("image")
            key = (image, ns["name"], facts["kind"])
            found = shared.get(key) if isinstance(image, str) else None
            if found is None:
                target = target or _target(workload)
                found = signature_facts(image, target, ns, policies)
                if isinstance(image, str) and policies.judges_kind_only(image):
                    shared[key] = found
            container["signature"] = found

    return join_complete(workloads, join)


def _target(workload: Workload) -> Target:
    facts = workload.facts
    return Target(
        kind=facts["kind"],
        name=facts["name"],
        object_labels=_string_map(workload.obj.metadata.get("labels")),
        pod_labels=facts["podLabels"],
        pod_annotations=facts["podAnnotations"],
    )


def _string_map(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): "" if v is None else str(v) for k, v in value.items()}
