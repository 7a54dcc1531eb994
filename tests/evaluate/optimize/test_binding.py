"""Rule variables bound inside one expression (scanner/evaluate/optimize/binding.py) mean what they meant
with one activation per variable: same values, same order, same errors. (That the findings
are the plain path's on every fixture: tests/equivalence/.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scanner import pipeline
from scanner.cel import Engine, ResultKind, cpp_available, get_engine
from scanner.errors import CelError, CelEvalError
from scanner.evaluate import fast
from scanner.evaluate.optimize.binding import bind, let_source
from scanner.evaluate.plan import PAYS_FROM, RulePlan, RunShape
from scanner.findings.records import Level
from scanner.inventory import KubeObject, LineMap, Origin
from scanner.model import Subject
from scanner.ruleset.docs import RuleDoc
from scanner.ruleset.load import Rule, Validation

pytestmark = pytest.mark.skipif(not cpp_available(), reason="cel-expr-python not installed")

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "fixtures" / "rules"
ACTIVATION = {"workload": {"namespace": "ml", "names": ["a", "b"]}, "variables": {}}


def evaluate(
    engine: Engine, variables: list[tuple[str, str]], body: str, data: dict[str, Any] | None = None
) -> Any:
    program = engine.compile(let_source(variables, body), ResultKind.ANY)
    return program.evaluate(engine.activation(data or ACTIVATION))


@pytest.mark.parametrize("name", ["cpp", "python"])
def test_each_variable_sees_the_ones_before_it_and_the_body_sees_all(name: str) -> None:
    engine = get_engine(name)
    variables = [
        ("ns", "workload.namespace"),
        ("count", "size(workload.names)"),
        ("label", 'variables.ns + "/" + string(variables.count)'),
        ("seen", "variables"),  # a later level sees every earlier variable, nothing more
        ("last", "size(variables)"),
    ]
    assert evaluate(engine, variables, "variables") == {
        "ns": "ml",
        "count": 2,
        "label": "ml/2",
        "seen": {"ns": "ml", "count": 2, "label": "ml/2"},
        "last": 4,
    }


@pytest.mark.parametrize("name", ["cpp", "python"])
def test_first_variable_sees_no_variables(name: str) -> None:
    assert evaluate(get_engine(name), [("before", "size(variables)")], "variables.before") == 0


def test_comments_and_comprehensions_in_the_rule_text_stay_inside() -> None:
    engine = get_engine("cpp")
    variables = [("names", "workload.names.map(n, n + n) // doubled\n")]
    body = "variables.names.filter(n, n != 'aa') // the rest\n"
    assert evaluate(engine, variables, body) == ["bb"]


def test_an_error_in_a_variable_is_an_error_of_the_program() -> None:
    engine = get_engine("cpp")
    with pytest.raises(CelEvalError):
        evaluate(engine, [("bad", "workload.missing"), ("ok", "1")], "variables.ok")


def _rule(variables: list[tuple[str, str]], violations: str, engine: Engine) -> Rule:
    doc = RuleDoc("PG900", "test-rule", Level.ERROR, "s", "d", "r.", "workload", "rules/x.yaml")
    compiled = tuple((name, engine.compile(source, ResultKind.ANY)) for name, source in variables)
    check = Validation(
        engine.compile("variables.ok", ResultKind.BOOL),
        "",
        engine.compile("variables.why", ResultKind.STRING),
        "spec",
    )
    return Rule(
        doc,
        True,
        frozenset(),
        variables=compiled,
        violations=engine.compile(violations, ResultKind.LIST),
        validations=(check,),
    )


def bind_rules(
    rules: list[Rule], engine: Engine, counts: dict[str, int] | None = None
) -> dict[str, Rule]:
    """Rule id -> the rule its plan runs, for the rules binding changes on a run with
    ``counts`` subjects of each type (default: one workload)."""
    shape = RunShape(engine, {}, {"workload": 1} if counts is None else counts, deferring=False)
    plans = [bind(RulePlan.of(rule), shape) for rule in rules]
    return {plan.rule.id: plan.running for plan in plans if plan.running is not plan.rule}


def test_bound_rule_keeps_original_sources_and_drops_its_variables() -> None:
    engine = get_engine("cpp")
    rule = _rule([("ok", "true"), ("why", '"because"')], "[]", engine)
    bound = bind_rules([rule], engine)["PG900"]
    assert bound.variables == ()
    assert bound.violations is not None and bound.violations.source == "[]"
    validation = bound.validations[0]
    assert validation.expression.source == "variables.ok"
    activation = engine.activation(ACTIVATION)
    assert validation.expression.evaluate(activation) is True
    assert validation.message_expression is not None
    assert validation.message_expression.evaluate(activation) == "because"


def test_only_engines_that_convert_per_activation_are_bound() -> None:
    engine = get_engine("python")
    assert bind_rules([_rule([("ok", "true"), ("why", '""')], "[]", engine)], engine) == {}


def test_rule_whose_wrapped_program_does_not_compile_keeps_the_plain_path() -> None:
    engine = get_engine("cpp")
    # Alone, the body nests three comprehensions, the most the cost limit allows; bound,
    # the wrapping adds one level and the program is refused. The rule then runs as written.
    body = "[1].filter(a, [1].all(b, [1].all(c, true))).map(a, {'message': 'x'})"
    rule = _rule([("ok", "true"), ("why", "false")], body, engine)
    assert bind_rules([rule], engine) == {}


def test_a_rule_that_names_a_variable_twice_keeps_the_plain_path() -> None:
    """Bound, the two would be keys of one map literal, which cel-cpp refuses at run
    time; unbound, the later one wins, whatever the number of subjects."""
    engine = get_engine("cpp")
    rule = _rule([("why", '"first"'), ("why", '"second"')], "[]", engine)
    assert bind_rules([rule], engine) == {}


def test_a_rule_is_bound_however_few_its_subjects() -> None:
    """One subject is enough (the answer must not depend on how many there are);
    none is not (nothing would run the rule)."""
    engine = get_engine("cpp")
    rule = _rule([("ok", "true"), ("why", '"because"')], "[]", engine)
    assert bind_rules([rule], engine, {"workload": 0}) == {}
    assert set(bind_rules([rule], engine, {"workload": 1})) == {"PG900"}


RULE_HEAD = """\
name: {name}
level: warning
summary: s.
description: d.
remediation: r.
subject: object
"""


def _ruleset(tmp_path: Path, rules: dict[str, str]) -> pipeline.Ruleset:
    directory = tmp_path / "rules"
    directory.mkdir()
    for rule_id, rest in rules.items():
        head = RULE_HEAD.format(name=rule_id.lower())
        (directory / f"{rule_id}.yaml").write_text(f"id: {rule_id}\n{head}{rest}")
    options = pipeline.ScanOptions(rule_dirs=[directory], include_bundled=False, enable_all=True)
    return pipeline.load_ruleset(options)


def _messages(ruleset: pipeline.Ruleset, count: int) -> list[list[str]]:
    """Each rule's messages on the first of ``count`` identical objects."""
    subjects = [
        Subject(
            "object",
            KubeObject(
                {
                    "kind": "X",
                    "metadata": {"name": f"x{index}", "creationTimestamp": "2026-01-01T00:00:00Z"},
                    "xs": list(range(60)),
                    "ys": list(range(100)),
                },
                Origin(f"cluster://c/X/x{index}"),
                LineMap({}),
            ),
        )
        for index in range(count)
    ]
    globals_ = {"config": {}, "cluster": {"now": "2026-01-02T00:00:00Z"}}
    found = fast.evaluate(ruleset.rules, {"object": subjects}, ruleset.engine, globals_)
    first = [finding for finding in found.findings if finding.ref and finding.ref.name == "x0"]
    return [[f.rule_id, f.outcome.value, f.message] for f in first]


@pytest.mark.parametrize("count", [1, PAYS_FROM, 40])
def test_the_answer_does_not_depend_on_how_many_subjects_there_are(
    tmp_path: Path, count: int
) -> None:
    """Found in review, each once a difference between a run of one object (a
    pre-commit hook) and a large one: a timestamp variable was no CEL value any more
    on the plain path; a rule left unbound (three comprehension levels) read the
    empty ``params`` of a bound rule with equal parameters that ran before it on the
    same activation; a variable's iterations counted toward the body's budget only
    when bound."""
    ruleset = _ruleset(
        tmp_path,
        {
            "ACME100": """\
variables:
  - name: created
    expression: timestamp(object.metadata.creationTimestamp)
violations: |
  timestamp(cluster.now) - variables.created > duration("1h") ? [{"message": "old"}] : []
""",
            "ACME101": """\
params: {limit: 1}
violations: '[{"message": "A " + string(params.limit)}]'
""",
            "ACME102": """\
params: {limit: 1}
violations: >-
  [1].exists(a, [1].exists(b, [1].exists(c, true)))
  ? [{"message": "B " + string(params.limit)}] : []
""",
            "ACME103": """\
variables:
  - name: v
    expression: object.xs.map(x, object.ys.map(y, y)).size()
violations: |
  object.xs.map(x, object.ys.map(y, y)).size() == variables.v
  ? [{"message": "ok " + string(variables.v)}] : []
""",
        },
    )
    assert _messages(ruleset, count) == [
        ["ACME100", "fail", "old"],
        ["ACME101", "fail", "A 1"],
        ["ACME102", "fail", "B 1"],
        [
            "ACME103",
            "error",
            "rule could not be evaluated: evaluation stopped at 10,000 comprehension "
            "iterations (rule cost limit)",
        ],
    ]


@pytest.mark.parametrize("name", ["cpp", "python"])
def test_params_are_bound_outermost_as_a_literal(name: str) -> None:
    engine = get_engine(name)
    params = '{"minutes": 10, "ratio": 0.5, "names": ["é", "a\\nb"], "on": true, "none": null}'
    variables = [("limit", "params.minutes * 60")]
    body = "[variables.limit, params.ratio, params.names, params.on, params.none]"
    # As bind_rules compiles them: without Kubernetes' literal checks, which the sources
    # inside passed on their own (the parameters' map literal mixes types).
    source = let_source(variables, body, params)
    program = engine.compile(source, ResultKind.ANY, literal_checks=False)
    assert program.evaluate(engine.activation(ACTIVATION)) == [600, 0.5, ["é", "a\nb"], True, None]
    if name == "cpp":
        with pytest.raises(CelError, match="expected type"):
            engine.compile(source, ResultKind.ANY)


def test_a_rule_with_params_shares_the_subject_activation() -> None:
    engine = get_engine("cpp")
    doc = RuleDoc("PG902", "params-rule", Level.ERROR, "s", "d", "r.", "workload", "rules/y.yaml")
    rule = Rule(
        doc,
        True,
        frozenset(),
        condition=engine.compile("size(workload.names) >= params.least", ResultKind.BOOL),
        violations=engine.compile('[{"message": string(params.least)}]', ResultKind.LIST),
        params={"least": 2},
    )
    bound = bind_rules([rule], engine)["PG902"]
    assert bound.params == {} and bound.condition is not None and bound.violations is not None
    assert bound.condition.source == "size(workload.names) >= params.least"
    activation = engine.activation(ACTIVATION)  # params {} here, as for any other rule
    assert bound.condition.evaluate(activation) is True
    assert bound.violations.evaluate(activation) == [{"message": "2"}]


def test_params_that_do_not_read_back_keep_the_plain_path() -> None:
    engine = get_engine("cpp")
    doc = RuleDoc("PG903", "nan-rule", Level.ERROR, "s", "d", "r.", "workload", "rules/z.yaml")
    rule = Rule(
        doc,
        True,
        frozenset(),
        violations=engine.compile("[]", ResultKind.LIST),
        params={"x": float("nan")},
    )
    assert bind_rules([rule], engine) == {}
