"""Admission policies evaluated as the API server evaluates them, on one object.

``evaluate_policy`` judges one object (as a CREATE of it) by one policy under each of
its bindings (or, with none in scope, as if bound with ``Deny`` to everything its
``matchConstraints`` match, as ``kyverno apply`` does) and returns ``Verdict``s; the
admission preview reuses it. ``findings`` makes verdicts the findings of a rule
(``scanner.evaluate.evaluator`` calls it for a rule with ``admission``).

In the API server's order, per binding and param object:

1. **Match**: the policy's ``matchConstraints`` (resource rules by group, version
   unless ``matchPolicy: Equivalent``, resource, operation CREATE, resource names;
   exclusions; ``namespaceSelector`` on the namespace's labels; ``objectSelector``),
   then the binding's ``matchResources``.
2. **Params**: ``paramRef`` by name or selector among the param objects loaded with
   the policy; none found: ``parameterNotFoundAction`` decides (``Deny`` is a verdict).
3. **matchConditions**, in order: a false one means the policy does not apply.
4. **validations**: a false one is a verdict at the binding's ``validationActions``
   level (``Deny`` error, ``Warn`` warning, ``Audit`` note), its message the message
   expression's, else ``message``, else the expression. ``variables`` are evaluated
   when first read, once.

An evaluation error is a verdict as ``failurePolicy`` says: ``Fail`` an error ("would
be denied: evaluation error"), ``Ignore`` a note. What offline evaluation cannot know
(``authorizer``, ``request.userInfo``, the ``namespaceObject`` or labels of a
namespace neither scanned nor given as context) makes the result that reads it *not
verified*: a note, never a pass or a violation. A policy whose expressions iterate
does not run on an object over the rule cost limits (``scanner.cel.budget``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from scanner.cel.budget import oversize
from scanner.errors import CelEvalError
from scanner.evaluate import stamp
from scanner.findings.records import Finding, Level, Outcome
from scanner.inventory import is_mapping
from scanner.kinds import CLUSTER_SCOPED, api_group
from scanner.model import Subject
from scanner.model.selectors import label_selector_matches
from scanner.ruleset.admission.policy import (
    AUTHORIZER,
    NAMESPACE_NAME,
    NAMESPACE_OBJECT,
    USER_INFO,
    Binding,
    Check,
    Expression,
    Match,
    Policy,
    ResourceRule,
    plural,
)
from scanner.ruleset.load import Rule

UNKNOWN: Final = object()
"""The namespace of an object whose namespace is not in the scan or its context."""

_LEVELS: Final = {"Deny": Level.ERROR, "Warn": Level.WARNING, "Audit": Level.NOTE}
UNBOUND: Final = " (no binding in scope)"
_CONTROLLERS: Final = {
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}
"""Kyverno's autogen: where each controller holds the pods it makes."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """One result of a policy on an object that is not an admit."""

    level: Level
    message: str
    outcome: Outcome = Outcome.FAIL
    """``ERROR`` for an evaluation error and for a result not verified."""
    path: str = ""
    """Where in the judged object (autogen: the pod template's path)."""


@dataclass(frozen=True, slots=True)
class Request:
    """The object as an admission request carries it (a CREATE)."""

    body: Mapping[str, Any]
    namespace: Any
    """The namespace object, None for a cluster-scoped object, or ``UNKNOWN``."""

    @property
    def kind(self) -> str:
        return str(self.body.get("kind", ""))

    @property
    def group_version(self) -> tuple[str, str]:
        api_version = str(self.body.get("apiVersion", ""))
        return api_group(api_version), api_version.rpartition("/")[2]

    @property
    def metadata(self) -> Mapping[str, Any]:
        metadata = self.body.get("metadata")
        return metadata if is_mapping(metadata) else {}

    def variable(self) -> dict[str, Any]:
        """The CEL ``request`` (``admission.k8s.io/v1`` AdmissionRequest) of a CREATE,
        without ``userInfo`` (``USER_INFO``: reads of it are not verified)."""
        group, version = self.group_version
        kind = {"group": group, "version": version, "kind": self.kind}
        resource = {"group": group, "version": version, "resource": plural(group, self.kind)}
        return {
            "uid": "",
            "kind": kind,
            "resource": resource,
            "requestKind": kind,
            "requestResource": resource,
            "subResource": "",
            "name": str(self.metadata.get("name", "") or ""),
            "namespace": str(self.metadata.get("namespace", "") or ""),
            "operation": "CREATE",
            "userInfo": {},
            "object": self.body,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        }


def request_for(body: Mapping[str, Any], namespaces: Mapping[str, Any]) -> Request:
    """``body`` as a request, its namespace looked up in ``namespaces`` (name -> object)."""
    kind = str(body.get("kind", ""))
    if (api_group(str(body.get("apiVersion", ""))), kind) in CLUSTER_SCOPED:
        return Request(body, body if kind == "Namespace" else None)
    metadata = body.get("metadata")
    name = metadata.get("namespace") if is_mapping(metadata) else None
    found = namespaces.get(name) if isinstance(name, str) else None
    return Request(body, UNKNOWN if found is None else found)


def evaluate_policy(policy: Policy, request: Request) -> list[Verdict]:
    """Every verdict of ``policy`` on ``request``, binding by binding."""
    if not _matches(policy.match, request, constraints=True):
        return []
    found: list[Verdict] = []
    bindings = policy.bindings or (Binding(policy.name, ("Deny",)),)
    for binding in bindings:
        found.extend(evaluate_bound(policy, binding, request, bound=bool(policy.bindings)))
    return found


def matches(policy: Policy, request: Request) -> bool:
    """Whether ``policy``'s ``matchConstraints`` select ``request``."""
    return _matches(policy.match, request, constraints=True)


def evaluate_bound(
    policy: Policy, binding: Binding, request: Request, *, bound: bool = True
) -> list[Verdict]:
    """The verdicts of ``policy`` under ``binding`` on ``request`` (matched by the
    policy already); ``bound``: False for the implicit binding of a policy alone."""
    judge = _Judge(policy, binding, request, "" if bound else UNBOUND)
    if binding.match is not None and not _matches(binding.match, request, constraints=False):
        return []
    if isinstance(judge.unmatched, str):
        return [judge.unverified(judge.unmatched)]
    params = _params(policy, binding, request)
    if params is None:
        return [
            judge.verdict("no params found for policy binding with `Deny` parameterNotFoundAction")
        ]
    found = []
    for param in params:
        found.extend(_Evaluation(judge, param).run())
    return found


def _matches(match: Match, request: Request, *, constraints: bool) -> bool:
    """Whether ``match`` selects ``request`` (an unknown namespace with a namespace
    selector: True, the judge reports it as not verified). A binding's
    ``matchResources`` without ``resourceRules`` does not narrow the resources."""
    labels = request.metadata.get("labels")
    labels = labels if is_mapping(labels) else {}
    if match.object_selector and not label_selector_matches(match.object_selector, labels):
        return False
    namespace = request.namespace
    if (
        match.namespace_selector
        and namespace is not UNKNOWN
        and namespace
        and not label_selector_matches(match.namespace_selector, _labels(namespace))
    ):
        return False
    if match.rules:
        if not any(_rule_matches(rule, request, match.exact) for rule in match.rules):
            return False
    elif constraints:  # a policy's resourceRules must name what it matches
        return False
    return not any(_rule_matches(rule, request, match.exact) for rule in match.excluded)


def _labels(namespace: Mapping[str, Any]) -> dict[str, Any]:
    """A namespace's labels, with the one the API server sets on every namespace
    (``kubernetes.io/metadata.name``)."""
    metadata = namespace.get("metadata")
    metadata = metadata if is_mapping(metadata) else {}
    labels = metadata.get("labels")
    found = dict(labels) if is_mapping(labels) else {}
    found["kubernetes.io/metadata.name"] = metadata.get("name")
    return found


def _rule_matches(rule: ResourceRule, request: Request, exact: bool) -> bool:
    group, version = request.group_version
    resource = plural(group, request.kind)
    name = str(request.metadata.get("name", "") or "")
    return (
        _has(rule.operations, "CREATE")
        and _has(rule.groups, group)
        and (not exact or _has(rule.versions, version))
        and any(each in ("*", "*/*", resource) for each in rule.resources)
        and (not rule.names or name in rule.names)
    )


def _has(values: Sequence[str], value: str) -> bool:
    return "*" in values or value in values


def _params(
    policy: Policy, binding: Binding, request: Request
) -> list[Mapping[str, Any] | None] | None:
    """The param objects to evaluate with: ``[None]`` for a policy without params,
    ``[]`` when none is found and the binding admits, None when it denies."""
    ref = binding.param_ref
    if policy.param_kind is None or ref is None:
        return [None]
    namespace = ref.namespace or str(request.metadata.get("namespace", "") or "")
    found: list[Mapping[str, Any] | None] = []
    for param in policy.params:
        metadata = param.get("metadata")
        metadata = metadata if is_mapping(metadata) else {}
        own = str(metadata.get("namespace", "") or "")
        if own and own != namespace:
            continue
        labels = metadata.get("labels")
        if ref.name and metadata.get("name") != ref.name:
            continue
        if not ref.name and not label_selector_matches(
            ref.selector or {}, labels if is_mapping(labels) else {}
        ):
            continue
        found.append(param)
    if found or not ref.deny_when_missing:
        return found
    return None


@dataclass(frozen=True, slots=True)
class _Judge:
    """Turns results into verdicts for one policy, binding and request."""

    policy: Policy
    binding: Binding
    request: Request
    suffix: str

    @property
    def level(self) -> Level:
        return min((_LEVELS[action] for action in self.binding.actions), key=_severity)

    @property
    def unmatched(self) -> str | None:
        """Why matching cannot be decided offline, or None."""
        selects = self.policy.match.namespace_selector or (
            self.binding.match is not None and self.binding.match.namespace_selector
        )
        if selects and self.request.namespace is UNKNOWN:
            return f"namespaceSelector: the labels of namespace {self._namespace()!r} are unknown"
        return None

    def _namespace(self) -> str:
        return str(self.request.metadata.get("namespace", "") or "")

    def verdict(self, message: str, path: str = "") -> Verdict:
        return Verdict(self.level, f"{message}{self.suffix}", Outcome.FAIL, path)

    def failed(self, error: CelEvalError) -> Verdict:
        text = stamp.message(stamp.error_text(error))
        if self.policy.fail:
            return Verdict(
                Level.ERROR,
                f"would be denied: evaluation error: {text}{self.suffix}",
                Outcome.ERROR,
            )
        return Verdict(
            Level.NOTE,
            f"evaluation error, admitted (failurePolicy Ignore): {text}{self.suffix}",
            Outcome.ERROR,
        )

    def unverified(self, why: str) -> Verdict:
        return Verdict(Level.NOTE, f"not verified: {why}{self.suffix}", Outcome.ERROR)

    def unknown(self, expression: Expression) -> str | None:
        """What ``expression`` reads that is unknown here, or None."""
        if AUTHORIZER in expression.unknowns:
            return "it calls authorizer, which is not available offline"
        if USER_INFO in expression.unknowns:
            return "it reads request.userInfo, which is not known offline"
        if self.request.namespace is not UNKNOWN:
            return None
        if NAMESPACE_NAME in expression.unknowns and not self._namespace():
            return "it reads namespaceObject, and the object names no namespace"
        if NAMESPACE_OBJECT in expression.unknowns:
            return f"it reads namespaceObject, and namespace {self._namespace()!r} is not in scope"
        return None


def _severity(level: Level) -> int:
    return {Level.ERROR: 0, Level.WARNING: 1, Level.NOTE: 2}[level]


@dataclass(slots=True)
class _Evaluation:
    """One policy on one request with one param object: variables evaluated lazily."""

    judge: _Judge
    params: Mapping[str, Any] | None
    values: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, CelEvalError] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    """The variables but ``variables``, built once."""

    def run(self) -> list[Verdict]:
        judge = self.judge
        for name, condition in judge.policy.conditions:
            why = judge.unknown(condition)
            if why is not None:
                return [judge.unverified(f"matchCondition {name}: {why}")]
            try:
                if not self.evaluate(condition):
                    return []
            except CelEvalError as error:
                return [judge.failed(error)]
        found = []
        for check in judge.policy.checks:
            verdict = self.check(check)
            if verdict is not None:
                found.append(verdict)
        return found

    def check(self, check: Check) -> Verdict | None:
        judge = self.judge
        why = judge.unknown(check.expression)
        if why is not None:
            return judge.unverified(f"{check.message or check.expression.source.strip()}: {why}")
        try:
            if self.evaluate(check.expression) is True:
                return None
        except CelEvalError as error:
            return judge.failed(error)
        message = check.message
        if check.message_expression is not None and judge.unknown(check.message_expression) is None:
            try:
                text = self.evaluate(check.message_expression)
                if isinstance(text, str) and stamp.usable_message(text):
                    message = stamp.message(text)
            except CelEvalError:
                pass  # the API server falls back to the message
        message = message or f"failed expression: {check.expression.source.strip()}"
        if check.reason:
            message = f"{message} (reason: {check.reason})"
        return judge.verdict(stamp.message(message))

    def evaluate(self, expression: Expression) -> Any:
        """The value of ``expression``, its variables evaluated first (once each)."""
        program = expression.program
        if program is None:
            raise CelEvalError("expression cannot be evaluated offline")
        for name in expression.variables:
            if name in self.errors:
                raise self.errors[name]
            if name not in self.values:
                self._variable(name)
        return program.evaluate(self._activation())

    def _variable(self, name: str) -> None:
        variable = dict(self.judge.policy.variables)[name]
        for needed in variable.variables:
            if needed in self.errors:
                self.errors[name] = self.errors[needed]
                raise self.errors[name]
            if needed not in self.values:
                self._variable(needed)
        assert variable.program is not None  # an authorizer call is caught before
        try:
            self.values[name] = variable.program.variable_value(self._activation())
        except CelEvalError as error:
            self.errors[name] = error
            raise

    def _activation(self) -> Any:
        if not self.data:
            request = self.judge.request
            namespace = request.namespace
            if namespace is UNKNOWN:  # only its name is read (``Judge.unknown``)
                name = request.metadata.get("namespace")
                namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            self.data = {
                "object": request.body,
                "oldObject": None,
                "request": request.variable(),
                "params": self.params,
                "namespaceObject": namespace,
                "authorizer": None,
            }
        return self.judge.policy.engine.activation({**self.data, "variables": dict(self.values)})


def findings(rule: Rule, subject: Subject, namespaces: Mapping[str, Any]) -> list[Finding]:
    """The findings of admission policy ``rule`` on ``subject``'s object, and, for a
    Kyverno Pod policy, on the pod templates of a controller (autogen)."""
    policy = rule.admission
    if policy is None:
        return []
    found = []
    for path, body in _judged(policy, subject.obj.body):
        refused = oversize("object", body) if policy.iterates else None
        request = request_for(body, namespaces)
        if refused is not None:
            if _matches(policy.match, request, constraints=True):
                found.append(stamp.refused(rule, subject, refused))
            continue
        for verdict in evaluate_policy(policy, request):
            found.append(
                stamp.finding(
                    rule, subject.obj, verdict.message, path, verdict.level, verdict.outcome
                )
            )
    return found


def _judged(policy: Policy, body: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, object) of what ``policy`` judges in ``body``: the object itself, and with
    autogen a controller's pod template as a Pod."""
    yield "", body
    keys = _CONTROLLERS.get(str(body.get("kind", ""))) if policy.pod_controllers else None
    if keys is None:
        return
    template: Any = body
    for key in keys:
        template = template.get(key) if is_mapping(template) else None
    if not is_mapping(template):
        return
    metadata = body.get("metadata")
    namespace = metadata.get("namespace") if is_mapping(metadata) else None
    pod_metadata = (
        dict(template.get("metadata") or {}) if is_mapping(template.get("metadata")) else {}
    )
    if namespace is not None:
        pod_metadata.setdefault("namespace", namespace)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod_metadata,
        "spec": template.get("spec"),
    }
    yield ".".join(keys), pod
