"""Admission preview (PG606): the admission policies found in the scan, run on its workloads.

The platform's own admission floor (a ValidatingAdmissionPolicy such as
``gpu-pool-contract`` and its ValidatingAdmissionPolicyBinding) is often among the
scanned files or the ``--context-path`` objects. The preview evaluates every such policy
that a binding in scope names against the scanned workloads (Pods and pod controllers),
as the API server would on their CREATE (``scanner.evaluate.admission``), and against
the pods a controller's pod template would make: the classic trap is a Deployment that
is admitted while its pods never start.

Only bound policies count, as in the API server: an unbound one admits everything.
A binding's ``Deny`` is an error, ``Warn`` a warning, ``Audit`` a note. The policies are
input, possibly hostile: they compile with the admission environment and run under the
rule cost limits and the run's deadline; one that cannot be loaded is an error
notification naming its file and line; they never change the policy of the run (they
only produce PG606 findings). The rule has no CEL of its own; it is stamped here, like
the document rules (``stamp.document_findings``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from scanner.cel.budget import oversize
from scanner.evaluate import stamp
from scanner.evaluate.admission import Verdict, evaluate_policy, matches, request_for
from scanner.findings.records import Finding, Level, Notification, Outcome
from scanner.inventory import KubeObject, Position, is_mapping
from scanner.ruleset import admission
from scanner.ruleset.admission.policy import Policy
from scanner.ruleset.load import Rule
from scanner.runtime.deadline import Deadline

RULE: Final = "PG606"
MAX_RUNS: Final = 64
"""Evaluations of a workload the preview makes at most: one per policy, binding and
param object. Each runs on every scanned workload, so their number multiplies the
work; policies past the bound are named in a notification, not run."""
TEMPLATES: Final = {
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "ReplicationController": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
    "PodTemplate": ("template",),
}
"""Where each controller holds the pods it makes."""
_CONTAINER_LISTS: Final = ("containers", "initContainers", "ephemeralContainers")
_ACTIONS: Final = {
    Level.ERROR: "would be denied at admission by",
    Level.WARNING: "would get an admission warning from",
    Level.NOTE: "would be audited at admission by",
}


@dataclass(slots=True)
class Preview:
    """What the preview found: findings of PG606 and notifications about the run."""

    findings: list[Finding] = field(default_factory=list)
    notifications: list[Notification] = field(default_factory=list)


def run(
    rule: Rule,
    objects: Iterable[KubeObject],
    engine_name: str,
    namespaces: Mapping[str, Any],
    deadline: Deadline | None = None,
) -> Preview:
    """PG606 over ``objects`` (scanned and context): the bound policies among them,
    evaluated on every reportable workload and the pods of its pod template."""
    objects = list(objects)
    preview = Preview()
    policies = _bounded(_policies(objects, engine_name, preview.notifications), preview)
    if not policies:
        return preview
    for obj in objects:
        if obj.context_only:
            continue
        if deadline is not None and deadline.passed():
            preview.notifications.append(
                Notification(
                    Level.ERROR,
                    f"the deadline ({deadline.seconds:g} s, --deadline) passed before the "
                    "admission preview (PG606) finished",
                )
            )
            break
        for path, body, subject in _judged(obj):
            for policy in policies:
                preview.findings.extend(_judge(rule, obj, path, body, subject, policy, namespaces))
    return preview


def _bounded(policies: list[Policy], preview: Preview) -> list[Policy]:
    """The policies, in order, whose evaluations fit in ``MAX_RUNS``."""
    kept: list[Policy] = []
    runs = 0
    for policy in policies:
        runs += len(policy.bindings) * max(1, len(policy.params))
        if runs > MAX_RUNS:
            break
        kept.append(policy)
    if len(kept) < len(policies):
        skipped = [policy.name for policy in policies[len(kept) :]]
        preview.notifications.append(
            Notification(
                Level.ERROR,
                f"admission preview: the bound admission policies in scope make more than "
                f"{MAX_RUNS} evaluations (policy x binding x param object) of each workload; "
                f"{len(skipped)} not run: {', '.join(skipped[:5])}"
                + (" ..." if len(skipped) > 5 else ""),
            )
        )
    return kept


def _policies(
    objects: list[KubeObject], engine_name: str, notes: list[Notification]
) -> list[Policy]:
    """The ValidatingAdmissionPolicies among ``objects`` that a binding among them
    names, with the param objects of their kind, compiled."""
    vaps = [obj for obj in objects if admission.kind_of(obj.body) == "vap"]
    if not vaps:
        return []
    names = {obj.name for obj in vaps}
    param_kinds = {_param_kind(obj.body) for obj in vaps} - {None}
    collected = admission.Collected()
    for obj in objects:
        kind = admission.kind_of(obj.body)
        if (
            kind == "vap"
            or (kind == "binding" and _policy_name(obj.body) in names)
            or (not kind and (obj.api_version, obj.kind) in param_kinds)
        ):
            collected.add(obj.origin.uri, [(obj.body, _positions(obj))])
    problems: list[str] = []
    policies = admission.build(collected, engine_name, problems)
    for problem in problems:
        notes.append(_problem(problem))
    return [policy for policy in policies if policy.bindings]


def _problem(problem: str) -> Notification:
    """A policy that cannot be loaded: ``file:line: message`` as a notification."""
    uri, _, rest = problem.partition(":")
    line, _, message = rest.partition(":")
    if not line.isdigit():
        return Notification(Level.ERROR, f"admission preview: {problem}")
    return Notification(
        Level.ERROR,
        f"admission preview: policy not run: {message.strip()}",
        uri=uri,
        line=int(line),
    )


def _param_kind(body: Mapping[str, Any]) -> tuple[str, str] | None:
    spec = body.get("spec")
    kind = spec.get("paramKind") if is_mapping(spec) else None
    if not is_mapping(kind):
        return None
    return str(kind.get("apiVersion", "")), str(kind.get("kind", ""))


def _policy_name(body: Mapping[str, Any]) -> object:
    spec = body.get("spec")
    return spec.get("policyName") if is_mapping(spec) else None


def _positions(obj: KubeObject) -> dict[str, Position]:
    """The object's field positions from its own root (an item of a ``List`` keeps
    them under its prefix)."""
    prefix = obj.lines.prefix
    if not prefix:
        return dict(obj.lines.positions)
    start = prefix + "."
    return {
        path[len(start) :]: position
        for path, position in obj.lines.positions.items()
        if path.startswith(start)
    }


def _judged(obj: KubeObject) -> Iterator[tuple[str, Mapping[str, Any], str]]:
    """(path, object, subject of the message) of a workload: a Pod, or a controller
    itself and the pods of its pod template, as the API server would receive them.
    Other objects are not previewed: the preview is about what runs."""
    keys = TEMPLATES.get(obj.kind)
    if obj.kind == "Pod":
        yield "", _typed(obj.body), f"Pod {obj.name}"
    elif keys is not None:
        yield "", obj.body, f"{obj.kind} {obj.name}"
    if keys is None:
        return
    template: Any = obj.body
    for key in keys:
        template = template.get(key) if is_mapping(template) else None
    if not is_mapping(template):
        return
    metadata = template.get("metadata")
    pod_metadata = dict(metadata) if is_mapping(metadata) else {}
    if obj.namespace:
        pod_metadata.setdefault("namespace", obj.namespace)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod_metadata,
        "spec": template.get("spec"),
    }
    yield ".".join(keys), _typed(pod), f"pods of {obj.kind} {obj.name}"


def _typed(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    """``pod`` as the API server hands it to a policy: decoded into its Go type, a
    container's ``resources`` (a struct, not a pointer) is there even when the manifest
    leaves it out, so ``has(c.resources.limits)`` is false rather than an error. The
    preview judges the pod the cluster would see, not the manifest's text."""
    spec = pod.get("spec")
    if not is_mapping(spec) or not any(
        is_mapping(container) and "resources" not in container
        for key in _CONTAINER_LISTS
        if isinstance(spec.get(key), list)
        for container in spec[key]
    ):
        return pod
    typed = dict(spec)
    for key in _CONTAINER_LISTS:
        if isinstance(spec.get(key), list):
            typed[key] = [
                {**container, "resources": {}}
                if is_mapping(container) and "resources" not in container
                else container
                for container in spec[key]
            ]
    return {**pod, "spec": typed}


def _judge(
    rule: Rule,
    obj: KubeObject,
    path: str,
    body: Mapping[str, Any],
    subject: str,
    policy: Policy,
    namespaces: Mapping[str, Any],
) -> list[Finding]:
    request = request_for(body, namespaces)
    if not matches(policy, request):
        return []
    if policy.iterates:
        refused = oversize("object", body)
        if refused is not None:
            text = f"{subject}: admission policy {policy.name} not run: {refused.message}"
            return [stamp.finding(rule, obj, text, path, Level.ERROR, Outcome.ERROR)]
    return [
        stamp.finding(
            rule, obj, _message(subject, policy, verdict), path, verdict.level, verdict.outcome
        )
        for verdict in evaluate_policy(policy, request)
    ]


def _message(subject: str, policy: Policy, verdict: Verdict) -> str:
    if verdict.outcome is Outcome.FAIL:
        return stamp.message(
            f"{subject} {_ACTIONS[verdict.level]} {policy.name}: {verdict.message}"
        )
    return stamp.message(f"{subject}: admission policy {policy.name}: {verdict.message}")
