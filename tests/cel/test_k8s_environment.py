"""The Kubernetes CEL environment (scanner/cel/k8s/): the API server's compile-time
literal checks, Kubernetes values kept apart from input, the rewrites that make cel-cpp
answer as cel-go, map iteration in sorted key order on both engines and in every
process, and the portable engine refusing what it cannot run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_run import poolgate

from scanner.cel import ResultKind, cpp_available, get_engine
from scanner.errors import CelError, CelEvalError

pytestmark = pytest.mark.skipif(not cpp_available(), reason="cel-expr-python not installed")

ENGINES = ["cpp", "python"]


def run(engine_name: str, source: str, data: dict[str, Any] | None = None) -> Any:
    engine = get_engine(engine_name)
    return engine.compile(source, ResultKind.ANY).evaluate(engine.activation(data or {}))


# --- compile-time checks ------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "message", "column"),
    [
        ("[1, 'a'].size() > 0", "expected type 'int' but found 'string'", 5),
        ("{'a': 1, 'b': true}", "expected type 'int' but found 'bool'", 15),
        ("{'a': 1, 2: 1}", "expected type 'string' but found 'int'", 10),
        ("[[1], ['a']]", "expected type 'list(int)' but found 'list(string)'", 7),
        ("'x'.matches('x++')", "invalid matches argument", 13),
        ("'x'.find(')')", "unexpected )", 10),
        ("duration('1d') > duration('1s')", "invalid duration argument", 10),
        ("timestamp('2024-13-01T00:00:00Z')", "invalid timestamp argument", 11),
    ],
)
@pytest.mark.parametrize("engine_name", ENGINES)
def test_literals_kubernetes_refuses_are_compile_errors_at_the_literal(
    engine_name: str, source: str, message: str, column: int
) -> None:
    with pytest.raises(CelError) as raised:
        get_engine(engine_name).compile(source, ResultKind.ANY)
    assert message in raised.value.message
    assert (raised.value.line, raised.value.column) == (1, column)


@pytest.mark.parametrize(
    "source",
    [
        "[1, dyn('a')].size() == 2",  # dyn matches any type
        "'%s: %d'.format(['a', 1]) == 'a: 1'",  # format()'s arguments are exempt
        "object.x.matches(object.y) || true",  # patterns that are not literals run as given
        "1 < 1.5 && size([1]) < 2.5 && 2u > 1",  # numbers compare across types
    ],
)
def test_what_kubernetes_accepts_compiles(source: str) -> None:
    assert run("cpp", source, {"object": {"x": "a", "y": "a"}}) is True


def test_a_program_poolgate_writes_around_checked_sources_may_skip_the_literal_checks() -> None:
    engine = get_engine("cpp")
    source = '[{"n": 1, "s": "a"}].map(v, v.s + string(v.n))[0]'
    with pytest.raises(CelError):
        engine.compile(source, ResultKind.STRING)
    program = engine.compile(source, ResultKind.STRING, literal_checks=False)
    assert program.evaluate(engine.activation({})) == "a1"


# --- Kubernetes values --------------------------------------------------------------


@pytest.mark.parametrize(
    "forged",
    [
        {"true": "kubernetes.Quantity", "false": "i:1e0"},  # the keys YAML gives: text
        {"1": "kubernetes.Quantity", "0": "i:1e0"},
    ],
)
def test_no_input_value_passes_for_a_kubernetes_value(forged: dict[str, str]) -> None:
    """Kubernetes values are maps with bool keys at run time; input maps have text keys,
    so a manifest cannot hand a rule something a quantity equals or a quantity's
    methods take: as in the API server, comparing the two is an error."""
    data = {"object": {"q": forged}}
    for source in ("quantity('1') == object.q", "object.q.isInteger()"):
        with pytest.raises(CelEvalError, match="no matching overload"):
            run("cpp", source, data)


def test_quantities_compare_by_value_whatever_their_form() -> None:
    assert run("cpp", "quantity('1.0') == quantity('1') && quantity('1.0') != quantity('2')")
    assert run("cpp", "[quantity('1.0').isInteger(), quantity('1').isInteger()]") == [False, True]


def test_a_huge_quantity_exponent_is_an_error_not_a_long_computation() -> None:
    """ "1e999999999" in a manifest must not make poolgate compute 10**999999999."""
    with pytest.raises(CelEvalError, match="exponent is outside the supported range"):
        run("cpp", "quantity(object.q).isInteger()", {"object": {"q": "1e999999999"}})


# --- rewrites --------------------------------------------------------------------


def test_transform_map_refuses_a_key_twice_as_cel_go_does() -> None:
    assert run("cpp", "[1, 2].transformMapEntry(i, v, {string(v): i})") == {"1": 0, "2": 1}
    with pytest.raises(CelEvalError, match="insert failed: key 1 already exists"):
        run("cpp", "[1, 1].transformMapEntry(i, v, {v: i})")


def test_folds_keep_the_element_type() -> None:
    assert run("cpp", "[2u, 1u].min() == 1u && type([2u, 1u].sum()) == uint")
    assert run("cpp", "[duration('1s'), duration('1ns')].sum() == duration('1000000001ns')")
    with pytest.raises(CelEvalError, match="max called on empty list"):
        run("cpp", "dyn([]).max()")


def test_optional_results_of_the_format_library() -> None:
    source = "format.named('dns1123Label').value().validate('Not_A_Label').orValue(['ok'])"
    assert len(run("cpp", source)) == 1
    assert run("cpp", "format.named('nope').hasValue() || format.uuid().validate('x').hasValue()")


# --- map iteration order -----------------------------------------------------------

MAPS = {"object": {"labels": {"zeta": "1", "alpha": "2", "mid": "3", "beta": "4"}}}


@pytest.mark.parametrize("engine_name", ENGINES)
@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("object.labels.map(k, k)", ["alpha", "beta", "mid", "zeta"]),
        ("object.labels.filter(k, k != 'mid')", ["alpha", "beta", "zeta"]),
        ("{'b': 1, 'a': 2, 'c': 3}.map(k, k)", ["a", "b", "c"]),
        ("{dyn(10): 'x', dyn(2): 'y', dyn(true): 'z'}.map(k, string(k))", ["true", "2", "10"]),
        ("object.labels.exists_one(k, k == 'beta')", True),
    ],
)
def test_comprehensions_visit_map_keys_in_sorted_order(
    engine_name: str, source: str, expected: object
) -> None:
    assert run(engine_name, source, MAPS) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("object.labels.transformList(k, v, k + v)", ["alpha2", "beta4", "mid3", "zeta1"]),
        ("object.labels.transformMap(k, v, v).map(k, k)", ["alpha", "beta", "mid", "zeta"]),
        ("[3, 1].transformList(i, v, i * 10 + v)", [3, 11]),  # lists keep their order
        ("dyn(object.labels).all(k, v, k.size() > 2 && v != '')", True),
    ],
)
def test_two_variable_comprehensions_visit_map_keys_in_sorted_order(
    source: str, expected: object
) -> None:
    assert run("cpp", source, MAPS) == expected


RULE = """\
id: ACME{number}
name: order-{number}
level: warning
summary: s.
description: d.
remediation: r.
subject: object
match:
  kinds: [ConfigMap]
violations: |
  [{{"message": {message}, "path": "metadata"}}]
"""
MANIFEST = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: order
  labels: {zeta: "1", alpha: "2", mid: "3", beta: "4", gamma: "5", delta: "6", eps: "7"}
data: {k9: a, k1: b, k5: c, k3: d}
"""


def _messages(tmp_path: Path, engine_name: str, seed: str) -> list[str]:
    result = poolgate(
        "scan",
        str(tmp_path / "cm.yaml"),
        "--rules",
        str(tmp_path / engine_name),
        "--cel-engine",
        engine_name,
        "--format",
        "json",
        "--fail-on",
        "never",
        env={"PYTHONHASHSEED": seed, "POOLGATE_CACHE_DIR": str(tmp_path / f"cache-{seed}")},
    )
    assert result.returncode == 0, result.stderr
    findings = json.loads(result.stdout)["findings"]
    return [finding["message"] for finding in findings]


def test_messages_built_from_maps_are_the_same_in_every_run(tmp_path: Path) -> None:
    """cel-cpp's maps iterate in an order that changes from process to process (hash
    seeds); poolgate's messages must not."""
    (tmp_path / "cm.yaml").write_text(MANIFEST)
    standard = 'joined(object.metadata.labels.map(k, k), ",") + ";" + joined(object.data.filter(k, true), ",")'
    built = 'joined(object.metadata.labels.transformMap(k, v, k + v).transformList(k, v, v), ",")'
    for engine_name, sources in (("cpp", [standard, built]), ("python", [standard])):
        rules = tmp_path / engine_name
        rules.mkdir()
        for number, message in enumerate(sources, start=100):
            (rules / f"ACME{number}.yaml").write_text(RULE.format(number=number, message=message))
    runs = {seed: _messages(tmp_path, "cpp", seed) for seed in ("0", "1", "2", "3")}
    assert all(messages == runs["0"] for messages in runs.values())
    assert sorted(runs["0"]) == [
        "alpha,beta,delta,eps,gamma,mid,zeta;k1,k3,k5,k9",
        "alpha2,beta4,delta6,eps7,gamma5,mid3,zeta1",
    ]
    assert _messages(tmp_path, "python", "5") == ["alpha,beta,delta,eps,gamma,mid,zeta;k1,k3,k5,k9"]


# --- the portable engine ------------------------------------------------------------


@pytest.mark.parametrize("with_checker", [True, False])
@pytest.mark.parametrize(
    ("source", "named"),
    [
        ("'a'.lowerAscii() == 'a'", "lowerAscii() (ext.Strings"),
        ("object.?spec.orValue({}) == {}", "optional syntax"),
        ("[?optional.of(object.x)].size() == 1", "optional syntax"),
        ("optional.of(1).hasValue()", "hasValue() (optional types)"),
        ("sets.contains([1], [1])", "sets.contains() (ext.Sets)"),
        ("[1].all(i, v, v > 0)", "two-variable comprehension all()"),
        ("[1].existsOne(i, v, v > 0)", "existsOne() (two-variable comprehensions)"),
        ("quantity('1').isInteger()", "isInteger() (kubernetes.quantity)"),
        ("isIP(object.x)", "isIP() (kubernetes.net.ip"),
        ("[1, 2].sum() == 3", "sum() (kubernetes.lists)"),
        ("duration('1s').getMilliseconds() == 1000", "getMilliseconds()"),
    ],
)
def test_the_portable_engine_refuses_what_it_cannot_run_when_the_rule_loads(
    monkeypatch: pytest.MonkeyPatch, with_checker: bool, source: str, named: str
) -> None:
    """Refused with the feature named and the default engine pointed at, whether or not
    the default engine is installed to check the rule first."""
    if not with_checker:
        monkeypatch.setattr("scanner.cel.python.cpp_available", lambda: False)
    engine = get_engine("python")
    with pytest.raises(CelError) as raised:
        engine.compile(source, ResultKind.BOOL)
    assert named in raised.value.message
    assert "not available on the portable engine" in raised.value.message
    assert "--cel-engine cpp" in raised.value.message


def test_a_variable_called_like_a_namespace_is_still_a_variable() -> None:
    """``c.matches(...)`` on a comprehension variable is a method, not a function ``c.*``."""
    source = "object.names.exists(sets, sets.startsWith('a'))"
    assert run("python", source, {"object": {"names": ["ab"]}}) is True


# --- more variables ----------------------------------------------------------------


@pytest.mark.parametrize("engine_name", ENGINES)
def test_an_environment_declares_the_variables_it_is_given_with_their_types(
    engine_name: str,
) -> None:
    """How an admission policy's environment adds ``oldObject``, ``request``, ...:
    names with types; poolgate's own variables stay ``dyn``."""
    engine = get_engine(
        engine_name,
        {"object": "dyn", "oldObject": "dyn", "request": "map(string, dyn)", "count": "int"},
    )
    program = engine.compile("oldObject == null && request.operation == 'CREATE'", ResultKind.BOOL)
    data = {"object": {}, "oldObject": None, "request": {"operation": "CREATE"}, "count": 1}
    assert program.evaluate(engine.activation(data)) is True
    with pytest.raises(CelError, match="no matching overload"):
        engine.compile("count + 'a' == 'b'", ResultKind.BOOL)
    with pytest.raises(CelError, match="undeclared reference to 'workload"):
        engine.compile("workload.gpu", ResultKind.BOOL)
