"""A small ValidatingAdmissionPolicy evaluator for the export's round-trip test.

It applies an exported policy to one object as the API server would on its CREATE (or
UPDATE): ``matchConstraints`` by the object's kind (``scanner.model.admission.covers``),
``matchConditions``, ``variables`` in order, ``validations``, and the bindings whose
namespace selector keeps the object's namespace (``kubernetes.io/metadata.name``, set
on every namespace). CEL runs in poolgate's Kubernetes environment
(``scanner.cel.k8s``). Only what the exported policies use is here: no object
selectors, ``params`` is the one ConfigMap given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from scanner.cel import Engine, ResultKind, get_engine
from scanner.kinds import api_group
from scanner.kinds.resources import find
from scanner.model.admission import covers
from scanner.model.selectors import label_selector_matches
from scanner.ruleset.export import NAMESPACE_LABEL, VARIABLES


@dataclass(frozen=True)
class Verdict:
    matched: bool
    """The policy's matchConstraints select the object's kind, and its matchConditions hold."""
    messages: tuple[str, ...] = ()
    """One per failed validation."""
    actions: frozenset[str] = frozenset()
    """validationActions of the bindings that keep the object's namespace."""

    @property
    def outcome(self) -> str:
        """``admit``, ``deny`` (a Deny binding), or ``audit``/``warn`` (only those)."""
        if not self.matched or not self.messages:
            return "admit"
        if "Deny" in self.actions:
            return "deny"
        return "warn" if "Warn" in self.actions else "audit" if self.actions else "admit"


@cache
def engine() -> Engine:
    return get_engine("cpp", VARIABLES)


def namespace_of(obj: Mapping[str, Any]) -> str:
    """Where the API server puts it: its own namespace, else the request's (``default``)."""
    return str(obj.get("metadata", {}).get("namespace") or "default")


def evaluate(
    policy: Mapping[str, Any],
    bindings: Sequence[Mapping[str, Any]],
    params: Mapping[str, Any],
    obj: Mapping[str, Any],
    *,
    old: Mapping[str, Any] | None = None,
) -> Verdict:
    """The policy on the CREATE of ``obj``, or its UPDATE from ``old``."""
    resource = find(api_group(str(obj.get("apiVersion", ""))), str(obj.get("kind", "")))
    spec = policy["spec"]
    if resource is None or not covers(spec.get("matchConstraints"), resource, inherit=False):
        return Verdict(matched=False)
    namespace = namespace_of(obj)
    data: dict[str, Any] = {
        "object": obj,
        "oldObject": old,
        "params": params,
        "request": {
            "operation": "CREATE" if old is None else "UPDATE",
            "namespace": namespace,
            "name": obj.get("metadata", {}).get("name", ""),
            "kind": {"group": resource.group, "version": "v1", "kind": resource.kind},
        },
        "namespaceObject": {
            "metadata": {"name": namespace, "labels": {NAMESPACE_LABEL: namespace}}
        },
        "authorizer": None,
    }
    cel = engine()
    for condition in spec.get("matchConditions", ()):
        if not cel.compile(condition["expression"], ResultKind.BOOL).evaluate(cel.activation(data)):
            return Verdict(matched=False)
    variables: dict[str, Any] = {}
    for variable in spec.get("variables", ()):
        program = cel.compile(variable["expression"], ResultKind.ANY)
        variables[variable["name"]] = program.evaluate(
            cel.activation({**data, "variables": variables})
        )
    activation = cel.activation({**data, "variables": variables})
    messages = []
    for validation in spec["validations"]:
        if cel.compile(validation["expression"], ResultKind.BOOL).evaluate(activation):
            continue
        message = validation["message"]
        if "messageExpression" in validation:
            program = cel.compile(validation["messageExpression"], ResultKind.STRING)
            message = program.evaluate(activation)
        messages.append(message)
    labels = {NAMESPACE_LABEL: namespace}
    actions = frozenset(
        action
        for binding in bindings
        if binding["spec"]["policyName"] == policy["metadata"]["name"]
        and label_selector_matches(
            binding["spec"].get("matchResources", {}).get("namespaceSelector", {}), labels
        )
        for action in binding["spec"]["validationActions"]
    )
    return Verdict(True, tuple(messages), actions)
