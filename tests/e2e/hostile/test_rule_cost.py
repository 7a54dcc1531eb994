"""Rule cost limits (scanner/cel/budget.py): one expensive rule cannot hang a scan.

The iteration limit is cel-cpp's own (compiled into cel-expr-python); the pure-Python
engine must stop on exactly the same inputs, so these tests measure cel-cpp's count
from the outside and compare it with cel-python's count from the inside.
"""

from __future__ import annotations

import contextlib
from functools import cache
from pathlib import Path
from typing import Any

import celpy
import lark
import pytest
from celpy.adapter import json_to_cel

from scanner.cel import Engine, ResultKind, budget, get_engine
from scanner.cel import celpy_budget as counting
from scanner.cel.budget import (
    BUDGET_EXCEEDED,
    MACROS,
    MAX_ITEMS,
    MAX_ITERATIONS,
    MAX_NESTING,
    MAX_STRING,
    comprehension_nesting,
    oversize,
)
from scanner.errors import CelError, CelEvalError
from scanner.evaluate.fast import evaluate
from scanner.findings.records import Outcome
from scanner.inventory import KubeObject, LineMap, Origin
from scanner.model import Subject
from scanner.ruleset.load import bundled_rules_dir, load_rules

ENGINES = ("cpp", "python")


@cache
def engine(name: str) -> Engine:
    return get_engine(name)


def run(name: str, source: str, data: dict[str, Any]) -> Any:
    cel = engine(name)
    return cel.compile(source, ResultKind.ANY).evaluate(cel.activation({"object": data}))


# --- static nesting ----------------------------------------------------------------


def _tree_nesting(tree: lark.Tree[Any]) -> int:
    """Comprehension nesting from cel-python's parse tree: the reference for the analysis."""
    children = [child for child in tree.children if isinstance(child, lark.Tree)]
    if tree.data == "member_dot_arg":
        method = tree.children[1]
        arguments = tree.children[2] if len(tree.children) > 2 else None
        if str(method) in MACROS and isinstance(arguments, lark.Tree):
            body = max((_tree_nesting(arg) for arg in arguments.children), default=0)
            return max(_tree_nesting(children[0]), 1 + body)
    return max((_tree_nesting(child) for child in children), default=0)


NESTING_CASES = [
    "object.spec.containers.all(c, c.name != '')",
    "a.all(x, x.b.exists(y, y.c.map(z, z).size() > 0))",
    "a.map(x, x).filter(y, y > 1).exists(z, z == 2)",  # a chain: each range is outside
    "a.all(x, [x.all(y, y)].size() > 0)",
    "a . all ( x , x . exists ( y , true ) )",
    "'.all(x, .exists(y, ' + a.all(x, true)",  # macro names inside a string
    '"a.all(\\" .exists(y, " + b.exists(x, true)',  # escaped quote inside a string
    "r'\\.all(x, ' + c.exists(x, true)",  # a raw string keeps its backslash
    "'''.all(x,\n.all(y,''' + d.exists(x, true)",  # triple-quoted, spanning lines
    "b'.all(' + e.map(x, x)",
    "f.all(x, x) // .exists(y, .exists(z, true))\n&& true",  # a comment
    "all(x) + has(a.b) + a.all_of(x, y)",  # neither a macro call nor a member macro
    "a.exists_one(x, b.filter(y, c.map(z, d.all(w, true)).size() > 0).size() > 0)",
    "(a.all(x, true) ? b : c).exists(y, y.map(z, z).size() > 0)",
    # comments and form feeds between a macro's name, its dot and its "("
    "[1, 2].all // c\n(x, x > 0)",
    "[1, 2]. // c\nall(x, x > 0)",
    "[1].all(a, [1].all(b, [1].all(c, [1].all // x\n(d, true))))",
    "xs.all\f(x, true) && xs.\fexists(y, true)",
]


@pytest.mark.parametrize("source", NESTING_CASES)
def test_the_nesting_agrees_with_cel_pythons_parse_tree(source: str) -> None:
    tree = celpy.Environment().compile(source)
    assert comprehension_nesting(source)[0] == _tree_nesting(tree)


def test_bundled_rules_stay_within_the_nesting_limit() -> None:
    """And the analysis agrees with the parse tree on every expression of every bundled rule."""
    for rule in load_rules([bundled_rules_dir()], engine("cpp")):
        programs = [rule.condition, rule.violations, *(p for _, p in rule.variables)]
        for validation in rule.validations:
            programs += [validation.expression, validation.message_expression]
        for program in programs:
            if program is None:
                continue
            depth = comprehension_nesting(program.source)[0]
            assert depth == _tree_nesting(celpy.Environment().compile(program.source)), rule.id
            assert depth <= MAX_NESTING, rule.id


@pytest.mark.parametrize("name", ENGINES)
def test_deep_nesting_is_refused_at_load_with_its_position(name: str) -> None:
    source = "object.a.all(a,\n  a.all(b, b.all(c,\n    c.all(d, d == 1))))"
    with pytest.raises(CelError) as raised:
        engine(name).compile(source, ResultKind.BOOL)
    assert raised.value.message == (
        f"comprehensions nested 4 deep; at most {MAX_NESTING} are allowed (rule cost limit)"
    )
    assert (raised.value.line, raised.value.column) == (3, 7)  # the innermost "all"
    engine(name).compile(source.replace("c.all(d, d == 1)", "c == 1"), ResultKind.BOOL)


def test_rule_file_with_deep_nesting_names_file_line_and_field(tmp_path: Path) -> None:
    rule = (Path(__file__).parent / "rule_template.yaml").read_text()
    deep = "object.a.all(a, a.all(b, b.all(c, c.all(d, d == 1))))"
    (tmp_path / "X001.yaml").write_text(rule.replace("EXPRESSION", deep))
    from scanner.errors import RuleLoadError

    with pytest.raises(RuleLoadError) as raised:
        load_rules([tmp_path], engine("cpp"))
    (problem,) = raised.value.problems
    assert problem.startswith(f"{tmp_path / 'X001.yaml'}:12: validations[0].expression: CEL ")
    assert problem.endswith(
        "nested 4 deep; at most 3 are allowed (rule cost limit) (expression line 1, column 37)"
    )


# --- iteration limit ---------------------------------------------------------------


def test_cpp_stops_at_its_ten_thousandth_iteration() -> None:
    source = "object.l.all(x, x == 0)"
    assert run("cpp", source, {"l": [0] * (MAX_ITERATIONS - 1)}) is True
    with pytest.raises(CelEvalError) as raised:
        run("cpp", source, {"l": [0] * MAX_ITERATIONS})
    assert str(raised.value) == BUDGET_EXCEEDED
    assert BUDGET_EXCEEDED == (
        "evaluation stopped at 10,000 comprehension iterations (rule cost limit)"
    )


def test_python_stops_at_the_same_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """Same code path with a small limit: 10,000 cel-python iterations take seconds."""
    monkeypatch.setattr(counting, "MAX_ITERATIONS", 60)
    source = "object.l.all(x, x == 0)"
    assert run("python", source, {"l": [0] * 59}) is True
    with pytest.raises(CelEvalError) as raised:
        run("python", source, {"l": [0] * 60})
    assert str(raised.value) == BUDGET_EXCEEDED


def _cpp_repeats(source: str, data: dict[str, Any], times: int) -> bool:
    """Can cel-cpp evaluate ``source`` ``times`` times inside one ``all`` within its limit?

    Each round costs 1 + c iterations, c being ``source``'s own count, so ``times``
    rounds fit exactly when times <= (MAX_ITERATIONS - 1) // (1 + c). The list wrapper
    keeps rounds going when ``source`` fails or is false.
    """
    program = engine("cpp").compile(f"object.r.all(i, [{source}].size() == 1)", ResultKind.ANY)
    try:
        program.evaluate(engine("cpp").activation({"object": {**data, "r": [0] * times}}))
    except CelEvalError as error:
        return str(error) != BUDGET_EXCEEDED
    return True


def _python_count(source: str, data: dict[str, Any]) -> int:
    environment = celpy.Environment()
    activation = environment.program(environment.compile("1")).new_activation()
    evaluator = counting.CountingEvaluator(environment.compile(source), activation)
    with contextlib.suppress(celpy.CELEvalError):
        evaluator.evaluate({"object": json_to_cel(data)})
    return MAX_ITERATIONS - evaluator.left[0]


COUNT_DATA = {"l": [0, 1, 2, 3, 4], "m": {"a": 1, "b": 2, "c": 3}}
COUNT_CASES = [
    ("object.l.all(x, x == 0)", 3),  # stops after 1; counts the check that stopped it
    ("object.l.all(x, x == 1)", 2),
    ("object.l.all(x, x < 9)", 5),
    ("object.l.exists(x, x == 2)", 4),
    ("object.l.exists(x, x == 4)", 5),  # decided on the last element: nothing extra
    ("object.l.exists(x, x == 9)", 5),
    ("object.l.exists_one(x, x == 0)", 5),
    ("object.l.map(x, x.foo)", 5),  # errors do not stop map
    ("object.l.map(x, x > 1, x * 2)", 5),  # one iteration each, kept or not
    ("object.l.filter(x, x > 1)", 5),
    ("object.l.filter(x, x == 1 ? true : x.bar)", 5),
    ("object.l.all(x, x.foo == 1 || x > 3)", 5),  # errors do not stop all
    ("object.l.exists(x, x.foo) || object.l.all(x, x < 3)", 10),
    ("object.l.all(x, object.l.exists(y, y == x))", 24),
    ("false && object.l.all(x, true)", 0),  # && and || short-circuit
    ("object.l.size() > 0 || object.l.all(x, true)", 0),
    ("true ? object.l.map(x, x) : object.l.map(x, x)", 5),
    # a map's keys are read (one iteration each), sorted, then iterated
    ("object.m.all(k, object.m[k] > 0)", 6),
    ("object.m.exists(k, k == 'a')", 5),  # sorted: stops at the first key
    ("object.l.all(x, x == 0 ? object.l.exists(y, y == 1) : object.l.all(y, y.foo))", 28),
]


@pytest.mark.parametrize(("source", "count"), COUNT_CASES)
def test_both_engines_count_the_same_iterations(source: str, count: int) -> None:
    assert _python_count(source, COUNT_DATA) == count
    rounds = (MAX_ITERATIONS - 1) // (1 + count)
    assert _cpp_repeats(source, COUNT_DATA, rounds)
    assert not _cpp_repeats(source, COUNT_DATA, rounds + 1)


@pytest.mark.parametrize(("source", "count"), COUNT_CASES)
def test_both_engines_give_the_same_value(source: str, count: int) -> None:
    outcomes = []
    for name in ENGINES:
        try:
            outcomes.append(("value", run(name, source, COUNT_DATA)))
        except CelEvalError:
            outcomes.append(("error", None))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("name", ENGINES)
def test_comprehension_over_a_scalar_is_an_error(name: str) -> None:
    with pytest.raises(CelEvalError):
        run(name, "object.s.all(x, true)", {"s": "abc"})


# --- value sizes -------------------------------------------------------------------


def test_oversize_names_the_first_value_over_a_limit_by_its_cel_path() -> None:
    small = {"spec": {"containers": [{"name": "a", "args": ["x"] * 10}]}}
    assert oversize("object", small) is None
    wide = {"spec": {"containers": [{"name": "a", "args": ["x"] * (MAX_ITEMS + 1)}]}}
    assert oversize("object", wide) == (
        "object.spec.containers[0].args holds 1,001 entries; rules with comprehensions "
        "do not run on lists or maps over 1,000 entries (rule cost limit)",
        "spec.containers[0].args",
    )
    long = {"data": {"app.conf": "x" * (MAX_STRING + 1)}}
    assert oversize("object", long) == (
        "object.data['app.conf'] is 262,145 characters long; rules with comprehensions "
        "do not run on strings over 262,144 characters (rule cost limit)",
        "data['app.conf']",
    )
    assert oversize("object", ["x" * (MAX_STRING + 1)]) == (
        "object[0] is 262,145 characters long; rules with comprehensions "
        "do not run on strings over 262,144 characters (rule cost limit)",
        "[0]",
    )
    keys = {"data": {str(index): "" for index in range(MAX_ITEMS + 1)}}
    found = oversize("object", keys)
    assert found is not None and found.message.startswith("object.data holds 1,001 entries")


@pytest.mark.parametrize(
    "value",
    [
        [0] * (MAX_ITEMS + 1),  # the shortest JSON over the item limit: 1,000 commas
        {"": [0] * (MAX_ITEMS + 1)},
        {str(index % 10) * (index // 10 + 1): 0 for index in range(MAX_ITEMS + 1)},
        "x" * (MAX_STRING + 1),
        {"x" * (MAX_STRING + 1): 0},
        [2**70, [0] * (MAX_ITEMS + 1)],  # an integer past 64 bits
    ],
)
def test_the_size_shortcut_never_hides_a_value_over_a_limit(value: object) -> None:
    assert oversize("object", value, many=True) is not None
    assert oversize("object", value, many=True) == oversize("object", value)
    assert oversize("object", [0] * MAX_ITEMS, many=True) is None  # settled in C


def test_the_size_shortcut_settles_large_objects_without_the_walk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Deployment's compact JSON is over 2 KB: the commas, not the length, show that
    no list in it can be over the limit, and no string is near the string limit."""

    def walk(value: object) -> bool:
        raise AssertionError("walked")

    body = {
        "spec": {
            "containers": [{"name": f"c{index}", "args": ["--x"] * 40} for index in range(20)]
        },
        "data": {"big": "x" * (MAX_STRING // 2)},
    }
    monkeypatch.setattr(budget, "_any_oversize", walk)
    assert oversize("object", body, many=True) is None
    with pytest.raises(AssertionError, match="walked"):  # 1,000 commas: walked
        oversize("object", {"data": "," * MAX_ITEMS}, many=True)
    with pytest.raises(AssertionError, match="walked"):  # long enough for a long string
        oversize("object", {"d": "x" * MAX_STRING}, many=True)


def test_the_size_shortcut_walks_what_nests_too_deep_to_encode() -> None:
    """msgspec's encoder recurses; near the interpreter's limit it raises, and the
    walks (iterative, both) decide instead of the run failing."""
    deep: list[object] = []
    for _ in range(990):
        deep = [deep]
    assert oversize("object", {"spec": deep}, many=True) is None
    deep.append([0] * (MAX_ITEMS + 1))  # beside the nesting: found after it, no recursion
    found = oversize("object", {"spec": deep}, many=True)
    assert found is not None and found.path == "spec[1]"


def _rule(tmp_path: Path, name: str, **fields: str) -> None:
    text = (Path(__file__).parent / "rule_template.yaml").read_text()
    text = text.replace("X001", name).replace("EXPRESSION", fields.get("expression", "true"))
    if "condition" in fields:
        text = text.replace(
            "  kinds: [ConfigMap]\n", f"  kinds: [ConfigMap]\n  condition: {fields['condition']}\n"
        )
    (tmp_path / f"{name}.yaml").write_text(text)


def _config_map(name: str, data: dict[str, str]) -> Subject:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
    obj = KubeObject(body, Origin(f"{name}.yaml", 0, 1, 1), LineMap(positions={"": (1, 1)}))
    return Subject("object", obj)


@pytest.mark.parametrize("name", ENGINES)
def test_rules_with_comprehensions_skip_oversized_subjects(name: str, tmp_path: Path) -> None:
    _rule(tmp_path, "X001", expression="object.data.all(k, k != 'bad')")
    _rule(tmp_path, "X002", expression="size(object.data) > 0")  # no comprehension: runs
    _rule(  # the condition has no comprehension and rules the big map out: no error
        tmp_path,
        "X003",
        expression="object.data.all(k, k != 'bad')",
        condition="object.metadata.name == 'small'",
    )
    rules = load_rules([tmp_path], engine(name))
    big = _config_map("big", {str(index): "" for index in range(MAX_ITEMS + 1)})
    small = _config_map("small", {"bad": ""})
    found = evaluate(rules, {"object": [big, small]}, engine(name), {})
    results = sorted(
        (f.location.uri, f.rule_id, f.outcome.value, f.message) for f in found.findings
    )
    assert results == [
        (
            "big.yaml",
            "X001",
            Outcome.ERROR.value,
            "rule could not be evaluated: object.data holds 1,001 entries; rules with "
            "comprehensions do not run on lists or maps over 1,000 entries (rule cost limit)",
        ),
        ("small.yaml", "X001", "fail", "data has a key named bad"),
        ("small.yaml", "X003", "fail", "data has a key named bad"),
    ]


HAS_CASES = [
    ({}, "error"),  # no metadata: has() cannot look into it
    ({"metadata": {}}, False),
    ({"metadata": {"namespace": "x"}}, True),
    ({"metadata": "text"}, "error"),
]


@pytest.mark.parametrize(("data", "expected"), HAS_CASES)
@pytest.mark.parametrize("name", ENGINES)
def test_has_follows_the_cel_spec_on_both_engines(
    name: str, data: dict[str, Any], expected: object
) -> None:
    """has(e.f) evaluates e (its error is the result), then tests the key f."""
    try:
        result: object = run(name, "has(object.metadata.namespace)", data)
    except CelEvalError:
        result = "error"
    assert result == expected


def test_an_integer_past_int64_in_derived_facts_does_not_fail_the_python_engine() -> None:
    """Sources read such numbers as floats; a fact computed from them must not crash."""
    cel = engine("python")
    activation = cel.activation({"workload": {"gpu": 10**22, "huge": -(10**400), "ok": True}})
    program = cel.compile(
        "workload.gpu > 1.0 && workload.huge < 0.0 && workload.ok", ResultKind.ANY
    )
    assert program.evaluate(activation) is True
