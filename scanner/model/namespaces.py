"""Namespaces: trust domain, Pod Security level and default-deny coverage (docs/platform-model.md).

Every workload gets ``workload.ns``; every Namespace object in scope is also a
``namespace`` subject, seen by rules as the CEL variable ``ns`` (``namespace`` is
a reserved word in CEL). ``scanner.model.facts`` (``NamespaceFacts``) declares the
facts. Rules that conclude from something *missing* in a namespace (docs/usage.md,
"Scope: what a scan can see") only do so when ``known`` is true: a Namespace object of that
name is in scope (scanned, or added with ``--context-path``). ``signatureOptIn`` is there
because the Sigstore policy-controller only checks opted-in namespaces; for
``defaultDeny`` see ``default_deny``; in ``gpuWorkloads`` a controlled pod or
ReplicaSet counts as its controller (``scanner.model.controllers``).

Objects without ``metadata.namespace`` count as namespace ``default``, where
``kubectl apply`` would put them (as workloads do).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scanner.config.values import Config
from scanner.inventory import KubeObject
from scanner.model.facts import NamespaceFacts
from scanner.model.index import ObjectIndex
from scanner.model.workloads import Workload

PSS_ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
SIGSTORE_OPT_IN_LABEL = "policy.sigstore.dev/include"
NAME_LIMIT = 10
NAMESPACED_ENGINES = frozenset({"CiliumNetworkPolicy"})
"""Network policies of other engines that apply to their namespace: Cilium's, and a
``NetworkPolicy`` not of ``networking.k8s.io`` (Calico's ``projectcalico.org``)."""
CLUSTER_ENGINES = frozenset(
    {
        "CiliumClusterwideNetworkPolicy",
        "GlobalNetworkPolicy",
        "AdminNetworkPolicy",
        "BaselineAdminNetworkPolicy",
    }
)
"""Cluster-wide network policies (Cilium, Calico, the Kubernetes network-policy API):
they may deny by default in every namespace."""
"""How many GPU workload names ``gpuWorkloads.names`` keeps (the count is exact).

Capped because every workload carries its namespace's facts into its CEL activation."""


@dataclass(frozen=True, slots=True)
class Namespaces:
    """Namespace facts by name, and the Namespace objects that are ``namespace`` subjects."""

    facts: Mapping[str, NamespaceFacts]
    subjects: Sequence[tuple[KubeObject, NamespaceFacts]]
    config: Config

    def get(self, name: str) -> NamespaceFacts:
        """The facts of ``name``; a namespace nothing in scope mentions is unknown and empty."""
        found = self.facts.get(name)
        return found if found is not None else namespace_facts(name, None, (), (), self.config)


def namespace_of(obj: KubeObject) -> str:
    """The namespace a namespaced object lands in (``default`` when the manifest sets none)."""
    return obj.namespace or "default"


def build_namespaces(
    index: ObjectIndex, workloads: Sequence[Workload], config: Config
) -> Namespaces:
    """Facts of every namespace that a Namespace object, a NetworkPolicy or a workload names,
    then ``workload.ns`` on every workload."""
    objects: dict[str, KubeObject] = {}
    for obj in index.kind("Namespace"):
        # A scanned Namespace wins over a --context-path copy for the joins.
        if obj.name and (obj.name not in objects or objects[obj.name].context_only):
            objects[obj.name] = obj
    policies: dict[str, list[KubeObject]] = {}
    for kind in ("NetworkPolicy", *sorted(NAMESPACED_ENGINES)):
        for obj in index.kind(kind):
            policies.setdefault(namespace_of(obj), []).append(obj)
    cluster_wide = [obj for kind in sorted(CLUSTER_ENGINES) for obj in index.kind(kind)]
    if cluster_wide:
        for name in set(objects) | {w.facts["namespace"] for w in workloads}:
            policies.setdefault(name, [])
        for found in policies.values():
            found.extend(cluster_wide)
    gpu: dict[str, set[str]] = {}
    for workload in workloads:
        # A controlled pod or ReplicaSet is its controller's, which is counted.
        if workload.is_gpu and not workload.facts["controlled"]:
            name = f"{workload.obj.kind}/{workload.obj.name}"
            gpu.setdefault(workload.facts["namespace"], set()).add(name)
    names = set(objects) | set(policies) | {w.facts["namespace"] for w in workloads}
    facts = {
        name: namespace_facts(
            name, objects.get(name), policies.get(name, ()), sorted(gpu.get(name, ())), config
        )
        for name in sorted(names)
    }
    for workload in workloads:
        workload.facts["ns"] = facts[workload.facts["namespace"]]
    # Every Namespace document is a subject judged on its own labels (overlays may
    # define one namespace twice); what lives in the namespace is shared.
    subjects = [
        (
            obj,
            facts[obj.name]
            if obj is objects[obj.name]
            else namespace_facts(
                obj.name, obj, policies.get(obj.name, ()), sorted(gpu.get(obj.name, ())), config
            ),
        )
        for obj in index.kind("Namespace")
        if obj.name
    ]
    return Namespaces(facts, subjects, config)


def namespace_facts(
    name: str,
    obj: KubeObject | None,
    network_policies: Iterable[KubeObject],
    gpu_workloads: Sequence[str],
    config: Config,
) -> NamespaceFacts:
    """The facts of one namespace (``NamespaceFacts``)."""
    labels = _string_map(obj.metadata.get("labels")) if obj is not None else {}
    operator = name in config.operator_namespaces
    system = name in config.system_namespaces
    policies = [policy for policy in network_policies if _kubernetes_policy(policy)]
    # Another engine's policies may deny by default; poolgate does not judge them.
    others = sorted(
        {f"{policy.kind}/{policy.name}" for policy in network_policies}
        - {f"{policy.kind}/{policy.name}" for policy in policies}
    )
    ingress, egress = default_deny(policies)
    trust = labels.get(config.trust_domain_label, "")
    return {
        "name": name,
        "known": obj is not None,
        "labels": labels,
        "trustDomain": "platform" if operator else trust or name,
        "operator": operator,
        "system": system,
        "platform": operator or system,
        "pssEnforce": labels.get(PSS_ENFORCE_LABEL, ""),
        "networkPolicies": sorted({policy.name for policy in policies}),
        "netpolsKnown": bool(policies),
        "otherNetworkPolicies": others[:NAME_LIMIT],
        "defaultDenyIngress": ingress,
        "defaultDenyEgress": egress,
        "defaultDeny": ingress and egress,
        "signatureOptIn": labels.get(SIGSTORE_OPT_IN_LABEL) == "true",
        "gpuWorkloads": {"count": len(gpu_workloads), "names": list(gpu_workloads[:NAME_LIMIT])},
    }


def _kubernetes_policy(obj: KubeObject) -> bool:
    return obj.kind == "NetworkPolicy" and obj.api_version.startswith("networking.k8s.io/")


def default_deny(policies: Iterable[KubeObject]) -> tuple[bool, bool]:
    """(ingress denied by default, egress denied by default) for one namespace's policies.

    A direction is denied by default when some NetworkPolicy selects every pod
    (``podSelector: {}``) and covers that direction, and no policy selecting every
    pod allows all traffic in that direction. Policies are additive, so one
    select-all policy with an allow-all rule undoes the deny; an allow-all rule
    on a policy that selects *some* pods is an ordinary exception and does not.

    ``policyTypes`` defaults as the API server does: absent or empty means
    ``Ingress``, plus ``Egress`` when the policy has egress rules. A deny split
    over two policies (one per direction) counts.
    """
    covered = {"Ingress": False, "Egress": False}
    opened = {"Ingress": False, "Egress": False}
    for policy in policies:
        spec = policy.body.get("spec")
        if not isinstance(spec, Mapping) or not _selects_every_pod(spec.get("podSelector")):
            continue
        for direction, rules_key, peers_key in (
            ("Ingress", "ingress", "from"),
            ("Egress", "egress", "to"),
        ):
            if direction not in policy_types(spec):
                continue
            covered[direction] = True
            if any(_allows_all(rule, peers_key) for rule in _list(spec.get(rules_key))):
                opened[direction] = True
    return (
        covered["Ingress"] and not opened["Ingress"],
        covered["Egress"] and not opened["Egress"],
    )


def policy_types(spec: Mapping[str, Any]) -> list[str]:
    """``spec.policyTypes``, or the API server's default for it."""
    written = [t for t in _list(spec.get("policyTypes")) if isinstance(t, str)]
    if written:
        return written
    return ["Ingress", "Egress"] if _list(spec.get("egress")) else ["Ingress"]


def _selects_every_pod(selector: object) -> bool:
    """An absent or empty label selector selects every pod in the namespace."""
    if selector is None:
        return True
    if not isinstance(selector, Mapping):
        return False
    return not selector.get("matchLabels") and not selector.get("matchExpressions")


def _allows_all(rule: object, peers_key: str) -> bool:
    """A rule with no port restriction whose peers are everyone.

    Everyone: no peers listed, an empty peer, ``namespaceSelector: {}`` (every pod
    of every namespace, the other tenants included), or an ``ipBlock`` of
    ``0.0.0.0/0`` or ``::/0`` without exceptions.
    """
    if not isinstance(rule, Mapping) or _list(rule.get("ports")):
        return False
    peers = _list(rule.get(peers_key))
    return not peers or any(_peer_is_everyone(peer) for peer in peers)


def _peer_is_everyone(peer: object) -> bool:
    if not isinstance(peer, Mapping):
        return False
    if not peer:
        return True
    block = peer.get("ipBlock")
    if isinstance(block, Mapping):
        return block.get("cidr") in ("0.0.0.0/0", "::/0") and not _list(block.get("except"))
    return (
        "namespaceSelector" in peer
        and _selects_every_pod(peer.get("namespaceSelector"))
        and _selects_every_pod(peer.get("podSelector"))
    )


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _string_map(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {
        str(k): "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
        for k, v in value.items()
    }
