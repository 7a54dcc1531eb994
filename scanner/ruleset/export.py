"""Rules exported to admission: ValidatingAdmissionPolicies from the rules' ``admission`` sections.

poolgate's rules read model facts (``workload.gpu``, ``workload.selectedLabels``) that
the API server does not have: admission sees the raw ``object``. Translating a rule's
CEL from facts to raw fields would be a compiler nobody can review, and wrong
wherever a fact joins objects. So a rule that can be enforced at admission says how,
in its own file, next to the CEL it mirrors: an ``admission`` section with
``validations`` written against the raw pod template, through the variables this
module defines once for every exported policy (``admission_policy.yaml``):

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
``operatorNamespaces`` ``systemNamespaces``, ``runtimeClass``, ``skuLabels``,
                       ``imageDigestPin``: the config, from the params ConfigMap
=====================  ===============================================================

A section may add ``variables`` of its own, after these (by convention ``applies``: when
the rule applies, which each validation tests first). ``systemNamespaces: audit`` says
the rule reports notes in config ``systemNamespaces``: the policy gets a second binding
there, with ``Audit`` only. A rule without a section is listed with the reason it is
not exported: its own ``admission.notExported``, or its subject's (a pool, a node, a
namespace: facts made of several objects). Config values go into one ConfigMap
(``PARAMS_NAME``, in the first operator namespace by default) that every policy reads
through ``paramKind``/``paramRef``: changing them needs no new export.

Why not a translation: a rule and its admission form are both short, stand side by
side in one file, and the round-trip test (tests/ruleset/test_export_roundtrip.py)
holds them to the same verdicts on the rule's fixtures.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final, TextIO

from scanner.cel import Engine, ResultKind
from scanner.config.values import Config
from scanner.errors import CelError
from scanner.ruleset.load import Rule

API_VERSION: Final = "admissionregistration.k8s.io/v1"
PARAMS_NAME: Final = "poolgate-admission-params"
FALLBACK_PARAMS_NAMESPACE: Final = "kube-system"
"""Where the params go when config names no operator namespace."""
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
    ("", ("pods", "pods/ephemeralcontainers", "replicationcontrollers")),
    ("apps", ("deployments", "replicasets", "statefulsets", "daemonsets")),
    ("batch", ("jobs", "cronjobs")),
)
"""What every exported policy matches, on CREATE and UPDATE: Pods (every pod, whoever
creates it, and the containers ``kubectl debug`` adds to one) and the built-in
controllers (so a Deployment whose pods would be denied is denied itself, instead of
being admitted with pods that never start)."""

POLICY_FILE: Final = Path(__file__).with_name("admission_policy.yaml")
"""The ``matchConditions`` and ``variables`` every exported policy holds."""


@cache
def _policy_parts() -> dict[str, tuple[tuple[str, str], ...]]:
    import yaml

    parts = yaml.safe_load(POLICY_FILE.read_text(encoding="utf-8"))
    return {
        section: tuple(
            (str(item["name"]), str(item["expression"]).strip()) for item in parts[section]
        )
        for section in ("matchConditions", "variables")
    }


def match_conditions() -> tuple[tuple[str, str], ...]:
    """(name, CEL) of each ``matchConditions`` entry in ``POLICY_FILE``."""
    return _policy_parts()["matchConditions"]


def export_variables() -> tuple[tuple[str, str], ...]:
    """(name, CEL) of each variable in ``POLICY_FILE``, in order."""
    return _policy_parts()["variables"]


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
    params_namespace: str = "",
) -> Export:
    """The policies, bindings and params ConfigMap for the enabled ``rules``.

    ``params_namespace``: where the ConfigMap goes; by default the first operator
    namespace, the platform's own, whose ConfigMaps the nightly audit reads (PG605
    finds the SKU label there)."""
    params_namespace = params_namespace or default_params_namespace(config)
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


def default_params_namespace(config: Config) -> str:
    return (
        config.operator_namespaces[0] if config.operator_namespaces else FALLBACK_PARAMS_NAMESPACE
    )


def not_exported(rule: Rule) -> str:
    """Why ``rule`` is not exported; empty when it is."""
    section = rule.export
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
    section = rule.export
    validations = []
    for item in section["validations"]:
        # CEL as written (ends trimmed): reflowing it would change its string literals.
        validation: dict[str, Any] = {"expression": str(item["expression"]).strip()}
        message = item.get("message") or f"{rule.doc.summary} ({rule.id})"
        validation["message"] = " ".join(str(message).split())
        if item.get("messageExpression"):
            validation["messageExpression"] = str(item["messageExpression"]).strip()
        validation["reason"] = item.get("reason", "Forbidden")
        validations.append(validation)
    variables = [*export_variables()]
    variables += [
        (str(item["name"]), str(item["expression"]).strip())
        for item in section.get("variables", ())
    ]
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
            "matchConditions": [
                {"name": name, "expression": expression} for name, expression in match_conditions()
            ],
            "variables": [
                {"name": name, "expression": expression} for name, expression in variables
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
    if rule.export.get("systemNamespaces") != "audit" or not system:
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
    """The config values the exported policies read (``admission_policy.yaml``)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": PARAMS_NAME, "namespace": namespace, "labels": dict(MANAGED)},
        "data": {
            "imageDigestPin": "true" if config.require.image_digest_pin else "false",
            "operatorNamespaces": ",".join(config.operator_namespaces),
            "runtimeClass": config.require.runtime_class,
            "skuLabels": ",".join(dict.fromkeys((config.sku_label, *config.sku_labels))),
            "systemNamespaces": ",".join(config.system_namespaces),
        },
    }


def expressions(obj: dict[str, Any]) -> Iterable[tuple[str, str, ResultKind]]:
    """(where, CEL, result kind) of every expression of an exported policy."""
    spec = obj.get("spec", {})
    for index, condition in enumerate(spec.get("matchConditions", ())):
        yield f"matchConditions[{index}]", condition["expression"], ResultKind.BOOL
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
        names = [variable["name"] for variable in obj["spec"]["variables"]]
        for name in sorted({name for name in names if names.count(name) > 1}):
            problems.append(f"{rule_id}: admission variables: {name} is defined twice")
        for where, source, kind in expressions(obj):
            try:
                engine.compile(source, kind)
            except CelError as error:
                problems.append(f"{rule_id}: admission {where}: CEL {error.message}")
    return problems


def render(result: Export, out: TextIO) -> None:
    """Write the objects as one YAML stream, after a comment naming what is not
    exported. Multi-line CEL is written as a literal block, as it was in the rule."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def string(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, string)
    out.write("# Generated by `poolgate admission export`.\n")
    out.write(f"# Exported rules: {', '.join(result.exported) or 'none'}\n")
    if result.skipped:
        out.write("# Not exported:\n")
        for item in result.skipped:
            out.write(f"#   {item.rule_id}: {item.reason}\n")
    for obj in result.objects:
        out.write("---\n")
        out.write(yaml.dump(obj, Dumper=Dumper, sort_keys=False, width=10_000))
