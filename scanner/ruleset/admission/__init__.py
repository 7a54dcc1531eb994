"""Admission policies loaded as rules, as they are.

``--rules`` and ``ruleDirs`` files may hold, next to poolgate rule files, the
admission policies a platform already has: ``ValidatingAdmissionPolicy`` with its
``ValidatingAdmissionPolicyBinding`` objects and their param objects (``vap.py``),
Kyverno ``ValidatingPolicy`` and Kyverno ``ClusterPolicy``/``Policy`` rules with
``validate.cel`` (``kyverno.py``). A file holding any of them is read whole, every
document; documents of other kinds in it are param objects. Bindings and params may
be in another file than their policy: policies are built once every file is read
(``build``).

Each policy is compiled here once (``compile.py``) into ``policy.Policy``; the rule
loader (``scanner.ruleset.load``) makes it a rule whose id is the policy's name (a
Kyverno ClusterPolicy rule: ``<policy>/<rule>``), and ``scanner.evaluate.admission``
evaluates it as the API server would.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from scanner.findings.records import Level
from scanner.inventory import Position
from scanner.ruleset.admission import kyverno
from scanner.ruleset.admission.compile import Compiler
from scanner.ruleset.admission.policy import Binding, Policy
from scanner.ruleset.admission.vap import Reader
from scanner.ruleset.docs import RuleDoc

VAP_GROUP: Final = "admissionregistration.k8s.io/"
KYVERNO_GROUP: Final = "policies.kyverno.io/"
KYVERNO_CLASSIC: Final = "kyverno.io/"
POLICY_KINDS: Final = {
    VAP_GROUP: ("ValidatingAdmissionPolicy",),
    KYVERNO_GROUP: ("ValidatingPolicy",),
    KYVERNO_CLASSIC: ("ClusterPolicy", "Policy"),
}
BINDING_KIND: Final = "ValidatingAdmissionPolicyBinding"

DNS_1123: Final = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
"""A policy's name: an id that never looks like a built-in rule's (``PG301``)."""

Document = tuple[Any, dict[str, Position]]

HELP_URI: Final = (
    "https://github.com/poolgate/poolgate/blob/main/docs/writing-rules.md"
    "#loading-admission-policies"
)


def kind_of(body: object) -> str:
    """``VAP``, ``binding``, ``kyverno``, ``kyverno-classic`` or ``""``."""
    if not isinstance(body, Mapping):
        return ""
    api_version, kind = str(body.get("apiVersion", "")), body.get("kind")
    if api_version.startswith(VAP_GROUP):
        if kind == BINDING_KIND:
            return "binding"
        return "vap" if kind in POLICY_KINDS[VAP_GROUP] else ""
    if api_version.startswith(KYVERNO_GROUP) and kind in POLICY_KINDS[KYVERNO_GROUP]:
        return "kyverno"
    if api_version.startswith(KYVERNO_CLASSIC) and kind in POLICY_KINDS[KYVERNO_CLASSIC]:
        return "kyverno-classic"
    return ""


def holds_admission(documents: list[Document]) -> bool:
    """Whether a rule file's documents are admission objects (policies, bindings, or
    Kubernetes objects that can only be param objects), not one poolgate rule."""
    return any(kind_of(body) for body, _ in documents) or all(
        isinstance(body, Mapping) and "apiVersion" in body and "kind" in body and "id" not in body
        for body, _ in documents
    )


@dataclass(slots=True)
class Collected:
    """The admission documents of every rule file, by file."""

    files: list[tuple[str, list[Document]]] = field(default_factory=list)

    def add(self, name: str, documents: list[Document]) -> None:
        self.files.append((name, documents))


def build(collected: Collected, engine_name: str, problems: list[str]) -> list[Policy]:
    """Every policy of ``collected`` with its bindings and params, compiled; what cannot
    be loaded is in ``problems`` (``file:line: field: message``)."""
    compiler = Compiler(engine_name, problems)
    policies: dict[str, Policy] = {}
    bindings: dict[str, list[Binding]] = {}
    params: list[tuple[str, Mapping[str, Any]]] = []
    for name, documents in collected.files:
        for body, positions in documents:
            reader = Reader(name, positions, compiler)
            kind = kind_of(body)
            if not kind:
                if isinstance(body, Mapping):
                    params.append((name, body))
                continue
            object_name = _name(reader, body)
            if object_name is None:
                continue
            if kind == "binding":
                bound = reader.binding(body, object_name)
                if bound is not None:
                    bindings.setdefault(bound[0], []).append(bound[1])
                continue
            for policy in _policies(reader, kind, body, object_name):
                if policy.name in policies:
                    problems.append(
                        f"{name}:1: {policy.name} is already defined in "
                        f"{policies[policy.name].source}"
                    )
                    continue
                policies[policy.name] = policy
    _unused(bindings, params, policies, problems)
    return [
        replace(
            policy,
            bindings=(*policy.bindings, *bindings.get(policy.name, ())),
            params=tuple(p for _, p in params if _of_kind(p, policy.param_kind)),
        )
        for policy in policies.values()
    ]


def _unused(
    bindings: Mapping[str, list[Binding]],
    params: list[tuple[str, Mapping[str, Any]]],
    policies: Mapping[str, Policy],
    problems: list[str],
) -> None:
    """A binding of no loaded policy, or an object no policy takes as params, is a
    problem: a rule directory holds nothing that is silently left out."""
    for policy_name, found in bindings.items():
        if policy_name not in policies:
            for binding in found:
                problems.append(
                    f"{binding.source}:1: binding {binding.name} names policy {policy_name}, "
                    "which is not loaded"
                )
    for name, body in params:
        if not any(_of_kind(body, policy.param_kind) for policy in policies.values()):
            problems.append(
                f"{name}:1: {body.get('kind')} is not a rule, an admission policy, a binding "
                "or the params of a loaded policy"
            )


def _policies(reader: Reader, kind: str, body: Mapping[str, Any], name: str) -> list[Policy]:
    if kind == "vap":
        policy = reader.policy(body, str(body.get("kind")), name)
        return [] if policy is None else [policy]
    if kind == "kyverno":
        return kyverno.validating_policy(reader, body, name)
    return kyverno.cluster_policy(reader, body, name)


def _name(reader: Reader, body: Mapping[str, Any]) -> str | None:
    metadata = body.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(name, str) or not DNS_1123.fullmatch(name):
        reader.problem("metadata.name", "must be a DNS-1123 name (lower case, digits, '-', '.')")
        return None
    return name


def _of_kind(body: Mapping[str, Any], param_kind: tuple[str, str] | None) -> bool:
    if param_kind is None:
        return False
    return (str(body.get("apiVersion", "")), body.get("kind")) == param_kind


def document(policy: Policy, level: Level) -> RuleDoc:
    """The rule documentation of an admission policy loaded as a rule."""
    messages = [check.message for check in policy.checks if check.message]
    return RuleDoc(
        id=policy.name,
        name=policy.name,
        level=level,
        summary=f"{policy.kind} {policy.name}" + (f": {messages[0]}" if messages else ""),
        description=(
            f"The admission policy {policy.name}, loaded from {policy.source} and "
            "evaluated as the API server would on a create of each object it matches."
        ),
        remediation="Change the object so that the policy admits it.",
        subject="object",
        source=policy.source,
        tags=("admission",),
        help_uri=HELP_URI,
    )
