"""Rules exported to admission: ValidatingAdmissionPolicies from the rules' ``admission`` sections.

poolgate's rules read model facts (``workload.gpu``, ``workload.selectedLabels``) that
the API server does not have: admission sees the raw ``object``. Translating a rule's
CEL from facts to raw fields would be a compiler nobody can review, and wrong
wherever a fact joins objects. So a rule that can be enforced at admission says how,
in its own file, next to the CEL it mirrors: an ``admission`` section with
``validations`` written against the raw pod template, through the variables this
module defines once for every exported policy (``EXPORT_VARIABLES``):

=====================  ===============================================================
``template``           the pod template: the Pod itself, ``spec.template`` of a
                       Deployment, ReplicaSet, StatefulSet, DaemonSet, Job or
                       ReplicationController, ``spec.jobTemplate.spec.template`` of a
                       CronJob
``spec``               its pod spec
``containers``         containers, init containers and ephemeral containers
``gpu``                a container asks for ``nvidia.com/gpu``, ``gpu.shared`` or
                       ``mig-<profile>`` (limits or requests, a quantity other than 0)
``namespace``          ``request.namespace``
``operatorNamespaces`` ``systemNamespaces``, ``runtimeClass``, ``skuLabel``,
                       ``imageDigestPin``: the config, from the params ConfigMap
=====================  ===============================================================

A section's optional ``condition`` says when the rule applies (an object it does not
apply to is admitted); ``systemNamespaces: audit`` says the rule reports notes in
config ``systemNamespaces``, so the policy gets a second binding there with ``Audit``
only. A rule without a section is listed with the reason it is not exported: its own
``admission.notExported``, or its subject's (a pool, a node, a namespace: facts made
of several objects). Config values go into one ConfigMap (``PARAMS_NAME``) that every
policy reads through ``paramKind``/``paramRef``: changing them needs no new export.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TextIO

from scanner.cel import Engine, ResultKind
from scanner.config.values import Config
from scanner.errors import CelError
from scanner.ruleset.load import Rule

API_VERSION: Final = "admissionregistration.k8s.io/v1"
PARAMS_NAME: Final = "poolgate-admission-params"
DEFAULT_PARAMS_NAMESPACE: Final = "kube-system"
ACTIONS: Final = ("Deny", "Warn", "Audit")
MANAGED: Final = {"app.kubernetes.io/managed-by": "poolgate"}
NAMESPACE_LABEL: Final = "kubernetes.io/metadata.name"

VARIABLES: Final = {
    "object": "dyn",
    "oldObject": "dyn",
    "request": "dyn",
    "params": "dyn",
    "namespaceObject": "dyn",
    "authorizer": "dyn",
    "variables": "dyn",
}
"""What a ValidatingAdmissionPolicy's CEL may read (all ``dyn`` here: the policy
matches several kinds)."""

RESOURCE_RULES: Final = (
    ("", ("pods", "replicationcontrollers")),
    ("apps", ("deployments", "replicasets", "statefulsets", "daemonsets")),
    ("batch", ("jobs", "cronjobs")),
)
"""What every exported policy matches, on CREATE and UPDATE: Pods (every pod, whoever
creates it) and the built-in controllers (so a Deployment whose pods would be denied
is denied itself, instead of being admitted with pods that never start)."""

_GPU_RESOURCE: Final = (
    r"^nvidia\\.com/(gpu|gpu\\.shared|mig-[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$"
)
"""``scanner.model.workloads.GPU_RESOURCE``, escaped for a CEL string literal."""

EXPORT_VARIABLES: Final[tuple[tuple[str, str], ...]] = (
    (
        "template",
        "object.kind == 'Pod' ? object"
        " : object.kind == 'CronJob' ? object.spec.jobTemplate.spec.template"
        " : object.spec.template",
    ),
    ("spec", "variables.template.spec"),
    (
        "containers",
        "variables.spec.?containers.orValue([])"
        " + variables.spec.?initContainers.orValue([])"
        " + variables.spec.?ephemeralContainers.orValue([])",
    ),
    (
        "gpu",
        "variables.containers.exists(c, [c.?resources.?limits.orValue({}),"
        " c.?resources.?requests.orValue({})].exists(r, r.exists(k,"
        f" k.matches('{_GPU_RESOURCE}') && quantity(string(r[k])).compareTo(quantity('0')) != 0)))",
    ),
    ("namespace", "request.namespace"),
    (
        "operatorNamespaces",
        "params.data.?operatorNamespaces.orValue('').split(',').filter(n, n != '')",
    ),
    (
        "systemNamespaces",
        "params.data.?systemNamespaces.orValue('').split(',').filter(n, n != '')",
    ),
    ("runtimeClass", "params.data.?runtimeClass.orValue('')"),
    ("skuLabel", "params.data.?skuLabel.orValue('')"),
    ("imageDigestPin", "params.data.?imageDigestPin.orValue('true') == 'true'"),
)
"""The variables every exported policy defines, in order (later ones read earlier ones)."""

SUBJECT_REASONS: Final = {
    "document": "checks the file itself (YAML syntax, duplicate keys and objects), "
    "which admission never sees",
    "node": "judges Nodes with their pools (facts joined from several objects)",
    "pool": "judges node pools, made of several Nodes or declarations",
    "sharingConfig": "judges device-plugin sharing configs read from ConfigMaps and "
    "ClusterPolicy together",
    "namespace": "judges a namespace with the workloads and policies in it",
    "cluster": "judges the cluster as a whole",
}


@dataclass(frozen=True, slots=True)
class Skipped:
    rule_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class Export:
    """The objects to write, in order, and the rules left out with why."""

    objects: tuple[dict[str, Any], ...]
    skipped: tuple[Skipped, ...]
    exported: tuple[str, ...]
    """Ids of the exported rules."""


def export(
    rules: Sequence[Rule],
    config: Config,
    actions: Sequence[str] = ("Deny",),
    params_namespace: str = DEFAULT_PARAMS_NAMESPACE,
) -> Export:
    """The policies, bindings and params ConfigMap for the enabled ``rules``."""
    objects: list[dict[str, Any]] = [params_config_map(config, params_namespace)]
    skipped: list[Skipped] = []
    exported: list[str] = []
    for rule in sorted(rules, key=lambda item: item.id):
        if not rule.enabled:
            continue
        reason = not_exported(rule)
        if reason:
            skipped.append(Skipped(rule.id, reason))
            continue
        exported.append(rule.id)
        objects.append(policy(rule))
        objects.extend(bindings(rule, config, actions, params_namespace))
    return Export(tuple(objects), tuple(skipped), tuple(exported))


def not_exported(rule: Rule) -> str:
    """Why ``rule`` is not exported; empty when it is."""
    section = rule.admission
    if section.get("validations"):
        return ""
    if section.get("notExported"):
        return " ".join(str(section["notExported"]).split())
    if "scan" not in rule.modes:
        return "reads live state (status, running pods) that admission does not have"
    if rule.doc.subject in SUBJECT_REASONS:
        return SUBJECT_REASONS[rule.doc.subject]
    return "its rule file has no admission section"


def policy_name(rule: Rule) -> str:
    return f"poolgate-{rule.doc.name}"


def policy(rule: Rule) -> dict[str, Any]:
    """The ValidatingAdmissionPolicy of one rule."""
    section = rule.admission
    condition = section.get("condition")
    validations = []
    for item in section["validations"]:
        expression = " ".join(str(item["expression"]).split())
        if condition:
            expression = f"!({' '.join(str(condition).split())}) || ({expression})"
        validation: dict[str, Any] = {"expression": expression}
        message = item.get("message") or f"{rule.doc.summary} ({rule.id})"
        validation["message"] = " ".join(str(message).split())
        if item.get("messageExpression"):
            validation["messageExpression"] = " ".join(str(item["messageExpression"]).split())
        validation["reason"] = item.get("reason", "Forbidden")
        validations.append(validation)
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {
            "name": policy_name(rule),
            "labels": dict(MANAGED),
            "annotations": {"poolgate.io/rule": rule.id},
        },
        "spec": {
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [group],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": list(resources),
                    }
                    for group, resources in RESOURCE_RULES
                ]
            },
            "variables": [
                {"name": name, "expression": expression} for name, expression in EXPORT_VARIABLES
            ],
            "validations": validations,
        },
    }


def bindings(
    rule: Rule, config: Config, actions: Sequence[str], params_namespace: str
) -> list[dict[str, Any]]:
    """The policy's binding with ``actions``; with ``systemNamespaces: audit``, that
    binding leaves config ``systemNamespaces`` out and a second one audits them."""
    name = policy_name(rule)
    system = sorted(config.system_namespaces)
    if rule.admission.get("systemNamespaces") != "audit" or not system:
        return [_binding(name, name, actions, params_namespace, None)]
    return [
        _binding(name, name, actions, params_namespace, ("NotIn", system)),
        _binding(f"{name}-system", name, ("Audit",), params_namespace, ("In", system)),
    ]


def _binding(
    name: str,
    policy_name_: str,
    actions: Sequence[str],
    params_namespace: str,
    namespaces: tuple[str, list[str]] | None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "policyName": policy_name_,
        "validationActions": list(actions),
        "paramRef": {
            "name": PARAMS_NAME,
            "namespace": params_namespace,
            "parameterNotFoundAction": "Deny",
        },
    }
    if namespaces is not None:
        operator, values = namespaces
        spec["matchResources"] = {
            "namespaceSelector": {
                "matchExpressions": [
                    {"key": NAMESPACE_LABEL, "operator": operator, "values": values}
                ]
            }
        }
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": dict(MANAGED)},
        "spec": spec,
    }


def params_config_map(config: Config, namespace: str) -> dict[str, Any]:
    """The config values the exported policies read (``EXPORT_VARIABLES``)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": PARAMS_NAME, "namespace": namespace, "labels": dict(MANAGED)},
        "data": {
            "imageDigestPin": "true" if config.require.image_digest_pin else "false",
            "operatorNamespaces": ",".join(config.operator_namespaces),
            "runtimeClass": config.require.runtime_class,
            "skuLabel": config.sku_label,
            "systemNamespaces": ",".join(config.system_namespaces),
        },
    }


def expressions(obj: dict[str, Any]) -> Iterable[tuple[str, str, ResultKind]]:
    """(where, CEL, result kind) of every expression of an exported policy."""
    spec = obj.get("spec", {})
    for index, variable in enumerate(spec.get("variables", ())):
        yield f"variables[{index}]", variable["expression"], ResultKind.ANY
    for index, validation in enumerate(spec.get("validations", ())):
        yield f"validations[{index}].expression", validation["expression"], ResultKind.BOOL
        if "messageExpression" in validation:
            where = f"validations[{index}].messageExpression"
            yield where, validation["messageExpression"], ResultKind.STRING


def check(result: Export, engine: Engine) -> list[str]:
    """Compile every expression of every policy in ``engine`` (which must declare
    ``VARIABLES``); one problem per expression that does not compile."""
    problems = []
    for obj in result.objects:
        if obj["kind"] != "ValidatingAdmissionPolicy":
            continue
        rule_id = obj["metadata"]["annotations"]["poolgate.io/rule"]
        for where, source, kind in expressions(obj):
            try:
                engine.compile(source, kind)
            except CelError as error:
                problems.append(f"{rule_id}: admission {where}: CEL {error.message}")
    return problems


def render(result: Export, out: TextIO) -> None:
    """Write the objects as one YAML stream, after a comment naming what is not exported."""
    import yaml

    out.write("# Generated by `poolgate admission export`.\n")
    out.write(f"# Exported rules: {', '.join(result.exported) or 'none'}\n")
    if result.skipped:
        out.write("# Not exported:\n")
        for item in result.skipped:
            out.write(f"#   {item.rule_id}: {item.reason}\n")
    for obj in result.objects:
        out.write("---\n")
        out.write(yaml.safe_dump(obj, sort_keys=False, width=100, allow_unicode=False))
