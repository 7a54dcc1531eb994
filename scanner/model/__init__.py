"""Platform facts derived once, in Python, so rules stay short CEL expressions.

Each derived fact is a plain value (dicts, lists, str, int, bool) that both CEL
engines can read. ``scanner.model.facts`` declares every fact (docs/facts.md lists
them); docs/platform-model.md defines the platform's terms.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from scanner.config.values import Config
from scanner.inventory import InvalidDocument, Inventory, KubeObject, SourceWarning
from scanner.model import deviceplugin
from scanner.model.cluster import ClusterScope, cluster_object, cluster_variables
from scanner.model.dra import extended_resources
from scanner.model.facts import ClusterFacts, NamespaceFacts, NodeFacts, SharingConfigFacts
from scanner.model.gpuoperator import operator_facts
from scanner.model.identity import attach_service_accounts
from scanner.model.index import ObjectIndex
from scanner.model.namespaces import build_namespaces
from scanner.model.nodes import build_nodes
from scanner.model.podsecurity import attach_pod_security
from scanner.model.policy import attach_runtime_classes, attach_signatures
from scanner.model.pools import Pool, attach_targets, build_pools, other_nodes
from scanner.model.providers import bottlerocket
from scanner.model.queues import attach_queues
from scanner.model.rbac import rbac_facts
from scanner.model.running import attach_running
from scanner.model.unmodelled import unchecked_pod_specs
from scanner.model.workloads import Join, Workload, build_workloads

_NO_VARIABLES: Mapping[str, Any] = MappingProxyType({})


class Subject(NamedTuple):
    """What a rule is evaluated on: an object, plus the facts the model derived for it.

    ``variables`` are the CEL variables particular to this subject
    (``{"workload": {...}}``); the engine always binds ``object`` to ``obj.body``.
    (A tuple: a live audit makes one per object and per pod template, 236,000 for
    100,000 pods, and a frozen dataclass is slower to build.)
    """

    type: str
    obj: KubeObject
    variables: Mapping[str, Any] = _NO_VARIABLES
    complete: Callable[[], object] | None = None
    """Computes the rest of ``variables`` in place (a controlled workload's deferred
    facts, ``scanner.model.workloads``): the engine calls it before the first rule
    that may read them (``scanner.evaluate.optimize.projection``)."""


@dataclass(frozen=True, slots=True)
class Model:
    """The derived facts of one run."""

    objects: Sequence[KubeObject]
    workloads: Sequence[Workload]
    invalid: Sequence[InvalidDocument] = field(default_factory=list)
    """Documents the model found invalid (PG003: a pod spec that is not a mapping)."""
    nodes: Sequence[tuple[KubeObject, NodeFacts]] = ()
    """GPU-relevant facts of every Node and node-pool declaration (the ``node`` subject)."""
    pools: Sequence[Pool] = ()
    sharing_configs: Sequence[tuple[KubeObject, SharingConfigFacts]] = ()
    """Device-plugin ConfigMaps (the ``sharingConfig`` subject)."""
    cluster: ClusterFacts = field(default_factory=lambda: ClusterFacts())
    """Cluster-wide facts (the CEL variable ``cluster``)."""
    namespaces: Sequence[tuple[KubeObject, NamespaceFacts]] = ()
    """Namespace objects in scope and their facts (the ``namespace`` subject, CEL ``ns``)."""
    cluster_subject: tuple[KubeObject, dict[str, Any]] | None = None
    """The synthetic cluster object and its variables (the ``cluster`` subject,
    ``scanner.model.cluster``); None only for models built by hand."""
    unchecked: Sequence[SourceWarning] = ()
    """GPU requests and pod specs in objects of kinds poolgate does not model (an Argo
    Workflow, a Kubeflow TrainJob): not checked, and reported as such
    (``scanner.model.unmodelled``)."""
    unfollowed: Sequence[str] = ()
    """GPU workloads (``Kind namespace/name``) whose node selection may reach more GPU
    pools than poolgate follows (``scanner.model.pools.MAX_REACH``): their pools count
    as unknown, and the run is incomplete."""

    def subjects(self) -> dict[str, list[Subject]]:
        """Subject type -> subjects, as the engine consumes them."""
        return {
            "object": [Subject("object", obj) for obj in self.objects],
            "workload": [
                Subject(
                    "workload",
                    workload.obj,
                    {"workload": workload.facts},
                    None if workload.deferred is None else workload.complete,
                )
                for workload in self.workloads
            ],
            "node": [Subject("node", obj, {"node": facts}) for obj, facts in self.nodes],
            "pool": [Subject("pool", pool.obj, {"pool": pool.facts}) for pool in self.pools],
            "sharingConfig": [
                Subject("sharingConfig", obj, {"sharingConfig": facts})
                for obj, facts in self.sharing_configs
            ],
            "namespace": [
                Subject("namespace", obj, {"ns": facts}) for obj, facts in self.namespaces
            ],
            "cluster": [
                Subject("cluster", obj, variables)
                for obj, variables in ([self.cluster_subject] if self.cluster_subject else [])
            ],
        }


def build_model(
    inventory: Inventory,
    config: Config | None = None,
    scope: ClusterScope | None = None,
    *,
    read_yaml: deviceplugin.ReadYaml,
    defer: bool = True,
) -> Model:
    """Derive every fact once, in dependency order; joins use the index.

    ``scope`` names the cluster an audit read (default: a scan of manifests).
    ``read_yaml`` reads the YAML that objects hold (device-plugin configs in
    ConfigMaps): the run's YAML reader, ``scanner.sources.yaml.document.parse_plain``.
    With ``defer``, controlled workloads get the rest of their facts when a rule needs
    them (``scanner.model.workloads``); without it, every fact is computed now."""
    config = config or Config()
    scope = scope or ClusterScope()
    index = ObjectIndex(inventory.objects)
    later: list[Join] = []
    unfollowed: dict[str, None] = {}
    workloads, invalid = build_workloads(inventory.objects, index, later if defer else None)
    setup = deviceplugin.cluster_setup(index)
    sharing_configs = [
        (obj, deviceplugin.config_facts(obj, setup, read_yaml))
        for obj in deviceplugin.config_maps(index, setup, read_yaml)
    ]
    setup = deviceplugin.with_fallback(setup, [facts for _, facts in sharing_configs])
    entries = deviceplugin.entries_by_key([facts for _, facts in sharing_configs], setup)
    nodes = build_nodes(index, config, setup, entries)
    pools = build_pools(nodes)
    namespaces = build_namespaces(index, workloads, config)
    # Trust domains rest on namespace labels: only namespaces in scope have known ones
    # (operator namespaces are the platform whatever their labels).
    domains = {
        name: facts["trustDomain"]
        for name, facts in namespaces.facts.items()
        if facts["known"] or facts["operator"]
    }
    attach_running(workloads, nodes, domains)
    # The joins that need a workload's template facts; deferred workloads run them
    # in this order when they complete.
    later += [
        attach_queues(workloads, index),
        attach_targets(
            workloads,
            pools,
            config,
            domains,
            other_nodes(nodes),
            unfollowed,
            extended_resources(index),
        ),
        attach_service_accounts(workloads, index, config),
        attach_runtime_classes(workloads, index),
        attach_pod_security(workloads),
        attach_signatures(workloads, index, namespaces),
    ]
    return Model(
        objects=inventory.objects,
        workloads=workloads,
        invalid=invalid,
        nodes=nodes,
        pools=pools,
        sharing_configs=[*sharing_configs, *bottlerocket.sharing_configs(index)],
        cluster={
            "devicePlugin": deviceplugin.cluster_facts(setup, sharing_configs, nodes, entries),
            "poolsKnown": bool(pools),
            "gpuOperator": operator_facts(index),
            "rbac": _rbac(index, config, setup, sharing_configs),
        },
        namespaces=namespaces.subjects,
        cluster_subject=(
            cluster_object(scope),
            cluster_variables(index, workloads, config, scope),
        ),
        unchecked=unchecked_pod_specs(inventory.objects),
        unfollowed=list(unfollowed),
    )


def _rbac(
    index: ObjectIndex,
    config: Config,
    setup: deviceplugin.Setup,
    sharing_configs: Sequence[tuple[KubeObject, SharingConfigFacts]],
) -> dict[str, Any]:
    """``cluster.rbac``, with the ConfigMaps that steer the device stack."""
    operator_config_maps = [
        obj.name for obj in index.kind("ConfigMap") if obj.namespace in config.operator_namespaces
    ]
    stack = deviceplugin.stack_config_maps(
        setup, [obj for obj, _ in sharing_configs], operator_config_maps
    )
    return rbac_facts(index, config, stack)
