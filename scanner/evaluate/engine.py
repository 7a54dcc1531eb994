"""Match, evaluate, report: rules run over subjects and turn into findings.

Matching is cheap first (subject type, kind set, controlled workloads that a
template rule leaves to their controller, guards decided in Python), then the
optional CEL ``match.condition``. Each subject gets one activation per distinct
parameter set, built once and shared by every rule; a workload's holds only the fields
of its facts that those rules name, and of a field read only at named keys
(``workload.ns.platform``, ``"nodeSelector" in workload.podSpec``) only those keys
(``scanner.evaluate.optimize.projection.projection``). A
controlled workload's deferred facts are completed before the first rule that needs
them (``scanner.evaluate.optimize.projection``).
A CEL error on one subject becomes a finding with outcome ``error`` for that rule
and subject; the run goes on. With enough subjects, every other chunk of each
subject type is evaluated in a forked child (``scanner.runtime.executors``) and the findings
join in subject order. Past the fork's memory guard (a large audit), a helper
process started before the cluster was read takes a share of the complete
workloads instead, pickled to it, and its findings take their subjects' places.
An audit's deadline (``scanner.runtime.deadline``) is looked at before each subject: once it
has passed, no more subjects are evaluated, and the rules of every subject type left
unfinished are named (``Evaluation.unfinished``).
"""

from __future__ import annotations

import json
import pickle
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

from scanner.cel import Engine, Program
from scanner.cel.budget import Oversize, iterates, oversize
from scanner.errors import CelEvalError
from scanner.evaluate.optimize.binding import BIND_FROM, bind_rules
from scanner.evaluate.optimize.binding import ENGINES as CONVERTING
from scanner.evaluate.optimize.guards import Guard, build_guards
from scanner.evaluate.optimize.projection import Projection, projection, reads_instance_facts_only
from scanner.findings.records import Finding, Level, Location, Outcome
from scanner.inventory import InvalidDocument, KubeObject, is_mapping
from scanner.model import Subject
from scanner.ruleset.load import Rule
from scanner.runtime import executors as forking
from scanner.runtime.deadline import Deadline

MESSAGE_LIMIT = 500
"""Messages from expressions are one line and capped (as VAP's are)."""

_LINE_BREAK: Final = re.compile("[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")
"""What ``str.splitlines`` breaks at."""


@dataclass(slots=True)
class Evaluation:
    findings: list[Finding] = field(default_factory=list)
    subjects: int = 0
    groups: list[list[Finding]] = field(default_factory=list)
    """With ``one_by_one``: the findings of each workload subject, in order."""
    unfinished: frozenset[str] = frozenset()
    """Rules that did not get through all their subjects before the deadline."""


def evaluate(
    rules: Sequence[Rule],
    subjects: Mapping[str, Sequence[Subject]],
    engine: Engine,
    globals_: Mapping[str, Any],
    lookup: Mapping[str, KubeObject] | None = None,
    helper: forking.Helper[HelperContext] | None = None,
    *,
    one_by_one: bool = False,
    deadline: Deadline | None = None,
) -> Evaluation:
    """Run every CEL rule over the subjects of its type.

    ``globals_`` are variables shared by all subjects (``config``, later ``cluster``);
    ``lookup`` resolves a violation's ``ref`` (``namespace/Kind/name``) to an object.
    ``helper``: a process started before the run grew (``start_helper``), which
    evaluates a share of the complete workloads when this process is too large to
    fork (``_to_ship``). ``one_by_one``: one process, and the workload findings
    grouped per subject (``Evaluation.groups``), as the helper answers. ``deadline``:
    no subject is evaluated once it has passed (checked before each subject, not per
    rule: one evaluation is bounded by the rule cost limits, scanner/cel/budget.py).
    """
    result = Evaluation()
    refs: Mapping[str, KubeObject] = {} if lookup is None else lookup  # not truth-tested: lazy
    iterating = {rule.id for rule in rules if rule.analysis.iterates}
    iterating_conditions = {
        rule.id for rule in rules if rule.condition is not None and iterates(rule.condition.source)
    }
    measured: dict[int, Oversize | None] = {}  # id(object body) -> rule cost limit problem
    many = sum(len(items) for items in subjects.values()) >= PARALLEL_FROM
    # Only an audit has deferred subjects (controlled workloads); scans skip the reading.
    deferring = any(subject.complete is not None for subject in subjects.get("workload", ()))
    light = {
        rule.id for rule in (rules if deferring else ()) if reads_instance_facts_only(rule.analysis)
    }
    # The fields of a workload's facts each rule may read: the activation converts only
    # those the subject's rules name (scanner/evaluate/optimize/projection.py), where
    # converting costs and there are enough workloads to repay reading every rule.
    selecting = engine.name in CONVERTING and len(subjects.get("workload", ())) >= BIND_FROM
    reads = {rule.id: projection(rule.analysis) for rule in (rules if selecting else ())}
    reads_controlled = {
        rule.id: projection(rule.analysis, controlled=True) for rule in (rules if selecting else ())
    }
    # One activation per subject: variables are bound inside the programs (bindings.py).
    bound = bind_rules(rules, engine, subjects)
    # Rules with equal parameters share one activation per subject: the parameters of
    # the rule as it runs (a bound rule has none left: they are inside its programs).
    params_keys = {
        rule.id: json.dumps(bound.get(rule.id, rule).params, sort_keys=True, default=str)
        for rule in rules
    }
    guards = build_guards(rules, engine, globals_, subjects)
    by_type: dict[str, list[Rule]] = {}
    for rule in rules:
        if not rule.builtin:
            by_type.setdefault(rule.doc.subject, []).append(bound.get(rule.id, rule))

    # Workloads the helper evaluates: the parent leaves a marker where their findings go.
    shipped: dict[int, int] = {}  # index among the workload subjects -> position shipped
    wait: forking.Waiting[tuple[list[list[Finding]], bool]] | None = None
    if helper is not None and not one_by_one and not forking.available():
        shipped = _to_ship(subjects, by_type)
        if shipped:
            workloads = subjects["workload"]
            wait = helper.submit(
                _evaluate_shipped,
                [_rule_key(rule) for rule in rules],
                [_shipped(workloads[index]) for index in shipped],
                dict(globals_),
                deadline,
            )
    chunk_size = 1 if one_by_one else CHUNK

    def run(share: int, shares: int) -> _Part:
        """Evaluate chunk ``share`` of every ``shares`` consecutive chunks of each
        subject type's subjects (``CHUNK`` subjects each)."""
        parts: dict[str, list[list[Finding | _Shipped]]] = {}
        counted = 0
        stopped = False  # the deadline passed: the rest only places the helper's findings
        unfinished: set[str] = set()
        for subject_type, type_rules in by_type.items():
            items = subjects.get(subject_type, ())
            away = shipped if subject_type == "workload" else {}
            chunks = parts[subject_type] = []
            # The rules that apply to a subject depend on its kind and on the kind of the
            # controller that stands for it; the list is worked out once per combination.
            plans: dict[tuple[str, str, bool], _Plan] = {}
            for start in range(share * chunk_size, len(items), shares * chunk_size):
                found: list[Finding | _Shipped] = []
                chunks.append(found)
                for index in range(start, min(start + chunk_size, len(items))):
                    if away and index in away:
                        found.append(_Shipped(away[index]))
                        continue
                    if deadline is not None and (stopped or deadline.passed()):
                        stopped = True
                        unfinished.add(subject_type)
                        continue
                    subject = items[index]
                    obj = subject.obj
                    if obj.context_only:
                        continue
                    counted += 1
                    variables = subject.variables
                    # A controlled workload runs its controller's current template, which the
                    # controller's findings cover: a rule that reports on the controller's kind
                    # skips it, unless it checks running instances.
                    facts = variables.get("workload") if subject_type == "workload" else None
                    controller = ""
                    controlled = False
                    if is_mapping(facts) and facts.get("controlled") is True:
                        controlled = True
                        controller = str(facts.get("controller", "")).partition("/")[0]
                    body = obj.body
                    plan = plans.get((obj.kind, controller, controlled))
                    if plan is None:
                        fields_read = reads_controlled if controlled else reads
                        plan = plans[(obj.kind, controller, controlled)] = _plan(
                            _Step(
                                rule,
                                guards.get(rule.id),
                                rule.id in iterating_conditions,
                                rule.id in iterating,
                                params_keys[rule.id],
                                rule.id in light,
                                fields_read.get(rule.id),
                            )
                            for rule in type_rules
                            if (not rule.kinds or obj.kind in rule.kinds)
                            and not (
                                controller
                                and not rule.controlled
                                and (not rule.kinds or controller in rule.kinds)
                            )
                        )
                    steps = plan.steps
                    # First what Python decides: which rules run, and so which facts the
                    # activation needs.
                    runs: list[tuple[_Step, bool | None, Oversize | None]] = []
                    for step in steps:
                        guard = step.guard
                        # The condition decided without CEL (guards.py): false skips the rule,
                        # true its CEL condition. (An oversized subject is refused before a
                        # condition with comprehensions runs, in _run_rule, so such a condition
                        # is guarded only once the subject's size is known.)
                        decided = None
                        if guard is not None and not step.condition_iterates:
                            decided = guard.decide(variables, body)
                            if decided is False:
                                continue
                        refuse = None
                        if step.iterates:
                            if id(body) not in measured:
                                measured[id(body)] = oversize("object", body, many=many)
                            refuse = measured[id(body)]
                            if guard is not None and step.condition_iterates and refuse is None:
                                decided = guard.decide(variables, body)
                                if decided is False:
                                    continue
                        runs.append((step, decided, refuse))
                    if not runs:
                        continue
                    fields: set[str] | None = None
                    if facts is not None and reads:
                        fields = set()
                        for step, _, _ in runs:
                            if step.reads is None:
                                fields = None
                                break
                            fields.update(step.reads)
                    activations: dict[str, Any] = {}
                    pending = subject.complete
                    for step, decided, refuse in runs:
                        rule = step.rule
                        # A controlled workload's deferred facts (optimize/projection.py):
                        # computed before the first rule that may read them.
                        if pending is not None and not step.light:
                            pending()
                            pending = None
                            activations.clear()
                        activation = activations.get(step.params_key)
                        if activation is None:
                            activation = activations[step.params_key] = _activation(
                                engine, globals_, subject, rule.params, fields, plan.keys
                            )
                        results = _run_rule(
                            rule, subject, activation, engine, globals_, refs, refuse, decided
                        )
                        found.extend(results)
        return _Part(parts, counted, frozenset(unfinished))

    # Two shares on two cores when there is enough to do (scanner/runtime/executors.py): chunks
    # alternate between them, so each gets its part of every kind of subject. Chunks
    # join in subject order, so the findings are those of one process.
    shares: Sequence[_Part]
    if (
        not one_by_one
        and not shipped
        and sum(len(subjects.get(kind, ())) for kind in by_type) >= PARALLEL_FROM
    ):
        shares = forking.in_two(lambda: run(0, 2), lambda: run(1, 2))
    else:
        shares = (run(0, 1),)
    groups: list[list[Finding]] = []
    cut = {subject_type for share in shares for subject_type in share.unfinished}
    if shipped:
        # The helper's answer, or (it failed) the same work done here.
        answer = None
        if wait is not None:
            answer = wait(None if deadline is None else deadline.left() + HELPER_GRACE)
        if answer is None or len(answer[0]) != len(shipped):
            workloads = subjects["workload"]
            done = evaluate(
                rules,
                {"workload": [workloads[index] for index in shipped]},
                engine,
                globals_,
                lookup,
                one_by_one=True,
                deadline=deadline,
            )
            answer = done.groups, not done.unfinished
        groups, finished = answer
        if not finished:
            cut.add("workload")
    for subject_type in by_type:
        chunks = [share.findings[subject_type] for share in shares]
        for index in range(max(len(found) for found in chunks)):
            for found in chunks:
                if index < len(found):
                    for item in found[index]:
                        if isinstance(item, _Shipped):
                            result.findings.extend(groups[item.position])
                        else:
                            result.findings.append(item)
                    if one_by_one and subject_type == "workload":
                        result.groups.append(cast("list[Finding]", found[index]))
    result.subjects = sum(share.subjects for share in shares) + len(shipped)
    result.unfinished = frozenset(rule.id for kind in cut for rule in by_type.get(kind, ()))
    return result


PARALLEL_FROM: Final = 1_000
"""Subjects from which evaluating on two processes pays (fork, pickling the findings)."""

CHUNK: Final = 64
"""Consecutive subjects evaluated by one process: small enough to share the work
evenly (subject types are laid out kind by kind, and kinds cost very differently),
large enough that chunk bookkeeping costs nothing."""


HELPER_GRACE: Final = 10.0
"""Seconds past the deadline the helper's answer is awaited: it stops at the same
deadline, once the subject it is evaluating is done."""


@dataclass(frozen=True, slots=True)
class _Part:
    findings: dict[str, list[list[Finding | _Shipped]]]
    """Subject type -> the findings of each chunk this process evaluated, in order."""
    subjects: int
    unfinished: frozenset[str]
    """Subject types with subjects this process left for the deadline."""


@dataclass(frozen=True, slots=True)
class _Shipped:
    """Where the findings of the helper's ``position``-th workload go."""

    position: int


HelperContext = tuple[Sequence[Rule], Engine]
"""What a helper holds from before the fork: the run's rules, compiled, and engine."""


def start_helper(rules: Sequence[Rule], engine: Engine) -> forking.Helper[HelperContext] | None:
    """A helper for a run that may grow past ``forking.FORK_BELOW`` (an audit), started
    now, while this process is small; None where there is no second CPU or fork."""
    return forking.Helper.start((tuple(rules), engine))


SHIP_FROM: Final = 1_000
"""Complete workloads from which the helper takes a share: below that, pickling them
and starting the evaluation over there costs about what it saves."""

SHIP_AT_LEAST: Final = 64
"""Fewer workloads than this are not worth the helper's round trip."""

_SHIP_COSTS: Final = {
    "deferred": 0.1,
    "typed": 0.25,
    "object": 0.01,
    "pickle": 0.16,
    "unpickle": 0.27,
}
"""Evaluation costs in units of one complete workload, measured on the 100,000-pod
benchmark snapshot (benchmarks/README.md): a deferred (controlled) workload, most of which no
rule runs on; a subject of another type (a Node, a Namespace); an ``object`` subject
a rule applies to by kind (mostly decided by a guard: a Pod for PG602); pickling a
shipped workload here; reading it there and sending its findings back."""


def _to_ship(
    subjects: Mapping[str, Sequence[Subject]], by_type: Mapping[str, Sequence[Rule]]
) -> dict[int, int]:
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
    if "workload" not in by_type or len(complete) < SHIP_FROM:
        return {}
    costs = _SHIP_COSTS
    here = (len(workloads) - len(complete)) * costs["deferred"]
    for subject_type, type_rules in by_type.items():
        items = subjects.get(subject_type, ())
        if subject_type == "object":  # every object: count those a rule applies to
            kinds = frozenset().union(*(rule.kinds for rule in type_rules))
            every = any(not rule.kinds for rule in type_rules)
            matched = sum(1 for subject in items if every or subject.obj.kind in kinds)
            here += matched * costs["object"]
        elif subject_type != "workload":
            here += len(items) * costs["typed"]
    # here + (complete - n) + pickle * n == (1 + unpickle) * n
    wanted = (here + len(complete)) / (2 + costs["unpickle"] - costs["pickle"])
    count = min(len(complete), int(wanted), _room_for(workloads, complete))
    if count < SHIP_AT_LEAST:
        return {}
    chosen = [complete[(slot * len(complete)) // count] for slot in range(count)]
    return {index: position for position, index in enumerate(chosen)}


HELPER_ROOM: Final = 1_600 * 1024 * 1024
"""Both processes together stay under this, by estimate: the helper gets only as many
workloads as fit beside what this process already holds. The documented footprint
of a 100,000-pod audit is 2 GB, and a CronJob's memory limit is set by it. Where
every one of 100,000 pods is its own workload (1.6 GiB in one process), the helper
gets ~20,000 of them instead of half, and both hold ~1.7 GiB."""

_HELPER_BASE: Final = 64 * 1024 * 1024
"""The helper's own pages (the process at the fork, rules and engine), roughly."""

_HELPER_EXPANSION: Final = 8
"""Bytes the helper holds per byte of pickled workloads: the objects, their
evaluation and findings (measured 6-7.5 on the benchmark snapshots)."""


def _room_for(workloads: Sequence[Subject], complete: Sequence[int]) -> int:
    """How many of the ``complete`` workloads fit in the helper under ``HELPER_ROOM``,
    from the pickled size of a sample of them."""
    room = HELPER_ROOM - forking.resident_bytes() - _HELPER_BASE
    if room <= 0 or not complete:
        return 0
    sample = [_shipped(workloads[index]) for index in complete[:: max(1, len(complete) // 64)]]
    size = len(pickle.dumps(sample, protocol=pickle.HIGHEST_PROTOCOL)) / len(sample)
    return int(room / (size * _HELPER_EXPANSION))


ShippedSubject = tuple[Mapping[str, Any], Any, Any, Mapping[str, Any]]
"""A workload as pickled to the helper: body, origin, line map, variables."""


def _shipped(subject: Subject) -> ShippedSubject:
    obj = subject.obj
    return obj.body, obj.origin, obj.lines, subject.variables


def _rule_key(rule: Rule) -> tuple[Any, ...]:
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
    keys: Sequence[tuple[Any, ...]],
    shipped: Sequence[ShippedSubject],
    globals_: Mapping[str, Any],
    deadline: Deadline | None = None,
) -> tuple[list[list[Finding]], bool]:
    """In the helper: the findings of each shipped workload, with the helper's copies
    of the rules the parent runs (a rule that differs, or is missing, is an error,
    and the parent does the work), and whether all were evaluated before
    ``deadline``."""
    rules, engine = context
    mine = {_rule_key(rule): rule for rule in rules}
    chosen = [mine[key] for key in keys]
    subjects = [
        Subject("workload", KubeObject(body, origin, lines), variables)
        for body, origin, lines, variables in shipped
    ]
    done = evaluate(
        chosen,
        {"workload": subjects},
        engine,
        globals_,
        _NoLookup(),
        one_by_one=True,
        deadline=deadline,
    )
    return done.groups, not done.unfinished


@dataclass(frozen=True, slots=True)
class _Step:
    """One rule as the evaluation loop needs it, looked up once per run."""

    rule: Rule
    guard: Guard | None
    condition_iterates: bool
    iterates: bool
    params_key: str
    light: bool
    """The rule reads only a controlled workload's instance facts
    (scanner/evaluate/optimize/projection.py)."""
    reads: Projection | None
    """The fields of ``workload`` the rule may read, each with the keys of its value it
    may read (None: all); None: all of them (scanner/evaluate/optimize/projection.py,
    ``projection``)."""


@dataclass(frozen=True, slots=True)
class _Plan:
    """The rules that apply to one kind of subject (kind, controller kind, controlled)."""

    steps: list[_Step]
    keys: Mapping[str, frozenset[str]]
    """Fields of ``workload`` whose value any of these rules reads only at these keys
    (a map's value is given with only them); none when a rule reads the facts whole."""


def _plan(steps: Iterable[_Step]) -> _Plan:
    listed = list(steps)
    keys: dict[str, set[str] | None] = {}
    for step in listed:
        if step.reads is None:
            return _Plan(listed, {})
        for name, wanted in step.reads.items():
            known = keys.get(name, set())
            keys[name] = None if wanted is None or known is None else known | wanted
    return _Plan(listed, {name: frozenset(k) for name, k in keys.items() if k is not None})


def _activation(
    engine: Engine,
    globals_: Mapping[str, Any],
    subject: Subject,
    params: Mapping[str, Any],
    fields: set[str] | None = None,
    keys: Mapping[str, frozenset[str]] | None = None,
) -> Any:
    """The activation a subject's rules with parameters ``params`` share; ``fields``:
    the only fields of ``workload`` those rules may read, and ``keys`` the only keys
    of some fields' values (scanner/evaluate/optimize/projection.py, ``projection``)."""
    obj = subject.obj
    data = {
        **globals_,
        **subject.variables,
        "object": obj.body,
        "subjectRef": obj.ref.logical_name,
    }
    facts = data.get("workload")
    if fields is not None and facts.__class__ is dict:
        projected = facts
        if len(fields) < len(facts):
            projected = {name: facts[name] for name in fields if name in facts}
        for name, wanted in (keys or {}).items():
            value = projected.get(name)
            if value.__class__ is dict and len(wanted) < len(value):
                if projected is facts:
                    projected = dict(facts)  # the subject's own facts stay whole
                projected[name] = {key: value[key] for key in wanted if key in value}
        data["workload"] = projected
    data["params"] = params
    data["variables"] = {}
    return engine.activation(data)


def _run_rule(
    rule: Rule,
    subject: Subject,
    activation: Any,
    engine: Engine,
    globals_: Mapping[str, Any],
    lookup: Mapping[str, KubeObject],
    refuse: Oversize | None = None,
    matched: bool | None = None,
) -> list[Finding]:
    """``refuse``: why the rule's comprehensions must not run on this subject (budget.py);
    a condition without comprehensions still decides first whether the rule applies.
    ``matched``: True when a guard found the condition true (guards.py)."""
    try:
        if rule.condition is not None and matched is not True:
            if refuse is not None and iterates(rule.condition.source):
                return [_refused(rule, subject, refuse)]
            if not rule.condition.evaluate(activation):
                return []
        if refuse is not None:
            return [_refused(rule, subject, refuse)]
        if rule.variables:
            activation = _bind_variables(rule, subject, engine, globals_, activation)
        if rule.violations is not None:
            items = rule.violations.evaluate(activation)
            return [_violation(rule, subject, item, lookup) for item in items]
        findings = []
        for validation in rule.validations:
            if validation.expression.evaluate(activation):
                continue
            message = validation.message
            if validation.message_expression is not None:
                # As VAP: a blank message, or one with line breaks, falls back to message.
                text = str(validation.message_expression.evaluate(activation))
                if text.strip() and not _LINE_BREAK.search(text):
                    message = _message(text)
            message = message or f"failed expression: {validation.expression.source.strip()}"
            findings.append(_finding(rule, subject.obj, message, validation.path, rule.doc.level))
        return findings
    except CelEvalError as error:
        return [
            _finding(
                rule,
                subject.obj,
                f"rule could not be evaluated: {_one_line(str(error))}",
                "",
                Level.ERROR,
                Outcome.ERROR,
            )
        ]


def _refused(rule: Rule, subject: Subject, refuse: Oversize) -> Finding:
    message = f"rule could not be evaluated: {refuse.message}"
    return _finding(rule, subject.obj, message, refuse.path, Level.ERROR, Outcome.ERROR)


def _programs(rule: Rule) -> Iterator[Program]:
    if rule.condition is not None:
        yield rule.condition
    yield from (program for _, program in rule.variables)
    if rule.violations is not None:
        yield rule.violations
    for validation in rule.validations:
        yield validation.expression
        if validation.message_expression is not None:
            yield validation.message_expression


def _bind_variables(
    rule: Rule, subject: Subject, engine: Engine, globals_: Mapping[str, Any], activation: Any
) -> Any:
    """Evaluate ``variables`` in order; each sees the ones before it as ``variables.<name>``,
    with the CEL type the engine keeps for it (``Program.variable_value``)."""
    values: dict[str, Any] = {}
    base = {
        **globals_,
        **subject.variables,
        "object": subject.obj.body,
        "subjectRef": subject.obj.ref.logical_name,
        "params": rule.params,
    }
    for name, program in rule.variables:
        values[name] = program.variable_value(activation)
        activation = engine.activation({**base, "variables": dict(values)})
    return activation


def _violation(
    rule: Rule, subject: Subject, item: object, lookup: Mapping[str, KubeObject]
) -> Finding:
    if not isinstance(item, Mapping) or not isinstance(item.get("message"), str):
        raise CelEvalError(
            "each violation must be a map with a string 'message' "
            "(and optional 'path', 'ref', 'level', 'line')"
        )
    line = item.get("line", 0)
    if not isinstance(line, int) or isinstance(line, bool):
        raise CelEvalError("violation 'line' must be an int")
    path = item.get("path", "")
    ref = item.get("ref", "")
    level_text = item.get("level", "")
    if not isinstance(path, str) or not isinstance(ref, str) or not isinstance(level_text, str):
        raise CelEvalError("violation 'path', 'ref' and 'level' must be strings")
    level = rule.doc.level
    if level_text:
        try:
            level = Level.parse(level_text)
        except KeyError:
            raise CelEvalError(
                f"violation level {level_text!r} is not error|warning|note"
            ) from None
    target = lookup.get(ref, subject.obj) if ref else subject.obj
    return _finding(rule, target, _message(item["message"]), path, level, line=line)


def _finding(
    rule: Rule,
    obj: KubeObject,
    message: str,
    path: str,
    level: Level,
    outcome: Outcome = Outcome.FAIL,
    line: int = 0,
) -> Finding:
    """``line`` (absolute, 1-based) overrides the path's position: findings inside an
    embedded document, such as a device-plugin config held in a ConfigMap value,
    have no field path of their own."""
    if line > 0:
        column = 1
    else:
        line, column = obj.position(path)
    return Finding(
        rule_id=rule.id,
        level=level,
        message=message,
        location=Location(obj.origin.uri, line, column, path),
        ref=obj.ref,
        source_type=obj.origin.source_type,
        outcome=outcome,
        origin=obj.origin,
    )


def _message(text: object) -> str:
    """A message from an expression on one line, capped. It quotes object data (names,
    values), so a line break inside is shown escaped rather than ending the message
    there: ``runtimeClassName: "nvidia\\u2028x"`` must not read as ``nvidia``."""
    return _capped(_LINE_BREAK.sub(_escaped, str(text).strip()))


def _escaped(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def _one_line(text: object) -> str:
    """The first line of an error (cel-cpp adds lines pointing at the expression)."""
    lines = str(text).strip().splitlines()
    return _capped(lines[0].strip() if lines else "")


def _capped(line: str) -> str:
    return line if len(line) <= MESSAGE_LIMIT else line[: MESSAGE_LIMIT - 1] + "…"


def document_findings(
    invalid: Iterable[InvalidDocument], rules: Mapping[str, Rule]
) -> Iterator[Finding]:
    """Findings of the built-in document rules (PG001-PG003, PG005) that are enabled."""
    for document in invalid:
        rule = rules.get(document.rule_id)
        if rule is None:
            continue
        yield Finding(
            rule_id=rule.id,
            level=rule.doc.level,
            message=document.message,
            location=Location(document.origin.uri, document.line, document.column, document.path),
            ref=document.ref,
            source_type=document.origin.source_type,
            origin=document.origin,
        )
