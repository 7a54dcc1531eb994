"""A run's plan: what each rule needs to run, worked out once per run.

The plain evaluation (``scanner.evaluate.evaluator``) asks everything of the rule
itself, subject after subject. The fast path (``scanner.evaluate.fast``) asks a plan
instead: one ``RulePlan`` per rule, made once for the run, and from it one list of
``RulePlan`` for each shape of subject (its type, its kind, its controller's kind:
``Plan.steps``), which the loop asks once per shape. A rule's plan starts
plain (``RulePlan.of``: the rule as loaded, no shortcut) and each speed-up of
``scanner.evaluate.optimize`` is a transform of it; the plan a helper process gets
is the same one (``scanner.evaluate.shipping``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final

from scanner.cel import Engine
from scanner.cel.budget import iterates
from scanner.evaluate.evaluator import applies
from scanner.ruleset.load import Rule

if TYPE_CHECKING:
    from scanner.evaluate.optimize.guards import Guard
    from scanner.evaluate.optimize.projection import Projection


@dataclass(frozen=True, slots=True)
class RulePlan:
    """One rule as the fast path runs it."""

    rule: Rule
    """The rule as loaded: its id, parameters, and what its CEL reads (``analysis``)."""
    running: Rule
    """The rule whose programs run: ``rule``, or ``rule`` with its variables and
    parameters bound inside its programs (``optimize.binding``)."""
    iterates: bool
    """An expression of the rule holds a comprehension: it is not run on an oversized
    subject (``scanner.cel.budget``)."""
    condition_iterates: bool
    activation_key: str
    """Rules with equal keys share one activation per subject (``optimize.sharing``);
    plain, each rule has its own."""
    guard: Guard | None = None
    """What Python decides of the condition (``optimize.guards``); None: CEL decides."""
    light: bool = False
    """The rule reads only a controlled workload's instance facts, and runs before its
    deferred facts are computed (``optimize.projection``, ``defer``)."""
    reads: Projection | None = None
    """The fields of ``workload`` (and keys of their values) the rule may read; None:
    the facts whole (``optimize.projection``, ``project``)."""
    reads_controlled: Projection | None = None
    """``reads`` on a controlled workload."""

    @classmethod
    def of(cls, rule: Rule) -> RulePlan:
        """The plain plan: the rule as loaded, with no speed-up."""
        condition = rule.condition
        return cls(
            rule=rule,
            running=rule,
            iterates=rule.analysis.iterates,
            condition_iterates=condition is not None and iterates(condition.source),
            activation_key=rule.id,
        )


PAYS_FROM: Final = 16
"""Subjects of a rule's type from which the speed-ups that cost at the start of a run
pay: guards compile their constant conjuncts, projection reads every rule's reads."""


@dataclass(frozen=True, slots=True)
class RunShape:
    """What a speed-up looks at to decide whether it pays on a run."""

    engine: Engine
    globals_: Mapping[str, Any]
    """The variables fixed for the run (``config``, ``cluster``)."""
    counts: Mapping[str, int]
    """Subjects of each type."""
    deferring: bool
    """Some workloads' facts are deferred (an audit's controlled workloads)."""

    def has(self, subject_type: str) -> bool:
        """Whether the run has subjects of ``subject_type``."""
        return self.counts.get(subject_type, 0) > 0

    def many(self, subject_type: str) -> bool:
        """Whether the run has ``PAYS_FROM`` subjects of ``subject_type`` or more."""
        return self.counts.get(subject_type, 0) >= PAYS_FROM


@dataclass(frozen=True, slots=True)
class Steps:
    """The rules that apply to one shape of subject, in rule order."""

    plans: Sequence[RulePlan]
    projected: bool = False
    """Every one of these rules says what it reads of ``workload`` (``RulePlan.reads``)."""
    keys: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Fields of ``workload`` whose value these rules read only at these keys (a map's
    value is given with only them)."""


@dataclass(frozen=True, slots=True)
class Plan:
    """The plans of a run's rules with CEL, by subject type, in rule order."""

    by_type: Mapping[str, Sequence[RulePlan]]

    @classmethod
    def of(cls, plans: Iterable[RulePlan]) -> Plan:
        by_type: dict[str, list[RulePlan]] = {}
        for plan in plans:
            if not plan.rule.builtin:
                by_type.setdefault(plan.rule.doc.subject, []).append(plan)
        return cls(by_type)

    @property
    def rules(self) -> list[RulePlan]:
        return [plan for plans in self.by_type.values() for plan in plans]

    def steps(self, subject_type: str, kind: str, controller: str | None) -> Steps:
        """The plans of the rules that apply to a subject of ``subject_type`` and
        ``kind`` (``controller``: ``evaluator.controlled_by``)."""
        return _steps(
            [
                plan if controller is None else replace(plan, reads=plan.reads_controlled)
                for plan in self.by_type.get(subject_type, ())
                if applies(plan.rule, kind, controller)
            ]
        )


def _steps(plans: list[RulePlan]) -> Steps:
    keys: dict[str, set[str] | None] = {}
    for plan in plans:
        if plan.reads is None:
            return Steps(plans)
        for name, wanted in plan.reads.items():
            known = keys.get(name, set())
            keys[name] = None if wanted is None or known is None else known | wanted
    found = {name: frozenset(k) for name, k in keys.items() if k is not None}
    return Steps(plans, True, found)
