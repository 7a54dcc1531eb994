"""A share of a run's workloads, evaluated in the helper process.

Past the fork's memory guard (``scanner.runtime.executors``, ``FORK_BELOW``: a large
audit), the fast path cannot fork a child that shares everything. An audit that may
grow that large starts a helper process instead, while it is still small
(``evaluation_helper``, before it reads the cluster); the runtime keeps it
(``executors.helper``). The fast path then ships it a share of the complete
workloads (``offer``), pickled with the run's plan: the helper puts its own copies
of the rules in (each checked against the parent's: ``_key``) and evaluates them,
one chunk per workload, with the run's deadline. Their findings take their subjects'
places (``loop.Shipped``). Anything that goes wrong there (a rule that differs, a
violation naming another object, which the helper cannot resolve, a helper that
died) only costs time: the parent evaluates the share itself (``answer``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, cast

from scanner.cel import Engine
from scanner.evaluate.evaluator import Run
from scanner.evaluate.loop import Share, evaluate_share
from scanner.evaluate.optimize.binding import bound_rule
from scanner.evaluate.optimize.guards import Guard
from scanner.evaluate.optimize.projection import Projection
from scanner.evaluate.plan import Plan, RulePlan
from scanner.findings.records import Finding
from scanner.inventory import KubeObject
from scanner.model import Subject
from scanner.ruleset.load import Rule
from scanner.runtime import executors
from scanner.runtime.deadline import Deadline

HelperContext = tuple[Sequence[Rule], Engine]
"""What a helper holds from before the fork: the run's rules, compiled, and engine."""

Answer = tuple[list[list[Finding]], bool]
"""The findings of each shipped workload, and whether all were evaluated."""

SHIP_FROM: Final = 1_000
"""Complete workloads from which the helper takes a share: below that, pickling them
and starting the evaluation over there costs about what it saves."""

SHIP_AT_LEAST: Final = 64
"""Fewer workloads than this are not worth the helper's round trip."""

HELPER_GRACE: Final = 10.0
"""Seconds past the deadline the helper's answer is awaited: it stops at the same
deadline, once the subject it is evaluating is done."""

_SHIP_COSTS: Final = {
    "deferred": 0.1,
    "typed": 0.25,
    "object": 0.01,
    "pickle": 0.16,
    "unpickle": 0.27,
}
"""Evaluation costs in units of one complete workload, measured on the 100,000-pod
benchmark snapshot: a deferred (controlled) workload, most of which no rule runs
on; a subject of another type (a Node, a Namespace); an ``object`` subject a rule
applies to by kind (mostly decided by a guard: a Pod for PG602); pickling a shipped
workload here; reading it there and sending its findings back."""


@contextmanager
def evaluation_helper(rules: Sequence[Rule], engine: Engine) -> Iterator[None]:
    """A helper process holding ``rules`` and ``engine`` for the evaluations of the
    block, forked now, while this process is small (none where there is no second CPU
    or fork)."""
    context: HelperContext = (tuple(rules), engine)
    with executors.helper_process(context):
        yield


@dataclass(frozen=True, slots=True)
class Offer:
    """Workloads shipped to the helper, and how to wait for its answer."""

    away: dict[int, int]
    """Index among the workloads -> position among those shipped."""
    wait: executors.Waiting[Answer]


def offer(
    plan: Plan,
    subjects: Mapping[str, Sequence[Subject]],
    run: Run,
    deadline: Deadline | None,
) -> Offer | None:
    """Ship a share of the workloads to the helper, when there is one and this process
    is too large to fork (``executors.available``); None when nothing was shipped."""
    helper = executors.helper()
    if helper is None or executors.available():
        return None
    away = _to_ship(subjects, plan)
    if not away:
        return None
    workloads = subjects["workload"]
    wait = helper.submit(
        _evaluate_shipped,
        [_recipe(rule_plan) for rule_plan in plan.rules],
        [_shipped(workloads[index]) for index in away],
        dict(run.globals_),
        deadline,
    )
    return Offer(away, wait)


def answer(
    shipped: Offer,
    plan: Plan,
    subjects: Mapping[str, Sequence[Subject]],
    run: Run,
    deadline: Deadline | None,
) -> Answer:
    """The helper's answer, or (it failed) the same work done here."""
    got = shipped.wait(None if deadline is None else deadline.left() + HELPER_GRACE)
    if got is not None and len(got[0]) == len(shipped.away):
        return got
    workloads = subjects["workload"]
    return _one_by_one(plan, [workloads[index] for index in shipped.away], run, deadline)


def _one_by_one(
    plan: Plan, workloads: Sequence[Subject], run: Run, deadline: Deadline | None
) -> Answer:
    """The findings of each of ``workloads``, and whether all were evaluated."""
    part = evaluate_share(plan, {"workload": workloads}, run, Share(), deadline)
    found = cast("list[list[Finding]]", part.findings["workload"])  # nothing shipped
    return found, not part.unfinished


def _to_ship(subjects: Mapping[str, Sequence[Subject]], plan: Plan) -> dict[int, int]:
    """The workloads for the helper: index -> position among them. Only complete ones
    (a deferred workload completes through the model, which stays here), spread evenly
    over the list (GPU and other workloads cost differently and come kind by kind),
    as many as make both processes finish together by ``_SHIP_COSTS``."""
    workloads = subjects.get("workload", ())
    complete = [
        index
        for index, subject in enumerate(workloads)
        if subject.complete is None and not subject.obj.context_only
    ]
    if "workload" not in plan.by_type or len(complete) < SHIP_FROM:
        return {}
    costs = _SHIP_COSTS
    here = (len(workloads) - len(complete)) * costs["deferred"]
    for subject_type, plans in plan.by_type.items():
        items = subjects.get(subject_type, ())
        if subject_type == "object":  # every object: count those a rule applies to
            kinds = frozenset().union(*(each.rule.kinds for each in plans))
            every = any(not each.rule.kinds for each in plans)
            matched = sum(1 for subject in items if every or subject.obj.kind in kinds)
            here += matched * costs["object"]
        elif subject_type != "workload":
            here += len(items) * costs["typed"]
    # here + (complete - n) + pickle * n == (1 + unpickle) * n
    wanted = (here + len(complete)) / (2 + costs["unpickle"] - costs["pickle"])
    sample = [_shipped(workloads[index]) for index in complete[:: max(1, len(complete) // 64)]]
    count = min(len(complete), int(wanted), executors.helper_room(sample))
    if count < SHIP_AT_LEAST:
        return {}
    chosen = [complete[(slot * len(complete)) // count] for slot in range(count)]
    return {index: position for position, index in enumerate(chosen)}


ShippedSubject = tuple[Mapping[str, Any], Any, Any, Mapping[str, Any]]
"""A workload as pickled to the helper: body, origin, line map, variables."""


def _shipped(subject: Subject) -> ShippedSubject:
    obj = subject.obj
    return obj.body, obj.origin, obj.lines, subject.variables


class _Recipe(NamedTuple):
    """A rule's plan as pickled to the helper: compiled programs do not pickle, so the
    rule travels as its key and the helper puts its own copy in."""

    key: tuple[Any, ...]
    bound: bool
    activation_key: str
    guard: Guard | None
    light: bool
    reads: Projection | None
    reads_controlled: Projection | None


def _recipe(plan: RulePlan) -> _Recipe:
    return _Recipe(
        _key(plan.rule),
        plan.running is not plan.rule,
        plan.activation_key,
        plan.guard,
        plan.light,
        plan.reads,
        plan.reads_controlled,
    )


def _cooked(recipe: _Recipe, rules: Mapping[tuple[Any, ...], Rule], engine: Engine) -> RulePlan:
    """The helper's plan from a recipe (``KeyError`` when its rules differ)."""
    rule = rules[recipe.key]
    running = bound_rule(rule, engine) if recipe.bound else rule
    if running is None:
        raise KeyError(recipe.key)  # bound there, not here: the parent does the work
    plain = RulePlan.of(rule)
    return RulePlan(
        rule,
        running,
        plain.iterates,
        plain.condition_iterates,
        recipe.activation_key,
        recipe.guard,
        recipe.light,
        recipe.reads,
        recipe.reads_controlled,
    )


def _key(rule: Rule) -> tuple[Any, ...]:
    """What the helper checks its own copy of a rule against: the programs, parameters
    and matching, as this process runs them."""
    return (
        rule.id,
        rule.doc.subject,
        rule.doc.level,
        tuple(program.source for program in _programs(rule)),
        json.dumps(rule.params, sort_keys=True, default=str),
        tuple(sorted(rule.kinds)) if rule.kinds else (),
        rule.controlled,
        rule.builtin,
    )


def _programs(rule: Rule) -> Iterator[Any]:
    if rule.condition is not None:
        yield rule.condition
    yield from (program for _, program in rule.variables)
    if rule.violations is not None:
        yield rule.violations
    for validation in rule.validations:
        yield validation.expression
        if validation.message_expression is not None:
            yield validation.message_expression


class _NoLookup(Mapping[str, KubeObject]):
    """The helper has no objects to resolve a violation's ``ref`` with: a rule that
    names one fails the helper's work, which the parent then does itself."""

    def __getitem__(self, key: str) -> KubeObject:
        raise _LookupNeeded(key)

    def get(self, key: str, default: Any = None) -> Any:
        raise _LookupNeeded(key)

    def __iter__(self) -> Iterator[str]:
        raise _LookupNeeded("")

    def __len__(self) -> int:
        raise _LookupNeeded("")


class _LookupNeeded(Exception):
    pass


def _evaluate_shipped(
    context: HelperContext,
    recipes: Sequence[_Recipe],
    shipped: Sequence[ShippedSubject],
    globals_: Mapping[str, Any],
    deadline: Deadline | None = None,
) -> Answer:
    """In the helper: the findings of each shipped workload by the parent's plan, with
    the helper's copies of the rules (a rule that differs, or is missing, is an
    error, and the parent does the work), and whether all were evaluated before
    ``deadline``."""
    rules, engine = context
    mine = {_key(rule): rule for rule in rules}
    plan = Plan.of(_cooked(recipe, mine, engine) for recipe in recipes)
    subjects = [
        Subject("workload", KubeObject(body, origin, lines), variables)
        for body, origin, lines, variables in shipped
    ]
    return _one_by_one(plan, subjects, Run(engine, globals_, _NoLookup()), deadline)
