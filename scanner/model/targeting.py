"""Which pools a workload can land on: node selection and taints, with Kubernetes semantics.

* ``nodeSelector`` keys must all match; required node-affinity terms are ORed, the
  expressions inside a term ANDed (``In``, ``NotIn``, ``Exists``, ``DoesNotExist``,
  ``Gt``, ``Lt``); an empty term matches nothing.
* A ``NoSchedule``/``NoExecute`` taint must be tolerated (key/operator/value/effect;
  an empty key with ``Exists`` tolerates everything; an empty effect matches all).
  ``PreferNoSchedule`` never blocks.
* With the ``ExtendedResourceToleration`` admission plugin (GKE runs it), a pod that
  requests extended resource ``R`` also tolerates ``NoSchedule`` taints with key ``R``.

Labels are ``key -> possible values`` so declarations whose requirements allow
several values (Karpenter ``In [a, b]``) match any selection of one of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

BLOCKING = ("NoSchedule", "NoExecute")


def selects(pod_spec: Mapping[str, Any], labels: Mapping[str, Sequence[str]]) -> bool:
    """Whether a node carrying ``labels`` satisfies the pod's required node selection."""
    node_selector = pod_spec.get("nodeSelector")
    if isinstance(node_selector, Mapping):
        for key, value in node_selector.items():
            if _scalar(value) not in labels.get(str(key), ()):
                return False
    terms = _required_terms(pod_spec)
    if terms is None:
        return True
    return any(_term_matches(term, labels) for term in terms)


def _required_terms(pod_spec: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    node: Any = pod_spec.get("affinity")
    for key in ("nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"):
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    if not isinstance(node, Mapping):
        return None
    terms = node.get("nodeSelectorTerms")
    return [t for t in terms if isinstance(t, Mapping)] if isinstance(terms, list) else []


def _term_matches(term: Mapping[str, Any], labels: Mapping[str, Sequence[str]]) -> bool:
    expressions = [e for e in term.get("matchExpressions") or [] if isinstance(e, Mapping)]
    if not expressions:
        return False  # "a null or empty node selector term matches no objects"
    return all(_expression_matches(e, labels) for e in expressions)


def _expression_matches(expression: Mapping[str, Any], labels: Mapping[str, Sequence[str]]) -> bool:
    key = str(expression.get("key", ""))
    operator = expression.get("operator")
    wanted = (
        [_scalar(v) for v in expression.get("values") or []]
        if isinstance(expression.get("values"), list)
        else []
    )
    present = labels.get(key)
    if operator == "In":
        return present is not None and any(v in wanted for v in present)
    if operator == "NotIn":
        return present is None or any(v not in wanted for v in present)
    if operator == "Exists":
        return present is not None
    if operator == "DoesNotExist":
        return present is None
    if operator in ("Gt", "Lt") and present is not None and wanted:
        limit = _int(wanted[0])
        if limit is None:
            return False
        numbers = [n for n in map(_int, present) if n is not None]
        return any(n > limit if operator == "Gt" else n < limit for n in numbers)
    return False


def untolerated(
    taints: Iterable[Mapping[str, str]],
    tolerations: Sequence[Mapping[str, Any]],
    requested: Iterable[str],
    extended_resource_toleration: bool,
) -> list[str]:
    """Blocking taints the pod does not tolerate, as ``key=value:Effect``."""
    requested = set(requested)
    blocked = []
    for taint in taints:
        effect = taint.get("effect", "")
        if effect not in BLOCKING:
            continue
        if (
            extended_resource_toleration
            and effect == "NoSchedule"
            and taint.get("key") in requested
        ):
            continue
        if not any(_tolerates(toleration, taint) for toleration in tolerations):
            value = taint.get("value", "")
            blocked.append(f"{taint.get('key', '')}{'=' + value if value else ''}:{effect}")
    return blocked


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, str]) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return key == "" or key == taint.get("key")
    return key == taint.get("key") and _scalar(toleration.get("value")) == taint.get("value", "")


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)
