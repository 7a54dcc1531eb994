"""Both CEL engines behind one interface: same results, same errors, same positions."""

from __future__ import annotations

from typing import Any

import pytest

from scanner.cel import ResultKind, get_engine
from scanner.errors import CelError, CelEvalError, UsageError
from scanner.model.facts import NAMES

ENGINES = ["cpp", "python"]

DATA: dict[str, Any] = {
    "object": {"metadata": {"name": "train", "labels": {"sku": "h100"}}, "spec": {"replicas": 2}},
    "workload": {
        "containers": [
            {"name": "a", "path": "spec.containers[0]", "securityContext": {"privileged": True}},
            {"name": "b", "path": "spec.containers[1]", "image": "busybox"},
        ]
    },
    "config": {"operatorNamespaces": ["gpu-operator"], "skuLabel": "sku"},
}


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> Any:
    return get_engine(request.param)


@pytest.mark.parametrize(
    ("source", "kind", "expected"),
    [
        ("object.metadata.name == 'train'", ResultKind.BOOL, True),
        ("config.skuLabel in object.metadata.labels", ResultKind.BOOL, True),
        ("object.spec.replicas + 1", ResultKind.ANY, 3),
        ("'x' + object.metadata.name", ResultKind.STRING, "xtrain"),
        (
            "workload.containers.filter(c, has(c.securityContext)"
            " && c.securityContext.privileged == true).map(c, {'path': c.path, 'message': c.name})",
            ResultKind.LIST,
            [{"path": "spec.containers[0]", "message": "a"}],
        ),
        (
            "workload.containers.exists(c, has(c.image) && c.image.startsWith('busy'))",
            ResultKind.BOOL,
            True,
        ),
        ("'busybox'.matches('^busy')", ResultKind.BOOL, True),
        ("size(workload.containers)", ResultKind.ANY, 2),
        ("type(object.metadata) == map", ResultKind.BOOL, True),
        ("[1, 2] + [3]", ResultKind.LIST, [1, 2, 3]),
        ("{'a': [true, dyn(null), dyn(1.5)]}", ResultKind.ANY, {"a": [True, None, 1.5]}),
    ],
)
def test_engines_agree(engine: Any, source: str, kind: ResultKind, expected: object) -> None:
    program = engine.compile(source, kind)
    assert program.evaluate(engine.activation(DATA)) == expected


@pytest.mark.parametrize(
    ("source", "kind", "message", "line", "column"),
    [
        ("1 + 'a'", ResultKind.BOOL, "no matching overload", 1, 3),
        ("'a'", ResultKind.BOOL, "must evaluate to bool, but evaluates to string", 0, 0),
        ("[1]", ResultKind.STRING, "must evaluate to string", 0, 0),
        ("true", ResultKind.LIST, "must evaluate to list", 0, 0),
        ("undeclared_variable == 1", ResultKind.BOOL, "undeclared reference", 1, 1),
    ],
)
def test_compile_errors_carry_positions(
    engine: Any, source: str, kind: ResultKind, message: str, line: int, column: int
) -> None:
    with pytest.raises(CelError) as caught:
        engine.compile(source, kind)
    assert message in caught.value.message
    assert (caught.value.line, caught.value.column) == (line, column)


def test_syntax_error(engine: Any) -> None:
    with pytest.raises(CelError) as caught:
        engine.compile("object.metadata.name ==\n  (", ResultKind.BOOL)
    assert caught.value.line == 2


@pytest.mark.parametrize(
    "source",
    [
        "object.metadata.missing == 'x'",  # missing key without has()
        "object.spec.replicas / 0 == 1",
        "object.metadata.name == 1 || object.metadata.name.size() > object.metadata.x",
    ],
)
def test_runtime_errors_raise_cel_eval_error(engine: Any, source: str) -> None:
    program = engine.compile(source, ResultKind.BOOL)
    with pytest.raises(CelEvalError):
        program.evaluate(engine.activation(DATA))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("string(object.v)", "1"),
        ("string(object.v * 1000000.0)", "1e+06"),
        ("string(object.v / 3.0)", "0.3333333333333333"),
        ("string(-0.0)", "-0"),
        ("string(123456.0) + ' ' + string(0.00001)", "123456 1e-05"),
        ("string(object.flag)", "false"),
        ("string(true) + string(1) + string('x')", "true1x"),
    ],
)
def test_string_writes_doubles_and_bools_as_cel_cpp_does(
    engine: Any, source: str, expected: str
) -> None:
    """celpy wrote "1.0" and "False"; a message built with string() must read the same
    on both engines."""
    data = {"object": {"v": 1.0, "flag": False}}
    assert engine.compile(source, ResultKind.ANY).evaluate(engine.activation(data)) == expected


@pytest.mark.parametrize(
    "source",
    [
        "string(object.n)",
        "int(object.n)",
        "uint(object.n)",
        "double(object.n)",
        "bool(object.n)",
        "size(object.n)",
        "object.n.size()",
        "'a' in object.n",
        "'a' in object.s",  # `in` takes lists and maps, not strings
    ],
)
def test_conversions_of_null_are_errors(engine: Any, source: str) -> None:
    """No overload takes null (cel-cpp, the CEL spec); celpy answered "None", 0 or false,
    and found "a" in "abc". Found by the live-snapshot property test: a null label value
    in PG604, a ClusterPolicy spec that is a string in PG503."""
    data = {"object": {"n": None, "s": "abc"}}
    program = engine.compile(source, ResultKind.ANY)
    with pytest.raises(CelEvalError):
        program.evaluate(engine.activation(data))
    absorbed = engine.compile(f"({source}) == ({source}) || true", ResultKind.BOOL)
    assert absorbed.evaluate(engine.activation(data)) is True


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("'driver' in object.items", False),  # another type: unequal, not an error
        ("'x' in object.items", True),
        ("true in object.items", False),
        ("'a' in object.keys", False),
        ("'b' in object.keys", True),
        ("object.one in object.items", False),
        ("object.zero in object.items", True),  # 0.0 in [0, ...]: int and double
        ("object.half in object.items", True),  # numbers compare by value across types
    ],
)
def test_in_compares_items_of_any_type(engine: Any, source: str, expected: bool) -> None:
    """Found by the live-snapshot property test: a ClusterPolicy whose spec is a list
    made PG503's `c in object.spec` an error on celpy and false on cel-cpp."""
    data = {
        "object": {"items": [0, "x", 1.5], "keys": {"b": 1}, "one": 1, "half": 1.5, "zero": 0.0}
    }
    assert engine.compile(source, ResultKind.BOOL).evaluate(engine.activation(data)) is expected


def test_dyn_result_is_checked_at_run_time(engine: Any) -> None:
    program = engine.compile("object.metadata.name", ResultKind.BOOL)
    with pytest.raises(CelEvalError, match="must evaluate to bool"):
        program.evaluate(engine.activation(DATA))


def test_every_declared_variable_is_usable(engine: Any) -> None:
    for name in NAMES:
        engine.compile(f"{name} == null", ResultKind.BOOL)


def test_extensions_run_on_the_default_engine_and_are_refused_by_the_portable_one(
    engine: Any,
) -> None:
    """The strings extension is part of Kubernetes' environment: the default engine runs
    it, the portable engine refuses the rule when it loads rather than answer otherwise."""
    source = "'A'.lowerAscii() == 'a'"
    if engine.name == "cpp":
        assert engine.compile(source, ResultKind.BOOL).evaluate(engine.activation({})) is True
        return
    with pytest.raises(CelError, match=r"lowerAscii\(\) \(ext.Strings.*--cel-engine cpp"):
        engine.compile(source, ResultKind.BOOL)


def test_auto_and_unknown_engine_names() -> None:
    assert get_engine("auto").name == "cpp"
    with pytest.raises(UsageError):
        get_engine("java")


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("([1] + [2]).filter(x, x > 1)", [2]),
        ("([1] + [2]).exists(x, x > 1)", True),
        ("([1] + [2]).map(x, x * 2)", [2, 4]),
        ("([1] + [2]).all(x, x > 0)", True),
    ],
)
def test_macros_over_concatenated_lists(engine: Any, source: str, expected: object) -> None:
    """celpy's ``+`` on lists returns a plain list; the macros must still accept it."""
    assert engine.compile(source, ResultKind.ANY).evaluate(engine.activation({})) == expected


def test_an_error_celpy_cannot_describe_is_still_an_evaluation_error() -> None:
    """Found by tests/model/test_deferral_fuzz.py's generator: cel-python raised an
    IndexError while formatting the TypeError of this `||`; it reached the user as a
    crash report."""
    source = (
        "size([([false, {'k': workload.runningShared} == {'k': []}][0]"
        " || [{workload.controlled ? 'a' : 'b' : 'x'}['a'],"
        " (workload.controlled ? true : workload.runningShared)][0])]) == 1"
    )
    data = {"workload": {"runningShared": True, "controlled": True}}
    cpp, python = get_engine("cpp"), get_engine("python")
    with pytest.raises(CelEvalError):
        cpp.compile(source, ResultKind.BOOL).evaluate(cpp.activation(data))
    with pytest.raises(CelEvalError):
        python.compile(source, ResultKind.BOOL).evaluate(python.activation(data))


OPERANDS: dict[str, Any] = {
    "object": {
        "a": 1,
        "f": 1.5,
        "two": 2.0,
        "s": "http",
        "n": None,
        "b": True,
        "l": [1, 2, 3],
        "min": -(2**63),
    }
}
ERROR = CelEvalError


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # == and != across types: unequal, never an error; null equals only null
        ("object.a != null", True),
        ("object.f == null", False),
        ("object.n != 1", True),
        ("object.a == 'http'", False),  # an int-or-string field such as a probe port
        ("object.s != 8", True),
        ("object.l == {}", False),
        ("[dyn(1), dyn('a'), dyn(null)].filter(x, x != null)", [1, "a"]),
        ("object.l.exists(x, x == 'a')", False),
        ("object.b == 1 || dyn(1) == true", False),  # a bool is no number
        # numbers compare by value across int, uint and double
        ("object.a == 1.0 && object.two == 2 && object.a == uint(1)", True),
        ("object.a < 1.5 && object.f > object.a && 2u >= object.a", True),
        ("[1, 2] == [dyn(1), dyn(2.0)] && {'k': object.a} == {'k': 1.0}", True),
        # maps of one size with other keys (found in review: an error on python)
        ("{'a': 1, 'b': 1} == {'a': 1, 'c': 1}", False),
        ("[{'a': 1, 'b': 1}].exists(m, m == {'a': 1, 'c': 1})", False),
        ("{'a': 1, 'b': 1} != {'a': 1, 'c': 1}", True),
        ("dyn({1: 'a'}) == dyn({true: 'a'}) || dyn({0: 'a'}) == dyn({false: 'a'})", False),
        ("type(object.a) == int && type(object.f) == double && type(1u) == uint", True),
        ("type(object.s) == string && type(object.b) == bool && type(object.a) != uint", True),
        # ordering only within a type, or between numbers
        ("object.s < 1", ERROR),
        ("object.b < 1", ERROR),
        ("false < object.b && 'a' < object.s", True),
    ],
)
def test_comparisons_across_types(engine: Any, source: str, expected: object) -> None:
    """Found in review: celpy refused == between an int and a string, a double and null,
    an int and a double, and said true == 1."""
    _assert_result(engine, source, expected)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("string(-object.f / 0.0)", "-inf"),
        ("0.0 / 0.0 == 0.0 / 0.0", False),  # NaN
        ("object.f / 0.0 > 0.0", True),
        ("object.a / 0", ERROR),
        ("object.min % -1", ERROR),  # int64 min % -1 overflows
        ("object.a * 1u", ERROR),  # no arithmetic mixing int, uint and double
        ("object.f + 1u", ERROR),
    ],
)
def test_arithmetic(engine: Any, source: str, expected: object) -> None:
    """Found in review: celpy divided a double by zero into +inf whatever the dividend,
    took int64 min % -1 as 0 and multiplied an int by a uint."""
    _assert_result(engine, source, expected)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("object.l[-1]", ERROR),
        ("object.l[3]", ERROR),
        ("object.l[1u] + object.l[1.0]", 4),
        ("object.l[1.5]", ERROR),
        ("object.s[0]", ERROR),
        ("string(object.l)", ERROR),
        ("string(dyn({'k': object.s}))", ERROR),
        ("true && object.s", ERROR),
        ("object.s || false", ERROR),
        ("[dyn(true), dyn(1)].all(x, x)", ERROR),
        ("object.s && false", False),  # false decides, as an error would be absorbed
        ("object.n || true", True),
    ],
)
def test_what_cel_does_not_overload_is_an_error(engine: Any, source: str, expected: object) -> None:
    """Found in review: celpy read a list from the end, indexed strings, wrote a list's
    Python repr for string(), and gave `true && "x"` the value "x"."""
    _assert_result(engine, source, expected)


def _assert_result(engine: Any, source: str, expected: object) -> None:
    program = engine.compile(source, ResultKind.ANY)
    if expected is ERROR:
        with pytest.raises(CelEvalError):
            program.evaluate(engine.activation(OPERANDS))
    else:
        value = program.evaluate(engine.activation(OPERANDS))
        assert (value, type(value)) == (expected, type(expected))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("object.l.map(x, x > 1, x * 2)", [4, 6]),
        ("object.l.map(x, x > 5, x)", []),
        ("{'k': 1, 'j': 2}.map(k, k == 'k', k + '!')", ["k!"]),
        ("object.l.map(x, x, x)", ERROR),  # the predicate must be a bool
        ("object.l.map(x, x > 1, 1 / (x - 3))", ERROR),
    ],
)
def test_map_with_a_predicate(engine: Any, source: str, expected: object) -> None:
    """Found in review: both engines accepted map(x, p, t) at load, celpy failed on it
    at evaluation ("too many values to unpack")."""
    _assert_result(engine, source, expected)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # int() and uint() read ASCII decimal digits and a sign, around spaces
        ("int(' -12 ')", -12),
        ("int('0x10')", ERROR),
        ("int('1_000')", ERROR),
        ("int('١٢')", ERROR),  # other scripts' digits
        ("uint('-0')", ERROR),
        # double() reads decimals, inf and nan, and hexadecimal floats
        ("double('0x10')", 16.0),
        ("double(' 1e3 ')", 1000.0),
        ("double('1_000')", ERROR),
        ("double('-inf') < 0.0", True),
        # timestamp() of seconds, and of RFC 3339 with a lower-case t and z
        ("string(timestamp(0))", "1970-01-01T00:00:00Z"),
        ("string(timestamp('2024-01-01t10:00:00z'))", "2024-01-01T10:00:00Z"),
        # string() of durations and timestamps: fractions in 3 or 6 digits, in UTC
        ("string(duration('1h2m3s4ms'))", "3723.004s"),
        ("string(duration('-1.5s'))", "-1.500s"),
        ("string(timestamp('2024-01-01T10:00:00.25+02:00'))", "2024-01-01T08:00:00.250Z"),
        # an int meets a double as a double in <, <= (cel-cpp; 2^53 + 1 is 2^53 there)
        ("9007199254740993 > 9007199254740992.0", False),
    ],
)
def test_conversions_and_text_as_cel_cpp_has_them(
    engine: Any, source: str, expected: object
) -> None:
    _assert_result(engine, source, expected)
