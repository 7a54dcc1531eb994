"""ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding, read as the API
server reads them (``admissionregistration.k8s.io/v1``).

Fields poolgate does not use offline (``auditAnnotations``) are accepted and left
out; a field of the wrong shape is a load problem naming the file and line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scanner.cel import ResultKind
from scanner.inventory import Position
from scanner.ruleset.admission.compile import Compiler
from scanner.ruleset.admission.policy import (
    Binding,
    Check,
    Expression,
    Match,
    ParamRef,
    Policy,
    ResourceRule,
)

ACTIONS = ("Deny", "Warn", "Audit")


class Reader:
    """Reads the documents of one file; problems go to ``compiler.problems``."""

    def __init__(self, name: str, positions: Mapping[str, Position], compiler: Compiler) -> None:
        self.name = name
        self.positions = positions
        self.compiler = compiler

    def where(self, path: str) -> str:
        while path and path not in self.positions:
            path = path.rsplit(".", 1)[0] if "." in path else ""
        line = self.positions[path][0] if path else 1
        return f"{self.name}:{line}"

    def problem(self, path: str, message: str) -> None:
        self.compiler.problems.append(f"{self.where(path)}: {path}: {message}")

    def strings(self, value: object, path: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            self.problem(path, "must be a list of strings")
            return ()
        return tuple(value)

    def mapping(self, value: object, path: str) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.problem(path, "must be a mapping")
            return {}
        return value

    def entries(self, value: object, path: str) -> Sequence[Mapping[str, Any]]:
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
            self.problem(path, "must be a list of mappings")
            return ()
        return value

    def match(self, value: object, path: str) -> Match:
        spec = self.mapping(value, path)
        policy = spec.get("matchPolicy", "Equivalent")
        if policy not in ("Equivalent", "Exact"):
            self.problem(f"{path}.matchPolicy", "must be Equivalent or Exact")
        return Match(
            rules=self.resource_rules(spec.get("resourceRules"), f"{path}.resourceRules"),
            excluded=self.resource_rules(
                spec.get("excludeResourceRules"), f"{path}.excludeResourceRules"
            ),
            namespace_selector=self.mapping(spec.get("namespaceSelector"), path) or None,
            object_selector=self.mapping(spec.get("objectSelector"), path) or None,
            exact=policy == "Exact",
        )

    def resource_rules(self, value: object, path: str) -> tuple[ResourceRule, ...]:
        return tuple(
            ResourceRule(
                groups=self.strings(item.get("apiGroups"), f"{path}[{index}].apiGroups"),
                versions=self.strings(item.get("apiVersions"), f"{path}[{index}].apiVersions"),
                resources=self.strings(item.get("resources"), f"{path}[{index}].resources"),
                operations=self.strings(item.get("operations"), f"{path}[{index}].operations"),
                names=self.strings(item.get("resourceNames"), f"{path}[{index}].resourceNames"),
            )
            for index, item in enumerate(self.entries(value, path))
        )

    def named(
        self, value: object, path: str, result: ResultKind, variables: dict[str, Expression]
    ) -> tuple[tuple[str, Expression], ...]:
        """``matchConditions`` or ``variables``: named expressions; each variable is
        known to those after it."""
        found = []
        for index, item in enumerate(self.entries(value, path)):
            name = item.get("name")
            if not isinstance(name, str) or not name:
                self.problem(f"{path}[{index}].name", "must be a non-empty string")
                continue
            at = f"{path}[{index}].expression"
            expression = self.compiler.expression(
                f"{self.where(at)}: {at}", item.get("expression"), result, variables
            )
            if expression is not None:
                found.append((name, expression))
                if path.endswith("variables"):
                    variables[name] = expression
        return tuple(found)

    def checks(
        self, value: object, path: str, variables: Mapping[str, Expression]
    ) -> tuple[Check, ...]:
        found = []
        for index, item in enumerate(self.entries(value, path)):
            at = f"{path}[{index}]"
            expression = self.compiler.expression(
                f"{self.where(at)}: {at}.expression",
                item.get("expression"),
                ResultKind.BOOL,
                variables,
            )
            message_expression = None
            if "messageExpression" in item:
                message_expression = self.compiler.expression(
                    f"{self.where(at)}: {at}.messageExpression",
                    item["messageExpression"],
                    ResultKind.STRING,
                    variables,
                )
            message = item.get("message", "")
            if not isinstance(message, str):
                self.problem(f"{at}.message", "must be a string")
            if expression is not None:
                found.append(
                    Check(
                        expression,
                        str(message),
                        message_expression,
                        str(item.get("reason", "") or ""),
                    )
                )
        return tuple(found)

    def policy(self, body: Mapping[str, Any], kind: str, name: str) -> Policy | None:
        """A ValidatingAdmissionPolicy (or a Kyverno ValidatingPolicy: the same spec)."""
        before = len(self.compiler.problems)
        spec = self.mapping(body.get("spec"), "spec")
        variables: dict[str, Expression] = {}
        declared = self.named(spec.get("variables"), "spec.variables", ResultKind.ANY, variables)
        conditions = self.named(
            spec.get("matchConditions"), "spec.matchConditions", ResultKind.BOOL, variables
        )
        checks = self.checks(spec.get("validations"), "spec.validations", variables)
        failure = spec.get("failurePolicy", "Fail")
        if failure not in ("Fail", "Ignore"):
            self.problem("spec.failurePolicy", "must be Fail or Ignore")
        param_kind = None
        if spec.get("paramKind") is not None:
            kind_spec = self.mapping(spec.get("paramKind"), "spec.paramKind")
            param_kind = (str(kind_spec.get("apiVersion", "")), str(kind_spec.get("kind", "")))
        match = self.match(spec.get("matchConstraints"), "spec.matchConstraints")
        if len(self.compiler.problems) > before:
            return None
        return Policy(
            name=name,
            kind=kind,
            source=self.name,
            match=match,
            conditions=conditions,
            variables=declared,
            checks=checks,
            fail=failure != "Ignore",
            engine=self.compiler.engine,
            param_kind=param_kind,
        )

    def binding(self, body: Mapping[str, Any], name: str) -> tuple[str, Binding] | None:
        """(policy name, binding) of a ValidatingAdmissionPolicyBinding."""
        spec = self.mapping(body.get("spec"), "spec")
        policy = spec.get("policyName")
        if not isinstance(policy, str) or not policy:
            self.problem("spec.policyName", "must name a policy")
            return None
        actions = self.strings(spec.get("validationActions"), "spec.validationActions")
        if not actions or any(action not in ACTIONS for action in actions):
            self.problem("spec.validationActions", "must list Deny, Warn or Audit")
            return None
        match = None
        if spec.get("matchResources") is not None:
            match = self.match(spec.get("matchResources"), "spec.matchResources")
        return policy, Binding(
            name, actions, match, self.param_ref(spec.get("paramRef")), self.name
        )

    def param_ref(self, value: object) -> ParamRef | None:
        if value is None:
            return None
        spec = self.mapping(value, "spec.paramRef")
        action = spec.get("parameterNotFoundAction", "Deny")
        if action not in ("Deny", "Allow"):
            self.problem("spec.paramRef.parameterNotFoundAction", "must be Deny or Allow")
        selector = spec.get("selector")
        return ParamRef(
            name=str(spec.get("name", "") or ""),
            namespace=str(spec.get("namespace", "") or ""),
            selector=selector if isinstance(selector, Mapping) else None,
            deny_when_missing=action != "Allow",
        )
