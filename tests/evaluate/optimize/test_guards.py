"""Match conditions decided in Python (scanner/evaluate/optimize/guards.py) agree with CEL: a guard may
only reject what the whole condition rejects, and only accept what it accepts. (That the
findings are the plain path's on every fixture: tests/equivalence/.)"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest

from scanner import pipeline
from scanner.cel import Engine, cpp_available, get_engine
from scanner.cel.analysis import PathTest, analyze
from scanner.cel.parser import ParseError
from scanner.evaluate.optimize import guards
from scanner.evaluate.optimize.guards import Flag, build, guard
from scanner.evaluate.plan import PAYS_FROM, RulePlan, RunShape
from scanner.model import build_model
from scanner.ruleset.load import Rule
from scanner.sources.files import load_paths
from scanner.sources.yaml.document import parse_plain

pytestmark = pytest.mark.skipif(not cpp_available(), reason="cel-expr-python not installed")

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "fixtures"
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
RUN = {"config": {"require": {"runtimeClass": "nvidia", "imageDigestPin": False}}, "cluster": {}}


@pytest.mark.parametrize(
    ("source", "parts"),
    [
        ('workload.gpu && config.require.x != ""', ["workload.gpu", 'config.require.x != ""']),
        ('x && "a && b" == y', ["x", '"a && b" == y']),
        ("f(a && b) && [c && d][0]", ["f(a && b)", "[c && d][0]"]),
        ("!workload.ns.platform", ["!workload.ns.platform"]),
        ("a || b && c", ["a || b && c"]),  # && binds tighter: the top level is ||
        ("a && b ? c : d", ["a && b ? c : d"]),
        ("(a && b) && c", ["a && b", "c"]),  # parentheses keep theirs together
        ("a && // why && not\n b", ["a", "b"]),
        ("a && r'\\d' == b", ["a", "r'\\d' == b"]),
        ("a && '''x\n&&''' == b", ["a", "'''x\n&&''' == b"]),
        ("a.?b.orValue(false) && [?c][0]", ["a.?b.orValue(false)", "[?c][0]"]),
    ],
)
def test_conditions_split_only_at_top_level_and(source: str, parts: list[str]) -> None:
    assert [part.source for part in analyze(source).conjuncts] == parts


@pytest.mark.parametrize("source", ["a && 'unterminated", "a && && b"])
def test_a_condition_that_does_not_parse_has_no_conjuncts(source: str) -> None:
    with pytest.raises(ParseError):
        analyze(source)


@pytest.mark.parametrize(
    ("value", "negated", "holds"),
    [(False, False, False), (True, False, True), (True, True, False), (False, True, True)],
)
def test_a_flag_is_decided_by_a_bool(value: bool, negated: bool, holds: bool) -> None:
    flag = Flag("workload", ("ns", "platform"), negated)
    assert flag.holds({"workload": {"ns": {"platform": value}}}) is holds


@pytest.mark.parametrize(
    "variables",
    [{}, {"workload": None}, {"workload": {"ns": "x"}}, {"workload": {"ns": {"platform": 0}}}],
)
def test_a_flag_leaves_anything_but_a_bool_to_cel(variables: dict[str, Any]) -> None:
    assert Flag("workload", ("ns", "platform"), False).holds(variables) is None


def test_constant_conjuncts_are_decided_once_per_run() -> None:
    engine = get_engine("cpp")
    off = build("workload.gpu && config.require.imageDigestPin", engine, RUN, {})
    assert off is not None and off.never
    on = build('config.require.runtimeClass != "" && workload.gpu', engine, RUN, {})
    assert on is not None and not on.never and on.flags == (Flag("workload", ("gpu",), False),)
    with_params = build("params.limit > 3 && node.gpu", engine, RUN, {"limit": 2})
    assert with_params is not None and with_params.never


def test_a_condition_every_conjunct_of_which_holds_is_true_without_cel() -> None:
    engine = get_engine("cpp")
    on = build('config.require.runtimeClass != "" && workload.gpu', engine, RUN, {})
    assert on is not None and on.whole
    assert on.decide({"workload": {"gpu": True}}) is True
    assert on.decide({"workload": {"gpu": False}}) is False
    assert on.decide({"workload": {"gpu": "yes"}}) is None  # not a bool: CEL decides
    assert on.decide({}) is None
    constant = build('config.require.runtimeClass == "nvidia"', engine, RUN, {})
    assert constant is not None and constant.whole and constant.decide({}) is True


@pytest.mark.parametrize(
    "source",
    [
        "workload.gpu && size(workload.targets) > 0",  # a conjunct no guard covers
        "workload.gpu && config.require.missing",  # a constant that fails
        "workload.gpu && (workload.controlled || size(workload.name) > 0)",  # half an atom
    ],
)
def test_a_condition_with_an_undecided_conjunct_is_never_accepted(source: str) -> None:
    guard = build(source, get_engine("cpp"), RUN, {})
    assert guard is not None and not guard.whole
    facts = {"workload": {"gpu": True, "controlled": True, "targets": [], "name": "x"}}
    assert guard.decide(facts) is None
    assert guard.decide({"workload": {**facts["workload"], "gpu": False}}) is False


@pytest.mark.parametrize(
    "source",
    [
        "config.require.missing",  # an error: left to the condition, per subject
        "object.kind == config.kind",  # reads the subject
        "size(object.spec) > 0 && has(object.spec.x)",
    ],
)
def test_nothing_to_decide_gives_no_guard(source: str) -> None:
    assert build(source, get_engine("cpp"), RUN, {}) is None


def guarded(
    rules: list[Rule], engine: Engine, run: dict[str, Any], count: int = PAYS_FROM
) -> dict[str, guards.Guard]:
    """Rule id -> the guard its plan gets on a run with ``count`` subjects of each type."""
    counts = dict.fromkeys(("workload", "node", "namespace", "object"), count)
    shape = RunShape(engine, run, counts, deferring=False)
    plans = [guard(RulePlan.of(rule), shape) for rule in rules]
    return {plan.rule.id: plan.guard for plan in plans if plan.guard is not None}


def test_guards_only_for_the_cpp_engine_and_enough_subjects() -> None:
    ruleset = pipeline.load_ruleset(pipeline.ScanOptions(engine="cpp", enable_all=True))
    rules = list(ruleset.rules)
    run = {"config": ruleset.config.cel_view(), "cluster": {}}
    assert "PG103" in guarded(rules, ruleset.engine, run)
    assert guarded(rules, ruleset.engine, run, PAYS_FROM - 1) == {}
    assert guarded(rules, get_engine("python"), run) == {}


def test_every_guard_decision_is_the_conditions_value() -> None:
    """Each bundled rule's guard against every subject of every fixture: where the
    guard decides, the CEL condition evaluates to the same bool."""
    ruleset = pipeline.load_ruleset(pipeline.ScanOptions(engine="cpp", enable_all=True))
    inventory = load_paths([str(FIXTURES)], REPO)
    model = build_model(inventory, ruleset.config, read_yaml=parse_plain)
    run = {"config": ruleset.config.cel_view(), "cluster": {**model.cluster, "now": "2026-01-01"}}
    found = guarded(list(ruleset.rules), ruleset.engine, run)
    assert {"PG103", "PG104", "PG303", "PG101", "PG602"} <= set(found)
    decided: dict[bool, int] = {True: 0, False: 0}
    for rule in ruleset.rules:
        guard = found.get(rule.id)
        if guard is None or rule.condition is None:
            continue
        for subject in model.subjects().get(rule.doc.subject, ()):
            if rule.kinds and subject.obj.kind not in rule.kinds:
                continue
            decision = guard.decide(subject.variables, subject.obj.body)
            if decision is None:
                continue
            data = {
                **run,
                **subject.variables,
                "object": subject.obj.body,
                "subjectRef": subject.obj.ref.logical_name,
                "params": rule.params,
                "variables": {},
            }
            assert rule.condition.evaluate(ruleset.engine.activation(data)) is decision, rule.id
            decided[decision] += 1
    assert decided[False] > 50 and decided[True] > 50


@pytest.mark.parametrize(
    ("source", "alternatives"),
    [
        (
            "(!workload.controlled || workload.runningShared)",
            [
                PathTest("flag", "workload", ("controlled",), negated=True),
                PathTest("flag", "workload", ("runningShared",)),
            ],
        ),
        (
            "((a.b)) || (c.d == 'x')",
            [PathTest("flag", "a", ("b",)), PathTest("equals", "c", ("d",), text="x")],
        ),
        ("a.b || b && c", [PathTest("flag", "a", ("b",)), None]),
        ("a ? b : c", []),
        ("a.b", []),
    ],
)
def test_disjunctions_split_at_top_level_or(
    source: str, alternatives: list[PathTest | None]
) -> None:
    [conjunct] = analyze(source).conjuncts
    assert list(conjunct.alternatives) == alternatives


def test_a_disjunction_of_flags_rejects_only_when_every_flag_is_false() -> None:
    source = "workload.gpu && (!workload.controlled || workload.runningShared)"
    guard = build(source, get_engine("cpp"), RUN, {})
    assert guard is not None
    assert guard.any_of == (
        (Flag("workload", ("controlled",), True), Flag("workload", ("runningShared",), False)),
    )

    def facts(controlled: bool, shared: object) -> dict[str, Any]:
        return {"workload": {"gpu": True, "controlled": controlled, "runningShared": shared}}

    assert guard.rejects(facts(True, False))
    assert not guard.rejects(facts(True, True))
    assert not guard.rejects(facts(False, False))
    assert not guard.rejects(facts(True, None))  # not a bool: CEL decides


def test_equality_and_membership_atoms_read_the_object_too() -> None:
    run = {"config": {"operatorNamespaces": ["gpu-operator"], "mixed": ["a", 1]}, "cluster": {}}
    source = (
        '(object.kind == "ClusterPolicy" || object.metadata.namespace in config.operatorNamespaces)'
        " && object.spec.paused"
    )
    guard = build(source, get_engine("cpp"), run, {})
    assert guard is not None
    assert guard.any_of == (
        (
            guards.Equals("object", ("kind",), "ClusterPolicy"),
            guards.Member("object", ("metadata", "namespace"), frozenset({"gpu-operator"})),
        ),
    )

    def pod(namespace: object) -> dict[str, Any]:
        return {"kind": "Pod", "metadata": {"namespace": namespace}, "spec": {"paused": True}}

    assert guard.rejects({}, pod("team-a"))
    assert not guard.rejects({}, pod("gpu-operator"))
    assert not guard.rejects({}, pod(None))  # not a string: CEL decides
    assert not guard.rejects({}, {"kind": "Pod", "spec": {"paused": True}})  # no metadata
    assert not guard.rejects({}, {"kind": "ClusterPolicy", "spec": {"paused": True}})
    assert guard.rejects({}, {"kind": "ClusterPolicy", "spec": {"paused": False}})
    # a list that is not all strings is not a membership the guard can decide
    assert build("object.kind in config.mixed", get_engine("cpp"), run, {}) is None


@pytest.mark.parametrize(
    ("source", "flags"),
    [
        # a comprehension may stop the whole evaluation: nothing after it decides
        ("params.xs.all(x, x != '') && workload.gpu", None),
        ("params.xs.all\f(x, x != '') && workload.gpu", None),  # form feed is space too
        # so may a map literal whose keys turn out equal
        ("{workload.name: 1, workload.namespace: 2}.size() == 2 && workload.gpu", None),
        ("workload.gpu && params.xs.all(x, x != '') && workload.pending", ("gpu",)),
    ],
)
def test_no_conjunct_after_a_comprehension_is_a_guard(
    source: str, flags: tuple[str, ...] | None
) -> None:
    guard = build(source, get_engine("cpp"), RUN, {"xs": ["a"]})
    if flags is None:
        assert guard is None
    else:
        assert guard is not None and not guard.whole
        assert tuple(flag.fields[0] for flag in guard.flags if isinstance(flag, Flag)) == flags


def test_a_leading_dot_name_is_not_a_run_constant() -> None:
    """``.workload`` is the global: evaluated without it, ``||`` would hide the error."""
    source = "(has(.workload.x) || config.require.imageDigestPin == false)"
    assert build(source, get_engine("cpp"), RUN, {}) is None
    after_in = '(config.require.runtimeClass in .workload.names || config.require.runtimeClass == "nvidia")'
    assert build(after_in, get_engine("cpp"), RUN, {}) is None


COST_RULE = """\
id: ACME201
name: constants-over-the-limit
level: warning
summary: Two constants that each fit the iteration limit, together not.
description: A rule of one's own, for the test.
remediation: None; it is a test.
subject: workload
params: {params}
match:
  condition: {condition}
violations: '[{{"message": "matched"}}]'
"""


@pytest.mark.parametrize(
    "condition",
    [
        # each conjunct fits the 10,000 iterations alone, not together (the iteration
        # variable is named config, so each reads only run values)
        "params.xs.all(config, config != '') && params.xs.all(config, config != '')",
        # false, but too late: the first one has used up most of the iterations
        "params.xs.all(config, config != '') && params.xs.all(config, config != 'v5999')",
        "workload.gpu && params.xs.all(config, config != '') && params.xs.all(config, true)",
    ],
)
def test_a_condition_over_the_iteration_limit_is_an_error_with_guards_too(
    condition: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    params = {"xs": [f"v{i}" for i in range(6000)]}
    text = COST_RULE.format(params=json.dumps(params), condition=json.dumps(condition))
    (rules / "ACME201.yaml").write_text(text)
    ruleset = pipeline.load_ruleset(
        pipeline.ScanOptions(rule_dirs=[rules], engine="cpp", include_bundled=False)
    )
    inventory = load_paths([str(FIXTURES / "rules" / "PG103")], REPO)

    def run() -> list[tuple[str, str, str]]:
        report = pipeline.evaluate_inventory(inventory, ruleset, REPO, now=NOW)
        return [(f.location.uri, f.message, f.outcome.value) for f in report.findings]

    guarded = run()
    monkeypatch.setattr(guards, "ENGINES", frozenset())
    plain = run()
    assert guarded == plain
    assert len(guarded) >= PAYS_FROM  # enough workloads for guards to be built
    assert {outcome for _, _, outcome in guarded} == {"error"}
