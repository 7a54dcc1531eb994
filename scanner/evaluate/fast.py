"""The fast path: the plain evaluation's findings, planned once and shared between processes.

What a run calls (``scanner.pipeline``). It gives the findings of
``scanner.evaluate.evaluator``, in the same order (tests/equivalence/ compare the
two), by three means, each in its own module:

* the run's plan (``scanner.evaluate.plan``): each rule's plan, with the speed-ups
  of ``scanner.evaluate.optimize`` applied once for the run;
* the loop that follows it (``scanner.evaluate.loop``), subject by subject;
* the processes (``scanner.runtime.executors``): with enough subjects, every other
  chunk of each subject type is evaluated in a forked child; past the fork's memory
  guard, the helper process an audit started early takes a share of the complete
  workloads instead (``scanner.evaluate.shipping``). The chunks, and the helper's
  findings, join in subject order.

An audit's deadline (``scanner.runtime.deadline``) is looked at before each subject:
once it has passed, no more subjects are evaluated, and the rules of every subject
type left unfinished are named (``Evaluation.unfinished``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from scanner.cel import Engine
from scanner.evaluate import shipping
from scanner.evaluate.evaluator import Evaluation, Run, namespaces
from scanner.evaluate.loop import Measured, Part, Share, Shipped, evaluate_share
from scanner.evaluate.optimize import SPEEDUPS, plan_run
from scanner.evaluate.plan import Plan, RunShape
from scanner.findings.records import Finding
from scanner.inventory import KubeObject
from scanner.model import Subject
from scanner.ruleset.load import Rule
from scanner.runtime import executors
from scanner.runtime.deadline import Deadline

PARALLEL_FROM: Final = 1_000
"""Subjects from which evaluating on two processes pays (fork, pickling the findings)."""

CHUNK: Final = 64
"""Consecutive subjects evaluated by one process: small enough to share the work
evenly (subject types are laid out kind by kind, and kinds cost very differently),
large enough that chunk bookkeeping costs nothing."""


def evaluate(
    rules: Sequence[Rule],
    subjects: Mapping[str, Sequence[Subject]],
    engine: Engine,
    globals_: Mapping[str, Any],
    lookup: Mapping[str, KubeObject] | None = None,
    *,
    deadline: Deadline | None = None,
    speedups: Iterable[str] = SPEEDUPS,
) -> Evaluation:
    """Run every rule with CEL over the subjects of its type, as
    ``evaluator.evaluate`` does. ``deadline``: no subject is evaluated once it has
    passed (checked before each subject, not per rule: one evaluation is bounded by
    the rule cost limits, scanner/cel/budget.py). ``speedups``: the names of the
    speed-ups to apply (``optimize.SPEEDUPS``, all by default)."""
    workloads = subjects.get("workload", ())
    shape = RunShape(
        engine,
        globals_,
        {subject_type: len(items) for subject_type, items in subjects.items()},
        deferring=any(subject.complete is not None for subject in workloads),
    )
    run = Run(engine, globals_, {} if lookup is None else lookup, namespaces(rules, subjects))
    return evaluate_plan(plan_run(rules, shape, speedups), subjects, run, deadline)


def evaluate_plan(
    plan: Plan,
    subjects: Mapping[str, Sequence[Subject]],
    run: Run,
    deadline: Deadline | None = None,
) -> Evaluation:
    """Evaluate ``subjects`` by ``plan``, on as many processes as pay."""
    many = sum(len(items) for items in subjects.values()) >= PARALLEL_FROM
    measured: Measured = {}  # a forked child gets a copy of its own

    def share(index: int, shares: int, away: Mapping[int, int]) -> Part:
        part = Share(index, shares, CHUNK, away)
        return evaluate_share(plan, subjects, run, part, deadline, many=many, measured=measured)

    helped = shipping.offer(plan, subjects, run, deadline)
    parts: Sequence[Part]
    if helped is not None:
        parts = (share(0, 1, helped.away),)
    elif sum(len(subjects.get(kind, ())) for kind in plan.by_type) >= PARALLEL_FROM:
        # Chunks alternate between the processes, so each gets its part of every kind
        # of subject.
        parts = executors.in_two(lambda: share(0, 2, {}), lambda: share(1, 2, {}))
    else:
        parts = (share(0, 1, {}),)
    unfinished = {subject_type for part in parts for subject_type in part.unfinished}
    shipped: list[list[Finding]] = []
    if helped is not None:
        shipped, finished = shipping.answer(helped, plan, subjects, run, deadline)
        if not finished:
            unfinished.add("workload")
    return Evaluation(
        findings=_joined(plan, parts, shipped),
        subjects=sum(part.subjects for part in parts) + len(shipped),
        unfinished=frozenset(
            each.rule.id for kind in unfinished for each in plan.by_type.get(kind, ())
        ),
    )


def _joined(plan: Plan, parts: Sequence[Part], shipped: Sequence[list[Finding]]) -> list[Finding]:
    """The findings of every chunk in subject order, the helper's in their places."""
    findings: list[Finding] = []
    for subject_type in plan.by_type:
        chunks = [part.findings[subject_type] for part in parts]
        for index in range(max(len(found) for found in chunks)):
            for found in chunks:
                if index < len(found):
                    for item in found[index]:
                        if isinstance(item, Shipped):
                            findings.extend(shipped[item.position])
                        else:
                            findings.append(item)
    return findings
