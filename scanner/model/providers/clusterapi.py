"""Cluster API ``MachineDeployment`` (``cluster.x-k8s.io``).

Labels are ``spec.template.metadata.labels``, taints ``spec.template.spec.taints``;
its nodes carry ``cluster.x-k8s.io/deployment-name``. Cluster API does not say what
hardware a machine has: the cluster autoscaler's
``capacity.cluster-autoscaler.kubernetes.io/gpu-count`` annotation does.
"""

from __future__ import annotations

from scanner.inventory import KubeObject, as_mapping
from scanner.model.index import ObjectIndex
from scanner.model.providers.declaration import Declaration, items, string_lists, taint
from scanner.model.quantity import positive_count


def declare(obj: KubeObject, index: ObjectIndex) -> Declaration:
    template = as_mapping(as_mapping(obj.body.get("spec")).get("template"))
    found = Declaration(
        labels=string_lists(as_mapping(template.get("metadata")).get("labels")),
        labels_path="spec.template.metadata.labels",
        taints=[taint(t) for t in items(as_mapping(template.get("spec")).get("taints"))],
        taints_path="spec.template.spec.taints",
        provider_labels={"cluster.x-k8s.io/deployment-name": [obj.name]},
    )
    annotations = as_mapping(obj.metadata.get("annotations"))
    autoscaler = positive_count(
        annotations.get("capacity.cluster-autoscaler.kubernetes.io/gpu-count")
    )
    if autoscaler:
        found.gpu, found.gpu_count = True, autoscaler
    return found
