"""Bad user rules, end to end through ``poolgate scan --rules``.

Load-time problems fail the run (exit 2) with every problem at once, each with file
and line; run-time failures become findings with outcome ``error`` on the object
they failed on (exit 3), and the scan goes on.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import cli_run
import pytest

TEMPLATE = (Path(__file__).parent / "rule_template.yaml").read_text()


def poolgate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return cli_run.poolgate(*args, cwd=cwd, timeout=300)


def rule(directory: Path, rule_id: str, expression: str, kinds: str = "[ConfigMap]") -> None:
    text = TEMPLATE.replace("X001", rule_id).replace("EXPRESSION", expression)
    text = text.replace("kinds: [ConfigMap]", f"kinds: {kinds}")
    (directory / f"{rule_id}.yaml").write_text(text)


def configmap(name: str, data: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: apps\ndata:\n{data}"


def report(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_a_rule_failing_on_one_object_is_an_error_finding_there_and_the_scan_goes_on(
    tmp_path: Path,
) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    # No has(): fails on a ConfigMap without "mode"; compares a string with an int on "many".
    rule(rules, "ACME001", "object.data.mode != 'bad' && object.data.replicas < 3")
    (tmp_path / "a.yaml").write_text(configmap("ok", "  mode: good\n  replicas: 1\n"))
    (tmp_path / "b.yaml").write_text(configmap("missing", "  other: x\n"))
    (tmp_path / "c.yaml").write_text(configmap("many", "  mode: good\n  replicas: 'three'\n"))
    (tmp_path / "d.yaml").write_text(configmap("bad", "  mode: bad\n  replicas: 1\n"))
    for engine in ("cpp", "python"):
        result = poolgate(
            "scan",
            ".",
            "--rules",
            "rules",
            "--format",
            "json",
            "--cel-engine",
            engine,
            cwd=tmp_path,
        )
        assert "Traceback" not in result.stdout + result.stderr
        findings = [f for f in report(result)["findings"] if f["ruleId"] == "ACME001"]
        assert [(f["location"]["uri"], f["outcome"]) for f in findings] == [
            ("b.yaml", "error"),
            ("c.yaml", "error"),
            ("d.yaml", "fail"),
        ], engine
        assert all(f["message"].startswith("rule could not be evaluated: ") for f in findings[:2])
        assert result.returncode == 1  # the real finding on d.yaml decides
        assert (
            poolgate(
                "scan", "a.yaml", "b.yaml", "--rules", "rules", "--cel-engine", engine, cwd=tmp_path
            ).returncode
            == 3
        )  # nothing failed, but a rule could not see b.yaml


@pytest.mark.parametrize("engine", ["cpp", "python"])
def test_an_expensive_rule_stops_at_the_iteration_limit(engine: str, tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    # 900 x 900 comparisons: within the value-size limit, far past 10,000 iterations.
    rule(
        rules,
        "ACME002",
        "object.spec.items.all(x, object.spec.items.all(y, x == y || x != y))",
        kinds="[Inventory]",
    )
    items = "".join(f"    - {index}\n" for index in range(900))
    (tmp_path / "big.yaml").write_text(
        f"apiVersion: example.com/v1\nkind: Inventory\nmetadata:\n  name: big\nspec:\n  items:\n{items}"
    )
    (tmp_path / "small.yaml").write_text(
        "apiVersion: example.com/v1\nkind: Inventory\nmetadata:\n  name: small\n"
        "spec:\n  items: [1, 2, 3]\n"
    )
    result = poolgate(
        "scan", ".", "--rules", "rules", "--format", "json", "--cel-engine", engine, cwd=tmp_path
    )
    assert "Traceback" not in result.stdout + result.stderr
    assert result.returncode == 3
    [finding] = report(result)["findings"]
    assert (finding["location"]["uri"], finding["outcome"], finding["message"]) == (
        "big.yaml",
        "error",
        "rule could not be evaluated: evaluation stopped at 10,000 comprehension iterations "
        "(rule cost limit)",
    )


def test_a_rule_with_comprehensions_is_not_run_on_an_oversized_value(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    rule(rules, "ACME003", "object.spec.items.all(x, x >= 0)", kinds="[Inventory]")
    rule(rules, "ACME004", "size(object.spec.items) < 5000", kinds="[Inventory]")  # no loop
    items = "".join(f"    - {index}\n" for index in range(1500))
    (tmp_path / "huge.yaml").write_text(
        "apiVersion: example.com/v1\nkind: Inventory\nmetadata:\n  name: huge\n"
        f"spec:\n  items:\n{items}"
    )
    result = poolgate("scan", ".", "--rules", "rules", "--format", "json", cwd=tmp_path)
    assert result.returncode == 3, result.stderr
    [finding] = report(result)["findings"]
    assert (finding["ruleId"], finding["outcome"], finding["location"]["line"]) == (
        "ACME003",
        "error",
        6,  # the "items" key
    )
    assert finding["message"] == (
        "rule could not be evaluated: object.spec.items holds 1,500 entries; rules with "
        "comprehensions do not run on lists or maps over 1,000 entries (rule cost limit)"
    )


def test_hostile_rule_files_are_load_errors_with_file_and_line(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    rule(rules, "ACME010", "object.metadata.name ==")  # syntax error
    rule(rules, "ACME011", "object.metadata.name == 'a' && 1 + 'x' == 2")  # type error
    rule(rules, "ACME012", "object.a.all(a, a.all(b, b.all(c, c.all(d, d))))")  # nesting
    (rules / "ACME013.yaml").write_text(TEMPLATE.replace("level: error", "level: fatal"))
    (rules / "ACME014.yaml").write_text("id: ACME014\nname: x\n\tlevel: error\n")  # tab
    laughs = "".join(
        f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
        for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
    )
    (rules / "ACME015.yaml").write_text(
        "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + laughs
    )
    (rules / "ACME016.yaml").write_bytes(b"id: ACME016\nname: caf\xe9\n")
    (rules / "ACME017.yaml").write_text("- id: ACME017\n")
    (tmp_path / "ok.yaml").write_text(configmap("ok", "  a: b\n"))
    result = poolgate("scan", "ok.yaml", "--rules", "rules", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stdout == ""  # nothing was scanned
    lines = result.stderr.splitlines()
    assert lines[0] == "poolgate: error: 8 rule problems:"
    problems = "\n".join(lines[1:])
    where = "  rules/"
    for expected in (
        f"{where}ACME010.yaml:12: validations[0].expression: CEL Syntax error",
        f"{where}ACME011.yaml:12: validations[0].expression: CEL found no matching overload",
        f"{where}ACME012.yaml:12: validations[0].expression: CEL comprehensions nested 4 deep",
        f"{where}ACME013.yaml:3: level:",
        f"{where}ACME014.yaml:3:1: YAML does not parse:",
        f"{where}ACME015.yaml:1:1: alias expansion exceeds limit of 1,000,000 nodes",
        f"{where}ACME016.yaml: cannot read:",
        f"{where}ACME017.yaml:1: a rule file is a YAML mapping",
    ):
        assert expected in problems, (expected, problems)
