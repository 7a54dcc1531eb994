"""Kueue (scanner/model/queues.py): a queued workload's placement is Kueue's to decide
when its flavors add node labels or tolerations, or when they are not in scope."""

from __future__ import annotations

from typing import Any

from scanner.inventory import LIVE, KubeObject, LineMap, Origin
from scanner.model.index import ObjectIndex
from scanner.model.queues import QUEUE_LABEL, attach_queues
from scanner.model.workloads import build_workloads

KUEUE = "kueue.x-k8s.io/v1beta1"


def obj(kind: str, name: str, spec: dict[str, Any], namespace: str = "", **meta: Any) -> KubeObject:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {}), **meta}
    body = {"apiVersion": KUEUE, "kind": kind, "metadata": metadata, "spec": spec}
    return KubeObject(body, Origin("test.yaml"), LineMap({}))


def job(
    name: str,
    labels: dict[str, str],
    pod_labels: dict[str, str] | None = None,
    kind: str = "Job",
    namespace: str = "ml",
) -> KubeObject:
    made = obj(kind, name, {}, namespace, labels=labels)
    made.body["apiVersion"] = "apps/v1" if kind == "Deployment" else "batch/v1"
    made.body["spec"] = {
        "template": {
            "metadata": {"labels": pod_labels or {}},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        }
    }
    return made


def placement(*objects: KubeObject) -> dict[str, str]:
    workloads, _ = build_workloads(objects)
    attach_queues(workloads, ObjectIndex(list(objects)))
    return {w.obj.name: w.facts["queuedPlacement"] for w in workloads}


def queues(flavor_spec: dict[str, Any]) -> list[KubeObject]:
    flavors = [{"name": "f", "resources": []}]
    return [
        obj("ResourceFlavor", "f", flavor_spec),
        obj("ClusterQueue", "cq", {"resourceGroups": [{"flavors": flavors}]}),
        obj("LocalQueue", "q", {"clusterQueue": "cq"}, "ml"),
    ]


def test_placement_is_kueues_when_a_flavor_adds_labels_or_tolerations() -> None:
    queued = job("queued", {QUEUE_LABEL: "q"})
    by_pod = job("pod-integration", {}, {QUEUE_LABEL: "q"}, kind="Deployment")
    plain = job("plain", {})
    # Found in review: Kueue never queues a Job by its pods' label; it runs as written.
    template_only = job("template-only", {}, {QUEUE_LABEL: "q"})
    found = placement(
        *queues({"nodeLabels": {"sku": "h100"}}), queued, by_pod, plain, template_only
    )
    assert found["queued"] == (
        "Kueue queue ml/q places it at admission (ResourceFlavor f adds node labels or tolerations)"
    )
    assert found["pod-integration"] == found["queued"]
    assert found["plain"] == found["template-only"] == ""
    # A quota-only flavor adds nothing: the template's own placement stands.
    assert placement(*queues({}), job("queued", {QUEUE_LABEL: "q"}))["queued"] == ""


def test_a_queue_chain_not_in_scope_leaves_placement_unknown() -> None:
    queued = job("queued", {QUEUE_LABEL: "q"})
    local, cluster, flavor = queues({})[2], queues({})[1], queues({})[0]
    assert placement(queued)["queued"].endswith(
        "is not in scope: its flavors' node labels and tolerations are unknown"
    )
    assert placement(local, queued)["queued"] == "Kueue queue ml/q: ClusterQueue cq is not in scope"
    assert placement(local, cluster, queued)["queued"] == (
        "Kueue queue ml/q: ResourceFlavor f is not in scope"
    )
    # Another group's LocalQueue is not Kueue's.
    lookalike = obj("LocalQueue", "q", {"clusterQueue": "cq"}, "ml")
    lookalike.body["apiVersion"] = "queues.example.com/v1"
    assert "is not in scope" in placement(lookalike, cluster, flavor, queued)["queued"]


def test_where_kueue_reads_the_queue_name() -> None:
    """Found in review: a CronJob's Jobs get the label of its jobTemplate (not of the
    CronJob); a namespace's LocalQueue named default takes unlabelled workloads; a
    LocalQueue written without a namespace is in default, like the Job beside it."""
    flavored = queues({"nodeLabels": {"sku": "h100"}})
    cronjob = obj("CronJob", "nightly", {}, "ml", labels={QUEUE_LABEL: "q"})
    cronjob.body["apiVersion"] = "batch/v1"
    template = {"spec": {"containers": [{"name": "c", "image": "x"}]}}
    cronjob.body["spec"] = {"jobTemplate": {"spec": {"template": template}}}
    assert placement(*flavored, cronjob)["nightly"] == ""  # its own label queues nothing
    cronjob.body["spec"]["jobTemplate"]["metadata"] = {"labels": {QUEUE_LABEL: "q"}}
    assert placement(*flavored, cronjob)["nightly"].startswith("Kueue queue ml/q places it")

    default = obj("LocalQueue", "default", {"clusterQueue": "cq"}, "ml")
    found = placement(*flavored[:2], default, job("unlabelled", {}))
    assert found["unlabelled"].startswith("Kueue queue ml/default places it")

    unset = obj("LocalQueue", "q", {"clusterQueue": "cq"})  # no namespace
    found = placement(*flavored[:2], unset, job("j", {QUEUE_LABEL: "q"}, namespace=""))
    assert found["j"].startswith("Kueue queue default/q places it")


def live(made: KubeObject, **spec: Any) -> KubeObject:
    """``made`` as an audit reads it (a ``cluster://`` object), with ``spec`` merged in."""
    made.body["spec"].update(spec)
    return KubeObject(made.body, Origin("cluster://lab/ml/x", source_type=LIVE), LineMap({}))


def test_a_live_job_kueue_admitted_is_judged_as_it_now_reads() -> None:
    """Kueue unsuspends what it admits and writes the flavor's node labels and
    tolerations into the pod template (a bare Pod: removes its admission gate), so in an
    audit an admitted job runs as it reads; a suspended one still waits for a flavor."""
    flavored = queues({"nodeLabels": {"sku": "h100"}})
    label = {QUEUE_LABEL: "q"}
    pytorch = job("trainer", label)
    pytorch.body.update(apiVersion="kubeflow.org/v1", kind="PyTorchJob")
    pytorch.body["spec"] = {
        "pytorchReplicaSpecs": {"Worker": {"template": pytorch.body["spec"]["template"]}}
    }
    pod = obj("Pod", "bare", {"containers": [{"name": "c", "image": "x"}]}, "ml", labels=label)
    pod.body["apiVersion"] = "v1"
    gate = [{"name": "kueue.x-k8s.io/admission"}]
    found = placement(
        *flavored,
        live(job("running", label), suspend=False),
        live(job("waiting", label), suspend=True),
        live(job("defaulted", label)),  # no suspend field: not suspended
        live(pytorch, runPolicy={"suspend": False}),
        live(pod),
        live(obj("Pod", "gated", dict(pod.body["spec"], schedulingGates=gate), "ml", labels=label)),
        live(job("web", {}, label, kind="Deployment")),  # its pods are admitted, not it
        job("manifest", label),  # a manifest: Kueue will suspend it on creation
    )
    assert found["running"] == found["defaulted"] == found["trainer"] == found["bare"] == ""
    for waiting in ("waiting", "gated", "web", "manifest"):
        assert found[waiting].startswith("Kueue queue ml/q places it"), waiting


def test_an_unlabelled_live_workload_is_not_taken_by_the_default_queue() -> None:
    """Kueue's defaulting webhook labels what a ``default`` LocalQueue takes when it is
    created; a live workload without the label was not taken (made before the queue,
    or of a kind Kueue does not manage), so it is judged as written."""
    flavored = queues({"nodeLabels": {"sku": "h100"}})
    default = obj("LocalQueue", "default", {"clusterQueue": "cq"}, "ml")
    found = placement(*flavored[:2], default, live(job("old", {}), suspend=False), job("new", {}))
    assert found["old"] == ""
    assert found["new"].startswith("Kueue queue ml/default places it")
    # Found in review: Kueue does not manage a CronJob, so nothing labels it, but each
    # Job it creates is labelled for the default queue and placed by its flavor.
    cronjob = obj("CronJob", "nightly", {}, "ml")
    cronjob.body["apiVersion"] = "batch/v1"
    template = {"spec": {"containers": [{"name": "c", "image": "x"}]}}
    cronjob.body["spec"] = {"jobTemplate": {"spec": {"template": template}}}
    found = placement(*flavored[:2], default, live(cronjob))
    assert found["nightly"].startswith("Kueue queue ml/default places it")


def test_a_job_multikueue_dispatches_runs_elsewhere() -> None:
    """Found in review: MultiKueue unsuspends the job in the manager cluster once a
    worker admitted it; its pods run in the worker cluster, with that flavor."""
    flavored = queues({"nodeLabels": {"sku": "h100"}})
    dispatched = live(
        job("dispatched", {QUEUE_LABEL: "q"}), suspend=False, managedBy="kueue.x-k8s.io/multikueue"
    )
    assert placement(*flavored, dispatched)["dispatched"].startswith("Kueue queue ml/q places it")
