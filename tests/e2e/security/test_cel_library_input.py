"""Hostile manifests against rules that use Kubernetes' CEL libraries: a pull request's
objects can neither pass for a Kubernetes value (a quantity, an IP) nor make a library
function run for long. Each test scans real files with ``python -m scanner``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_run import poolgate

from scanner.cel import cpp_available

pytestmark = pytest.mark.skipif(not cpp_available(), reason="cel-expr-python not installed")

RULE = """\
id: ACME200
name: gpu-memory-floor
level: error
summary: s.
description: d.
remediation: r.
subject: object
match:
  kinds: [ConfigMap]
validations:
  - expression: {expression}
    message: memory below the floor
"""


def _scan(tmp_path: Path, expression: str, manifest: str) -> tuple[int, list[dict[str, object]]]:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "ACME200.yaml").write_text(RULE.format(expression=expression))
    (tmp_path / "pr.yaml").write_text(manifest)
    result = poolgate(
        "scan",
        str(tmp_path / "pr.yaml"),
        "--rules",
        str(rules),
        "--format",
        "json",
        timeout=60,
    )
    return result.returncode, json.loads(result.stdout)["findings"]


def test_a_map_shaped_like_a_quantity_is_no_quantity(tmp_path: Path) -> None:
    """Kubernetes values are maps with bool keys at run time; YAML keys are text, so the
    forged map compares as the API server compares any non-quantity: an error."""
    manifest = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: forged}
data:
  memory: {true: kubernetes.Quantity, false: "i:1073741824e0"}
  limit: "1"
"""
    code, findings = _scan(tmp_path, 'quantity("1Gi") == object.data.memory', manifest)
    assert code == 3, findings
    [finding] = findings
    assert finding["outcome"] == "error"
    assert "no matching overload for '_==_' applied to '(kubernetes.Quantity, map)'" in str(
        finding["message"]
    )


def test_a_huge_quantity_exponent_is_refused_quickly(tmp_path: Path) -> None:
    """``1e999999999`` would make a naive implementation compute 10**999999999; the
    scan ends well inside the timeout with an error finding for the rule."""
    manifest = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: huge}
data:
  memory: "2Gi"
  limit: "1e999999999"
"""
    code, findings = _scan(tmp_path, "quantity(object.data.limit).isInteger()", manifest)
    assert code == 3, findings
    [finding] = findings
    assert "quantity exponent is outside the supported range" in str(finding["message"])
