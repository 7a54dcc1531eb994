"""GPU nodes and node-pool declarations, reduced to one shape: the ``node`` facts.

Live clusters have Nodes; manifest repositories have declarations of the nodes to
come, which the providers of ``scanner.model.providers`` read (Karpenter ``NodePool``,
Config Connector ``ContainerNodePool``, Cluster API ``MachineDeployment``). Both become
the same facts (``scanner.model.facts.NodeFacts``) so pool rules do not care which
they see (docs/platform-model.md, "GPU pools, sharing and targeting").

``labels`` maps a label key to the list of values the node (or any node of the
declaration) may carry: one value for a Node, possibly several for a Karpenter
requirement ``In [a, b]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple

from scanner.config.values import Config
from scanner.inventory import KubeObject, as_mapping, join_path
from scanner.model.deviceplugin import Setup
from scanner.model.facts import NodeFacts
from scanner.model.index import ObjectIndex
from scanner.model.providers import DECLARE, gke
from scanner.model.providers.declaration import Declaration, items, string_lists, taint
from scanner.model.quantity import positive_count
from scanner.model.records import Taint
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
_NOT_A_PROFILE = ("all-disabled", "all-enabled", "all-balanced")
"""MIG manager configs named ``all-...`` that do not name one profile."""

DEVICE_PLUGIN_DEPLOY_LABEL: Final = "nvidia.com/gpu.deploy.device-plugin"
"""The GPU Operator deploys an operand on a node unless its ``nvidia.com/gpu.deploy.<operand>``
label is ``false``."""


def build_nodes(
    index: ObjectIndex, config: Config, setup: Setup, entries: Mapping[str, Mapping[str, Any]]
) -> list[tuple[KubeObject, NodeFacts]]:
    """Facts for every Node and node-pool declaration in the inventory."""
    found: list[tuple[KubeObject, NodeFacts]] = []
    for obj in index.kind("Node"):
        found.append((obj, _node(obj, config, setup, entries)))
    for provider, declare in DECLARE.items():
        for obj in index.kind(provider.kind):
            if obj.api_version.startswith(f"{provider.group}/"):
                facts = _declaration(obj, declare(obj, index), config, setup, entries)
                found.append((obj, facts))
    return found


def _declaration(
    obj: KubeObject,
    declared: Declaration,
    config: Config,
    setup: Setup,
    entries: Mapping[str, Mapping[str, Any]],
) -> NodeFacts:
    """The facts of a node-pool declaration, from what its provider read."""
    labels = declared.labels
    for key, values in declared.provider_labels.items():
        labels.setdefault(key, values)
    taints = declared.taints + declared.implicit_taints
    facts = _common(obj, "declaration", labels, taints, config, setup, entries)
    facts["gpu"] = declared.gpu or facts["gpuLabeled"]
    facts["gpuCount"] = max(declared.gpu_count, facts["gpuCount"])
    facts["identity"] = declared.identity
    facts["taintsPath"] = declared.taints_path
    facts["labelsPath"] = declared.labels_path
    facts["devicePluginConfigPath"] = join_path(declared.labels_path, DEVICE_PLUGIN_LABEL)
    facts["implicitTaints"] = declared.implicit_taints
    facts["gke"] = declared.gke
    if declared.sharing or declared.mig_profile:
        shared = declared.sharing.replace("time-sharing", "time-slicing")
        facts["sharing"] = _combine(mig=bool(declared.mig_profile), shared=shared)
        if declared.mig_profile:
            facts["migProfiles"] = [declared.mig_profile]
    if declared.replicas:  # settings its nodes boot with, not labels (Bottlerocket)
        facts["replicas"] = declared.replicas
    if declared.one_share:
        facts["oneShare"] = True
    if declared.rename_shared:
        facts["renameShared"] = True
        facts["advertises"] = ["nvidia.com/gpu.shared"]
    if facts["gke"]:
        facts["advertises"] = ["nvidia.com/gpu"]  # GKE exposes slices and shares as nvidia.com/gpu
    return facts


def _node(
    obj: KubeObject, config: Config, setup: Setup, entries: Mapping[str, Mapping[str, Any]]
) -> NodeFacts:
    meta = obj.metadata
    labels = string_lists(meta.get("labels"))
    status = as_mapping(obj.body.get("status"))
    allocatable = _gpu_counts(status.get("allocatable"))
    capacity = _gpu_counts(status.get("capacity"))
    taints = [taint(t) for t in items(as_mapping(obj.body.get("spec")).get("taints"))]
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
    facts["gke"] = gke.NODEPOOL_LABEL in labels
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


def _whole_gpus(facts: NodeFacts, observed: Mapping[str, int]) -> int:
    """The GPUs a Node's status shows: ``nvidia.com/gpu`` (or its ``.shared`` name),
    once per GPU: a time-sliced or MPS node advertises each GPU once per replica. Never
    the slices of the mixed strategy (``nvidia.com/mig-*``). Under the single strategy
    every ``nvidia.com/gpu`` is a MIG device, and GFD's ``nvidia.com/gpu.count`` counts
    those too: there the count is of MIG devices, as both say."""
    advertised = max(observed.get(WHOLE_GPU, 0), observed.get(f"{WHOLE_GPU}.shared", 0))
    replicas = facts["replicas"]
    return advertised // replicas if replicas > 1 else advertised


WHOLE_GPU: Final = "nvidia.com/gpu"
UNKNOWN_SHARING: Final = "unknown"
"""The sharing of a node whose device-plugin config is not in scope."""
_SHARING: Final = ("time-slicing", "mps")


def _common(
    obj: KubeObject,
    source: str,
    labels: dict[str, list[str]],
    taints: list[Taint],
    config: Config,
    setup: Setup,
    entries: Mapping[str, Mapping[str, Any]],
    observed: Mapping[str, int] | None = None,
) -> NodeFacts:
    """Facts a Node and a declaration share. ``observed``: the GPU resources a Node's
    status shows, name -> count (None when it shows no status)."""
    first = _Labels(labels).first
    pool_label = next((key for key in config.pool_labels if key in labels), "")
    gpu_labeled = any(first(key) == "true" for key in GPU_LABELS_TRUE) or any(
        key in labels for key in GPU_LABELS_ANY
    )
    config_key = first(DEVICE_PLUGIN_LABEL)
    entry = entries.get(config_key or setup.default_key)
    mig = _mig(first, observed, setup, entry)
    shared = _shared(first, mig.strategy, entry) or _unknown(config_key or setup.default_key, entry)
    gke_sharing = first("cloud.google.com/gke-gpu-sharing-strategy")
    # Only the MIG manager's all-<profile> convention names a profile; any other
    # config (all-balanced, a site's own five-1g-one-2g) leaves the profiles unknown.
    # Layouts tell MIG configs apart, whatever they name (PG202).
    mig_config = first("nvidia.com/mig.config")
    partition = first("cloud.google.com/gke-gpu-partition-size")
    profile = _config_profile(mig_config)
    profiles = [profile] if profile else []
    layouts = [profile or mig_config] if mig_config else []
    if partition:
        profiles.append(partition)
        layouts.append(partition)
    sharing = _combine(mig=mig.enabled, shared=shared)
    replicas = _replicas(first, shared, entry)
    # GKE refuses more than one nvidia.com/gpu per container on a shared GPU node,
    # time-sharing or MPS ("at most 1 nvidia.com/gpu can be requested on GPU nodes").
    one_share = (
        shared == "mps"
        or bool(gke_sharing)
        or bool(entry and entry.get("failRequestsGreaterThanOne"))
    )
    # renameByDefault renames time-sliced and MPS replicas alike (<name>.shared).
    rename = bool(entry and entry.get("renameByDefault")) and shared in _SHARING
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
        "product": first("nvidia.com/gpu.product"),
        "gpuCount": positive_count(first("nvidia.com/gpu.count")),
        "replicas": replicas if shared in _SHARING else 0,
        "oneShare": shared in _SHARING and one_share,
        "sharing": sharing,
        "migStrategy": mig.strategy,
        "migConfig": mig_config,
        "migConfigState": first("nvidia.com/mig.config.state"),
        "migProfiles": profiles,
        "migLayouts": layouts,
        "resourceCounts": dict(observed or {}),
        "devicePluginConfig": config_key,
        "renameShared": rename,
        "advertises": sorted(
            {
                *_advertised(sharing, mig.strategy, profiles, rename),
                *(
                    _advertised(_combine(mig=True, shared=shared), mig.label, profiles, rename)
                    if mig.maybe
                    else ()
                ),
            }
        ),
        "identity": {},
    }


class _Labels(NamedTuple):
    labels: Mapping[str, list[str]]

    def first(self, key: str) -> str:
        """The (first) value of label ``key``, "" when there is none."""
        values = self.labels.get(key)
        return values[0] if values else ""


class _Mig(NamedTuple):
    enabled: bool
    maybe: bool
    """Not known to be MIG, but it may be: the rules that say a pod cannot run there
    take both whole GPUs and MIG slices."""
    strategy: str
    label: str
    """The ``nvidia.com/mig.strategy`` label."""


def _mig(
    first: Callable[[str], str],
    observed: Mapping[str, int] | None,
    setup: Setup,
    entry: Mapping[str, Any] | None,
) -> _Mig:
    """Whether the node partitions its GPUs with MIG, and under which strategy."""
    product = first("nvidia.com/gpu.product")
    mig_config = first("nvidia.com/mig.config")
    mig_label = first("nvidia.com/mig.strategy")
    observed_mig = any(name.startswith("nvidia.com/mig-") for name in observed or ())
    mig = (
        bool(mig_config and mig_config != "all-disabled")
        or "-MIG-" in product
        or bool(first("cloud.google.com/gke-gpu-partition-size"))
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
    # The GPU Operator passes ClusterPolicy's strategy to the plugin it runs as
    # MIG_STRATEGY, which the plugin takes over its config file's flags.migStrategy
    # (its precedence: flag, environment, file). A plugin the operator does not run
    # (devicePlugin disabled) follows its config file.
    strategy = (
        ("mixed" if observed_mig else "")  # only the mixed strategy advertises mig-*
        or mig_label
        or (setup.mig_strategy if setup.plugin_enabled else "")
        or (str(entry.get("migStrategy", "")) if entry else "")
        or setup.mig_strategy
    )
    if mig and strategy in ("", "none"):
        strategy = "single"
    if not mig:
        strategy = "none"
    return _Mig(mig, maybe_mig, strategy, mig_label)


def _shared(first: Callable[[str], str], mig_strategy: str, entry: Mapping[str, Any] | None) -> str:
    """How the node shares its GPUs: ``time-slicing``, ``mps`` or ""."""
    strategy_label = first("nvidia.com/gpu.sharing-strategy")
    gke_sharing = first("cloud.google.com/gke-gpu-sharing-strategy")
    if strategy_label in ("time-slicing", "mps"):
        return strategy_label
    if positive_count(first("nvidia.com/gpu.replicas")) > 1:
        return "time-slicing"
    if first("nvidia.com/gpu.product").endswith("-SHARED"):
        return "time-slicing"
    if gke_sharing:
        return "mps" if gke_sharing == "mps" else "time-slicing"
    if (
        entry is not None
        and entry.get("mode") in ("time-slicing", "mps")
        and _shares_here(entry, mig_strategy)
    ):
        return str(entry["mode"])
    return ""


def _unknown(selected_key: str, entry: Mapping[str, Any] | None) -> str:
    """``unknown`` when the node selects a device-plugin config the scan does not hold
    (its ConfigMap is not in scope, or lacks the key): how it shares is not known, and
    absence of evidence is not exclusive."""
    return UNKNOWN_SHARING if selected_key and entry is None else ""


def _replicas(first: Callable[[str], str], shared: str, entry: Mapping[str, Any] | None) -> int:
    """Replicas per GPU of a time-sliced or MPS node: GFD's label, else the largest the
    device-plugin config gives a whole-GPU resource, else GKE's clients per GPU (0:
    unknown). One container may take one replica only under MPS (the device plugin
    forces failRequestsGreaterThanOne), when the config sets that flag, or on GKE's
    shared GPUs."""
    replicas = positive_count(first("nvidia.com/gpu.replicas"))
    if shared and not replicas and entry is not None:
        replicas = max(
            (r["replicas"] for r in entry["resources"] if r["name"] in ("gpu", "nvidia.com/gpu")),
            default=0,
        )
    if shared and not replicas:
        replicas = positive_count(first("cloud.google.com/gke-max-shared-clients-per-gpu"))
    return replicas


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


def _gpu_counts(value: object) -> dict[str, int]:
    return {
        str(name): positive_count(count)
        for name, count in as_mapping(value).items()
        if isinstance(name, str) and GPU_RESOURCE.match(name)
    }
