"""A workload's activation holds only the fields its rules may read (scanner/engine.py,
``workload_fields`` in scanner/deferral.py), and the findings do not depend on it.

cel-expr-python converts a variable whole the first time an expression reads it, so
converting fields no rule names is wasted time. No cluster is available here: the
snapshots are the test dump and the benchmark generator's cluster at a small size.
"""

from __future__ import annotations

import datetime
import textwrap
from pathlib import Path
from typing import Any

import pytest

from benchmarks.snapshot import write_snapshot
from scanner import audit, engine, pipeline
from scanner.cel import cpp_available
from scanner.deferral import workload_fields
from scanner.pipeline import ScanOptions, load_ruleset
from scanner.sources import snapshot
from scanner.sources.files import load_paths

pytestmark = pytest.mark.skipif(not cpp_available(), reason="cel-expr-python not installed")

REPO = Path(__file__).resolve().parents[1]
DUMP = REPO / "tests" / "audit" / "controlled" / "dump.yaml"
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


@pytest.mark.parametrize(
    ("source", "fields"),
    [
        ("workload.gpu && workload.pending", {"gpu", "pending"}),
        # both branches count: only a controlled workload skips the else branch
        ("(workload.controlled ? [] : workload.targets)", {"controlled", "targets"}),
        ('"workload.targets" + workload.name', {"name"}),  # in a string: no read
        ("has(workload.ns.name) && .workload.gpu", {"ns", "gpu"}),
        ("workload.name.startsWith('a')", {"name"}),
        ("[1].map(x, x)", set()),
        # read whole, or not readable here: every field
        ("size(workload) > 3", None),
        ('"targets" in workload', None),
        ('workload["containers"]', None),
        ("workload.all(k, k != '')", None),
        ("[workload].size()", None),
        ('workload.name + r"\\"', None),
        ("workload.name // comment", None),
    ],
)
def test_the_fields_a_rule_may_read(source: str, fields: set[str] | None) -> None:
    found = workload_fields([source])
    assert found == (None if fields is None else frozenset(fields))


def test_fields_of_all_expressions_of_a_rule_add_up() -> None:
    assert workload_fields(["workload.gpu", "workload.name + ''"]) == {"gpu", "name"}
    assert workload_fields(["workload.gpu", "size(workload)"]) is None


def test_an_activation_holds_only_the_fields_its_rules_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ruleset = pipeline.load_ruleset(pipeline.ScanOptions(engine="cpp", enable_all=True))
    named = frozenset().union(
        *(
            workload_fields(program.source for program in engine._programs(rule)) or ()
            for rule in ruleset.rules
            if rule.doc.subject == "workload"
        )
    )
    seen: list[set[str]] = []
    original = ruleset.engine.activation

    def recording(data: dict[str, Any]) -> Any:
        facts = data.get("workload")
        if isinstance(facts, dict) and "kind" in data.get("object", {}):
            seen.append(set(facts))
        return original(data)

    monkeypatch.setattr(ruleset.engine, "activation", recording)
    inventory = load_paths([str(REPO / "fixtures" / "rules")], REPO)
    pipeline.evaluate_inventory(inventory, ruleset, REPO, now=NOW)
    assert seen and all(keys <= named for keys in seen)
    # a non-GPU workload meets only the rules that read its containers and namespace
    assert min(len(keys) for keys in seen) < len(named) // 2


def rule_file(rule_id: str, violations: str) -> str:
    return textwrap.dedent(
        f"""\
        id: {rule_id}
        name: reads-facts-{rule_id.lower()}
        level: warning
        summary: Reads workload facts its own way.
        description: A rule of one's own, for the test.
        remediation: None; it is a test.
        subject: workload
        violations: |
          {violations}
        """
    )


CUSTOM_RULES = {
    # reads the facts whole: nothing may be left out
    "ACME101": 'size(workload) > 3 ? [{"message": string(size(workload)) + " facts"}] : []',
    "ACME102": '"gpu" in workload && workload.gpu ? [{"message": "a GPU workload"}] : []',
    # a field holding a map that lacks a key on some workloads: the same either way
    "ACME103": 'has(workload.runningNode.name) ? [] : [{"message": "not running"}]',
    "ACME104": '[{"message": workload.runningNode.name}]',  # an error where it is missing
}


@pytest.mark.parametrize("source", ["dump", "generated", "fixtures"])
def test_findings_do_not_depend_on_the_projection(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    for rule_id, violations in CUSTOM_RULES.items():
        (rules / f"{rule_id}.yaml").write_text(rule_file(rule_id, violations))
    ruleset = load_ruleset(ScanOptions(rule_dirs=[rules], engine="cpp", enable_all=True))

    def run() -> list[tuple[str, str, str, str]]:
        if source == "fixtures":
            inventory = load_paths([str(REPO / "fixtures" / "rules")], REPO)
            findings = pipeline.evaluate_inventory(inventory, ruleset, REPO, now=NOW).findings
        else:
            path = DUMP
            if source == "generated":
                path = tmp_path / "cluster.json"
                write_snapshot(path, nodes=20, pods=300)
            findings, _ = audit.evaluate(snapshot.read(str(path)), ruleset, now=NOW)
            findings = findings.findings
        return [(f.rule_id, f.location.uri, f.location.path, f.message) for f in findings]

    projected = run()
    monkeypatch.setattr(engine, "CONVERTING", frozenset())
    whole = run()
    assert projected == whole
    for rule_id in CUSTOM_RULES:
        assert any(f[0] == rule_id for f in whole), rule_id
