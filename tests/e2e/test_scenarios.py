"""Scenario fixtures: several files that only mean something together.

Each ``fixtures/scenarios/<name>/`` holds pool declarations or Nodes, device-plugin
config, namespaces and workloads, plus ``expected.yaml``::

    rules: [PG201, PG105]          # the rules this scenario is about
    findings:                      # exactly their findings, in any order
      - {rule: PG201, file: workloads/team-b.yaml, line: 12, object: team-b/Deployment/eval}

The whole directory is scanned as one run (``poolgate scan <dir>``), under both CEL
engines; findings of the listed rules must equal the list exactly, so near-misses
in the scenario are checked to stay silent.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from scanner.pipeline import Ruleset, ScanOptions, load_ruleset, scan_paths

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted(p for p in (ROOT / "fixtures" / "scenarios").iterdir() if p.is_dir())


@cache
def ruleset(engine: str) -> Ruleset:
    return load_ruleset(ScanOptions(engine=engine, enable_all=True))


def findings_of(directory: Path, engine: str, rules: set[str]) -> list[dict[str, Any]]:
    report = scan_paths([str(directory)], ruleset(engine), repo_root=directory)
    return sorted(
        (
            {
                "rule": f.rule_id,
                "file": f.location.uri,
                "line": f.location.line,
                "object": f.ref.logical_name if f.ref else "",
            }
            for f in report.findings
            if f.rule_id in rules
        ),
        key=lambda d: (d["file"], d["line"], d["rule"], d["object"]),
    )


@pytest.mark.parametrize("engine", ["cpp", "python"])
@pytest.mark.parametrize("directory", SCENARIOS, ids=lambda p: p.name)
def test_scenario(directory: Path, engine: str) -> None:
    expected_doc = yaml.safe_load((directory / "expected.yaml").read_text())
    rules = set(expected_doc["rules"])
    expected = sorted(
        expected_doc.get("findings") or [],
        key=lambda d: (d["file"], d["line"], d["rule"], d["object"]),
    )
    assert findings_of(directory, engine, rules) == expected


def test_every_scenario_has_expectations() -> None:
    assert SCENARIOS
    for directory in SCENARIOS:
        doc = yaml.safe_load((directory / "expected.yaml").read_text())
        assert doc["rules"], directory
        assert len([p for p in directory.rglob("*.yaml") if p.name != "expected.yaml"]) >= 2, (
            directory
        )
