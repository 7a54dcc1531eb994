"""Admission facts: which ValidatingAdmissionPolicies hold GPU pods to the floor (PG605).

``admission``, a variable of the ``cluster`` subject:

* ``known``: the run can see the cluster's admission policies. In an audit both
  ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding were listed to
  the end (a cluster with none is known to have none); otherwise (manifests, a
  ``kubectl`` dump) an object of either kind is in scope.
* ``policies``: every ValidatingAdmissionPolicy in scope, sorted by name, each with

  - ``name``;
  - ``pods``: its ``matchConstraints`` match core ``pods`` on ``CREATE`` (``*`` and
    ``*/*`` count; ``pods/*`` is only subresources; rules with ``resourceNames``
    match named objects only; ``excludeResourceRules`` are applied);
  - ``controllers``: the pod-controller resources it matches on ``CREATE``
    (``deployments.apps``, ``pytorchjobs.kubeflow.org``, ...), sorted;
  - ``runtimeClass``: an expression of its ``validations`` or ``variables`` names
    ``runtimeClassName`` (a field, or a string constant such as a key test);
  - ``sku``: those expressions name ``nodeSelector`` or ``nodeAffinity`` and a SKU or
    pool label key (config ``skuLabel``, ``skuLabels``, ``poolLabels``), as a string
    constant (``'sku'``), a field (``.sku``), or a value of its params: a policy whose
    ``paramKind`` is a ConfigMap counts the values in the ``data`` of the ConfigMap a
    binding's ``paramRef`` names by name and namespace, when it is in scope (each
    value, and each comma-separated part of it; ``poolgate admission export`` keeps
    the SKU label there);
  - ``failurePolicy``: ``Fail`` (the default) or ``Ignore``;
  - ``bindings``: the ValidatingAdmissionPolicyBindings whose ``policyName`` is
    it, sorted by name, each with ``name``, ``actions`` (its ``validationActions``)
    and ``pods`` (its ``matchResources`` keep Pods on ``CREATE``; a binding without
    ``resourceRules`` keeps what the policy matches);
  - ``actions``: the ``validationActions`` of all those bindings, sorted, once each;
  - ``deny``: a binding with ``Deny`` among its actions keeps Pods.

The expressions are read through their parse (``scanner.cel.analysis``: the names
they mention, comments aside), not evaluated: a policy that names the field is taken
to check it, and one whose CEL does not parse names nothing. ``matchConditions``,
namespace and object selectors, and parameters other than a ConfigMap's label keys are
not judged (a floor usually exempts system namespaces).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scanner.cel.analysis import analyze
from scanner.config.values import Config
from scanner.errors import CelError
from scanner.inventory import KubeObject, as_mapping
from scanner.kinds import WORKLOAD_KINDS, api_group
from scanner.kinds.resources import RESOURCES, Resource, find
from scanner.model.facts import AdmissionFacts
from scanner.model.index import ObjectIndex

GROUP = "admissionregistration.k8s.io"
POLICY = "ValidatingAdmissionPolicy"
BINDING = "ValidatingAdmissionPolicyBinding"
KINDS: frozenset[tuple[str, str]] = frozenset({(GROUP, POLICY), (GROUP, BINDING)})
"""(group, kind) of what admission facts are made from."""

_PODS = find("", "Pod")
_CONTROLLERS: tuple[Resource, ...] = tuple(
    resource for resource in RESOURCES if resource.kind in WORKLOAD_KINDS and resource.kind != "Pod"
)


def admission_facts(
    index: ObjectIndex, config: Config, listed: frozenset[tuple[str, str]] | None
) -> AdmissionFacts:
    """``admission`` (see the module docstring). ``listed``: the (group, kind) pairs an
    audit listed to the end; None when the run cannot tell (then presence decides)."""
    policies = [obj for obj in index.kind(POLICY) if api_group(obj.api_version) == GROUP]
    bindings = [obj for obj in index.kind(BINDING) if api_group(obj.api_version) == GROUP]
    known = bool(policies or bindings) if listed is None else listed >= KINDS
    by_policy: dict[str, list[dict[str, Any]]] = {}
    param_values: dict[str, set[str]] = {}
    for binding in bindings:
        spec = as_mapping(binding.body.get("spec"))
        name = spec.get("policyName")
        if isinstance(name, str):
            by_policy.setdefault(name, []).append(_binding_facts(binding, spec))
            param_values.setdefault(name, set()).update(_config_map_values(index, spec))
    keys = _label_keys(config)
    facts = [
        _policy_facts(obj, by_policy.get(obj.name, []), keys, param_values.get(obj.name, set()))
        for obj in policies
    ]
    facts.sort(key=lambda item: str(item["name"]))
    return {"known": known, "policies": facts}


def _policy_facts(
    obj: KubeObject, bindings: list[dict[str, Any]], keys: frozenset[str], params: set[str]
) -> dict[str, Any]:
    spec = as_mapping(obj.body.get("spec"))
    match = spec.get("matchConstraints")
    names = _names(_expressions(spec))
    if as_mapping(spec.get("paramKind")) == {"apiVersion": "v1", "kind": "ConfigMap"}:
        names |= params
    failure = spec.get("failurePolicy")
    bindings.sort(key=lambda item: str(item["name"]))
    actions = sorted({action for binding in bindings for action in binding["actions"]})
    return {
        "name": obj.name,
        "pods": _PODS is not None and covers(match, _PODS, inherit=False),
        "controllers": sorted(
            resource.label for resource in _CONTROLLERS if covers(match, resource, inherit=False)
        ),
        "runtimeClass": "runtimeClassName" in names,
        "sku": bool({"nodeSelector", "nodeAffinity"} & names and keys & names),
        "failurePolicy": failure if isinstance(failure, str) else "Fail",
        "bindings": bindings,
        "actions": actions,
        "deny": any(binding["pods"] and "Deny" in binding["actions"] for binding in bindings),
    }


def _binding_facts(obj: KubeObject, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "name": obj.name,
        "actions": _strings(spec.get("validationActions")),
        "pods": _PODS is not None and covers(spec.get("matchResources"), _PODS, inherit=True),
    }


def _config_map_values(index: ObjectIndex, binding_spec: Mapping[str, Any]) -> set[str]:
    """The ``data`` values (and their comma-separated parts) of the ConfigMap the
    binding's ``paramRef`` names by name and namespace, if it is in scope."""
    ref = as_mapping(binding_spec.get("paramRef"))
    name, namespace = ref.get("name"), ref.get("namespace")
    if not isinstance(name, str) or not isinstance(namespace, str):
        return set()
    found = index.get("ConfigMap", namespace, name)
    if found is None:
        return set()
    values: set[str] = set()
    for value in as_mapping(found.body.get("data")).values():
        if isinstance(value, str):
            values.add(value)
            values.update(part.strip() for part in value.split(","))
    return values


def covers(match: object, resource: Resource, *, inherit: bool) -> bool:
    """``match`` (``matchConstraints`` or a binding's ``matchResources``) selects
    ``resource`` on ``CREATE``. ``inherit``: what a missing ``resourceRules`` means
    (a binding then keeps whatever its policy matches; a policy matches nothing)."""
    if not isinstance(match, Mapping):
        return inherit
    rules = match.get("resourceRules")
    included = inherit if rules is None else _any_rule(rules, resource)
    return included and not _any_rule(match.get("excludeResourceRules"), resource)


def _any_rule(rules: object, resource: Resource) -> bool:
    return isinstance(rules, list) and any(_rule_matches(rule, resource) for rule in rules)


def _rule_matches(rule: object, resource: Resource) -> bool:
    """One ``NamedRuleWithOperations`` selects every ``resource`` object on CREATE."""
    if not isinstance(rule, Mapping) or rule.get("resourceNames"):
        return False  # resourceNames: only the named objects
    groups = _strings(rule.get("apiGroups"))
    versions = _strings(rule.get("apiVersions"))
    resources = _strings(rule.get("resources"))
    operations = _strings(rule.get("operations"))
    scope = rule.get("scope", "*")
    return (
        ("*" in groups or resource.group in groups)
        and ("*" in versions or any(version in versions for version in resource.versions))
        and ("*" in resources or "*/*" in resources or resource.plural in resources)
        and ("*" in operations or "CREATE" in operations)
        and scope in ("*", "Namespaced" if resource.namespaced else "Cluster")
    )


def _expressions(spec: Mapping[str, Any]) -> Iterable[str]:
    """The CEL that decides: ``validations[].expression`` and ``variables[].expression``."""
    for field in ("validations", "variables"):
        items = spec.get(field)
        if not isinstance(items, list):
            continue
        for item in items:
            if isinstance(item, Mapping) and isinstance(item.get("expression"), str):
                yield item["expression"]


def _names(expressions: Iterable[str]) -> frozenset[str]:
    """The field names and string constants the expressions mention."""
    names: set[str] = set()
    for expression in expressions:
        try:
            names |= analyze(expression, keep=False).names
        except CelError:  # not CEL (a ParseError)
            continue
    return frozenset(names)


def _label_keys(config: Config) -> frozenset[str]:
    """The SKU and pool label keys a policy may test."""
    return frozenset(
        key for key in (config.sku_label, *config.sku_labels, *config.pool_labels) if key
    )


def _strings(value: object) -> list[str]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        return []
    return [item for item in value if isinstance(item, str)]
