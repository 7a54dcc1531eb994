"""The ``cluster`` subject: the cluster as a whole, exactly one per run.

Rules about something the cluster lacks (PG605: no admission policy enforces the
GPU pod floor) have no object to report on, so the model makes one up: a
``poolgate.io/v1alpha1`` ``Cluster`` named ``cluster`` whose URI is
``cluster://<context>/_cluster`` (``scanner.inventory.cluster_uri``), with
source type ``cluster`` and no file, like every live object. The name does not
carry the context, so a finding's fingerprint is the same whichever kubeconfig
context (or ``in-cluster``) read the cluster: baselines and drift survive a
renamed context. A ``scan`` of manifests has no context; its cluster is
``cluster://manifests/_cluster``.

Its variables, computed once:

* ``admission``: ``scanner.model.admission``;
* ``gpuWorkloads``: ``count``, the objects in scope with a GPU pod template
  (``workload.gpu``) that are not controlled (a Deployment counts once, not with its
  ReplicaSet and every replica), and ``names``, the first ten of their ``namespace/Kind/name``
  in sorted order (``default`` for a manifest without a namespace, as
  ``workload.namespace`` says), as ``ns.gpuWorkloads`` has them per namespace.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scanner.config.values import Config
from scanner.inventory import LIVE, KubeObject, LineMap, Origin, cluster_uri
from scanner.model.admission import admission_facts
from scanner.model.index import ObjectIndex
from scanner.model.namespaces import NAME_LIMIT
from scanner.model.workloads import Workload

API_VERSION = "poolgate.io/v1alpha1"
KIND = "Cluster"
NAME = "cluster"
MANIFESTS = "manifests"
"""The context of a ``scan``: the cluster is what the manifests describe."""


@dataclass(frozen=True, slots=True)
class ClusterScope:
    """What a run knows about the cluster it reads."""

    context: str = MANIFESTS
    """The kubeconfig context (``in-cluster`` inside a pod), or ``manifests``."""
    listed: frozenset[tuple[str, str]] | None = None
    """(group, kind) pairs an audit listed to the end, so a kind without objects is
    known to be empty; None when the run cannot tell (manifests, a ``kubectl`` dump)."""

    @property
    def uri(self) -> str:
        return cluster_uri(self.context)


def cluster_object(scope: ClusterScope) -> KubeObject:
    """The synthetic object cluster findings attach to (see the module docstring)."""
    body = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": NAME}}
    return KubeObject(body, Origin(scope.uri, line=0, column=0, source_type=LIVE), LineMap({}))


def cluster_variables(
    index: ObjectIndex, workloads: Sequence[Workload], config: Config, scope: ClusterScope
) -> dict[str, Any]:
    """The ``cluster`` subject's variables (see the module docstring)."""
    # One name per object (a RayCluster's head and worker templates are one workload),
    # from the facts: cheaper than each object's ref on a cluster of 100,000 GPU pods.
    gpu = {
        f"{facts['namespace']}/{facts['kind']}/{facts['name']}"
        for facts in (workload.facts for workload in workloads)
        if facts["gpu"] and not facts["controlled"]  # replicas count as their controller
    }
    return {
        "admission": admission_facts(index, config, scope.listed),
        "gpuWorkloads": {"count": len(gpu), "names": heapq.nsmallest(NAME_LIMIT, gpu)},
    }
