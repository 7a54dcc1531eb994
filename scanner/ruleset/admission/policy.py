"""Admission policies as poolgate holds them once loaded: what to match, what to check.

One model for every kind of admission policy poolgate loads as rules
(``scanner.ruleset.admission``): a Kubernetes ValidatingAdmissionPolicy and its
bindings, a Kyverno ValidatingPolicy, a Kyverno ClusterPolicy rule with
``validate.cel``. The evaluation (``scanner.evaluate.admission``) reads only this.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scanner.cel import Engine, Program

AUTHORIZER = "authorizer"
"""A variable offline evaluation cannot answer: who may do what in the cluster."""
USER_INFO = "request.userInfo"
"""Who sends the request: unknown offline."""
NAMESPACE_OBJECT = "namespaceObject"
"""Unknown for a namespace that is neither scanned nor given as context."""
NAMESPACE_NAME = "namespaceObject.metadata.name"
"""Known from the object's ``metadata.namespace`` even when the namespace is not in
scope; unknown for a namespaced object that names none (``kubectl -n`` decides)."""


@dataclass(frozen=True, slots=True)
class ResourceRule:
    """One ``resourceRules`` entry (``NamedRuleWithOperations``)."""

    groups: tuple[str, ...]
    versions: tuple[str, ...]
    resources: tuple[str, ...]
    operations: tuple[str, ...]
    names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Match:
    """``matchConstraints`` (or a binding's ``matchResources``)."""

    rules: tuple[ResourceRule, ...]
    excluded: tuple[ResourceRule, ...] = ()
    namespace_selector: Mapping[str, Any] | None = None
    object_selector: Mapping[str, Any] | None = None
    exact: bool = False
    """``matchPolicy: Exact``; ``Equivalent`` (the default) matches any version."""


@dataclass(frozen=True, slots=True)
class Expression:
    """A compiled expression, or None where it reads what offline evaluation cannot
    know (``unknowns``: ``AUTHORIZER`` is never compiled)."""

    source: str
    program: Program | None
    unknowns: frozenset[str]
    """Of ``AUTHORIZER``, ``USER_INFO``, ``NAMESPACE_OBJECT``, ``NAMESPACE_NAME``: what
    it reads, its variables followed."""
    variables: tuple[str, ...]
    """The policy variables it reads, directly or through others, in policy order."""
    iterates: bool = False
    """It holds a comprehension (``scanner.cel.budget``: not run on oversized objects)."""


@dataclass(frozen=True, slots=True)
class Check:
    """One ``validations`` entry."""

    expression: Expression
    message: str
    message_expression: Expression | None
    reason: str
    path: str = ""


@dataclass(frozen=True, slots=True)
class ParamRef:
    name: str
    namespace: str
    selector: Mapping[str, Any] | None
    deny_when_missing: bool
    """``parameterNotFoundAction: Deny`` (the default); ``Allow`` admits."""


@dataclass(frozen=True, slots=True)
class Binding:
    """A ``ValidatingAdmissionPolicyBinding`` (or the implicit binding of a policy that
    carries its own actions)."""

    name: str
    actions: tuple[str, ...]
    """Of ``Deny``, ``Warn``, ``Audit``."""
    match: Match | None = None
    param_ref: ParamRef | None = None
    source: str = ""


@dataclass(frozen=True, slots=True)
class Policy:
    """One admission policy, compiled with the admission environment's ``engine``."""

    name: str
    kind: str
    source: str
    match: Match
    conditions: tuple[tuple[str, Expression], ...]
    variables: tuple[tuple[str, Expression], ...]
    checks: tuple[Check, ...]
    fail: bool
    """``failurePolicy: Fail`` (the default); ``Ignore`` admits on an evaluation error."""
    engine: Engine
    param_kind: tuple[str, str] | None = None
    """(apiVersion, kind) of its params, or None."""
    params: tuple[Mapping[str, Any], ...] = ()
    """The param objects loaded next to it, of ``param_kind``."""
    bindings: tuple[Binding, ...] = ()
    """Its bindings in scope; none: evaluated as if bound with ``Deny`` to everything
    ``match`` matches (as ``kyverno apply`` does)."""
    pod_controllers: bool = False
    """Kyverno autogen: a Pod policy also judges the pod templates of controllers."""

    @property
    def iterates(self) -> bool:
        """Any of its expressions holds a comprehension."""
        named = (*self.conditions, *self.variables)
        checks = [(c.expression, c.message_expression) for c in self.checks]
        return any(e.iterates for _, e in named) or any(
            e is not None and e.iterates for pair in checks for e in pair
        )


def plural(group: str, kind: str) -> str:
    """The resource name of ``kind`` in ``group`` (``pods``, ``deployments``): the API
    resource table's (``scanner.kinds.resources``), else English rules as the API
    server's default REST mapper uses."""
    from scanner.kinds.resources import find

    known = find(group, kind)
    if known is not None:
        return known.plural
    lower = kind.lower()
    if lower.endswith(("s", "x", "z", "ch", "sh")):
        return lower + "es"
    if lower.endswith("y") and not lower.endswith(("ay", "ey", "oy", "uy")):
        return lower[:-1] + "ies"
    return lower + "s"
