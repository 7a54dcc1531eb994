"""The plain evaluation: every rule over the subjects of its type, into findings.

This module is what running a rule means, and knows nothing about speed. For each
subject type, each of its subjects in order, and each rule of that type in order:

1. **Match** (``applies``): the rule names the subject's kind, or no kind; and the
   subject is not a controlled workload the rule leaves to its controller. A
   controlled workload (a Pod of a ReplicaSet in the run, ``scanner.model.workloads``)
   runs its controller's current template, which the controller's findings cover:
   a rule that reports on the controller's kind skips it, unless it checks running
   instances (``match.controlled: include``).
2. **Condition** (``match.condition``): when false, the rule does not apply.
3. **Variables**, in order, each seeing those before it as ``variables.<name>``.
4. **Body**: each item of ``violations`` is a finding, or each false one of
   ``validations``, with its message chosen as VAP does; the finding is stamped with
   the rule's id and level and the subject's location (``scanner.evaluate.stamp``).

Every expression sees the run's variables (``config``, ``cluster``), the subject's
(``workload``, ``node``, ...), ``object`` (the subject's object), ``subjectRef`` and
the rule's ``params``. A CEL error is a finding with outcome ``error`` for that rule
and subject, and the run goes on. A rule with comprehensions does not run on a
subject holding a value over the rule cost limits (``scanner.cel.budget``): an error
finding too, once a condition without comprehensions has said the rule applies.
Objects given only as context (``--context-path``) are never subjects.

A run takes the fast path (``scanner.evaluate.fast``), which gives the same findings
in the same order (tests/equivalence/ compare the two).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scanner.cel import Engine
from scanner.cel.budget import Oversize, iterates, oversize
from scanner.errors import CelEvalError
from scanner.evaluate import stamp
from scanner.findings.records import Finding
from scanner.inventory import KubeObject, is_mapping
from scanner.model import Subject
from scanner.ruleset.load import Rule, Validation


@dataclass(slots=True)
class Evaluation:
    findings: list[Finding] = field(default_factory=list)
    subjects: int = 0
    """Subjects evaluated."""
    unfinished: frozenset[str] = frozenset()
    """Rules that did not get through all their subjects before the run's deadline
    (``scanner.evaluate.fast``)."""


@dataclass(frozen=True, slots=True)
class Run:
    """What every rule of a run is evaluated with."""

    engine: Engine
    globals_: Mapping[str, Any]
    """The variables every subject shares (``config``, ``cluster``)."""
    lookup: Mapping[str, KubeObject]
    """A violation's ``ref`` (``namespace/Kind/name``) -> the object it names."""


def evaluate(
    rules: Sequence[Rule],
    subjects: Mapping[str, Sequence[Subject]],
    engine: Engine,
    globals_: Mapping[str, Any],
    lookup: Mapping[str, KubeObject] | None = None,
) -> Evaluation:
    """Run every rule with CEL over the subjects of its type (subject type -> subjects)."""
    run = Run(engine, globals_, {} if lookup is None else lookup)
    result = Evaluation()
    for subject_type, type_rules in by_subject_type(rules).items():
        for subject in subjects.get(subject_type, ()):
            if subject.obj.context_only:
                continue
            result.subjects += 1
            controller = controlled_by(subject_type, subject)
            matched = [rule for rule in type_rules if applies(rule, subject.obj.kind, controller)]
            if matched and subject.complete is not None:
                subject.complete()  # the facts a controlled workload defers (model/workloads.py)
            for rule in matched:
                activation = engine.activation(activation_data(globals_, subject, rule.params))
                refuse = oversized(subject.obj.body) if rule.analysis.iterates else None
                result.findings.extend(evaluate_rule(rule, subject, activation, run, refuse))
    return result


def by_subject_type(rules: Iterable[Rule]) -> dict[str, list[Rule]]:
    """The rules with CEL by the subject type they run on, in rule order (the built-in
    document rules have none: ``stamp.document_findings``)."""
    found: dict[str, list[Rule]] = {}
    for rule in rules:
        if not rule.builtin:
            found.setdefault(rule.doc.subject, []).append(rule)
    return found


def controlled_by(subject_type: str, subject: Subject) -> str | None:
    """For a controlled workload, the kind of the controller in the run that stands
    for it (``workload.controller``: ``Kind/name``); None for any other subject."""
    if subject_type != "workload":
        return None
    facts = subject.variables.get("workload")
    if is_mapping(facts) and facts.get("controlled") is True:
        return str(facts.get("controller", "")).partition("/")[0]
    return None


def applies(rule: Rule, kind: str, controller: str | None) -> bool:
    """Whether ``rule`` runs on a subject of ``kind`` (``controller``: ``controlled_by``)."""
    if rule.kinds and kind not in rule.kinds:
        return False
    # The controller's findings cover the template its instances run, unless the rule
    # checks running instances or never reports on the controller's kind.
    return not (controller and not rule.controlled and (not rule.kinds or controller in rule.kinds))


def activation_data(
    globals_: Mapping[str, Any], subject: Subject, params: Mapping[str, Any]
) -> dict[str, Any]:
    """The variables a rule with ``params`` sees on ``subject`` (none of its own yet)."""
    obj = subject.obj
    return {
        **globals_,
        **subject.variables,
        "object": obj.body,
        "subjectRef": obj.ref.logical_name,
        "params": params,
        "variables": {},
    }


def oversized(body: Any, *, many: bool = False) -> Oversize | None:
    """Why a rule with comprehensions must not run on an object (``scanner.cel.budget``);
    ``many``: the caller measures many objects (only how fast it is measured)."""
    return oversize("object", body, many=many)


def evaluate_rule(
    rule: Rule, subject: Subject, activation: Any, run: Run, refuse: Oversize | None = None
) -> list[Finding]:
    """The findings of ``rule`` on ``subject``: its condition, then its body. ``refuse``:
    why its comprehensions must not run on this subject (``oversized``); a condition
    without comprehensions still decides first whether the rule applies."""
    condition = rule.condition
    if condition is not None:
        if refuse is not None and iterates(condition.source):
            return [stamp.refused(rule, subject, refuse)]
        try:
            if not condition.evaluate(activation):
                return []
        except CelEvalError as error:
            return [stamp.failed(rule, subject, error)]
    return evaluate_body(rule, subject, activation, run, refuse)


def evaluate_body(
    rule: Rule, subject: Subject, activation: Any, run: Run, refuse: Oversize | None = None
) -> list[Finding]:
    """The findings of ``rule`` on a subject it applies to (its condition holds): its
    variables, then its violations or validations."""
    if refuse is not None:
        return [stamp.refused(rule, subject, refuse)]
    try:
        if rule.variables:
            activation = _with_variables(rule, subject, run, activation)
        if rule.violations is not None:
            items = rule.violations.evaluate(activation)
            return [stamp.violation(rule, subject, item, run.lookup) for item in items]
        found = (_failed(rule, subject, each, activation) for each in rule.validations)
        return [finding for finding in found if finding is not None]
    except CelEvalError as error:
        return [stamp.failed(rule, subject, error)]


def _with_variables(rule: Rule, subject: Subject, run: Run, activation: Any) -> Any:
    """Evaluate ``variables`` in order; each sees the ones before it as ``variables.<name>``,
    with the CEL type the engine keeps for it (``Program.variable_value``)."""
    values: dict[str, Any] = {}
    data = activation_data(run.globals_, subject, rule.params)
    for name, program in rule.variables:
        values[name] = program.variable_value(activation)
        activation = run.engine.activation({**data, "variables": dict(values)})
    return activation


def _failed(
    rule: Rule, subject: Subject, validation: Validation, activation: Any
) -> Finding | None:
    """The finding of a validation that is false, its message as VAP chooses it: the
    message expression's, else the message, else the expression."""
    if validation.expression.evaluate(activation):
        return None
    message = validation.message
    if validation.message_expression is not None:
        text = str(validation.message_expression.evaluate(activation))
        if stamp.usable_message(text):
            message = stamp.message(text)
    message = message or f"failed expression: {validation.expression.source.strip()}"
    return stamp.finding(rule, subject.obj, message, validation.path, rule.doc.level)
