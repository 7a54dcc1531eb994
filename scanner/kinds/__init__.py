"""Named kind sets, and where each workload kind keeps its pod templates.

Rules match on these names (``match.kinds``) and the model uses the extractors,
so no rule ever switches on kinds itself. Core kinds are recognised by kind
alone (as they always were); GPU workload CRDs also by API group, so an
unrelated CRD that happens to be called ``Rollout`` or ``PyTorchJob`` is not
misread as a pod template.

``scanner.kinds.resources`` is the table of API resources poolgate knows how to list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final, NamedTuple

from scanner.inventory import as_mapping, is_mapping, join_path
from scanner.kinds.resources import RESOURCES

POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "PodTemplate": ("template", "spec"),
}
"""Pod-template-bearing core kinds -> the keys leading to their pod spec."""

CONTAINER_FIELDS: tuple[tuple[str, str], ...] = (
    ("initContainers", "initContainer"),
    ("containers", "container"),
    ("ephemeralContainers", "ephemeralContainer"),
)
"""Pod spec list fields holding containers, with the type name the model exposes."""

KSERVE_PREDICTOR_CONTAINERS: tuple[str, ...] = (
    "model",
    "sklearn",
    "xgboost",
    "tensorflow",
    "pytorch",
    "triton",
    "onnx",
    "huggingface",
    "pmml",
    "lightgbm",
    "paddle",
)
"""KServe predictor fields that are one container each (``corev1.Container`` inlined):
the framework server KServe runs as ``kserve-container`` in the predictor pod."""

KSERVE_EXPLAINER_CONTAINERS: tuple[str, ...] = ("art", "alibi", "aix")
"""KServe explainer fields that are one container each (``alibi``/``aix`` in older releases)."""

KSERVE_ACCELERATOR_ANNOTATION = "serving.kserve.io/gke-accelerator"
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"

INLINE_CONTAINER_NAME = "kserve-container"
"""The name of an inline container that names none (KServe calls its framework
container ``kserve-container``)."""

Key = str | int


class PodTemplate(NamedTuple):
    """One pod template inside an object, as written.

    ``template`` names it among the object's templates: ``""`` when the object has
    only one (core kinds, Argo Rollout), else the replica type (``Worker``), the
    group (``headGroupSpec``, ``workerGroupSpecs[1]``) or the component
    (``predictor``). ``spec`` is the pod spec as written (possibly not a mapping:
    the model reports that as PG003); ``path`` is its field path.
    ``container_fields`` are pod-spec keys that hold one container inline (KServe).
    A named tuple: a live cluster has one per replica pod, and it is quicker to
    build than a frozen dataclass.
    """

    template: str
    spec: Any
    path: str
    metadata: Mapping[str, Any]
    container_fields: tuple[str, ...] = ()
    gpu_node_selector: tuple[tuple[str, str], ...] = ()
    """Node labels the operator's admission webhook adds to ``nodeSelector`` when a
    container asks for ``nvidia.com/gpu`` in ``limits`` (KServe's accelerator
    annotation)."""


Extractor = Callable[[Mapping[str, Any]], Iterable[PodTemplate]]
"""An object's body -> its pod templates, in document order."""


@dataclass(frozen=True, slots=True)
class WorkloadKind:
    """A pod-template-bearing kind: ``group`` is its API group, or None to accept any
    (core kinds keep being recognised by kind alone)."""

    kind: str
    group: str | None
    templates: Extractor = field(repr=False)


KUBERNETES_CLUSTER_SCOPED: Final = frozenset(
    {
        ("", "Namespace"),
        ("", "Node"),
        ("", "PersistentVolume"),
        ("", "ComponentStatus"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        ("storage.k8s.io", "StorageClass"),
        ("storage.k8s.io", "CSIDriver"),
        ("storage.k8s.io", "CSINode"),
        ("storage.k8s.io", "VolumeAttachment"),
        ("storage.k8s.io", "VolumeAttributesClass"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("apiregistration.k8s.io", "APIService"),
        ("scheduling.k8s.io", "PriorityClass"),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
        ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
        ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"),
        ("node.k8s.io", "RuntimeClass"),
        ("networking.k8s.io", "IngressClass"),
        ("networking.k8s.io", "IPAddress"),
        ("networking.k8s.io", "ServiceCIDR"),
        ("certificates.k8s.io", "CertificateSigningRequest"),
        ("certificates.k8s.io", "ClusterTrustBundle"),
        ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
        ("resource.k8s.io", "DeviceClass"),
        ("resource.k8s.io", "ResourceSlice"),
        ("nvidia.com", "NVIDIADriver"),
    }
)
"""(API group, kind) of Kubernetes' own cluster-scoped kinds, and of the cluster-scoped
CRDs poolgate knows without listing them."""

CLUSTER_SCOPED: Final = KUBERNETES_CLUSTER_SCOPED | {
    resource.key for resource in RESOURCES if not resource.namespaced
}
"""(API group, kind) of the cluster-scoped kinds poolgate knows: Kubernetes' own, and
the CRDs of ``scanner.kinds.resources``. Such an object has no namespace (the API
server drops a ``metadata.namespace`` on it). Other kinds, CRDs included, are taken
as namespaced."""


def api_group(api_version: str) -> str:
    """``apps/v1`` -> ``apps``; ``v1`` (core) -> ``""``."""
    group, slash, _ = api_version.rpartition("/")
    return group if slash else ""


def _at(node: Any, keys: tuple[Key, ...]) -> Any:
    """Follow ``keys`` (mapping keys and list indices); None when the way is broken."""
    for key in keys:
        if isinstance(key, int):
            if not isinstance(node, list) or key >= len(node):
                return None
            node = node[key]
        elif is_mapping(node):
            node = node.get(key)
        else:
            return None
    return node


def _path(keys: tuple[Key, ...]) -> str:
    path = ""
    for key in keys:
        path = join_path(path, key)
    return path


def _core(keys: tuple[str, ...]) -> Extractor:
    """Core kinds: one pod spec at ``keys``; its metadata is the template's (a Pod's own)."""

    path = _path(keys)  # static: computed once, not per object
    parents, last = keys[:-1], keys[-1]

    def extract(body: Mapping[str, Any]) -> Iterable[PodTemplate]:
        # Runs on every replica pod of a live cluster: a tuple, not a generator.
        parent = _at(body, parents) if parents else body
        if not is_mapping(parent):
            return ()
        meta = parent.get("metadata") if parents else body.get("metadata")
        return (PodTemplate("", parent.get(last), path, as_mapping(meta)),)

    return extract


def _template_at(
    body: Mapping[str, Any], keys: tuple[Key, ...], name: str
) -> Iterator[PodTemplate]:
    """A ``PodTemplateSpec`` at ``keys``: its ``spec`` and ``metadata``."""
    template = _at(body, keys)
    if isinstance(template, Mapping):
        yield PodTemplate(
            name, template.get("spec"), _path((*keys, "spec")), as_mapping(template.get("metadata"))
        )


def _replica_specs(field_name: str) -> Extractor:
    """Kubeflow training jobs: ``spec.<field>.<ReplicaType>.template`` per replica type."""

    def extract(body: Mapping[str, Any]) -> Iterator[PodTemplate]:
        specs = _at(body, ("spec", field_name))
        if not isinstance(specs, Mapping):
            return
        for replica_type in specs:
            if isinstance(replica_type, str):
                yield from _template_at(
                    body, ("spec", field_name, replica_type, "template"), replica_type
                )

    return extract


def _indexed(body: Mapping[str, Any], list_keys: tuple[Key, ...]) -> Iterator[tuple[int, str]]:
    """(index, ``field[index]``) for every item of the list at ``list_keys``."""
    items = _at(body, list_keys)
    if isinstance(items, list):
        name = str(list_keys[-1])
        for index in range(len(items)):
            yield index, f"{name}[{index}]"


def _ray_cluster_spec(body: Mapping[str, Any], prefix: tuple[Key, ...]) -> Iterator[PodTemplate]:
    yield from _template_at(body, (*prefix, "headGroupSpec", "template"), "headGroupSpec")
    for index, name in _indexed(body, (*prefix, "workerGroupSpecs")):
        yield from _template_at(body, (*prefix, "workerGroupSpecs", index, "template"), name)


def _ray_cluster(body: Mapping[str, Any]) -> Iterator[PodTemplate]:
    yield from _ray_cluster_spec(body, ("spec",))


def _ray_job(body: Mapping[str, Any]) -> Iterator[PodTemplate]:
    yield from _ray_cluster_spec(body, ("spec", "rayClusterSpec"))
    yield from _template_at(body, ("spec", "submitterPodTemplate"), "submitterPodTemplate")


def _ray_service(body: Mapping[str, Any]) -> Iterator[PodTemplate]:
    yield from _ray_cluster_spec(body, ("spec", "rayClusterConfig"))


def _jobset(body: Mapping[str, Any]) -> Iterator[PodTemplate]:
    for index, name in _indexed(body, ("spec", "replicatedJobs")):
        keys: tuple[Key, ...] = ("spec", "replicatedJobs", index, "template", "spec", "template")
        yield from _template_at(body, keys, name)


def _leader_worker_set(body: Mapping[str, Any]) -> Iterator[PodTemplate]:
    for name in ("leaderTemplate", "workerTemplate"):
        yield from _template_at(body, ("spec", "leaderWorkerTemplate", name), name)


def _inference_service(body: Mapping[str, Any]) -> Iterator[PodTemplate]:
    """KServe: each component (predictor, its multi-node workerSpec, transformer,
    explainer) *is* a pod spec with the pod's fields inlined; framework fields such
    as ``predictor.model`` are one container each. KServe copies the object's labels
    and annotations to the component pods, then the component's own ``labels`` and
    ``annotations``; its pod webhook turns the ``serving.kserve.io/gke-accelerator``
    annotation of a pod whose containers ask for ``nvidia.com/gpu`` into a
    nodeSelector on ``cloud.google.com/gke-accelerator``."""
    object_meta = as_mapping(body.get("metadata"))
    components: tuple[tuple[str, tuple[Key, ...], tuple[str, ...]], ...] = (
        ("predictor", ("spec", "predictor"), KSERVE_PREDICTOR_CONTAINERS),
        ("predictor.workerSpec", ("spec", "predictor", "workerSpec"), ()),
        ("transformer", ("spec", "transformer"), ()),
        ("explainer", ("spec", "explainer"), KSERVE_EXPLAINER_CONTAINERS),
    )
    for name, keys, container_fields in components:
        parent = _at(body, keys[:-1])
        if not isinstance(parent, Mapping) or parent.get(keys[-1]) is None:
            continue
        spec = parent[keys[-1]]
        own = as_mapping(spec)
        meta = {
            "labels": {**as_mapping(object_meta.get("labels")), **as_mapping(own.get("labels"))},
            "annotations": {
                **as_mapping(object_meta.get("annotations")),
                **as_mapping(own.get("annotations")),
            },
        }
        accelerator = meta["annotations"].get(KSERVE_ACCELERATOR_ANNOTATION)
        selector = ((GKE_ACCELERATOR_LABEL, accelerator),) if isinstance(accelerator, str) else ()
        yield PodTemplate(name, spec, _path(keys), meta, container_fields, selector)


def _named(
    body: Mapping[str, Any], list_keys: tuple[Key, ...], template_keys: tuple[Key, ...]
) -> Iterator[PodTemplate]:
    """A pod template in every item of the list at ``list_keys`` (at ``template_keys``
    below the item), named by the item's ``name`` (the replicated job or task that holds
    it: ``node``, not ``replicatedJobs[2]``), or by its index when it has none."""
    items = _at(body, list_keys)
    if not isinstance(items, list):
        return
    for index, item in enumerate(items):
        name = item.get("name") if is_mapping(item) else None
        label = name if isinstance(name, str) and name else f"{list_keys[-1]}[{index}]"
        yield from _template_at(body, (*list_keys, index, *template_keys), label)


def _training_runtime(body: Mapping[str, Any]) -> Iterator[PodTemplate]:
    """Kubeflow Trainer (Cluster)TrainingRuntime: a JobSet template whose every
    replicated job (initializers, the trainer ``node``, launchers) has a pod template."""
    yield from _named(
        body,
        ("spec", "template", "spec", "replicatedJobs"),
        ("template", "spec", "template"),
    )


def _volcano_job(body: Mapping[str, Any]) -> Iterator[PodTemplate]:
    yield from _named(body, ("spec", "tasks"), ("template",))


def _spec_template(body: Mapping[str, Any]) -> Iterator[PodTemplate]:
    """One ``spec.template`` (Argo Rollout, Kubeflow Notebook)."""
    yield from _template_at(body, ("spec", "template"), "")


def _llm_inference_service(body: Mapping[str, Any]) -> Iterator[PodTemplate]:
    """KServe LLMInferenceService: the decode workload (``spec``) and the optional
    ``spec.prefill`` each hold a pod spec in ``template`` and, multi-node, in
    ``worker``; the router's scheduler has its own. Each workload's ``labels`` and
    ``annotations`` go to its pods. KServe fills in what the spec leaves out (the
    image among them) from LLMInferenceServiceConfig presets."""
    for name, keys in _LLM_WORKLOADS:
        workload = _at(body, keys)
        if not isinstance(workload, Mapping):
            continue
        meta = {
            "labels": as_mapping(workload.get("labels")),
            "annotations": as_mapping(workload.get("annotations")),
        }
        for field_name in ("template", "worker"):
            spec = workload.get(field_name)
            if spec is not None and (field_name == "template" or name != "router.scheduler"):
                label = field_name if not name else f"{name}.{field_name}"
                yield PodTemplate(label, spec, _path((*keys, field_name)), meta)


_LLM_WORKLOADS: Final[tuple[tuple[str, tuple[Key, ...]], ...]] = (
    ("", ("spec",)),
    ("prefill", ("spec", "prefill")),
    ("router.scheduler", ("spec", "router", "scheduler")),
)


def _entries() -> tuple[WorkloadKind, ...]:
    kinds = [WorkloadKind(kind, None, _core(keys)) for kind, keys in POD_SPEC_PATHS.items()]
    kinds += [
        WorkloadKind("PyTorchJob", "kubeflow.org", _replica_specs("pytorchReplicaSpecs")),
        WorkloadKind("TFJob", "kubeflow.org", _replica_specs("tfReplicaSpecs")),
        WorkloadKind("MPIJob", "kubeflow.org", _replica_specs("mpiReplicaSpecs")),
        WorkloadKind("PaddleJob", "kubeflow.org", _replica_specs("paddleReplicaSpecs")),
        WorkloadKind("XGBoostJob", "kubeflow.org", _replica_specs("xgbReplicaSpecs")),
        WorkloadKind("JAXJob", "kubeflow.org", _replica_specs("jaxReplicaSpecs")),
        WorkloadKind("Notebook", "kubeflow.org", _spec_template),
        WorkloadKind("TrainingRuntime", "trainer.kubeflow.org", _training_runtime),
        WorkloadKind("ClusterTrainingRuntime", "trainer.kubeflow.org", _training_runtime),
        WorkloadKind("RayCluster", "ray.io", _ray_cluster),
        WorkloadKind("RayJob", "ray.io", _ray_job),
        WorkloadKind("RayService", "ray.io", _ray_service),
        WorkloadKind("JobSet", "jobset.x-k8s.io", _jobset),
        WorkloadKind("LeaderWorkerSet", "leaderworkerset.x-k8s.io", _leader_worker_set),
        WorkloadKind("InferenceService", "serving.kserve.io", _inference_service),
        WorkloadKind("LLMInferenceService", "serving.kserve.io", _llm_inference_service),
        WorkloadKind("Rollout", "argoproj.io", _spec_template),
        WorkloadKind("Job", "batch.volcano.sh", _volcano_job),
    ]
    return tuple(kinds)


WORKLOAD_TABLE: tuple[WorkloadKind, ...] = _entries()
"""Where each workload kind keeps its pod templates. Small and static: built once at
import. A CRD may share its kind name with a core kind (Volcano's ``Job``): its API
group tells them apart."""

_CORE_TABLE: Final = {entry.kind: entry for entry in WORKLOAD_TABLE if entry.group is None}
_CRD_TABLE: Final = {
    (entry.group, entry.kind): entry for entry in WORKLOAD_TABLE if entry.group is not None
}

CORE_WORKLOAD_KINDS: frozenset[str] = frozenset(POD_SPEC_PATHS)
CRD_WORKLOAD_KINDS: frozenset[str] = frozenset(kind for _, kind in _CRD_TABLE)
WORKLOAD_KINDS: frozenset[str] = CORE_WORKLOAD_KINDS | CRD_WORKLOAD_KINDS
"""Every kind name that carries pod templates (core kinds and the GPU workload CRDs;
``Job`` is both)."""

DRA_GROUP = "resource.k8s.io"
RESOURCE_CLAIM_KINDS: frozenset[str] = frozenset({"ResourceClaim", "ResourceClaimTemplate"})
DEVICE_CLASS_KIND = "DeviceClass"


def workload_kind(kind: str, api_version: str) -> WorkloadKind | None:
    """The table entry for an object, or None when it carries no pod template we know."""
    if kind in CRD_WORKLOAD_KINDS:  # most objects (every pod) skip the group
        entry = _CRD_TABLE.get((api_group(api_version), kind))
        if entry is not None:
            return entry
    return _CORE_TABLE.get(kind)


BUILT_IN_GROUPS: Final = frozenset({"", "apps", "batch", "policy", "autoscaling"})
"""API groups of Kubernetes itself besides ``*.k8s.io``: their pod templates are all
in ``WORKLOAD_TABLE``."""


@lru_cache(maxsize=256)
def kubernetes_group(api_version: str) -> bool:
    """Whether ``api_version`` is in one of Kubernetes' own API groups (cached: every
    pod of a cluster asks about ``v1``)."""
    group = api_group(api_version)
    return group in BUILT_IN_GROUPS or group == "k8s.io" or group.endswith(".k8s.io")
