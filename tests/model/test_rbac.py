from __future__ import annotations

from pathlib import Path
from typing import Any

from scanner.config.values import AdminSubject, Config
from scanner.inventory import KubeObject, LineMap, Origin
from scanner.model.index import ObjectIndex
from scanner.model.rbac import rbac_facts
from scanner.pipeline import ScanOptions, load_ruleset, scan_paths


def obj(body: dict[str, Any]) -> KubeObject:
    return KubeObject(body, Origin("test.yaml"), LineMap({}))


def cluster_role(name: str, rules: list[dict[str, Any]], **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": labels},
        "rules": rules,
    }


def binding(
    kind: str, role: str, subjects: list[dict[str, Any]], namespace: str = ""
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"bind-{role}"}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": meta,
        "subjects": subjects,
        "roleRef": {"kind": "ClusterRole", "name": role, "apiGroup": "rbac.authorization.k8s.io"},
    }


def facts(*bodies: dict[str, Any]) -> dict[str, Any]:
    bindings: dict[str, Any] = rbac_facts(ObjectIndex([obj(b) for b in bodies]), Config())[
        "bindings"
    ]
    return bindings


USER = {"kind": "User", "name": "alice"}


def test_writer_roles_by_verb_group_and_resource() -> None:
    bodies = [
        cluster_role("cm", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["update"]}]),
        cluster_role("cp", [{"apiGroups": ["nvidia.com"], "resources": ["*"], "verbs": ["*"]}]),
        cluster_role("ro", [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list"]}]),
        cluster_role(
            "wrong-group",
            [{"apiGroups": ["apps"], "resources": ["configmaps"], "verbs": ["patch"]}],
        ),
    ]
    bodies += [
        binding("ClusterRoleBinding", name, [USER]) for name in ("cm", "cp", "ro", "wrong-group")
    ]
    found = facts(*bodies)
    assert found["ClusterRoleBinding/bind-cm"]["writes"] == ["configmaps"]
    assert found["ClusterRoleBinding/bind-cp"]["writes"] == ["clusterpolicies"]
    assert "ClusterRoleBinding/bind-ro" not in found
    assert "ClusterRoleBinding/bind-wrong-group" not in found


def test_builtin_roles_and_roles_not_in_scope() -> None:
    found = facts(
        binding("ClusterRoleBinding", "cluster-admin", [USER]),
        binding("ClusterRoleBinding", "edit", [USER]),
        binding("ClusterRoleBinding", "somewhere-else", [USER]),
    )
    assert found["ClusterRoleBinding/bind-cluster-admin"]["writes"] == [
        "configmaps",
        "clusterpolicies",
        "nodes",
    ]
    assert found["ClusterRoleBinding/bind-edit"]["writes"] == ["configmaps"]
    assert "ClusterRoleBinding/bind-somewhere-else" not in found


def test_aggregated_cluster_role() -> None:
    found = facts(
        cluster_role(
            "piece", [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]}], agg="x"
        ),
        {
            **cluster_role("whole", []),
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "x"}}]},
        },
        binding("ClusterRoleBinding", "whole", [USER]),
    )
    assert found["ClusterRoleBinding/bind-whole"]["writes"] == ["nodes"]


def test_grants_limited_by_resource_names_say_which_objects() -> None:
    """A rule limited by resourceNames writes only the device-stack objects it names
    (the message says which, not "cluster-wide"); an unlimited rule for the same
    resource makes the grant whole again."""
    stack = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["patch"]}
    bodies = [
        cluster_role("named", [{**stack, "resourceNames": ["lock", "default-mig-parted-config"]}]),
        cluster_role("both", [{**stack, "resourceNames": ["default-mig-parted-config"]}, stack]),
        binding("ClusterRoleBinding", "named", [USER]),
        binding("ClusterRoleBinding", "both", [USER]),
    ]
    index = ObjectIndex([obj(b) for b in bodies])
    found = rbac_facts(index, Config(), ["default-mig-parted-config"])["bindings"]
    named = found["ClusterRoleBinding/bind-named"]
    assert named["writes"] == ["configmaps"]
    assert named["writesNamed"] == {"configmaps": ["default-mig-parted-config"]}
    both = found["ClusterRoleBinding/bind-both"]
    assert both["writes"] == ["configmaps"]
    assert both["writesNamed"] == {}


def test_role_bindings_only_in_operator_namespaces_and_platform_subjects() -> None:
    subjects = [
        {"kind": "ServiceAccount", "name": "gpu-operator"},  # namespace from the binding
        {"kind": "ServiceAccount", "name": "ci", "namespace": "ml"},
        {"kind": "ServiceAccount", "name": "node-controller", "namespace": "kube-system"},
        {"kind": "Group", "name": "system:serviceaccounts:gpu-operator"},
        {"kind": "Group", "name": "system:serviceaccounts:ml"},
        {"kind": "Group", "name": "system:authenticated"},
        {"kind": "User", "name": "system:kube-scheduler"},
        {"kind": "User", "name": "system:serviceaccount:ml:ci"},
        USER,
    ]
    found = facts(
        binding("RoleBinding", "view", subjects, namespace="gpu-operator"),
        binding("RoleBinding", "edit", subjects, namespace="ml"),
    )
    assert list(found) == ["gpu-operator/RoleBinding/bind-view"]
    grant = found["gpu-operator/RoleBinding/bind-view"]
    assert grant["scope"] == "operator-namespace" and grant["role"] == "ClusterRole/view"
    assert [(s["name"], s["platform"]) for s in grant["subjects"]] == [
        ("gpu-operator", True),
        ("ci", False),
        ("node-controller", True),
        ("system:serviceaccounts:gpu-operator", True),
        ("system:serviceaccounts:ml", False),
        ("system:authenticated", False),
        ("system:kube-scheduler", True),
        ("system:serviceaccount:ml:ci", False),
        ("alice", False),
    ]
    assert grant["subjects"][0]["namespace"] == "gpu-operator"
    assert grant["subjects"][1]["path"] == "subjects[1]"


def test_config_admins_silence_pg306(tmp_path: Path) -> None:
    manifest = tmp_path / "rbac.yaml"
    manifest.write_text(
        "apiVersion: rbac.authorization.k8s.io/v1\n"
        "kind: ClusterRoleBinding\n"
        "metadata: {name: admins}\n"
        "subjects:\n"
        "  - {kind: Group, name: platform-admins, apiGroup: rbac.authorization.k8s.io}\n"
        "  - {kind: ServiceAccount, name: deployer, namespace: ci}\n"
        "  - {kind: ServiceAccount, name: deployer, namespace: other}\n"
        "roleRef: {kind: ClusterRole, name: cluster-admin, apiGroup: rbac.authorization.k8s.io}\n"
    )
    admins = (
        AdminSubject("Group", "platform-admins"),
        AdminSubject("ServiceAccount", "deployer", "ci"),
    )
    for config, lines in ((Config(), [5, 6, 7]), (Config(admins=admins), [7])):
        ruleset = load_ruleset(ScanOptions(config=config, enable=["PG306"]))
        report = scan_paths([str(manifest)], ruleset, repo_root=tmp_path)
        assert [f.location.line for f in report.findings if f.rule_id == "PG306"] == lines
