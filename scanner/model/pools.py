"""GPU pools: GPU nodes and declarations grouped by pool label, with sharing and tenants.

A pool is the set of GPU nodes (or declarations) that share the value of the first
pool label present (config ``poolLabels``); a declaration's own name is its pool
name; GPU nodes without any pool label form the *unpooled* group (name ``""``).
Workloads are joined to pools once, here, with indexes: each GPU workload gets
``targets`` (one entry per GPU pool its node selection admits) and each pool gets
its ``tenants`` and their trust domains. A selection is checked only against the
pools whose members carry the labels it requires (``scanner.model.labelindex``), so
the cost follows the pairs that may match, never workloads x nodes: a selection that
requires no label (none, or only ``NotIn`` and ``DoesNotExist``) may match every
pool, and is checked against each, once per distinct selection.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from scanner.config.values import Config
from scanner.inventory import LIVE, KubeObject
from scanner.model.capacity import SHARED_MODES, largest
from scanner.model.facts import NodeFacts, PoolFacts, WorkloadFacts
from scanner.model.labelindex import LabelIndex
from scanner.model.records import Tenant
from scanner.model.targeting import InScope, required_terms, selects, untolerated
from scanner.model.workloads import Join, Workload


@dataclass(frozen=True, slots=True)
class Pool:
    """A GPU pool; ``obj`` is its first member, where pool findings point by default."""

    obj: KubeObject
    facts: PoolFacts
    members: tuple[tuple[KubeObject, NodeFacts], ...]


def build_pools(nodes: Sequence[tuple[KubeObject, NodeFacts]]) -> list[Pool]:
    grouped: dict[str, list[tuple[KubeObject, NodeFacts]]] = {}
    for obj, facts in nodes:
        if not facts["gpu"]:
            continue
        name = obj.name if facts["source"] == "declaration" else facts["pool"]
        facts["pool"] = name
        grouped.setdefault(name, []).append((obj, facts))
    return [_pool(name, members) for name, members in sorted(grouped.items())]


def _pool(name: str, members: list[tuple[KubeObject, NodeFacts]]) -> Pool:
    modes = sorted({facts["sharing"] for _, facts in members})
    mig_members = [facts for _, facts in members if "mig" in facts["sharing"]]
    facts: PoolFacts = {
        "name": name,
        "unpooled": name == "",
        "members": [
            {
                "kind": obj.kind,
                "name": obj.name,
                "ref": obj.ref.logical_name,
                "sharing": member["sharing"],
                "migStrategy": member["migStrategy"],
                "migProfiles": member["migProfiles"],
                "devicePluginConfig": member["devicePluginConfig"],
            }
            for obj, member in members
        ],
        "sharingModes": modes,
        "sharing": modes[0] if len(modes) == 1 else "mixed",
        "shared": any(mode in SHARED_MODES for mode in modes),
        "migStrategies": sorted({m["migStrategy"] for m in mig_members}),
        "migProfiles": sorted({p for m in mig_members for p in m["migProfiles"]}),
        "migLayouts": sorted({p for m in mig_members for p in m["migLayouts"]}),
        "advertises": sorted({r for _, member in members for r in member["advertises"]}),
        "maxGpusPerNode": max(member["gpuCount"] for _, member in members),
        "skus": sorted({member["sku"] for _, member in members if member["sku"]}),
        "tenants": [],
        "trustDomains": [],
        "fractionalTrustDomains": [],
    }
    return Pool(members[0][0], facts, tuple(members))


class Others(NamedTuple):
    """Nodes or a declaration not known to have GPUs, grouped as pools are."""

    name: str
    """A pool's name (``""``: unpooled Nodes), or ``Kind/name`` of a declaration."""
    declaration: bool
    members: tuple[tuple[KubeObject, NodeFacts], ...]


def other_nodes(nodes: Sequence[tuple[KubeObject, NodeFacts]]) -> list[Others]:
    """The Nodes and declarations not known to have GPUs, grouped as pools are (a
    declaration alone, Nodes by pool label, unpooled Nodes together): what a GPU
    workload that selects no GPU pool may select instead (``nonGpuMatches``)."""
    grouped: dict[tuple[str, str], list[tuple[KubeObject, NodeFacts]]] = {}
    for obj, facts in nodes:
        if not facts["gpu"]:
            if facts["source"] == "declaration":
                key = ("declaration", f"{obj.kind}/{obj.name}")
            else:
                key = ("pool", str(facts["pool"]))
            grouped.setdefault(key, []).append((obj, facts))
    return [
        Others(name, kind == "declaration", tuple(members))
        for (kind, name), members in sorted(grouped.items())
    ]


def attach_targets(
    workloads: Sequence[Workload],
    pools: Sequence[Pool],
    config: Config,
    trust_domain: Mapping[str, str],
    others: Sequence[Others] = (),
    unfollowed: dict[str, None] | None = None,
    dra_served: frozenset[str] = frozenset(),
) -> Join:
    """Give every workload its ``targets`` (none unless it is a GPU workload),
    ``nonGpuMatches`` and ``diagnosis``, and every pool its ``tenants``; a deferred
    workload gets them from the join returned, when it completes. ``others``
    (``other_nodes``): where a GPU workload that selects no GPU pool lands instead.
    A controlled workload counts as its controller, so is no tenant.

    ``trust_domain`` maps namespace -> trust domain ("platform" for operator namespaces,
    which are not tenants) for the namespaces whose labels are known; a workload in
    another namespace shows its namespace as its trust domain, but a pool's
    ``trustDomains`` count only known ones. Cost stays near linear: workloads with the same node
    selection, tolerations and GPU resource names (the replicas of one controller, the
    pods of one Job) share one computation, a selection is checked only against the
    pools a label index says it may reach, and each pool is matched through its
    distinct member classes — members that look the same to the labels the selection
    names — rather than node by node. A GPU workload whose selection may reach more
    than ``MAX_REACH`` pools is not followed (``poolsKnown`` false): its
    ``Kind namespace/name`` goes into ``unfollowed``.
    """
    targeting = _Targeting(pools, config, trust_domain, others, dra_served)
    if unfollowed is not None:
        targeting.unfollowed = unfollowed
    complete = []
    for workload in workloads:
        if workload.deferred is None:
            complete.append(workload)
        else:  # instance facts (INSTANCE_FACTS); the targets come with the rest
            targeting.place(workload.facts)
    tenants: dict[str, dict[str, Tenant]] = {pool.facts["name"]: {} for pool in pools}
    fractional: dict[str, set[str]] = {pool.facts["name"]: set() for pool in pools}
    for workload in complete:
        facts = workload.facts
        targeting.target(facts)
        if facts["trustDomain"] == "platform" or facts["controlled"]:
            continue
        for target in facts["targets"]:
            if target["tolerated"] and target["decided"]:
                if target.get("fractional") and facts["namespace"] in trust_domain:
                    fractional[target["pool"]].add(facts["trustDomain"])
                tenant = tenants[target["pool"]].setdefault(
                    facts["namespace"],
                    {
                        "namespace": facts["namespace"],
                        "trustDomain": facts["trustDomain"],
                        "workloads": 0,
                    },
                )
                tenant["workloads"] += 1
    for pool in pools:
        pool.facts["tenants"] = [
            tenants[pool.facts["name"]][ns] for ns in sorted(tenants[pool.facts["name"]])
        ]
        # Only tenants whose Namespace is in scope have a known trust domain (docs/usage.md,
        # "Scope: what a scan can see"): an unseen namespace may carry any trust-domain label.
        pool.facts["trustDomains"] = sorted(
            {t["trustDomain"] for t in pool.facts["tenants"] if t["namespace"] in trust_domain}
        )
        pool.facts["fractionalTrustDomains"] = sorted(fractional[pool.facts["name"]])
    targeting.finish()
    for workload in complete:
        workload.facts["diagnosis"] = diagnose(workload.facts)

    def join(workload: Workload) -> None:
        targeting.target(workload.facts)
        workload.facts["diagnosis"] = diagnose(workload.facts)

    return join


MAX_REACH: Final = 100
"""GPU pools a workload's node selection is followed to. A selection that may reach
more (there are more GPU pools than this, and it requires no label that fewer of
them carry) is not followed: the workload's pools count as unknown (``poolsKnown``
false, so the rules about its pools do not judge it) and the run says so
(``Model.unfollowed``), rather than every such workload costing a target per pool,
in the model and in every rule that reads ``targets``."""


class _Targeting:
    """The GPU pools a workload's node selection, tolerations and resource names admit.

    Targets are shared by every workload with the same selection. ``trustDomains`` and
    ``shared`` come from the pools once their tenants are known (``finish``); targets
    computed after that get them at once.
    """

    def __init__(
        self,
        pools: Sequence[Pool],
        config: Config,
        trust_domain: Mapping[str, str],
        others: Sequence[Others] = (),
        dra_served: frozenset[str] = frozenset(),
    ) -> None:
        self.known = bool(pools)
        self.dra_served = dra_served
        """Extended resource names DRA allocates (``dra.extended_resources``): never missing."""
        members = [m for pool in pools for m in pool.members]
        members += [m for group in others for m in group.members]
        live = any(obj.origin.source_type == LIVE for obj, _ in members)
        self.in_scope = None if live else InScope(k for _, m in members for k in m["labels"])
        """The label keys in scope, to tell pools declared outside a scan (targeting.py)."""
        self.indexes = [_PoolIndex(pool) for pool in pools]
        self.by_label = LabelIndex([[member for _, member in pool.members] for pool in pools])
        """Which pools a selection may reach, so that it is checked against those only."""
        self.others = others
        self.others_index: _OtherNodes | None = None
        """Built on first use: only a GPU workload that reaches no GPU pool needs it."""
        self.elsewhere: dict[str, list[str]] = {}
        """Selection key -> ``nonGpuMatches`` of a selection that reaches no GPU pool."""
        self.config = config
        self.trust_domain = trust_domain
        self.computed: dict[str, list[dict[str, Any]]] = {}
        self.pools = {pool.facts["name"]: pool.facts for pool in pools}
        self.finished = False
        self.wide = len(pools) > MAX_REACH
        """Whether a selection may reach more than ``MAX_REACH`` pools at all."""
        self.unfollowed: dict[str, None] = {}
        """``Kind namespace/name`` of the GPU workloads not followed (``MAX_REACH``)."""

    def place(self, facts: WorkloadFacts) -> None:
        """Set ``poolsKnown`` and ``trustDomain`` on one workload's facts."""
        facts["poolsKnown"] = (
            self.known
            and self._followed(facts)
            and not (facts["gpu"] and self.in_scope and self.in_scope.outside(facts["podSpec"]))
        )
        facts["trustDomain"] = self.trust_domain.get(facts["namespace"], facts["namespace"])

    def _followed(self, facts: Mapping[str, Any]) -> bool:
        """Whether the workload's selection is followed to pools (``MAX_REACH``): from
        its pod spec alone (an instance fact), so a deferred workload is judged the
        same before and after it completes."""
        if not self.wide or not facts["gpu"]:
            return True
        if self.by_label.candidates(facts["podSpec"], MAX_REACH) is not None:
            return True
        self.unfollowed[f"{facts['kind']} {facts['namespace']}/{facts['name']}"] = None
        return False

    def target(self, facts: WorkloadFacts) -> None:
        """Set ``poolsKnown``, ``trustDomain``, ``targets`` and ``nonGpuMatches`` on one
        workload's facts."""
        self.place(facts)
        facts["targets"] = []
        facts["nonGpuMatches"] = []
        # Kueue adds its flavor's node labels and tolerations at admission
        # (scanner/model/queues.py): the template's own placement is not where it runs.
        if not facts["gpu"] or not facts["poolsKnown"] or facts.get("queuedPlacement"):
            return
        requested = sorted({entry["name"] for entry in facts["gpuResources"]})
        is_fractional = facts["gpuSharing"]["mode"] == "fractional"
        key = _selection_key(facts["podSpec"], facts["tolerations"], requested, is_fractional)
        targets = self.computed.get(key)
        if targets is None:
            keys = _selection_keys(facts["podSpec"])
            candidates = self.by_label.candidates(facts["podSpec"], MAX_REACH)
            indexes = self.indexes if candidates is None else [self.indexes[i] for i in candidates]
            targets = self.computed[key] = [
                target
                for index in indexes
                if (target := _target(facts, requested, index, keys, self)) is not None
            ]
            if len(targets) == 1:
                # The one pool the selection may reach: if it runs, it runs there.
                targets[0]["decided"] = True
            for target in targets:
                target["fractional"] = is_fractional
            if self.finished:
                self._pool_facts(targets)
        facts["targets"] = targets
        if not targets:
            facts["nonGpuMatches"] = self._elsewhere(facts["podSpec"], key)

    def _elsewhere(self, pod_spec: Mapping[str, Any], key: str) -> list[str]:
        """The nodes not known to have GPUs that a selection reaching no GPU pool
        matches, taints aside: ``pool <name>``, ``Kind/name`` of a declaration, or
        ``Node/name`` of the first unpooled Node (sorted, at most ``_NAMED``)."""
        found = self.elsewhere.get(key)
        if found is None:
            if self.others_index is None:
                self.others_index = _OtherNodes(self.others)
            found = self.elsewhere[key] = self.others_index.matched(pod_spec)
        return found

    def finish(self) -> None:
        """The pools' tenants are known: give every target its pool's sharing facts."""
        self.finished = True
        for targets in self.computed.values():
            self._pool_facts(targets)

    def _pool_facts(self, targets: list[dict[str, Any]]) -> None:
        for target in targets:
            pool_facts = self.pools[target["pool"]]
            if target["fractional"] and not pool_facts["shared"]:
                # Fractional tenants share GPUs with each other, whatever the pool
                # does for whole-GPU tenants.
                target["trustDomains"] = pool_facts["fractionalTrustDomains"]
                target["shared"] = bool(pool_facts["fractionalTrustDomains"])
                target["sharing"] = "fractional"
            else:
                target["trustDomains"] = pool_facts["trustDomains"]
                target["shared"] = pool_facts["shared"]


def _group_name(group: Others, obj: KubeObject) -> str:
    """How ``nonGpuMatches`` names a group of ``other_nodes`` through its member ``obj``."""
    if group.declaration:
        return group.name
    return f"pool {group.name}" if group.name else f"{obj.kind}/{obj.name}"


_NAMED: Final = 5
"""At most this many ``nonGpuMatches`` are named."""

_SCAN_LIMIT: Final = 500
"""Non-GPU Nodes (and declarations) a selection is checked against one by one: those
carrying a label value it requires, or all of them when it requires none (only
``NotIn``, ``DoesNotExist``, ...); past that, their names are left out of the message
rather than the cost growing with selections times nodes."""


class _OtherNodes:
    """``other_nodes`` indexed by label (``LabelIndex``), so that a selection is checked
    only against the Nodes and declarations carrying a value it requires
    (``nonGpuMatches``): a thousand pods pinned by ``kubernetes.io/hostname`` to a
    thousand names cost a lookup each, not a pass over every Node."""

    def __init__(self, groups: Sequence[Others]) -> None:
        self.declarations = [group for group in groups if group.declaration]
        self.declared = LabelIndex(
            [[member for _, member in group.members] for group in self.declarations]
        )
        self.members = [
            (_group_name(group, obj), obj, member)
            for group in groups
            if not group.declaration
            for obj, member in group.members
        ]
        self.nodes = LabelIndex([[member] for _, _, member in self.members])

    def matched(self, pod_spec: Mapping[str, Any]) -> list[str]:
        found = self.declared.candidates(pod_spec, _SCAN_LIMIT)
        if found is None:
            many = len(self.declarations) > _SCAN_LIMIT
            declarations = [] if many else self.declarations
        else:
            declarations = [self.declarations[i] for i in found]
        names = {
            _group_name(group, group.members[0][0])
            for group in declarations
            if any(
                selects(pod_spec, member["labels"], declaration=True) for _, member in group.members
            )
        }
        for position in self._candidates(pod_spec):
            name, _, member = self.members[position]
            if name not in names and selects(pod_spec, member["labels"]):
                names.add(name)
        return sorted(names)[:_NAMED]

    def _candidates(self, pod_spec: Mapping[str, Any]) -> Sequence[int]:
        """The Nodes that may match: those carrying a label value (or key) the selection
        requires; every Node when it requires none and there are few; none when either
        is more than ``_SCAN_LIMIT``."""
        found = self.nodes.candidates(pod_spec, _SCAN_LIMIT)
        if found is not None:
            return found
        return range(len(self.members)) if len(self.members) <= _SCAN_LIMIT else ()


class _PoolIndex:
    """A pool's members grouped into classes that a selection cannot tell apart.

    Two members are alike for a workload when they agree on the labels its selection
    names and on taints, advertised names and size; the per-node ``hostname`` label
    only splits classes for the rare workload that selects it.
    """

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self._classes: dict[frozenset[str], list[tuple[KubeObject, Mapping[str, Any]]]] = {}

    def classes(self, keys: frozenset[str]) -> list[tuple[KubeObject, Mapping[str, Any]]]:
        found = self._classes.get(keys)
        if found is None:
            seen: dict[str, tuple[KubeObject, Mapping[str, Any]]] = {}
            for obj, member in self.pool.members:
                labels = member["labels"]
                signature = json.dumps(
                    [
                        {key: labels[key] for key in keys if key in labels},
                        member["taints"],
                        member["advertises"],
                        member["gpuCount"],
                        member["resourceCounts"],
                        member["sharing"],
                        bool(member.get("statusKnown")),
                        member.get("replicas", 0),
                        bool(member.get("oneShare")),
                        bool(member.get("gke")),
                    ],
                    sort_keys=True,
                )
                seen.setdefault(signature, (obj, member))
            found = self._classes[keys] = list(seen.values())
        return found


def _selection_key(
    pod_spec: Mapping[str, Any],
    tolerations: object,
    requested: Sequence[str],
    fractional: bool = False,
) -> str:
    affinity = pod_spec.get("affinity")
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    required = (
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(node_affinity, Mapping)
        else None
    )
    return json.dumps(
        [pod_spec.get("nodeSelector"), required, tolerations, list(requested), fractional],
        sort_keys=True,
        default=str,
    )


def _selection_keys(pod_spec: Mapping[str, Any]) -> frozenset[str]:
    """Every node label key the pod's required node selection names."""
    keys: set[str] = set()
    node_selector = pod_spec.get("nodeSelector")
    if isinstance(node_selector, Mapping):
        keys.update(str(key) for key in node_selector)
    for term in required_terms(pod_spec) or ():
        expressions = term.get("matchExpressions")
        for expression in expressions if isinstance(expressions, list) else ():
            if isinstance(expression, Mapping):
                keys.add(str(expression.get("key", "")))
    return frozenset(keys)


def diagnose(facts: Mapping[str, Any]) -> str:
    """Why a GPU workload cannot run on any visible pool, in one line ("" when it can,
    or when no pool is visible). PG603 appends it to a Pending pod's finding; the
    static rules PG105/PG106/PG108 report the same causes one by one."""
    if not facts.get("gpu") or not facts.get("poolsKnown") or facts.get("queuedPlacement"):
        return ""  # a queued workload goes where Kueue's flavor puts it (queues.py)
    targets = facts["targets"]
    if not targets:
        return "its node selection matches no GPU pool"
    reachable = [t for t in targets if t["tolerated"]]
    if not reachable:
        return "untolerated taints: " + "; ".join(
            f"{t['pool']}: {', '.join(t['untolerated'])}" for t in targets
        )
    if all(t["missingResources"] for t in reachable):
        missing = sorted({r for t in reachable for r in t["missingResources"]})
        return f"{', '.join(missing)} not advertised by " + "; ".join(
            f"{t['pool']} ({', '.join(t['advertises'])})" for t in reachable
        )
    # Only pools whose size is known everywhere they reach: an unknown size may fit.
    for entry in facts["gpuResources"]:
        count, name = entry["limitCount"], entry["name"]
        if any(name not in t["perNode"] for t in reachable):
            continue
        sizes = [t["perNode"][name] for t in reachable if t["perNode"][name] > 0]
        if count > 0 and sizes and all(count > size for size in sizes):
            what = "GPUs" if name == "nvidia.com/gpu" else name
            return f"asks for {count} {what} in one container; the largest node has {max(sizes)}"
    for name, counts in facts.get("gpuPodCounts", {}).items():
        if any(name not in t["perPod"] or name not in t["perNode"] for t in reachable):
            continue
        sized = [t for t in reachable if t["perPod"][name] > 0]
        if sized and all(
            counts["pod"] > t["perPod"][name] or counts["container"] > t["perNode"].get(name, 0)
            for t in sized
        ):
            what = "GPUs" if name == "nvidia.com/gpu" else name
            largest = max(t["perPod"][name] for t in sized)
            return f"asks for {counts['pod']} {what} in one pod; no node fits (largest: {largest})"
    return ""


def _target(
    facts: Mapping[str, Any],
    requested: Sequence[str],
    index: _PoolIndex,
    keys: frozenset[str],
    targeting: _Targeting,
) -> dict[str, Any] | None:
    pool = index.pool
    pod_spec = facts["podSpec"]
    tolerations = facts["tolerations"]
    classes = index.classes(keys)
    # Decided: the labels a member is known to carry match. Else possible: a pool
    # declaration matches only through labels its nodes get when they join
    # (targeting.py). Rules that say a pod cannot run take possible targets too; a
    # workload is a pool's tenant (PG201) only where it is decided.
    selected = [(obj, member) for obj, member in classes if selects(pod_spec, member["labels"])]
    decided = bool(selected)
    if not decided:
        selected = [
            (obj, member)
            for obj, member in classes
            if member["source"] == "declaration"
            and selects(pod_spec, member["labels"], declaration=True)
        ]
    if not selected:
        return None
    blocked: list[str] = []
    tolerated_members = []
    for _obj, member in selected:
        ert = targeting.config.extended_resource_toleration or bool(member.get("gke"))
        missing = untolerated(member["taints"], tolerations, requested, ert)
        if missing:
            blocked.extend(t for t in missing if t not in blocked)
        else:
            tolerated_members.append(member)
    reachable = tolerated_members or [member for _, member in selected]
    advertises = sorted({r for member in reachable for r in member["advertises"]})
    return {
        "pool": pool.facts["name"],
        "ref": selected[0][0].ref.logical_name,
        "decided": decided,
        "tolerated": bool(tolerated_members),
        "untolerated": blocked,
        "sharing": pool.facts["sharing"],
        "migStrategies": pool.facts["migStrategies"],
        "advertises": advertises,
        "missingResources": [
            r for r in requested if r not in targeting.dra_served and not _advertised(r, advertises)
        ],
        "maxGpusPerNode": max(member["gpuCount"] for member in reachable),
        "perNode": largest(requested, reachable),
        "perPod": largest(requested, reachable, whole_pod=True),
    }


def _advertised(resource: str, advertises: Sequence[str]) -> bool:
    if resource in advertises:
        return True
    shared = resource.endswith(".shared")
    return resource.startswith("nvidia.com/mig-") and (
        ("nvidia.com/mig-*.shared" if shared else "nvidia.com/mig-*") in advertises
    )
