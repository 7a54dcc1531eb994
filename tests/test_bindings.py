"""Rule variables bound inside one expression (scanner/bindings.py) mean what they meant
with one activation per variable: same values, same order, same errors."""

from __future__ import annotations

from typing import Any

import pytest

from scanner.bindings import bind_rules, let_source
from scanner.cel import Engine, ResultKind, cpp_available, get_engine
from scanner.errors import CelEvalError
from scanner.findings import Level
from scanner.ruledoc import RuleDoc
from scanner.rules import Rule, Validation

pytestmark = pytest.mark.skipif(not cpp_available(), reason="cel-expr-python not installed")

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
    # Alone, ``variables.why`` is dyn and compiles as a string expression; bound, the
    # checker sees a map of bools and refuses it. The rule then runs as written.
    rule = _rule([("ok", "true"), ("why", "false")], "[]", engine)
    assert bind_rules([rule], engine) == {}
