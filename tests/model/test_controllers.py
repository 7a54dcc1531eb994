"""Controlled workloads: a Pod of a ReplicaSet of a Deployment runs the Deployment's
template, so ``workload.controlled`` says so and names the top controller."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from scanner.inventory import KubeObject, LineMap, Origin
from scanner.model.index import ObjectIndex
from scanner.model.workloads import build_workloads, top_controller

SPEC = {"containers": [{"name": "app", "image": "ghcr.io/x/app:1"}]}


def obj(kind: str, name: str, owner: tuple[str, str, str] | None = None, **meta: Any) -> KubeObject:
    api = {"Deployment": "apps/v1", "ReplicaSet": "apps/v1", "Job": "batch/v1"}.get(kind, "v1")
    metadata: dict[str, Any] = {"name": name, "namespace": "ml", "uid": f"uid-{name}", **meta}
    if owner is not None:
        owner_kind, owner_name, uid = owner
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Other", "name": "x", "uid": "u"},  # not the controller
            {"kind": owner_kind, "name": owner_name, "uid": uid, "controller": True},
        ]
    body: dict[str, Any] = {"apiVersion": api, "kind": kind, "metadata": metadata}
    body["spec"] = SPEC if kind == "Pod" else {"template": {"spec": SPEC}}
    if kind == "Node":
        body["spec"] = {}
    return KubeObject(body, Origin("cluster://test"), LineMap({}))


def controllers(*objects: KubeObject) -> dict[str, tuple[bool, str]]:
    workloads, _ = build_workloads(objects, ObjectIndex(objects))
    return {w.obj.name: (w.facts["controlled"], w.facts["controller"]) for w in workloads}


def test_the_chain_is_followed_to_its_top_controller() -> None:
    found = controllers(
        obj("Deployment", "api"),
        obj("ReplicaSet", "api-6d9f", ("Deployment", "api", "uid-api")),
        obj("Pod", "api-6d9f-x1", ("ReplicaSet", "api-6d9f", "uid-api-6d9f")),
        obj("Job", "eval"),
        obj("Pod", "eval-q7", ("Job", "eval", "uid-eval")),
    )
    assert found == {
        "api": (False, ""),
        "api-6d9f": (True, "Deployment/api"),
        "api-6d9f-x1": (True, "Deployment/api"),
        "eval": (False, ""),
        "eval-q7": (True, "Job/eval"),
    }


def test_an_owner_that_is_not_there_or_not_the_same_object_does_not_control() -> None:
    found = controllers(
        obj("ReplicaSet", "api-6d9f"),
        obj("Pod", "absent", ("ReplicaSet", "gone", "uid-gone")),
        obj("Pod", "recreated", ("ReplicaSet", "api-6d9f", "uid-of-an-older-one")),
        obj("Pod", "no-uid", ("ReplicaSet", "api-6d9f", "")),
    )
    assert found["absent"] == (False, "")
    assert found["recreated"] == (False, "")
    assert found["no-uid"] == (False, "")  # "" is a uid that does not match either


def test_only_workload_owners_in_the_same_namespace_and_reported_count() -> None:
    node = obj("Node", "gpu-1")  # static (mirror) pods name their Node as controller
    other_namespace = obj("ReplicaSet", "web")
    other_namespace = replace(
        other_namespace,
        body={**other_namespace.body, "metadata": {"name": "web", "namespace": "other"}},
    )
    context = replace(obj("ReplicaSet", "ctx"), context_only=True)
    objects = (
        node,
        other_namespace,
        context,
        obj("Pod", "static", ("Node", "gpu-1", "uid-gpu-1")),
        obj("Pod", "web-1", ("ReplicaSet", "web", "uid-web")),
        obj("Pod", "ctx-1", ("ReplicaSet", "ctx", "uid-ctx")),
    )
    found = controllers(*objects)
    assert found["static"] == (False, "")
    assert found["web-1"] == (False, "")
    assert found["ctx-1"] == (False, "")  # --context objects are never reported on


def test_an_ownership_loop_controls_nothing() -> None:
    """Otherwise every object in the loop would be skipped and none checked."""
    first = obj("ReplicaSet", "a", ("ReplicaSet", "b", "uid-b"))
    second = obj("ReplicaSet", "b", ("ReplicaSet", "a", "uid-a"))
    pod = obj("Pod", "p", ("ReplicaSet", "a", "uid-a"))
    itself = obj("ReplicaSet", "self", ("ReplicaSet", "self", "uid-self"))
    assert top_controller(first, ObjectIndex([first, second])) is None
    assert controllers(first, second, pod, itself) == {
        "a": (False, ""),
        "b": (False, ""),
        "p": (False, ""),
        "self": (False, ""),
    }


def test_manifests_without_owners_are_not_controlled() -> None:
    assert controllers(obj("Deployment", "api"), obj("Pod", "bare")) == {
        "api": (False, ""),
        "bare": (False, ""),
    }
