"""Controlled workloads (scanner/model/controllers.py): only live objects, only the
edges built-in controllers make, only while the object runs the current template."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from scanner.inventory import KubeObject, LineMap, Origin
from scanner.model.index import ObjectIndex
from scanner.model.workloads import build_workloads

SPEC = {"containers": [{"name": "app", "image": "ghcr.io/x/app:1"}]}
GROUPS = {
    "Deployment": "apps",
    "ReplicaSet": "apps",
    "StatefulSet": "apps",
    "Job": "batch",
    "CronJob": "batch",
}


def obj(
    kind: str,
    name: str,
    owner: tuple[str, str] | None = None,
    *,
    source: str = "cluster",
    labels: dict[str, str] | None = None,
    template_labels: dict[str, str] | None = None,
    uid: str | None = None,
    group: str | None = None,
    **body: Any,
) -> KubeObject:
    api = f"{GROUPS[kind]}/v1" if kind in GROUPS else "v1"
    metadata: dict[str, Any] = {"name": name, "namespace": "ml", "uid": f"uid-{name}"}
    if labels:
        metadata["labels"] = labels
    if owner is not None:
        owner_kind, owner_name = owner
        owner_group = GROUPS.get(owner_kind, "") if group is None else group
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Other", "name": "x", "uid": "u"},  # not the controller
            {
                "apiVersion": f"{owner_group}/v1" if owner_group else "v1",
                "kind": owner_kind,
                "name": owner_name,
                "uid": uid or f"uid-{owner_name}",
                "controller": True,
            },
        ]
    document: dict[str, Any] = {"apiVersion": api, "kind": kind, "metadata": metadata, **body}
    if kind == "Pod":
        document.setdefault("spec", SPEC)
    elif kind != "Node":
        template = {"metadata": {"labels": template_labels or {}}, "spec": SPEC}
        document.setdefault("spec", {"template": template})
    return KubeObject(document, Origin("cluster://test", source_type=source), LineMap({}))


def controllers(*objects: KubeObject) -> dict[str, str]:
    workloads, _ = build_workloads(objects, ObjectIndex(objects))
    assert all(w.facts["controlled"] is bool(w.facts["controller"]) for w in workloads)
    return {w.obj.name: w.facts["controller"] for w in workloads}


HASH = {"pod-template-hash": "6d9f"}


def deployment_chain(**pod: Any) -> tuple[KubeObject, ...]:
    return (
        obj("Deployment", "api", template_labels={"app": "api"}),
        obj(
            "ReplicaSet", "api-6d9f", ("Deployment", "api"), template_labels={"app": "api", **HASH}
        ),
        obj("Pod", "api-6d9f-x1", ("ReplicaSet", "api-6d9f"), labels={"app": "api", **HASH}, **pod),
    )


def test_a_deployment_stands_for_its_current_replicaset_and_pods() -> None:
    assert controllers(*deployment_chain()) == {
        "api": "",
        "api-6d9f": "Deployment/api",
        "api-6d9f-x1": "Deployment/api",
    }


def test_manifests_are_never_controlled() -> None:
    """A pull request could otherwise exempt any workload by naming a controller."""
    files = [
        obj("Deployment", "api", template_labels={"app": "api"}, source="file"),
        obj("Pod", "p", ("ReplicaSet", "rs"), source="file"),
        obj(
            "ReplicaSet", "rs", ("Deployment", "api"), template_labels={"app": "api"}, source="file"
        ),
    ]
    assert set(controllers(*files).values()) == {""}
    live_pod = obj("Pod", "live", ("ReplicaSet", "rs"))
    assert controllers(files[2], live_pod)["live"] == ""  # a file is no controller either


def test_an_old_replicaset_whose_template_moved_on_is_checked_as_itself() -> None:
    old_labels = {"app": "api", "pod-template-hash": "5c2a"}
    old_template = {"metadata": {"labels": old_labels}, "spec": {"containers": [{"name": "old"}]}}
    found = controllers(
        obj("Deployment", "api", template_labels={"app": "api"}),
        obj("ReplicaSet", "api-5c2a", ("Deployment", "api"), spec={"template": old_template}),
        obj("Pod", "api-5c2a-z", ("ReplicaSet", "api-5c2a"), labels=old_labels),
        obj("Pod", "stale", ("ReplicaSet", "api-5c2a"), labels={"pod-template-hash": "0000"}),
    )
    assert found == {"api": "", "api-5c2a": "", "api-5c2a-z": "ReplicaSet/api-5c2a", "stale": ""}


def test_statefulset_pods_count_only_at_the_update_revision() -> None:
    status = {"status": {"updateRevision": "web-7f8"}}
    found = controllers(
        obj("StatefulSet", "web", **status),
        obj("Pod", "web-0", ("StatefulSet", "web"), labels={"controller-revision-hash": "web-7f8"}),
        obj("Pod", "web-1", ("StatefulSet", "web"), labels={"controller-revision-hash": "web-111"}),
    )
    assert found == {"web": "", "web-0": "StatefulSet/web", "web-1": ""}


def test_ondelete_daemonset_pods_are_checked_as_themselves() -> None:
    template = {"metadata": {"labels": {}}, "spec": SPEC}
    rolling = obj("DaemonSet", "dcgm", spec={"template": template})
    on_delete = obj(
        "DaemonSet", "old", spec={"template": template, "updateStrategy": {"type": "OnDelete"}}
    )
    rolling.body["apiVersion"] = on_delete.body["apiVersion"] = "apps/v1"
    found = controllers(
        rolling,
        on_delete,
        obj("Pod", "dcgm-1", ("DaemonSet", "dcgm"), group="apps"),
        obj("Pod", "old-1", ("DaemonSet", "old"), group="apps"),
    )
    assert found["dcgm-1"] == "DaemonSet/dcgm"
    assert found["old-1"] == ""


def test_only_built_in_edges_with_the_right_group_uid_and_a_template() -> None:
    objects = (
        obj("Deployment", "api", template_labels={"app": "api"}),
        obj("Job", "eval"),
        obj("Node", "gpu-1"),  # static (mirror) pods name their Node
        obj("Deployment", "empty", spec={}),  # produced no workload
        obj("Pod", "on-deployment", ("Deployment", "api")),  # no controller makes this
        obj("Pod", "on-node", ("Node", "gpu-1")),
        obj("Pod", "wrong-group", ("Job", "eval"), group="apps"),
        obj("Pod", "wrong-uid", ("Job", "eval"), uid="uid-of-an-older-eval"),
        obj("Pod", "absent", ("Job", "gone")),
        obj("ReplicaSet", "on-empty", ("Deployment", "empty")),
        obj("Pod", "eval-1", ("Job", "eval")),
    )
    found = controllers(*objects)
    assert found["eval-1"] == "Job/eval"
    for name in ("on-deployment", "on-node", "wrong-group", "wrong-uid", "absent", "on-empty"):
        assert found[name] == "", name


def test_a_context_only_controller_stands_for_nothing() -> None:
    deployment, replicaset, pod = deployment_chain()
    found = controllers(replace(deployment, context_only=True), replicaset, pod)
    assert found["api-6d9f"] == ""  # its findings would never be reported
    assert found["api-6d9f-x1"] == "ReplicaSet/api-6d9f"


def test_an_edge_no_controller_makes_does_not_decide_for_others_naming_the_same_owner() -> None:
    """A live audit lists Pods before ReplicaSets: a pod naming the Deployment must not
    settle, for the ReplicaSet that names it too, whether the Deployment controls it."""
    deployment, replicaset, pod = deployment_chain()
    stray = obj("Pod", "on-deployment", ("Deployment", "api"))
    assert controllers(stray, pod, replicaset, deployment) == {
        "on-deployment": "",
        "api-6d9f-x1": "Deployment/api",
        "api-6d9f": "Deployment/api",
        "api": "",
    }


def test_a_replicaset_naming_a_replicaset_is_checked_as_itself() -> None:
    """Its pods resolve the same reference; no built-in controller owns a ReplicaSet
    by a ReplicaSet, so the rogue one keeps its own (privileged) template's findings."""
    deployment, replicaset, pod = deployment_chain()
    rogue = obj("ReplicaSet", "rogue", ("ReplicaSet", "api-6d9f"), labels=HASH)
    found = controllers(deployment, replicaset, pod, rogue)
    assert found["api-6d9f-x1"] == "Deployment/api"
    assert found["rogue"] == ""


def test_a_controller_reference_with_fields_that_are_not_strings_names_nothing() -> None:
    """References are looked up by their fields as written, shared by the replicas
    that write the same ones: a list where a string belongs (unhashable) or a number
    is no reference, and does not decide for the valid pods beside it."""
    deployment, replicaset, pod = deployment_chain()
    broken = []
    for field_name, value in (("uid", ["uid-api-6d9f"]), ("name", {"n": 1}), ("uid", 7)):
        stray = obj(
            "Pod",
            f"broken-{len(broken)}",
            ("ReplicaSet", "api-6d9f"),
            labels={"app": "api", **HASH},
        )
        stray.body["metadata"]["ownerReferences"][1][field_name] = value
        broken.append(stray)
    found = controllers(deployment, replicaset, *broken, pod)
    assert found["api-6d9f-x1"] == "Deployment/api"  # the same labels and owner, valid
    assert [found[stray.name] for stray in broken] == ["", "", ""]


def crd(kind: str, api_group: str, name: str, spec: dict[str, Any], **owned: Any) -> KubeObject:
    """A live object of a GPU workload CRD (or CronJob) with its own spec shape."""
    made = obj("Pod", name, **owned)
    made.body.update(apiVersion=f"{api_group}/v1", kind=kind, spec=spec)
    return made


TEMPLATE = {"metadata": {"labels": {"app": "train"}}, "spec": SPEC}


def test_pods_and_jobs_of_gpu_workload_operators_stand_for_their_owner() -> None:
    """Found in review: a live PyTorchJob with 128 workers was reported 129 times per
    template rule. The training operator, KubeRay and JobSet make pods, Jobs and
    clusters from the owner's template, two levels at most."""
    replica = {"replicas": 2, "template": TEMPLATE}
    job = {"template": TEMPLATE}
    cluster = {"headGroupSpec": {"template": TEMPLATE}, "workerGroupSpecs": []}
    objects = (
        crd("PyTorchJob", "kubeflow.org", "ft", {"pytorchReplicaSpecs": {"Worker": replica}}),
        obj("Pod", "ft-worker-0", ("PyTorchJob", "ft"), group="kubeflow.org"),
        crd("RayJob", "ray.io", "tune", {"rayClusterSpec": cluster}),
        crd(
            "RayCluster",
            "ray.io",
            "tune-raycluster",
            cluster,
            owner=("RayJob", "tune"),
            group="ray.io",
        ),
        obj("Pod", "tune-head", ("RayCluster", "tune-raycluster"), group="ray.io"),
        obj("Job", "tune-submitter", ("RayJob", "tune"), group="ray.io"),
        crd(
            "JobSet",
            "jobset.x-k8s.io",
            "pretrain",
            {"replicatedJobs": [{"name": "w", "template": {"spec": job}}]},
        ),
        obj("Job", "pretrain-w-0", ("JobSet", "pretrain"), group="jobset.x-k8s.io"),
        obj("Pod", "pretrain-w-0-0", ("Job", "pretrain-w-0")),
        # The same kinds from another group are someone else's objects.
        obj("Pod", "lookalike", ("PyTorchJob", "ft"), group="example.com"),
    )
    found = controllers(*objects)
    assert found["ft-worker-0"] == "PyTorchJob/ft"
    assert found["tune-raycluster"] == "RayJob/tune"
    assert found["tune-head"] == "RayJob/tune"
    assert found["tune-submitter"] == "RayJob/tune"
    assert found["pretrain-w-0"] == "JobSet/pretrain"
    assert found["pretrain-w-0-0"] == "JobSet/pretrain"
    assert found["lookalike"] == ""
    assert found["ft"] == found["tune"] == found["pretrain"] == ""


def test_a_cronjobs_job_stands_for_it_only_while_their_templates_agree() -> None:
    """The Job controller labels the Job's pod template (job-name, controller-uid):
    those are not a change. A Job made before the CronJob's template changed is checked
    as itself: it still runs the old template."""

    def job(name: str, image: str) -> KubeObject:
        spec = {"containers": [{"name": "app", "image": image}]}
        labels = {
            "app": "train",
            "job-name": name,
            "batch.kubernetes.io/job-name": name,
            "controller-uid": "u1",
            "batch.kubernetes.io/controller-uid": "u1",
        }
        return obj(
            "Job",
            name,
            ("CronJob", "nightly"),
            spec={"template": {"metadata": {"labels": labels}, "spec": spec}},
        )

    cronjob = crd(
        "CronJob",
        "batch",
        "nightly",
        {"schedule": "@daily", "jobTemplate": {"spec": {"template": TEMPLATE}}},
    )
    current = job("nightly-2911", "ghcr.io/x/app:1")
    older = job("nightly-2811", "ghcr.io/x/app:0")
    pod = obj("Pod", "nightly-2911-abc", ("Job", "nightly-2911"))
    found = controllers(cronjob, current, older, pod)
    assert found["nightly-2911"] == "CronJob/nightly"
    assert found["nightly-2911-abc"] == "CronJob/nightly"
    assert found["nightly-2811"] == ""
