"""GKE node pools declared through Config Connector: ``ContainerNodePool``
(``container.cnrm.cloud.google.com``).

Labels are ``spec.nodeConfig.labels``, taints ``spec.nodeConfig.taint`` (effects
written ``NO_SCHEDULE``, ...). A ``guestAccelerator`` gives its nodes GPUs, with GKE's
own node labels for the accelerator, MIG partitions and GPU sharing, and GKE's own
``nvidia.com/gpu=present:NoSchedule`` taint. The node identity is the pool's metadata
mode and OAuth scopes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from scanner.inventory import KubeObject, as_mapping
from scanner.model.index import ObjectIndex
from scanner.model.providers.declaration import Declaration, items, string_lists, text
from scanner.model.quantity import positive_count
from scanner.model.selectors import label_value

NODEPOOL_LABEL: Final = "cloud.google.com/gke-nodepool"
_EFFECTS: Final = {
    "NO_SCHEDULE": "NoSchedule",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
    "NO_EXECUTE": "NoExecute",
}


def declare(obj: KubeObject, index: ObjectIndex) -> Declaration:
    spec = as_mapping(obj.body.get("spec"))
    node_config = as_mapping(spec.get("nodeConfig"))
    found = Declaration(
        labels=string_lists(node_config.get("labels")),
        labels_path="spec.nodeConfig.labels",
        taints=[
            {
                "key": text(t.get("key")),
                "value": label_value(t.get("value")),
                "effect": _EFFECTS.get(text(t.get("effect")), text(t.get("effect"))),
            }
            for t in map(as_mapping, items(node_config.get("taint")))
        ],
        taints_path="spec.nodeConfig.taint",
        gke=True,
    )
    # Config Connector names the GKE node pool spec.resourceID when set.
    resource_id = spec.get("resourceID")
    pool_name = resource_id if isinstance(resource_id, str) and resource_id else obj.name
    found.provider_labels[NODEPOOL_LABEL] = [pool_name]
    accelerators = [as_mapping(a) for a in items(node_config.get("guestAccelerator"))]
    if accelerators:
        _accelerators(found, accelerators)
    metadata_config = as_mapping(node_config.get("workloadMetadataConfig"))
    scopes = [text(s) for s in items(node_config.get("oauthScopes"))]
    found.identity.update(
        provider="gcp",
        known=True,
        metadataMode=text(metadata_config.get("mode")),
        broadScopes=any(s.endswith("/cloud-platform") or s == "cloud-platform" for s in scopes),
        path="spec.nodeConfig.workloadMetadataConfig.mode"
        if "mode" in metadata_config
        else "spec.nodeConfig",
        scopesPath="spec.nodeConfig.oauthScopes",
    )
    return found


def _accelerators(found: Declaration, accelerators: list[Mapping[str, Any]]) -> None:
    """GPUs, and the labels GKE gives their nodes: the first accelerator's type, and the
    MIG partition size and sharing strategy of the first accelerator that sets one
    (every accelerator of a node pool is read: a sharing config on the second one
    shares the pool's GPUs as well)."""
    found.gpu = True
    first = accelerators[0]
    found.gpu_count = max(positive_count(a.get("count")) for a in accelerators)
    found.provider_labels["cloud.google.com/gke-accelerator"] = [text(first.get("type"))]
    found.mig_profile = next(
        (p for p in (text(a.get("gpuPartitionSize")) for a in accelerators) if p), ""
    )
    if found.mig_profile:
        found.provider_labels["cloud.google.com/gke-gpu-partition-size"] = [found.mig_profile]
    sharing = next(
        (
            config
            for config in (as_mapping(a.get("gpuSharingConfig")) for a in accelerators)
            if text(config.get("gpuSharingStrategy"))
        ),
        {},
    )
    strategy = text(sharing.get("gpuSharingStrategy"))
    if strategy:
        found.sharing = {"TIME_SHARING": "time-sharing", "MPS": "mps"}.get(
            strategy, strategy.lower()
        )
        found.provider_labels["cloud.google.com/gke-gpu-sharing-strategy"] = [found.sharing]
        clients = sharing.get("maxSharedClientsPerGpu")
        if clients is not None:
            key = "cloud.google.com/gke-max-shared-clients-per-gpu"
            found.provider_labels[key] = [label_value(clients)]
    # GKE taints GPU node pools nvidia.com/gpu=present:NoSchedule itself.
    found.implicit_taints.append(
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    )
