"""RBAC facts: bindings that give someone power over the GPU Operator (PG306).

``cluster.rbac.bindings`` maps a binding's logical name (``namespace/Kind/name``,
``ClusterRoleBinding/name``) to what it grants, for two kinds of binding:

* every RoleBinding in an operator namespace (scope ``operator-namespace``):
  anything bound there acts inside the operator's own namespace;
* every ClusterRoleBinding to a ClusterRole that can write ConfigMaps (the
  device-plugin and MIG configs), NVIDIA ``clusterpolicies`` or Nodes (labels
  that steer the device stack) anywhere (scope ``cluster-write``).

Each entry: ``scope``, ``role`` (``ClusterRole/edit``), ``writes`` (the guarded
resources the role can write, when the role is known), ``writesNamed`` (those of
``writes`` it can write only by name, through ``resourceNames``: resource -> the
device-stack objects named) and ``subjects``: each
with ``kind``, ``name``, ``namespace``, ``path`` (``subjects[1]``) and
``platform``: true for ServiceAccounts of the operator and system namespaces
and for Kubernetes' own ``system:`` identities (components such as
``system:kube-controller-manager``), except the groups and users that stand for
everyone (``system:authenticated``, ``system:unauthenticated``,
``system:anonymous``, ``system:serviceaccounts``) and the ServiceAccounts of
tenant namespaces. Config ``admins`` is applied by the rule.

A ClusterRole's rules come from the object in scope; its ``aggregationRule``
is resolved against the ClusterRoles in scope. ``cluster-admin``, ``admin``
and ``edit`` (Kubernetes' default user-facing roles) are known without being in
scope; any other role that is not in scope writes nothing poolgate can prove.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from scanner.config.values import Config
from scanner.inventory import KubeObject, join_path
from scanner.model.index import ObjectIndex
from scanner.model.namespaces import namespace_of
from scanner.model.selectors import label_selector_matches

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection", "*"})
NAMED_WRITE_VERBS = frozenset({"update", "patch", "delete", "*"})
"""The write verbs a rule limited by ``resourceNames`` can grant (a create or a
deletecollection request names no object)."""
GUARDED: tuple[tuple[str, str], ...] = (
    ("", "configmaps"),
    ("nvidia.com", "clusterpolicies"),
    ("", "nodes"),
)
"""(API group, resource) pairs whose write access controls the GPU device stack."""

BUILTIN_WRITES: Mapping[str, tuple[str, ...]] = {
    "cluster-admin": ("configmaps", "clusterpolicies", "nodes"),
    "admin": ("configmaps",),
    "edit": ("configmaps",),
}
"""Kubernetes' default user-facing ClusterRoles and the guarded resources they write."""

EVERYONE = frozenset(
    {"system:authenticated", "system:unauthenticated", "system:anonymous", "system:serviceaccounts"}
)


def rbac_facts(
    index: ObjectIndex, config: Config, stack_config_maps: Collection[str] = ()
) -> dict[str, Any]:
    """``cluster.rbac`` (see the module docstring). ``stack_config_maps``: names of the
    ConfigMaps that steer the device stack (``deviceplugin.stack_config_maps``), one of
    which a rule limited by ``resourceNames`` must name to count as writing ConfigMaps
    (as it must name a Node in scope, or the ClusterPolicy)."""
    named: dict[str, frozenset[str]] = {
        "configmaps": frozenset(stack_config_maps),
        "nodes": frozenset(obj.name for obj in index.kind("Node")),
        "clusterpolicies": frozenset(
            {"cluster-policy"}
            | {
                policy.name
                for policy in index.kind("ClusterPolicy")
                if policy.api_version.startswith("nvidia.com/")
            }
        ),
    }
    cluster_roles = {obj.name: obj for obj in index.kind("ClusterRole") if obj.name}
    platform = {*config.operator_namespaces, *config.system_namespaces}
    bindings: dict[str, Any] = {}
    for obj in index.kind("RoleBinding"):
        namespace = namespace_of(obj)
        if namespace not in config.operator_namespaces:
            continue
        role = _role_ref(obj)
        if role is None:
            continue
        kind, name = role
        role_obj = (
            cluster_roles.get(name)
            if kind == "ClusterRole"
            else index.get("Role", obj.namespace, name)
        )
        writes = (
            _writes(role_obj, cluster_roles, named)
            if role_obj is not None
            else _builtin(kind, name)
        )
        bindings[obj.ref.logical_name] = _grant(
            obj, "operator-namespace", f"{kind}/{name}", writes, namespace, platform
        )
    for obj in index.kind("ClusterRoleBinding"):
        role = _role_ref(obj)
        if role is None or role[0] != "ClusterRole":
            continue
        name = role[1]
        role_obj = cluster_roles.get(name)
        writes = (
            _writes(role_obj, cluster_roles, named) if role_obj is not None else _builtin(*role)
        )
        if writes:
            bindings[obj.ref.logical_name] = _grant(
                obj, "cluster-write", f"ClusterRole/{name}", writes, "", platform
            )
    return {"bindings": bindings}


def _role_ref(obj: KubeObject) -> tuple[str, str] | None:
    ref = obj.body.get("roleRef")
    if not isinstance(ref, Mapping):
        return None
    kind, name = ref.get("kind"), ref.get("name")
    if kind not in ("Role", "ClusterRole") or not isinstance(name, str):
        return None
    return str(kind), name


Writes = dict[str, list[str]]
"""Guarded resource -> the names it is limited to (empty: any object), in ``GUARDED``
order."""


def _builtin(kind: str, name: str) -> Writes:
    if kind != "ClusterRole":
        return {}
    return {resource: [] for resource in BUILTIN_WRITES.get(name, ())}


def _writes(
    role: KubeObject,
    cluster_roles: Mapping[str, KubeObject],
    named: Mapping[str, Collection[str]],
) -> Writes:
    """The guarded resources ``role``'s rules (and aggregated roles' rules) can write,
    each with the device-stack objects it is limited to (none: any object)."""
    rules = list(_rules(role))
    aggregation = role.body.get("aggregationRule")
    if isinstance(aggregation, Mapping):
        selectors = aggregation.get("clusterRoleSelectors")
        for other in cluster_roles.values():
            labels = _string_map(other.metadata.get("labels"))
            if other is not role and any(
                label_selector_matches(selector, labels)
                for selector in (selectors if isinstance(selectors, list) else [])
            ):
                rules.extend(_rules(other))
    writes: Writes = {}
    for group, resource in GUARDED:
        limits = [_rule_writes(rule, group, resource, named) for rule in rules]
        if any(limit == () for limit in limits):
            writes[resource] = []
        elif any(limits):
            writes[resource] = sorted({name for limit in limits if limit for name in limit})
    return writes


def _rules(role: KubeObject) -> Iterable[Mapping[str, Any]]:
    rules = role.body.get("rules")
    return [rule for rule in rules if isinstance(rule, Mapping)] if isinstance(rules, list) else []


def _rule_writes(
    rule: Mapping[str, Any], group: str, resource: str, named: Mapping[str, Collection[str]]
) -> tuple[str, ...] | None:
    """Whether one PolicyRule lets its holder write ``resource``: None if not, ``()``
    for any object, else the objects it is limited to. With ``resourceNames`` it covers
    only the objects named, and never ``create`` or ``deletecollection`` (requests
    without a name); it counts only when it names one that steers the device stack
    (``named[resource]``: a device-stack ConfigMap, a Node in scope, the
    ClusterPolicy): a leader-election lock is none of them."""
    groups = _strings(rule.get("apiGroups"))
    resources = _strings(rule.get("resources"))
    verbs = _strings(rule.get("verbs"))
    names = _strings(rule.get("resourceNames"))
    steering = tuple(name for name in names if name in named.get(resource, ()))
    if names and not steering:
        return None
    writing = NAMED_WRITE_VERBS if names else WRITE_VERBS
    if (
        ("*" in groups or group in groups)
        and ("*" in resources or resource in resources)
        and any(verb in writing for verb in verbs)
    ):
        return steering
    return None


def _grant(
    obj: KubeObject,
    scope: str,
    role: str,
    writes: Writes,
    binding_namespace: str,
    platform: set[str],
) -> dict[str, Any]:
    subjects = []
    items = obj.body.get("subjects")
    for index, subject in enumerate(items if isinstance(items, list) else []):
        if not isinstance(subject, Mapping):
            continue
        kind = _text(subject.get("kind"))
        name = _text(subject.get("name"))
        namespace = _text(subject.get("namespace"))
        if kind == "ServiceAccount" and not namespace:
            namespace = binding_namespace
        subjects.append(
            {
                "kind": kind,
                "name": name,
                "namespace": namespace if kind == "ServiceAccount" else "",
                "path": join_path("subjects", index),
                "platform": _is_platform(kind, name, namespace, platform),
            }
        )
    return {
        "scope": scope,
        "role": role,
        "writes": list(writes),
        "writesNamed": {resource: names for resource, names in writes.items() if names},
        "subjects": subjects,
    }


def _is_platform(kind: str, name: str, namespace: str, platform: set[str]) -> bool:
    if kind == "ServiceAccount":
        return namespace in platform
    if name in EVERYONE:
        return False
    for prefix in ("system:serviceaccounts:", "system:serviceaccount:"):
        if name.startswith(prefix):
            return name[len(prefix) :].split(":", 1)[0] in platform
    return name.startswith("system:")


def _strings(value: object) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _string_map(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): "" if v is None else str(v) for k, v in value.items()}
