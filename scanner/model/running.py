"""What runs where: the live GPU pods on each shared node (``runningNode``).

An audit sees where pods run (``spec.nodeName``); manifests do not. PG201 reads it to
find tenants of different trust domains sharing one time-sliced or MPS node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scanner.inventory import KubeObject, is_mapping
from scanner.model.capacity import SHARED_MODES
from scanner.model.facts import NodeFacts, WorkloadFacts
from scanner.model.workloads import Workload


def attach_running(
    workloads: Sequence[Workload],
    nodes: Sequence[tuple[KubeObject, NodeFacts]],
    trust_domain: Mapping[str, str],
) -> None:
    """Live state: which GPU pods actually run on which shared node (audit, PG201).

    Every GPU Pod bound to a Node (``spec.nodeName``) and not finished gets
    ``runningNode`` = {name, sharing, shared, trustDomains}, where ``trustDomains`` are
    those of all GPU pods running on that node. Pods of other workload kinds, and
    manifests (no ``nodeName``), get an empty ``runningNode``. ``runningShared`` says
    whether ``runningNode`` is a shared (time-sliced or MPS) node, as a plain flag.
    """
    by_name = {facts["name"]: facts for _obj, facts in nodes if facts["source"] == "node"}
    domains: dict[str, set[str]] = {}
    placed: list[tuple[WorkloadFacts, NodeFacts]] = []
    for workload in workloads:
        facts = workload.facts
        facts["runningNode"] = {}
        facts["runningShared"] = False
        if facts["kind"] != "Pod" or not facts["gpu"]:
            continue
        node_name = facts["podSpec"].get("nodeName")
        status = workload.obj.body.get("status")
        phase = status.get("phase") if is_mapping(status) else None
        node = by_name.get(node_name) if isinstance(node_name, str) else None
        if node is None or phase in ("Succeeded", "Failed"):
            continue
        domain = trust_domain.get(facts["namespace"])  # None: the Namespace is not in scope
        if domain is not None and domain != "platform":
            domains.setdefault(node["name"], set()).add(domain)
        placed.append((facts, node))
    for facts, node in placed:
        facts["runningNode"] = {
            "name": node["name"],
            "sharing": node["sharing"],
            "shared": node["sharing"] in SHARED_MODES,
            "trustDomains": sorted(domains.get(node["name"], ())),
        }
        facts["runningShared"] = node["sharing"] in SHARED_MODES
