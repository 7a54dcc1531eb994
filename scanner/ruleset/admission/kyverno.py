"""Kyverno's CEL policies, read as Kyverno's CLI (``kyverno apply``/``kyverno test``)
reads them, into the same ``Policy`` as a ValidatingAdmissionPolicy.

* ``ValidatingPolicy`` (``policies.kyverno.io``): a ValidatingAdmissionPolicy's spec
  with its own ``validationActions`` (an implicit binding) and autogen
  (``spec.autogen.podControllers``).
* ``ClusterPolicy``/``Policy`` (``kyverno.io/v1``) rules with ``validate.cel``: each
  rule a policy of its own, named ``<policy>/<rule>``; ``match``/``exclude`` by kinds
  (and namespaces, names, selectors), ``validate.failureAction`` or the policy's
  ``validationFailureAction`` (``Enforce`` denies, ``Audit`` audits). A rule on Pods
  also judges the pod templates of Deployments, StatefulSets, DaemonSets, Jobs,
  CronJobs and ReplicaSets unless ``pod-policies.kyverno.io/autogen-controllers`` is
  ``none`` (Kyverno's autogen). Rules without ``validate.cel`` (patterns, mutate,
  generate, verifyImages) are refused: poolgate runs CEL.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from scanner.cel import ResultKind
from scanner.ruleset.admission.policy import (
    Binding,
    Check,
    Expression,
    Match,
    ParamRef,
    Policy,
    ResourceRule,
    plural,
)
from scanner.ruleset.admission.vap import ACTIONS, Reader

AUTOGEN: Final = "pod-policies.kyverno.io/autogen-controllers"
_READ_FILTERS: Final = frozenset({"kinds", "operations", "names"})
"""What poolgate reads of a ``match``/``exclude`` filter's ``resources``; a policy that
filters by anything else (namespaces, selectors, annotations, roles) is refused."""
_UNREAD_RULE_FIELDS: Final = frozenset({"context", "preconditions"})


def validating_policy(reader: Reader, body: Mapping[str, Any], name: str) -> list[Policy]:
    policy = reader.policy(body, "ValidatingPolicy", name)
    if policy is None:
        return []
    spec = reader.mapping(body.get("spec"), "spec")
    actions = reader.strings(spec.get("validationActions"), "spec.validationActions") or ("Deny",)
    if any(action not in ACTIONS for action in actions):
        reader.problem("spec.validationActions", "must list Deny, Warn or Audit")
        return []
    autogen = reader.mapping(spec.get("autogen"), "spec.autogen")
    controllers = reader.mapping(autogen.get("podControllers"), "spec.autogen.podControllers")
    pods = any("pods" in rule.resources for rule in policy.match.rules)
    return [
        replace(
            policy,
            bindings=(Binding(name, actions, source=reader.name),),
            pod_controllers=pods and controllers.get("controllers", ["*"]) != [],
        )
    ]


def cluster_policy(reader: Reader, body: Mapping[str, Any], name: str) -> list[Policy]:
    spec = reader.mapping(body.get("spec"), "spec")
    metadata = reader.mapping(body.get("metadata"), "metadata")
    annotations = reader.mapping(metadata.get("annotations"), "metadata.annotations")
    default_action = spec.get("validationFailureAction", "Audit")
    namespace = str(metadata.get("namespace", "") or "") if body.get("kind") == "Policy" else ""
    found = []
    for index, rule in enumerate(reader.entries(spec.get("rules"), "spec.rules")):
        path = f"spec.rules[{index}]"
        rule_name = rule.get("name")
        if not isinstance(rule_name, str) or not rule_name:
            reader.problem(f"{path}.name", "must be a non-empty string")
            continue
        validate = reader.mapping(rule.get("validate"), f"{path}.validate")
        unread = sorted(set(rule) & _UNREAD_RULE_FIELDS)
        if unread:
            reader.problem(
                f"{path}.{unread[0]}", "is not supported by poolgate (refused, not ignored)"
            )
            continue
        if "cel" not in validate:
            reader.problem(path, "has no validate.cel: poolgate runs Kyverno's CEL rules only")
            continue
        action = validate.get("failureAction", default_action)
        policy = _rule(
            reader,
            validate["cel"],
            rule.get("celPreconditions"),
            f"{path}.validate.cel",
            f"{name}/{rule_name}",
        )
        if policy is None:
            continue
        match = _match(reader, rule.get("match"), f"{path}.match", rule.get("exclude"), namespace)
        pods = any("pods" in each.resources for each in match.rules)
        deny = str(action).lower() == "enforce"
        found.append(
            replace(
                policy,
                match=match,
                bindings=(Binding(name, ("Deny",) if deny else ("Audit",), source=reader.name),),
                pod_controllers=pods and annotations.get(AUTOGEN) != "none",
            )
        )
    return found


def _rule(
    reader: Reader, value: object, preconditions: object, path: str, name: str
) -> Policy | None:
    cel = reader.mapping(value, path)
    before = len(reader.compiler.problems)
    variables: dict[str, Expression] = {}
    declared = reader.named(cel.get("variables"), f"{path}.variables", ResultKind.ANY, variables)
    rule_path = path.removesuffix(".validate.cel")
    conditions = reader.named(
        preconditions, f"{rule_path}.celPreconditions", ResultKind.BOOL, variables
    )
    checks: tuple[Check, ...] = reader.checks(
        cel.get("expressions"), f"{path}.expressions", variables
    )
    param_kind = None
    if cel.get("paramKind") is not None:
        kind = reader.mapping(cel.get("paramKind"), f"{path}.paramKind")
        param_kind = (str(kind.get("apiVersion", "")), str(kind.get("kind", "")))
    param_ref: ParamRef | None = None
    if cel.get("paramRef") is not None:
        param_ref = reader.param_ref(cel.get("paramRef"))
    if len(reader.compiler.problems) > before:
        return None
    return Policy(
        name=name,
        kind="ClusterPolicy",
        source=reader.name,
        match=Match(()),
        conditions=conditions,
        variables=declared,
        checks=checks,
        fail=True,
        engine=reader.compiler.engine,
        param_kind=param_kind,
        bindings=(Binding(name, ("Deny",), param_ref=param_ref, source=reader.name),)
        if param_ref
        else (),
    )


def _match(reader: Reader, value: object, path: str, exclude: object, namespace: str) -> Match:
    """Kyverno's ``match``/``exclude`` as a ``Match``: its kinds as resource rules
    (``Kind``, ``version/Kind`` or ``group/version/Kind``)."""
    rules = _resource_rules(reader, value, path)
    excluded = _resource_rules(reader, exclude, path.replace("match", "exclude"))
    selector = {"matchLabels": {"kubernetes.io/metadata.name": namespace}} if namespace else None
    return Match(rules, excluded, namespace_selector=selector)


def _resource_rules(reader: Reader, value: object, path: str) -> tuple[ResourceRule, ...]:
    spec = reader.mapping(value, path)
    filters = [*reader.entries(spec.get("any"), f"{path}.any")]
    every = reader.entries(spec.get("all"), f"{path}.all")
    if len(every) > 1:
        reader.problem(f"{path}.all", "with more than one filter is not supported by poolgate")
    filters += every
    if "resources" in spec:
        filters.append(spec)
    found = []
    for index, each in enumerate(filters):
        resources = reader.mapping(each.get("resources"), f"{path}[{index}].resources")
        unread = sorted((set(each) - {"resources"}) | (set(resources) - _READ_FILTERS))
        if unread:
            reader.problem(
                f"{path}[{index}]",
                f"{unread[0]} is not supported by poolgate (refused, not ignored)",
            )
            continue
        operations = reader.strings(resources.get("operations"), f"{path}.operations") or ("*",)
        names = reader.strings(resources.get("names"), f"{path}.names")
        if any("*" in name or "?" in name for name in names):
            reader.problem(f"{path}[{index}].resources.names", "wildcards are not supported")
        for kind in reader.strings(resources.get("kinds"), f"{path}.kinds"):
            found.append(_kind_rule(kind, operations, names))
    return tuple(found)


def _kind_rule(kind: str, operations: tuple[str, ...], names: tuple[str, ...]) -> ResourceRule:
    """A Kyverno kind (``Pod``, ``v1/Pod``, ``apps/v1/Deployment``, ``batch/*/CronJob``)
    as a resource rule: a kind without a group matches it in any group, as Kyverno does."""
    parts = kind.split("/")
    group = parts[0] if len(parts) == 3 else "*"
    version = parts[-2] if len(parts) >= 2 else "*"
    if len(parts) == 2:
        group = ""  # ``v1/Pod``: the core group
    resource = "*" if parts[-1] == "*" else plural("" if group == "*" else group, parts[-1])
    return ResourceRule((group,), (version,), (resource,), operations, names)
