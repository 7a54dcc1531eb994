"""Kubernetes' CEL library cases (tests/data/k8s-cel/): the default engine gives
Kubernetes' answer, case by case, except the differences docs/cel-compatibility.md
lists; the portable engine gives the default engine's answer or refuses the
expression when it loads, naming what it lacks and the default engine."""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from scanner.cel import ResultKind, cpp_available, get_engine
from scanner.errors import CelError, CelEvalError

pytestmark = pytest.mark.skipif(not cpp_available(), reason="cel-expr-python not installed")

CASES: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parent.parent / "data" / "k8s-cel" / "cases.yaml").read_text("utf-8")
)

DIFFERENCES: dict[str, str] = {
    # docs/cel-compatibility.md, "Differences from the API server"
    'type(ip("192.168.0.1")) == net.IP': "type names of Kubernetes values",
    'type(cidr("2001:db8::/32").ip()) == net.IP': "type names of Kubernetes values",
    'type(cidr("192.168.0.0/24")) == net.CIDR': "type names of Kubernetes values",
    '"string type: %s".format([type(string)])': "format() of a type",
    "optional.ofNonZeroValue(timestamp('0001-01-01T00:00:00.000+00:00')) == optional.none()": (
        "the zero timestamp"
    ),
}


@cache
def engine(name: str) -> Any:
    return get_engine(name)


def outcome(engine_name: str, source: str) -> tuple[str, Any]:
    """("compile", message), ("runtime", message) or ("value", plain value)."""
    cel = engine(engine_name)
    try:
        program = cel.compile(source, ResultKind.ANY)
    except CelError as error:
        return "compile", error.message
    try:
        return "value", program.evaluate(cel.activation({}))
    except CelEvalError as error:
        return "runtime", str(error)


def same(left: Any, right: Any) -> bool:
    """Equal as the case file means it: doubles numerically, bools never numbers."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right or (math.isnan(left) and math.isnan(right))
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(same, left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(same(left[k], right[k]) for k in left)
    return bool(left == right)


def kubernetes_answer(case: dict[str, Any], found: tuple[str, Any]) -> bool:
    if case.get("expect_error"):
        return found[0] == case["error_phase"]
    return found[0] == "value" and same(found[1], case["expect"])


def case_id(case: dict[str, Any]) -> str:
    return case["expr"][:80]


def params() -> list[Any]:
    marked = []
    for case in CASES:
        reason = DIFFERENCES.get(case["expr"])
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        marked.append(pytest.param(case, id=case_id(case), marks=marks))
    return marked


@pytest.mark.parametrize("case", params())
def test_the_default_engine_gives_kubernetes_answer(case: dict[str, Any]) -> None:
    found = outcome("cpp", case["expr"])
    assert kubernetes_answer(case, found), f"{case['note']}: {found}"


def test_at_least_98_percent_of_the_cases_give_kubernetes_answer() -> None:
    answered = sum(kubernetes_answer(case, outcome("cpp", case["expr"])) for case in CASES)
    assert answered == len(CASES) - len(DIFFERENCES)
    assert answered >= 0.98 * len(CASES)


@pytest.mark.parametrize("case", [pytest.param(case, id=case_id(case)) for case in CASES])
def test_the_portable_engine_never_answers_differently(case: dict[str, Any]) -> None:
    default = outcome("cpp", case["expr"])
    portable = outcome("python", case["expr"])
    if portable[0] == "compile" and default[0] != "compile":
        assert "not available on the portable engine" in portable[1]
        assert "--cel-engine cpp" in portable[1]
        return
    assert portable[0] == default[0], (default, portable)
    if default[0] == "value":
        assert same(portable[1], default[1]), (default, portable)
