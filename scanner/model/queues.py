"""Kueue: a queued workload's placement is decided at admission (``queuedPlacement``).

A Job (or JobSet, RayJob, PyTorchJob, Deployment, Pod) labelled
``kueue.x-k8s.io/queue-name`` waits, suspended, in that LocalQueue. The label is
read where Kueue reads it: on the object itself (a CronJob's on its
``jobTemplate``, which its Jobs get); on the pod template only for the kinds Kueue
queues pod by pod (Deployment, StatefulSet, ReplicaSet): a Job's pods are never
queued on their own. Without the label, a namespace's LocalQueue named
``default`` takes the workload (Kueue's LocalQueueDefaulting, on by default since
v0.12), when that LocalQueue is in scope.

When the queue's ClusterQueue admits the workload, Kueue gives it one of the
ClusterQueue's ResourceFlavors and adds that flavor's ``nodeLabels`` to the pod
template's ``nodeSelector`` and its ``tolerations`` to the pod's tolerations. The
template as written is then not where the pods go: a job with no SKU selector and
no toleration for the GPU taint is exactly what a platform using flavors asks its
tenants to write.

A live object (an audit) has been through Kueue's webhooks already. The label is
then all there is to read: the defaulting webhook labelled what the ``default``
LocalQueue takes when it was created, so an unlabelled live workload is not Kueue's.
A CronJob aside: Kueue does not manage it, so nothing labels it, but the webhook
labels each Job it creates (their owner is not Kueue's), so its Jobs go to the
``default`` queue all the same (found in review).
And a live job Kueue admitted runs what the flavor added: Kueue unsuspends it and
writes the flavor's node labels and tolerations into its pod template (a bare Pod:
removes its ``kueue.x-k8s.io/admission`` scheduling gate and writes them into the
Pod), so it is judged as it now reads. A suspended one waits, or was evicted and
had its template restored.

``queuedPlacement`` is empty for a workload whose placement is as written (no queue
label, a queue whose flavors in scope add no node labels and no tolerations, or a
live job already admitted); otherwise it says why not. The placement rules (PG104,
PG105, and through ``targets`` PG106, PG108 and PG201) do not judge such a workload:
the flavor it will get is Kueue's choice, and when the queue, its ClusterQueue or a
flavor is not in scope, nothing says what Kueue adds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from scanner.inventory import LIVE, KubeObject, as_mapping
from scanner.kinds import api_group
from scanner.model.index import ObjectIndex
from scanner.model.workloads import Join, Workload, join_complete

QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
KUEUE_GROUP: Final = "kueue.x-k8s.io"

POD_BY_POD: Final = frozenset({"Deployment", "StatefulSet", "ReplicaSet"})
"""Kinds whose pods Kueue queues one by one (its pod integration): the label may be
on the pod template."""

DEFAULT_QUEUE: Final = "default"

MULTIKUEUE: Final = "kueue.x-k8s.io/multikueue"
"""``spec.managedBy`` of a job MultiKueue dispatches to a worker cluster."""

ADMISSION_GATE: Final = "kueue.x-k8s.io/admission"
"""The scheduling gate a queued Pod carries until Kueue admits it."""

_SUSPEND: Final = {
    ("batch", "Job"): ("spec", "suspend"),
    ("jobset.x-k8s.io", "JobSet"): ("spec", "suspend"),
    ("ray.io", "RayJob"): ("spec", "suspend"),
    ("ray.io", "RayCluster"): ("spec", "suspend"),
    ("kubeflow.org", "PyTorchJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "TFJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "MPIJob"): ("spec", "runPolicy", "suspend"),
}
"""Where each kind Kueue admits by unsuspending it keeps ``suspend``."""


def attach_queues(workloads: Sequence[Workload], index: ObjectIndex) -> Join:
    """Set ``workload.queuedPlacement`` on every workload (``join_complete``)."""
    answers: dict[tuple[str, str], str] = {}
    queues = bool(index.kind("LocalQueue"))
    defaults: dict[str, bool] = {}  # namespace -> has a LocalQueue named default

    def join(workload: Workload) -> None:
        facts = workload.facts
        namespace = facts["namespace"]
        obj = workload.obj
        live = obj.origin.source_type == LIVE
        queue = _queue_name(obj, facts["podLabels"])
        if queue and live and _admitted(obj):
            facts["queuedPlacement"] = ""
            return
        if not queue and queues and (not live or obj.kind == "CronJob"):
            if namespace not in defaults:
                defaults[namespace] = _local_queue(index, namespace, DEFAULT_QUEUE) is not None
            queue = DEFAULT_QUEUE if defaults[namespace] else ""
        if not queue:
            facts["queuedPlacement"] = ""
            return
        key = (namespace, queue)
        if key not in answers:
            answers[key] = _placement(index, *key)
        facts["queuedPlacement"] = answers[key]

    return join_complete(workloads, join)


def _queue_name(obj: KubeObject, pod_labels: Mapping[str, str]) -> str:
    """The LocalQueue the object names where Kueue reads it (module docstring)."""
    if obj.kind == "CronJob":
        spec = as_mapping(obj.body.get("spec"))
        meta = as_mapping(as_mapping(spec.get("jobTemplate")).get("metadata"))
        name = as_mapping(meta.get("labels")).get(QUEUE_LABEL)
    else:
        name = as_mapping(obj.metadata.get("labels")).get(QUEUE_LABEL)
        if not name and obj.kind in POD_BY_POD:
            name = pod_labels.get(QUEUE_LABEL)
    return name if isinstance(name, str) else ""


def _admitted(obj: KubeObject) -> bool:
    """Whether Kueue has admitted the live ``obj``: a Pod without its admission gate,
    a job of a kind it unsuspends that is not suspended (module docstring)."""
    body = obj.body
    if obj.kind == "Pod" and api_group(obj.api_version) == "":
        gates = as_mapping(body.get("spec")).get("schedulingGates")
        names = [as_mapping(g).get("name") for g in gates] if isinstance(gates, list) else []
        return ADMISSION_GATE not in names
    path = _SUSPEND.get((api_group(obj.api_version), obj.kind))
    if path is None:
        return False  # a Deployment's pods are admitted one by one, not its template
    if as_mapping(body.get("spec")).get("managedBy") == MULTIKUEUE:
        return False  # unsuspended here, run in a worker cluster with its flavor
    value: Any = body
    for key in path:
        value = as_mapping(value).get(key)
    return value is not True


def _local_queue(index: ObjectIndex, namespace: str, name: str) -> KubeObject | None:
    """Kueue's LocalQueue ``name`` of ``namespace``; a manifest without a namespace is
    in ``default``, where ``kubectl apply`` puts it."""
    found = index.get("LocalQueue", namespace, name)
    if found is None and namespace == "default":
        found = index.get("LocalQueue", "", name)
    return _kueue(found)


def _placement(index: ObjectIndex, namespace: str, queue: str) -> str:
    """Why Kueue decides where the pods of a workload in LocalQueue ``queue`` go, or
    "" when it adds nothing to their placement."""
    where = f"Kueue queue {namespace}/{queue}"
    local = _local_queue(index, namespace, queue)
    if local is None:
        return f"{where} is not in scope: its flavors' node labels and tolerations are unknown"
    cluster_queue = as_mapping(local.body.get("spec")).get("clusterQueue")
    cluster = _kueue(index.get("ClusterQueue", "", str(cluster_queue or "")))
    if cluster is None:
        return f"{where}: ClusterQueue {cluster_queue} is not in scope"
    adding: list[str] = []
    for name in _flavor_names(cluster):
        flavor = _kueue(index.get("ResourceFlavor", "", name))
        if flavor is None:
            return f"{where}: ResourceFlavor {name} is not in scope"
        spec = as_mapping(flavor.body.get("spec"))
        if as_mapping(spec.get("nodeLabels")) or _non_empty(spec.get("tolerations")):
            adding.append(name)
    if adding:
        return (
            f"{where} places it at admission (ResourceFlavor {', '.join(adding)} "
            "adds node labels or tolerations)"
        )
    return ""


def _kueue(obj: KubeObject | None) -> KubeObject | None:
    """``obj`` when it is Kueue's (another group's LocalQueue is someone else's)."""
    return obj if obj is not None and api_group(obj.api_version) == KUEUE_GROUP else None


def _flavor_names(cluster_queue: KubeObject) -> list[str]:
    names: list[str] = []
    groups = as_mapping(cluster_queue.body.get("spec")).get("resourceGroups")
    for group in groups if isinstance(groups, list) else []:
        flavors = as_mapping(group).get("flavors")
        for flavor in flavors if isinstance(flavors, list) else []:
            name = as_mapping(flavor).get("name")
            if isinstance(name, str) and name and name not in names:
                names.append(name)
    return names


def _non_empty(value: Any) -> bool:
    return isinstance(value, list) and bool(value)
