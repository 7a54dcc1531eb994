from __future__ import annotations

from typing import Any

from scanner.inventory import KubeObject, LineMap, Origin
from scanner.model.index import ObjectIndex
from scanner.model.podsecurity import (
    RESTRICTED_VOLUME_TYPES,
    attach_pod_security,
    container_security,
    pod_security,
    volumes,
)
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
        "misspelt": [],
    }


def test_misspelt_fields_get_a_suggestion_and_the_cost_is_bounded() -> None:
    own = {
        "path": "spec.containers[0]",
        "securityContext": {
            "allowPrivilegedEscalation": False,
            "runAsNonroot": True,
            "readOnlyRootFilesystem": True,
            "somethingElse": 1,
            "x" * 10_000: True,
        },
    }
    assert container_security(own, {})["misspelt"] == [
        {
            "field": "allowPrivilegedEscalation",
            "suggestion": "allowPrivilegeEscalation",
            "path": "spec.containers[0].securityContext.allowPrivilegedEscalation",
        },
        {
            "field": "runAsNonroot",
            "suggestion": "runAsNonRoot",
            "path": "spec.containers[0].securityContext.runAsNonroot",
        },
    ]
    many = {f"allowPrivilegeEscalatio{i}": False for i in range(1000)}
    assert len(container_security({"securityContext": many}, {})["misspelt"]) == 8


def test_inherited_and_unset_values() -> None:
    inherited = container_security(
        {}, {"runAsNonRoot": True, "seccompProfile": {"type": "Localhost"}}
    )
    assert (inherited["runAsNonRoot"], inherited["runAsNonRootFrom"]) == (True, "pod")
    assert (inherited["seccompProfileType"], inherited["seccompProfileFrom"]) == (
        "Localhost",
        "pod",
    )
    # a string where a bool belongs counts as unset; a seccompProfile without a type is
    # set (to no type), so the pod's is not inherited (check_seccompProfile_restricted.go)
    unset = container_security(
        {"securityContext": {"runAsNonRoot": "true", "seccompProfile": {}}},
        {"seccompProfile": {"type": "RuntimeDefault"}},
    )
    assert (unset["runAsNonRoot"], unset["runAsNonRootFrom"]) == (False, "")
    assert (unset["seccompProfileType"], unset["seccompProfileFrom"]) == ("", "container")
    assert unset["allowPrivilegeEscalation"] and not unset["allowPrivilegeEscalationSet"]
    nothing = container_security({"securityContext": {"seccompProfile": None}}, {})
    assert (nothing["seccompProfileType"], nothing["seccompProfileFrom"]) == ("", "")


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


def test_volume_types_restricted_allows() -> None:
    # check_restrictedVolumes.go; image volumes since Kubernetes 1.33
    assert set(RESTRICTED_VOLUME_TYPES) == {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "image",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The model's containers of a Pod with ``spec`` (path, type and name included)."""
    [workload] = _workloads(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}
    )
    containers: list[dict[str, Any]] = workload.facts["containers"]
    return containers


def test_pod_values_judged_where_they_are_written() -> None:
    spec: dict[str, Any] = {
        "os": {"name": "windows"},
        "hostUsers": False,
        "securityContext": {
            "runAsNonRoot": False,
            "runAsUser": 0,
            "seccompProfile": {},
            "seLinuxOptions": {"type": "spc_t"},
            "windowsOptions": {"hostProcess": True},
            "sysctls": [{"name": "kernel.msgmax", "value": "1"}, "odd", {"value": "2"}],
        },
        "initContainers": [{"name": "init", "image": "x"}],
        "containers": [
            {
                "name": "app",
                "image": "x",
                "securityContext": {
                    "runAsUser": True,  # not an int: unset
                    "procMount": "Unmasked",
                    "appArmorProfile": {"type": "Unconfined"},
                    "seLinuxOptions": {"user": "system_u", "role": "system_r"},
                },
                "ports": [
                    {"containerPort": 80},
                    {"containerPort": 53, "hostPort": 53},
                    {"containerPort": 81, "hostPort": 0},
                ],
                "livenessProbe": {"httpGet": {"host": "10.0.0.1", "port": 80}},
                "readinessProbe": {"tcpSocket": {"port": 80}},
                "lifecycle": {"preStop": {"tcpSocket": {"host": "", "port": 1}}},
            }
        ],
    }
    facts = pod_security(spec, "spec", _containers(spec), {})
    assert (facts["windows"], facts["userNamespace"]) == (True, True)
    assert (facts["runAsNonRootSet"], facts["runAsNonRoot"]) == (True, False)
    assert (facts["seccompProfileSet"], facts["seccompProfileType"]) == (True, "")
    pod, app = facts["contexts"]  # the init container sets no securityContext
    assert pod == {
        "owner": "the pod",
        "path": "spec.securityContext",
        "runAsUserSet": True,
        "runAsUser": 0,
        "procMountSet": False,
        "procMount": "",
        "appArmorProfileSet": False,
        "appArmorProfileType": "",
        "seLinuxType": "spc_t",
        "seLinuxUser": "",
        "seLinuxRole": "",
        "hostProcess": True,
    }
    assert app["owner"] == "container 'app'"
    assert app["path"] == "spec.containers[0].securityContext"
    assert (app["runAsUserSet"], app["procMountSet"], app["procMount"]) == (False, True, "Unmasked")
    assert (app["appArmorProfileSet"], app["appArmorProfileType"]) == (True, "Unconfined")
    assert (app["seLinuxUser"], app["seLinuxRole"]) == ("system_u", "system_r")
    assert facts["sysctls"] == [
        {"name": "kernel.msgmax", "path": "spec.securityContext.sysctls[0].name"},
        {"name": "", "path": "spec.securityContext.sysctls[2].name"},
    ]
    assert facts["hostPorts"] == [
        {
            "owner": "container 'app'",
            "hostPort": 53,
            "path": "spec.containers[0].ports[1].hostPort",
        },
        {"owner": "container 'app'", "hostPort": 0, "path": "spec.containers[0].ports[2].hostPort"},
    ]
    assert facts["probeHosts"] == [
        {
            "owner": "container 'app'",
            "handler": "livenessProbe.httpGet",
            "host": "10.0.0.1",
            "path": "spec.containers[0].livenessProbe.httpGet.host",
        },
        {
            "owner": "container 'app'",
            "handler": "lifecycle.preStop.tcpSocket",
            "host": "",
            "path": "spec.containers[0].lifecycle.preStop.tcpSocket.host",
        },
    ]


def test_a_pod_without_settings_has_empty_lists() -> None:
    facts = pod_security({"containers": [{"name": "c"}]}, "spec", [], {})
    assert facts["contexts"] == facts["sysctls"] == facts["hostPorts"] == []
    assert not facts["windows"] and not facts["userNamespace"]
    assert not facts["runAsNonRootSet"] and not facts["seccompProfileSet"]


def test_apparmor_annotations_point_at_the_template_metadata() -> None:
    key = "container.apparmor.security.beta.kubernetes.io/app"
    other = {"team": "ml"}

    def paths(pod_spec: dict[str, Any], pod_path: str) -> list[tuple[str, str, str]]:
        facts = pod_security(pod_spec, pod_path, [], {key: "unconfined", **other})
        return [(a["key"], a["value"], a["path"]) for a in facts["appArmorAnnotations"]]

    quoted = f"annotations['{key}']"
    assert paths({}, "spec") == [(key, "unconfined", f"metadata.{quoted}")]
    assert paths({}, "spec.jobTemplate.spec.template.spec") == [
        (key, "unconfined", f"spec.jobTemplate.spec.template.metadata.{quoted}")
    ]
    # KServe components inline the pod: their own annotations, else the object's
    assert paths({"annotations": {key: "unconfined"}}, "spec.predictor") == [
        (key, "unconfined", f"spec.predictor.{quoted}")
    ]
    assert paths({}, "spec.predictor") == [(key, "unconfined", f"metadata.{quoted}")]


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
