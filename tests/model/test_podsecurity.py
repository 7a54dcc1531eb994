from __future__ import annotations

from typing import Any

from scanner.inventory import KubeObject, LineMap, Origin
from scanner.model.index import ObjectIndex
from scanner.model.podsecurity import attach_pod_security, container_security, volumes
from scanner.model.policy import attach_runtime_classes
from scanner.model.workloads import build_workloads


def test_container_values_win_over_the_pods() -> None:
    pod = {"runAsNonRoot": False, "seccompProfile": {"type": "Unconfined"}}
    own = {
        "securityContext": {
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
        }
    }
    assert container_security(own, pod) == {
        "allowPrivilegeEscalation": False,
        "allowPrivilegeEscalationSet": True,
        "runAsNonRoot": True,
        "runAsNonRootFrom": "container",
        "seccompProfileType": "RuntimeDefault",
        "seccompProfileFrom": "container",
        "capabilitiesDrop": ["ALL"],
        "capabilitiesAdd": ["NET_BIND_SERVICE"],
    }


def test_inherited_and_unset_values() -> None:
    inherited = container_security(
        {}, {"runAsNonRoot": True, "seccompProfile": {"type": "Localhost"}}
    )
    assert (inherited["runAsNonRoot"], inherited["runAsNonRootFrom"]) == (True, "pod")
    assert (inherited["seccompProfileType"], inherited["seccompProfileFrom"]) == (
        "Localhost",
        "pod",
    )
    # a seccompProfile without a type, or a string where a bool belongs, counts as unset
    unset = container_security(
        {"securityContext": {"runAsNonRoot": "true", "seccompProfile": {}}}, {}
    )
    assert (unset["runAsNonRoot"], unset["runAsNonRootFrom"]) == (False, "")
    assert (unset["seccompProfileType"], unset["seccompProfileFrom"]) == ("", "")
    assert unset["allowPrivilegeEscalation"] and not unset["allowPrivilegeEscalationSet"]


def test_volume_types_and_paths() -> None:
    spec = {
        "volumes": [
            {"name": "cache", "hostPath": {"path": "/mnt/models"}},
            {"name": "bare"},
            {"name": "data", "nfs": {"server": "x", "path": "/"}},
            "not a mapping",
            {"name": "odd", "someFutureSource": {}},
        ]
    }
    found = volumes(spec, "spec.template.spec")
    assert [(v["name"], v["type"], v["typePath"], v["hostPath"]) for v in found] == [
        ("cache", "hostPath", "spec.template.spec.volumes[0].hostPath", "/mnt/models"),
        ("bare", "emptyDir", "spec.template.spec.volumes[1].emptyDir", ""),
        ("data", "nfs", "spec.template.spec.volumes[2].nfs", ""),
        ("odd", "someFutureSource", "spec.template.spec.volumes[4].someFutureSource", ""),
    ]


def _workloads(*bodies: dict[str, Any]) -> list[Any]:
    objects = [KubeObject(b, Origin("t.yaml"), LineMap({})) for b in bodies]
    workloads, _ = build_workloads(objects)
    attach_pod_security(workloads)
    attach_runtime_classes(workloads, ObjectIndex(objects))
    return workloads


def pod(runtime_class: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if runtime_class is not None:
        spec["runtimeClassName"] = runtime_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


def test_attach_sets_security_on_every_container_and_volumes() -> None:
    [workload] = _workloads(pod(None))
    assert "security" in workload.facts["containers"][0]
    assert workload.facts["volumes"] == []


def test_runtime_class_facts() -> None:
    runtime_class = {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": "nvidia"},
        "handler": "nvidia",
    }
    exists, missing, unset = _workloads(pod("nvidia"), pod("nvida"), pod(None), runtime_class)
    assert exists.facts["runtimeClass"] == {
        "name": "nvidia",
        "known": True,
        "exists": True,
        "handler": "nvidia",
    }
    assert missing.facts["runtimeClass"]["known"] and not missing.facts["runtimeClass"]["exists"]
    assert unset.facts["runtimeClass"]["name"] == ""
    [alone] = _workloads(pod("nvidia"))
    assert not alone.facts["runtimeClass"]["known"]
