"""Any value a CEL expression can produce survives being a rule variable, on both engines.

Found in review: ``bytes(...)`` or ``type(...)`` as a variable's value crashed the whole
scan on the pure-Python engine (celpy's bytes were handed back to its JSON converter),
and a ``uint`` variable came back as an int there (``variables.v > 2u``: no overload).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scanner import pipeline
from scanner.evaluate import fast
from scanner.inventory import KubeObject, LineMap, Origin
from scanner.model import Subject

ENGINES = ["cpp", "python"]


def _findings(
    tmp_path: Path, engine: str, variables: list[tuple[str, str]], violations: str
) -> list[str]:
    rule = {
        **dict.fromkeys(("summary", "description", "remediation"), "x."),
        "id": "ACME100",
        "name": "acme",
        "level": "warning",
        "subject": "object",
        "variables": [{"name": name, "expression": text} for name, text in variables],
        "violations": violations,
    }
    directory = tmp_path / "rules"
    directory.mkdir(exist_ok=True)
    (directory / "ACME100.yaml").write_text(json.dumps(rule))  # JSON is YAML
    options = pipeline.ScanOptions(
        rule_dirs=[directory], include_bundled=False, enable_all=True, engine=engine
    )
    ruleset = pipeline.load_ruleset(options)
    subject = Subject(
        "object",
        KubeObject(
            {"kind": "X", "metadata": {"name": "train"}, "data": {"a": "1"}, "n": 3},
            Origin("cluster://c/X/train"),
            LineMap({}),
        ),
    )
    globals_ = {"config": {}, "cluster": {}}
    found = fast.evaluate(ruleset.rules, {"object": [subject]}, ruleset.engine, globals_)
    return [f"{finding.outcome.value}: {finding.message}" for finding in found.findings]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("expression", "check"),
    [
        ("bytes(object.metadata.name)", "variables.v == b'train'"),
        ("type(object.data)", "variables.v == map"),
        ("type(object.n)", "variables.v == int && variables.v != uint"),
        ("uint(object.n)", "variables.v > 2u && variables.v + 1u == 4u"),
        ("[uint(object.n)]", "variables.v[0] == 3u"),
        ("timestamp('2024-01-01T00:00:00Z')", "variables.v + duration('1h') > variables.v"),
        ("duration('90s')", "variables.v == duration('1m30s')"),
        ("{'k': b'x'}", "variables.v.k == b'x'"),
    ],
)
def test_every_kind_of_value_round_trips_through_a_variable(
    tmp_path: Path, engine: str, expression: str, check: str
) -> None:
    variables = [("v", expression)]
    violations = f"({check}) ? [{{'message': 'kept'}}] : []"
    assert _findings(tmp_path, engine, variables, violations) == ["fail: kept"]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_variable_read_by_the_next_keeps_its_type(tmp_path: Path, engine: str) -> None:
    variables = [("t", "type(object.data)"), ("same", "variables.t == map")]
    violations = "variables.same ? [{'message': string(variables.same)}] : []"
    assert _findings(tmp_path, engine, variables, violations) == ["fail: true"]


@pytest.mark.parametrize("expression", ["type(object.data)", "timestamp('2024-01-01T00:00:00Z')"])
def test_a_value_cel_cpp_cannot_take_back_is_an_error_of_the_rule(
    tmp_path: Path, expression: str
) -> None:
    """A variable named twice keeps the rule on the plain path (scanner/evaluate/optimize/binding.py),
    where cel-expr-python gets the value back as a Python object it refuses: the rule
    reports an error, the scan goes on."""
    variables = [("v", "1"), ("v", expression)]
    violations = "variables.v != null ? [{'message': 'kept'}] : []"
    [finding] = _findings(tmp_path, "cpp", variables, violations)
    assert finding.startswith("error: rule could not be evaluated: ")
    assert _findings(tmp_path, "python", variables, violations) == ["fail: kept"]
