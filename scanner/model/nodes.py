"""GPU nodes and node-pool declarations, reduced to one shape: the ``node`` facts.

Live clusters have Nodes; manifest repositories have declarations of the nodes to
come (Karpenter ``NodePool``, Config Connector ``ContainerNodePool``, Cluster API
``MachineDeployment``). Both become the same facts so pool rules do not care which
they see (RULES.md, "GPU node", "Node-pool declarations", "Sharing mode").

``labels`` maps a label key to the list of values the node (or any node of the
declaration) may carry: one value for a Node, possibly several for a Karpenter
requirement ``In [a, b]``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from scanner.config.values import Config
from scanner.inventory import KubeObject, as_mapping, join_path
from scanner.model.deviceplugin import Setup
from scanner.model.index import ObjectIndex
from scanner.model.quantity import positive_count
from scanner.model.selectors import label_value
from scanner.model.workloads import GPU_RESOURCE

GPU_LABELS_TRUE = (
    "nvidia.com/gpu.present",
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
)
GPU_LABELS_ANY = (
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.count",
    "cloud.google.com/gke-accelerator",
    "kubernetes.azure.com/accelerator",
    "k8s.amazonaws.com/accelerator",
)
DEVICE_PLUGIN_LABEL = "nvidia.com/device-plugin.config"
_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
    "NO_EXECUTE": "NoExecute",
}
_MIG_PROFILE = re.compile(r"^nvidia\.com/mig-(.+?)(?:\.shared)?$")
_NOT_A_PROFILE = ("all-disabled", "all-enabled", "all-balanced")
"""MIG manager configs named ``all-...`` that do not name one profile."""

KARPENTER_NODEPOOL = ("NodePool", "karpenter.sh/")
GKE_NODEPOOL = ("ContainerNodePool", "container.cnrm.cloud.google.com/")
GKE_NODEPOOL_LABEL: Final = "cloud.google.com/gke-nodepool"
DEVICE_PLUGIN_DEPLOY_LABEL: Final = "nvidia.com/gpu.deploy.device-plugin"
"""The GPU Operator deploys an operand on a node unless its ``nvidia.com/gpu.deploy.<operand>``
label is ``false``."""
CAPI_MACHINEDEPLOYMENT = ("MachineDeployment", "cluster.x-k8s.io/")


def build_nodes(
    index: ObjectIndex, config: Config, setup: Setup, entries: Mapping[str, Mapping[str, Any]]
) -> list[tuple[KubeObject, dict[str, Any]]]:
    """Facts for every Node and node-pool declaration in the inventory."""
    found: list[tuple[KubeObject, dict[str, Any]]] = []
    for obj in index.kind("Node"):
        found.append((obj, _node(obj, config, setup, entries)))
    for kind, group in (KARPENTER_NODEPOOL, GKE_NODEPOOL, CAPI_MACHINEDEPLOYMENT):
        for obj in index.kind(kind):
            if obj.api_version.startswith(group):
                found.append((obj, _declaration(obj, index, config, setup, entries)))
    return found


AWS_NVIDIA_FAMILIES: Final = frozenset(
    {
        *("p2", "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6e-gb200"),
        *("g3", "g3s", "g4dn", "g5", "g5g", "g6", "g6e", "g6f", "gr6", "gr6f"),
    }
)
"""EC2 instance families with NVIDIA GPUs (not g4ad: AMD; not inf, trn, dl: other
accelerators). Karpenter's own GPU examples select them by family."""


def _nvidia_instances(key: str, values: Sequence[str]) -> bool:
    """Whether a Karpenter requirement ``key In values`` admits only EC2 instances with
    NVIDIA GPUs: families (``g5``), types (``p4d.24xlarge``), or the ``p`` category."""
    if not values:
        return False
    if key == "karpenter.k8s.aws/instance-family":
        return all(value in AWS_NVIDIA_FAMILIES for value in values)
    if key == "node.kubernetes.io/instance-type":
        return all(value.partition(".")[0] in AWS_NVIDIA_FAMILIES for value in values)
    if key == "karpenter.k8s.aws/instance-category":
        return all(value == "p" for value in values)
    return False


def _node(
    obj: KubeObject, config: Config, setup: Setup, entries: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    meta = obj.metadata
    labels = {str(k): [label_value(v)] for k, v in as_mapping(meta.get("labels")).items()}
    status = as_mapping(obj.body.get("status"))
    allocatable = _gpu_counts(status.get("allocatable"))
    capacity = _gpu_counts(status.get("capacity"))
    taints = [_taint(t) for t in _list(as_mapping(obj.body.get("spec")).get("taints"))]
    status_known = "allocatable" in status or "capacity" in status
    observed: dict[str, int] | None = None
    if status_known:
        observed = {}
        for name in sorted({*allocatable, *capacity}):
            count = max(allocatable.get(name, 0), capacity.get(name, 0))
            if count > 0:
                observed[name] = count
    facts = _common(obj, "node", labels, taints, config, setup, entries, observed)
    facts["allocatable"] = allocatable
    facts["capacity"] = capacity
    facts["statusKnown"] = status_known
    facts["gpu"] = bool(allocatable or capacity) or facts["gpuLabeled"]
    # A GKE node (its node pool label says so): GKE runs the ExtendedResourceToleration
    # admission plugin, which tolerates its nvidia.com/gpu taint for GPU pods.
    facts["gke"] = GKE_NODEPOOL_LABEL in labels
    # No device plugin meant to run here: the ClusterPolicy turns it off (NVIDIA's DRA
    # driver publishes the GPUs instead), or the GPU Operator's per-node operand label.
    facts["devicePluginDisabled"] = not setup.plugin_enabled or (
        labels.get(DEVICE_PLUGIN_DEPLOY_LABEL) == ["false"]
    )
    if facts["statusKnown"]:
        facts["advertises"] = sorted(name for name, count in allocatable.items() if count > 0)
    facts["gpuCount"] = max(_whole_gpus(facts, observed or {}), facts["gpuCount"])
    facts["taintsPath"] = "spec.taints"
    facts["labelsPath"] = "metadata.labels"
    facts["devicePluginConfigPath"] = join_path("metadata.labels", DEVICE_PLUGIN_LABEL)
    return facts


def _whole_gpus(facts: Mapping[str, Any], observed: Mapping[str, int]) -> int:
    """The GPUs a Node's status shows: ``nvidia.com/gpu`` (or its ``.shared`` name),
    once per GPU: a time-sliced or MPS node advertises each GPU once per replica. Never
    the slices of the mixed strategy (``nvidia.com/mig-*``). Under the single strategy
    every ``nvidia.com/gpu`` is a MIG device, and GFD's ``nvidia.com/gpu.count`` counts
    those too: there the count is of MIG devices, as both say."""
    advertised = max(observed.get(WHOLE_GPU, 0), observed.get(f"{WHOLE_GPU}.shared", 0))
    replicas = facts["replicas"]
    return advertised // replicas if replicas > 1 else advertised


WHOLE_GPU: Final = "nvidia.com/gpu"


def _declaration(
    obj: KubeObject,
    index: ObjectIndex,
    config: Config,
    setup: Setup,
    entries: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    spec = as_mapping(obj.body.get("spec"))
    identity: dict[str, Any] = {
        "provider": "",
        "known": False,
        "metadataMode": "",
        "hopLimit": 0,
        "httpTokens": "",
        "tokensPath": "",
        "broadScopes": False,
        "path": "",
        "scopesPath": "",
        "ref": "",
    }
    gpu = False
    gpu_count = 0
    extra: dict[str, list[str]] = {}
    implicit_taints: list[dict[str, str]] = []
    sharing_hint = ""
    mig_profile = ""
    if obj.kind == "NodePool":
        template = as_mapping(spec.get("template"))
        labels = _string_lists(as_mapping(template.get("metadata")).get("labels"))
        taints = [_taint(t) for t in _list(as_mapping(template.get("spec")).get("taints"))]
        taints_path = "spec.template.spec.taints"
        labels_path = "spec.template.metadata.labels"
        extra["karpenter.sh/nodepool"] = [obj.name]
        for requirement in _list(as_mapping(template.get("spec")).get("requirements")):
            requirement = as_mapping(requirement)
            key, operator = _text(requirement.get("key")), requirement.get("operator")
            values = [label_value(v) for v in _list(requirement.get("values"))]
            if operator == "In" and key:
                extra.setdefault(key, values)
            if key == "karpenter.k8s.aws/instance-gpu-count":
                if operator == "Gt" and values:  # more than N GPUs: at least one
                    gpu = True
                elif operator == "In" and any(positive_count(v) > 0 for v in values):
                    gpu = True
                    gpu_count = max(positive_count(v) for v in values)
            if key == "karpenter.k8s.aws/instance-gpu-name" and operator in ("In", "Exists"):
                gpu = True
            if (
                key == "karpenter.k8s.aws/instance-gpu-manufacturer"
                and operator == "In"
                and "nvidia" in values
            ):
                gpu = True
            if operator == "In" and _nvidia_instances(key, values):
                gpu = True
        limits = as_mapping(spec.get("limits"))
        if any(isinstance(k, str) and GPU_RESOURCE.match(k) for k in limits):
            gpu = True
        node_class = _text(
            as_mapping(as_mapping(template.get("spec")).get("nodeClassRef")).get("name")
        )
        ec2 = index.get("EC2NodeClass", "", node_class) if node_class else None
        identity["provider"] = "aws"
        if ec2 is not None:
            options = as_mapping(as_mapping(ec2.body.get("spec")).get("metadataOptions"))
            hop = options.get("httpPutResponseHopLimit")
            identity["hopLimit"] = hop if isinstance(hop, int) and not isinstance(hop, bool) else 1
            identity["ref"] = ec2.ref.logical_name
            identity["path"] = (
                "spec.metadataOptions.httpPutResponseHopLimit"
                if "httpPutResponseHopLimit" in options
                else "spec"
            )
            # Karpenter's default is required (IMDSv2 only); optional keeps IMDSv1,
            # which the hop limit does not guard (it limits the token's PUT response).
            tokens = options.get("httpTokens")
            identity["httpTokens"] = tokens if isinstance(tokens, str) and tokens else "required"
            identity["tokensPath"] = (
                "spec.metadataOptions.httpTokens" if "httpTokens" in options else "spec"
            )
            # httpEndpoint disabled: nothing on the node reaches the metadata service,
            # whatever the hop limit and tokens say (AWS InstanceMetadataOptions).
            identity["endpoint"] = "disabled" if options.get("httpEndpoint") == "disabled" else ""
            identity["known"] = True
        else:
            identity["known"] = False
    elif obj.kind == "ContainerNodePool":
        node_config = as_mapping(spec.get("nodeConfig"))
        labels = _string_lists(node_config.get("labels"))
        taints = [
            {
                "key": _text(t.get("key")),
                "value": label_value(t.get("value")),
                "effect": _EFFECTS.get(_text(t.get("effect")), _text(t.get("effect"))),
            }
            for t in map(as_mapping, _list(node_config.get("taint")))
        ]
        taints_path = "spec.nodeConfig.taint"
        labels_path = "spec.nodeConfig.labels"
        # Config Connector names the GKE node pool spec.resourceID when set.
        resource_id = spec.get("resourceID")
        pool_name = resource_id if isinstance(resource_id, str) and resource_id else obj.name
        extra["cloud.google.com/gke-nodepool"] = [pool_name]
        accelerators = [as_mapping(a) for a in _list(node_config.get("guestAccelerator"))]
        if accelerators:
            gpu = True
            first = accelerators[0]
            gpu_count = max(positive_count(a.get("count")) for a in accelerators)
            extra["cloud.google.com/gke-accelerator"] = [_text(first.get("type"))]
            mig_profile = _text(first.get("gpuPartitionSize"))
            if mig_profile:
                extra["cloud.google.com/gke-gpu-partition-size"] = [mig_profile]
            sharing = as_mapping(first.get("gpuSharingConfig"))
            strategy = _text(sharing.get("gpuSharingStrategy"))
            if strategy:
                sharing_hint = {"TIME_SHARING": "time-sharing", "MPS": "mps"}.get(
                    strategy, strategy.lower()
                )
                extra["cloud.google.com/gke-gpu-sharing-strategy"] = [sharing_hint]
                clients = sharing.get("maxSharedClientsPerGpu")
                if clients is not None:
                    key = "cloud.google.com/gke-max-shared-clients-per-gpu"
                    extra[key] = [label_value(clients)]
            # GKE taints GPU node pools nvidia.com/gpu=present:NoSchedule itself.
            implicit_taints.append(
                {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
            )
        metadata_config = as_mapping(node_config.get("workloadMetadataConfig"))
        scopes = [_text(s) for s in _list(node_config.get("oauthScopes"))]
        identity.update(
            provider="gcp",
            known=True,
            metadataMode=_text(metadata_config.get("mode")),
            broadScopes=any(s.endswith("/cloud-platform") or s == "cloud-platform" for s in scopes),
            path="spec.nodeConfig.workloadMetadataConfig.mode"
            if "mode" in metadata_config
            else "spec.nodeConfig",
            scopesPath="spec.nodeConfig.oauthScopes",
        )
    else:  # Cluster API MachineDeployment
        template = as_mapping(spec.get("template"))
        labels = _string_lists(as_mapping(template.get("metadata")).get("labels"))
        taints = [_taint(t) for t in _list(as_mapping(template.get("spec")).get("taints"))]
        taints_path = "spec.template.spec.taints"
        labels_path = "spec.template.metadata.labels"
        extra["cluster.x-k8s.io/deployment-name"] = [obj.name]
        annotations = as_mapping(obj.metadata.get("annotations"))
        autoscaler = positive_count(
            annotations.get("capacity.cluster-autoscaler.kubernetes.io/gpu-count")
        )
        if autoscaler:
            gpu, gpu_count = True, autoscaler
    for key, values in extra.items():
        labels.setdefault(key, values)
    facts = _common(obj, "declaration", labels, taints + implicit_taints, config, setup, entries)
    facts["gpu"] = gpu or facts["gpuLabeled"]
    facts["gpuCount"] = max(gpu_count, facts["gpuCount"])
    facts["identity"] = identity
    facts["taintsPath"] = taints_path
    facts["labelsPath"] = labels_path
    facts["devicePluginConfigPath"] = join_path(labels_path, DEVICE_PLUGIN_LABEL)
    facts["implicitTaints"] = implicit_taints
    facts["gke"] = obj.kind == "ContainerNodePool"
    if sharing_hint or mig_profile:
        facts["sharing"] = _combine(
            mig=bool(mig_profile), shared=sharing_hint.replace("time-sharing", "time-slicing")
        )
        if mig_profile:
            facts["migProfiles"] = [mig_profile]
    if facts["gke"]:
        facts["advertises"] = ["nvidia.com/gpu"]  # GKE exposes slices and shares as nvidia.com/gpu
    return facts


def _common(
    obj: KubeObject,
    source: str,
    labels: dict[str, list[str]],
    taints: list[dict[str, str]],
    config: Config,
    setup: Setup,
    entries: Mapping[str, Mapping[str, Any]],
    observed: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Facts a Node and a declaration share. ``observed``: the GPU resources a Node's
    status shows, name -> count (None when it shows no status)."""

    def first(key: str) -> str:
        values = labels.get(key)
        return values[0] if values else ""

    pool_label = next((key for key in config.pool_labels if key in labels), "")
    gpu_labeled = any(first(key) == "true" for key in GPU_LABELS_TRUE) or any(
        key in labels for key in GPU_LABELS_ANY
    )
    config_key = first(DEVICE_PLUGIN_LABEL)
    entry = entries.get(config_key or setup.default_key)
    product = first("nvidia.com/gpu.product")
    mig_config = first("nvidia.com/mig.config")
    partition = first("cloud.google.com/gke-gpu-partition-size")
    mig_label = first("nvidia.com/mig.strategy")
    observed_mig = any(name.startswith("nvidia.com/mig-") for name in observed or ())
    mig = (
        bool(mig_config and mig_config != "all-disabled")
        or "-MIG-" in product
        or bool(partition)
        or observed_mig
    )
    # GFD labels every GPU node with the cluster's MIG strategy, MIG-enabled or not
    # (k8s-device-plugin internal/lm/mig-strategy.go). Alone, the label leaves MIG
    # open: such a node may advertise whole GPUs or MIG slices, so the rules that
    # say a pod cannot run there take both (the node's sharing mode stays what the
    # other signals say). Whole GPUs in its status, or mig.config: all-disabled,
    # settle it.
    whole_gpus_seen = bool(observed) and not observed_mig and "-MIG-" not in product
    maybe_mig = (
        not mig
        and mig_label in ("single", "mixed")
        and not whole_gpus_seen
        and mig_config != "all-disabled"
    )
    strategy_label = first("nvidia.com/gpu.sharing-strategy")
    replicas = positive_count(first("nvidia.com/gpu.replicas"))
    gke_sharing = first("cloud.google.com/gke-gpu-sharing-strategy")
    # The GPU Operator passes ClusterPolicy's strategy to the plugin it runs as
    # MIG_STRATEGY, which the plugin takes over its config file's flags.migStrategy
    # (its precedence: flag, environment, file). A plugin the operator does not run
    # (devicePlugin disabled) follows its config file.
    mig_strategy = (
        ("mixed" if observed_mig else "")  # only the mixed strategy advertises mig-*
        or mig_label
        or (setup.mig_strategy if setup.plugin_enabled else "")
        or (str(entry.get("migStrategy", "")) if entry else "")
        or setup.mig_strategy
    )
    if mig and mig_strategy in ("", "none"):
        mig_strategy = "single"
    if not mig:
        mig_strategy = "none"
    shared = ""
    if strategy_label in ("time-slicing", "mps"):
        shared = strategy_label
    elif replicas > 1 or product.endswith("-SHARED"):
        shared = "time-slicing"
    elif gke_sharing:
        shared = "mps" if gke_sharing == "mps" else "time-slicing"
    elif (
        entry is not None
        and entry.get("mode") in ("time-slicing", "mps")
        and _shares_here(entry, mig_strategy)
    ):
        shared = str(entry["mode"])
    # Only the MIG manager's all-<profile> convention names a profile; any other
    # config (all-balanced, a site's own five-1g-one-2g) leaves the profiles unknown.
    # Layouts tell MIG configs apart, whatever they name (PG202).
    profile = _config_profile(mig_config)
    profiles = [profile] if profile else []
    layouts = [profile or mig_config] if mig_config else []
    if partition:
        profiles.append(partition)
        layouts.append(partition)
    sharing = _combine(mig=mig, shared=shared)
    # Replicas per GPU of a time-sliced or MPS node: GFD's label, else the largest
    # the device-plugin config gives a whole-GPU resource, else GKE's clients per GPU
    # (0: unknown). One container may take one replica only under MPS (the device
    # plugin forces failRequestsGreaterThanOne), when the config sets that flag, or on
    # GKE's shared GPUs.
    if shared and not replicas and entry is not None:
        replicas = max(
            (r["replicas"] for r in entry["resources"] if r["name"] in ("gpu", "nvidia.com/gpu")),
            default=0,
        )
    if shared and not replicas:
        replicas = positive_count(first("cloud.google.com/gke-max-shared-clients-per-gpu"))
    # GKE refuses more than one nvidia.com/gpu per container on a shared GPU node,
    # time-sharing or MPS ("at most 1 nvidia.com/gpu can be requested on GPU nodes").
    one_share = (
        shared == "mps"
        or bool(gke_sharing)
        or bool(entry and entry.get("failRequestsGreaterThanOne"))
    )
    # renameByDefault renames time-sliced and MPS replicas alike (<name>.shared).
    rename = bool(entry and entry.get("renameByDefault")) and shared in ("time-slicing", "mps")
    return {
        "kind": obj.kind,
        "name": obj.name,
        "source": source,
        "labels": labels,
        "taints": taints,
        "gpuLabeled": gpu_labeled,
        "gpu": gpu_labeled,
        "pool": first(pool_label) if pool_label else "",
        "poolLabel": pool_label,
        "sku": first(config.sku_label),
        "product": product,
        "gpuCount": positive_count(first("nvidia.com/gpu.count")),
        "replicas": replicas if shared else 0,
        "oneShare": bool(shared) and one_share,
        "sharing": sharing,
        "migStrategy": mig_strategy,
        "migConfig": mig_config,
        "migConfigState": first("nvidia.com/mig.config.state"),
        "migProfiles": profiles,
        "migLayouts": layouts,
        "resourceCounts": dict(observed or {}),
        "devicePluginConfig": config_key,
        "renameShared": rename,
        "advertises": sorted(
            {
                *_advertised(sharing, mig_strategy, profiles, rename),
                *(
                    _advertised(_combine(mig=True, shared=shared), mig_label, profiles, rename)
                    if maybe_mig
                    else ()
                ),
            }
        ),
        "identity": {},
    }


def _combine(*, mig: bool, shared: str) -> str:
    if mig and shared:
        return f"mig+{shared}"
    if mig:
        return "mig"
    return shared or "exclusive"


def _config_profile(mig_config: str) -> str:
    """The profile an ``nvidia.com/mig.config`` of the form ``all-<profile>`` names, as
    the device plugin spells it in ``nvidia.com/mig-<profile>`` (mig-parted's config
    names already write ``+`` as ``.``: ``all-1g.10gb.me``); "" for any other config."""
    if not mig_config.startswith("all-") or mig_config in _NOT_A_PROFILE:
        return ""
    return mig_config[len("all-") :].replace("+", ".")


def _shares_here(entry: Mapping[str, Any], mig_strategy: str) -> bool:
    """Whether the config shares a resource a node with ``mig_strategy`` advertises:
    the device plugin replicates only the resources a config lists. Whole GPUs
    (``nvidia.com/gpu``) on a node without MIG or under the single strategy (which
    advertises its slices as ``nvidia.com/gpu``); MIG slices under the mixed one,
    whose partitioned GPUs advertise no ``nvidia.com/gpu``."""
    names = {str(r["name"]) for r in entry["resources"] if r["replicas"] >= 2}
    if mig_strategy == "mixed":
        return any(name.startswith(("nvidia.com/mig-", "mig-")) for name in names)
    return bool(names & {"gpu", "nvidia.com/gpu"})


def _advertised(sharing: str, mig_strategy: str, profiles: list[str], rename: bool) -> list[str]:
    """Resource names a node advertises when its status is not known (declarations).
    Mixed-strategy MIG with unknown profiles advertises some ``nvidia.com/mig-*``."""
    suffix = ".shared" if rename else ""
    if "mig" in sharing and mig_strategy == "mixed":
        if profiles:
            return sorted(f"nvidia.com/mig-{profile}{suffix}" for profile in profiles)
        return [f"nvidia.com/mig-*{suffix}"]
    return [f"nvidia.com/gpu{suffix}"]


def mig_profile_of(resource: str) -> str:
    match = _MIG_PROFILE.match(resource)
    return match.group(1) if match else ""


def _gpu_counts(value: object) -> dict[str, int]:
    return {
        str(name): positive_count(count)
        for name, count in as_mapping(value).items()
        if isinstance(name, str) and GPU_RESOURCE.match(name)
    }


def _taint(value: object) -> dict[str, str]:
    taint = as_mapping(value)
    return {
        "key": _text(taint.get("key")),
        "value": label_value(taint.get("value")),
        "effect": _text(taint.get("effect")),
    }


def _string_lists(value: object) -> dict[str, list[str]]:
    return {str(k): [label_value(v)] for k, v in as_mapping(value).items()}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
