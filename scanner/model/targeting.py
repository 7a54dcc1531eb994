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

A pool *declaration* (Karpenter NodePool, GKE node pool, Cluster API) lists the labels
it gives its nodes, not those the kubelet, the cloud provider, the autoscaler or GPU
Feature Discovery add when a node joins (``kubernetes.io/os``, ``topology.kubernetes.io/zone``,
``karpenter.sh/capacity-type``, ``nvidia.com/gpu.product``). A selection on such a key
that the declaration does not list is undecided, so it matches: "selects no GPU pool,
it will stay Pending" must rest on labels the declaration does decide. Live Nodes
carry every label and are matched exactly.

Pools declared outside the scan. A ``scan`` sees the declarations in its paths only;
a workload may select a pool declared elsewhere (another repository, Terraform). When
its required selection names a label no node or declaration in scope carries (a
``team-pool`` no declaration lists, ``cloud.google.com/gke-nodepool`` with no GKE
pool in scope), the scan cannot see the pool it selects: its pools are unknown
(``outside_scan``), and no rule about its pools judges it. A label some declaration
in scope carries (``sku``, ``pool``) decides: ``sku: b200`` that no pool has is a
selection that matches nothing. A live cluster shows every node: never outside.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from scanner.model.selectors import label_value

BLOCKING = ("NoSchedule", "NoExecute")

RUNTIME_LABELS: Final = frozenset(
    {
        "kubernetes.io/hostname",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/instance-type",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
    }
)
"""Well-known labels a node gets when it joins (kubelet, cloud provider)."""
RUNTIME_DOMAINS: Final = (
    "node.kubernetes.io/",  # instance-type
    "topology.kubernetes.io/",  # zone, region
    "karpenter.sh/",
    "karpenter.k8s.aws/",
    "karpenter.azure.com/",
    "cloud.google.com/",
    "eks.amazonaws.com/",
    "kubernetes.azure.com/",
    "nvidia.com/",  # GPU Feature Discovery: gpu.product, gpu.count, mig.strategy
    "feature.node.kubernetes.io/",  # Node Feature Discovery
)
"""Label domains whose keys the autoscaler, the cloud provider or GPU/Node Feature
Discovery set on nodes at runtime."""


PROVIDER_DOMAINS: Final = (
    ("cloud.google.com/",),
    ("karpenter.sh/", "karpenter.k8s.aws/"),
    ("eks.amazonaws.com/",),
    ("kubernetes.azure.com/", "karpenter.azure.com/"),
    ("cluster.x-k8s.io/",),
)
"""Label domains one provider puts on its nodes: in scope when one of its nodes or
declarations is (each carries its provider's pool label), else its pools are not."""


class InScope:
    """The node label keys the nodes and declarations in scope carry, to tell a
    selection of a pool declared outside the scan (``outside``; module docstring)."""

    __slots__ = ("groups", "keys")

    def __init__(self, keys: Iterable[str]) -> None:
        self.keys = frozenset(keys)
        self.groups = frozenset(
            group for group in PROVIDER_DOMAINS if any(k.startswith(group) for k in self.keys)
        )

    def outside(self, pod_spec: Mapping[str, Any]) -> bool:
        """Whether the pod's required node selection names a label no node or
        declaration in scope carries. Generic runtime labels (``kubernetes.io/os``, GPU
        Feature Discovery's) come with every node, and a label asked to be absent
        (``NotIn``, ``DoesNotExist``) decides nothing."""
        node_selector = pod_spec.get("nodeSelector")
        if isinstance(node_selector, Mapping) and any(
            self._unseen(str(key)) for key in node_selector
        ):
            return True
        for term in required_terms(pod_spec) or ():
            expressions = term.get("matchExpressions")
            for expression in expressions if isinstance(expressions, list) else ():
                if (
                    isinstance(expression, Mapping)
                    and expression.get("operator") in ("In", "Exists", "Gt", "Lt")
                    and self._unseen(str(expression.get("key", "")))
                ):
                    return True
        return False

    def _unseen(self, key: str) -> bool:
        if key in self.keys:
            return False
        group = next((g for g in PROVIDER_DOMAINS if key.startswith(g)), None)
        if group is not None:
            return group not in self.groups
        return not runtime_label(key)


class _Undecided:
    """The value of a runtime label a pool declaration does not list."""


_UNDECIDED: Final = _Undecided()


def selects(
    pod_spec: Mapping[str, Any],
    labels: Mapping[str, Sequence[str]],
    declaration: bool = False,
) -> bool:
    """Whether a node carrying ``labels`` satisfies the pod's required node selection.
    ``declaration``: ``labels`` are a pool declaration's (module docstring)."""

    def lookup(key: str) -> Sequence[str] | _Undecided | None:
        present = labels.get(key)
        if present is None and declaration and runtime_label(key):
            return _UNDECIDED
        return present

    node_selector = pod_spec.get("nodeSelector")
    if isinstance(node_selector, Mapping):
        for key, value in node_selector.items():
            present = lookup(str(key))
            if isinstance(present, _Undecided):
                continue
            if label_value(value) not in (present or ()):
                return False
    terms = required_terms(pod_spec)
    if terms is None:
        return True
    return any(_term_matches(term, lookup) for term in terms)


def runtime_label(key: str) -> bool:
    """Whether nodes get label ``key`` when they join, whatever their pool declares."""
    return key in RUNTIME_LABELS or key.startswith(RUNTIME_DOMAINS)


def required_terms(pod_spec: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    """The pod's required node-affinity terms; None when it has no required affinity."""
    node: Any = pod_spec.get("affinity")
    for key in ("nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"):
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    if not isinstance(node, Mapping):
        return None
    terms = node.get("nodeSelectorTerms")
    return [t for t in terms if isinstance(t, Mapping)] if isinstance(terms, list) else []


_Lookup = Callable[[str], "Sequence[str] | _Undecided | None"]


def _term_matches(term: Mapping[str, Any], lookup: _Lookup) -> bool:
    expressions = [e for e in term.get("matchExpressions") or [] if isinstance(e, Mapping)]
    fields = [f for f in term.get("matchFields") or [] if isinstance(f, Mapping)]
    if not expressions and not fields:
        return False  # "a null or empty node selector term matches no objects"
    # matchFields name nodes (metadata.name: the DaemonSet controller pins each of its
    # pods so), which pool classes do not tell apart: undecided, as a runtime label is;
    # the term's expressions decide.
    return all(_expression_matches(e, lookup) for e in expressions)


def _expression_matches(expression: Mapping[str, Any], lookup: _Lookup) -> bool:
    key = str(expression.get("key", ""))
    operator = expression.get("operator")
    wanted = (
        [label_value(v) for v in expression.get("values") or []]
        if isinstance(expression.get("values"), list)
        else []
    )
    present = lookup(key)
    if isinstance(present, _Undecided):
        return True
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
    value = label_value(toleration.get("value"))
    return key == taint.get("key") and value == taint.get("value", "")


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None
