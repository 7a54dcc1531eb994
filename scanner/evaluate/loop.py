"""The fast path's loop: a share of a run's subjects, evaluated by the run's plan.

The same work as the plain evaluation's loop (``scanner.evaluate.evaluator``), and
the same functions for what a rule means (``applies``, ``evaluate_rule``); what the
plan (``scanner.evaluate.plan``) adds happens per subject, in this order:

1. the rules that apply to the subject's shape (its kind, its controller's kind),
   worked out once per shape (``Plan.steps``);
2. what Python decides: a guard that finds the condition false skips the rule, one
   that finds it true skips the CEL condition (``optimize.guards``); a rule with
   comprehensions on an oversized object is refused, the object measured once
   (``evaluator.oversized``). A condition with comprehensions is guarded only once
   the object is known not to be refused: the refusal comes first in the plain path;
3. the activation: one per parameter set (``optimize.sharing``), holding of
   ``workload`` only what the rules that run read (``optimize.projection``);
4. a controlled workload's deferred facts, computed before the first rule that may
   read them (``optimize.projection``, ``defer``);
5. each rule's condition and body (``evaluator.evaluate_rule``, ``evaluate_body``).

A share is every ``shares``-th chunk of each subject type's subjects, starting at
chunk ``share`` (``scanner.evaluate.fast`` gives the processes their shares and
joins their chunks in subject order). The run's deadline is looked at before each
subject.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scanner.cel.budget import Oversize
from scanner.evaluate.evaluator import (
    Run,
    activation_data,
    controlled_by,
    evaluate_body,
    evaluate_rule,
    oversized,
)
from scanner.evaluate.optimize.projection import projected
from scanner.evaluate.plan import Plan, RulePlan, Steps
from scanner.findings.records import Finding
from scanner.model import Subject
from scanner.runtime.deadline import Deadline


@dataclass(frozen=True, slots=True)
class Shipped:
    """Where the findings of the helper's ``position``-th workload go
    (``scanner.evaluate.shipping``)."""

    position: int


Chunk = list[Finding | Shipped]


@dataclass(frozen=True, slots=True)
class Part:
    """What one process evaluated of a run."""

    findings: dict[str, list[Chunk]]
    """Subject type -> the findings of each chunk this process evaluated, in order."""
    subjects: int
    unfinished: frozenset[str]
    """Subject types with subjects this process left for the deadline."""


@dataclass(frozen=True, slots=True)
class Share:
    """One process's share of a run: every ``shares``-th chunk of ``size`` subjects,
    from chunk ``index``, and the workloads shipped to the helper (index among the
    workloads -> position among those shipped)."""

    index: int = 0
    shares: int = 1
    size: int = 1
    away: Mapping[int, int] = field(default_factory=dict)


Measured = dict[int, Oversize | None]
"""id(object body) -> why a rule with comprehensions must not run on it
(``evaluator.oversized``): an object is measured once, whatever its subjects."""


def evaluate_share(
    plan: Plan,
    subjects: Mapping[str, Sequence[Subject]],
    run: Run,
    share: Share,
    deadline: Deadline | None = None,
    *,
    many: bool = False,
    measured: Measured | None = None,
) -> Part:
    """Evaluate ``share`` of ``subjects`` by ``plan``. ``many``: the run has many
    subjects (only how fast an object is measured); ``measured``: the objects
    measured so far in this process."""
    parts: dict[str, list[Chunk]] = {}
    counted = 0
    stopped = False  # the deadline passed: the rest only places the helper's findings
    unfinished: set[str] = set()
    if measured is None:
        measured = {}
    for subject_type in plan.by_type:
        items = subjects.get(subject_type, ())
        away = share.away if subject_type == "workload" else {}
        shapes: dict[tuple[str, str | None], Steps] = {}
        chunks = parts[subject_type] = []
        step = share.shares * share.size
        for start in range(share.index * share.size, len(items), step):
            found: Chunk = []
            chunks.append(found)
            for index in range(start, min(start + share.size, len(items))):
                if away and index in away:
                    found.append(Shipped(away[index]))
                    continue
                if deadline is not None and (stopped or deadline.passed()):
                    stopped = True
                    unfinished.add(subject_type)
                    continue
                subject = items[index]
                if subject.obj.context_only:
                    continue
                counted += 1
                shape = (subject.obj.kind, controlled_by(subject_type, subject))
                steps = shapes.get(shape)
                if steps is None:
                    steps = shapes[shape] = plan.steps(subject_type, *shape)
                found.extend(_subject(steps, run, subject_type, subject, measured, many))
    return Part(parts, counted, frozenset(unfinished))


def _subject(
    steps: Steps,
    run: Run,
    subject_type: str,
    subject: Subject,
    measured: Measured,
    many: bool,
) -> list[Finding]:
    """The findings of one subject. (Called once per subject: the work per rule stays
    inline, as it runs some ten times per subject of a large audit.)"""
    variables = subject.variables
    body = subject.obj.body
    # First what Python decides: which rules run, and so which facts the activation needs.
    runs: list[tuple[RulePlan, bool | None, Oversize | None]] = []
    for step in steps.plans:
        guard = step.guard
        decided = None
        if guard is not None and not step.condition_iterates:
            decided = guard.decide(variables, body)
            if decided is False:
                continue
        refuse = None
        if step.iterates:
            key = id(body)
            if key not in measured:
                measured[key] = oversized(body, many=many)
            refuse = measured[key]
            if guard is not None and step.condition_iterates and refuse is None:
                decided = guard.decide(variables, body)
                if decided is False:
                    continue
        runs.append((step, decided, refuse))
    if not runs:
        return []
    fields: set[str] | None = None
    if steps.projected and subject_type == "workload":
        fields = set()
        for step, _, _ in runs:
            fields.update(step.reads or ())
    found: list[Finding] = []
    activations: dict[str, Any] = {}
    pending = subject.complete
    for step, decided, refuse in runs:
        if pending is not None and not step.light:
            pending()  # the deferred facts, before the first rule that may read them
            pending = None
            activations.clear()
        activation = activations.get(step.activation_key)
        if activation is None:
            activation = activations[step.activation_key] = _activation(
                run, subject, step.running.params, fields, steps.keys
            )
        if decided is True:  # the guard found the condition true
            found.extend(evaluate_body(step.running, subject, activation, run, refuse))
        else:
            found.extend(evaluate_rule(step.running, subject, activation, run, refuse))
    return found


def _activation(
    run: Run,
    subject: Subject,
    params: Mapping[str, Any],
    fields: set[str] | None,
    keys: Mapping[str, frozenset[str]],
) -> Any:
    """The activation of a subject's rules with ``params``; ``fields``: the only fields
    of ``workload`` those rules read, ``keys`` the only keys of some fields' values."""
    data = activation_data(run.globals_, subject, params)
    if fields is not None:
        facts = data.get("workload")
        if facts.__class__ is dict:
            data["workload"] = projected(facts, fields, keys)
    return run.engine.activation(data)
