"""Drift between two audits, decided by fingerprint."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from scanner import drift
from scanner.errors import UsageError
from scanner.findings import Finding, Level, Location, Outcome, Suppression
from scanner.inventory import ObjectRef
from scanner.reporters import Report
from scanner.reporters.json import to_document


def finding(rule: str, name: str, kind: str = "Pod", message: str = "m", **extra: Any) -> Finding:
    ref = ObjectRef("v1", kind, "ml", name)
    uri = f"cluster://prod/ml/{kind}/{name}"
    return Finding(rule, Level.ERROR, message, Location(uri, 1, 1, "spec"), ref, "cluster", **extra)


def make_report(*findings: Finding) -> Report:
    return Report(
        findings=list(findings), notifications=[], rules=[], tool_version="0", repo_root="."
    )


def previous(tmp_path: Path, *findings: Finding) -> list[Any]:
    path = tmp_path / "last.json"
    path.write_text(json.dumps(to_document(make_report(*findings))))
    return drift.load_previous(str(path))


def test_new_unchanged_resolved_by_fingerprint(tmp_path: Path) -> None:
    before = previous(
        tmp_path,
        finding("PG603", "a", message="Pending for 20 minutes"),
        finding("PG301", "gone"),
    )
    now = make_report(
        finding("PG603", "a", message="Pending for 1460 minutes"),  # same finding, new text
        finding("PG501", "fresh"),
    )
    changes = drift.compare(
        now, before, "last.json", drift.checker({"PG603", "PG301", "PG501"}, ())
    )
    assert [f.rule_id for f in changes.new] == ["PG501"]
    assert [f.rule_id for f in changes.unchanged] == ["PG603"]
    assert [e["ruleId"] for e in changes.resolved] == ["PG301"]
    assert changes.unverified == ()


def test_unchecked_findings_are_not_resolved(tmp_path: Path) -> None:
    before = previous(tmp_path, finding("PG301", "a"), finding("PG604", "n", kind="Node"))
    changes = drift.compare(
        make_report(),
        before,
        "last.json",
        # PG301 ran, but not on Pods (forbidden); PG604 did not run at all.
        drift.checker({"PG301"}, {("PG301", "Pod")}),
    )
    assert changes.resolved == ()
    assert sorted(e["ruleId"] for e in changes.unverified) == ["PG301", "PG604"]


def test_suppressed_and_rule_errors_do_not_count(tmp_path: Path) -> None:
    before = previous(
        tmp_path,
        finding("PG301", "a", suppression=Suppression("in-source", "debug pod")),
        finding("PG302", "b", outcome=Outcome.ERROR),
    )
    now = make_report(finding("PG301", "a"), finding("PG302", "b"))
    changes = drift.compare(now, before, "last.json", drift.checker({"PG301", "PG302"}, ()))
    assert sorted(f.rule_id for f in changes.new) == ["PG301", "PG302"]


def test_reports_carry_the_drift(tmp_path: Path) -> None:
    before = previous(tmp_path, finding("PG603", "a"), finding("PG301", "gone"))
    now = make_report(finding("PG603", "a"), finding("PG501", "fresh"))
    changes = drift.compare(now, before, "last.json", drift.checker({"PG603", "PG301"}, ()))

    out = io.StringIO()
    drift.wrap("json", lambda r, s: None, changes)(now, out)
    document = json.loads(out.getvalue())
    assert document["drift"]["counts"] == {"new": 1, "unchanged": 1, "resolved": 1, "unverified": 0}
    assert {f["ruleId"]: f["drift"] for f in document["findings"]} == {
        "PG501": "new",
        "PG603": "unchanged",
    }

    out = io.StringIO()
    drift.wrap("sarif", lambda r, s: None, changes)(now, out)
    results = json.loads(out.getvalue())["runs"][0]["results"]
    assert {r["ruleId"]: r["baselineState"] for r in results} == {
        "PG501": "new",
        "PG603": "unchanged",
    }

    out = io.StringIO()
    drift.wrap("text", lambda r, s: s.write("REPORT\n"), changes)(now, out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "Since the last audit (last.json): 1 new, 1 unchanged, 1 resolved"
    assert lines[1] == "  new       cluster://prod/ml/Pod/fresh error PG501 m"
    assert lines[2] == "  resolved  cluster://prod/ml/Pod/gone error PG301 m"
    assert lines[-1] == "REPORT"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "invalid JSON"),
        ('{"version": 2, "findings": []}', "not a poolgate JSON report"),
        ("[]", "not a poolgate JSON report"),
        ('{"version": ' + "7" * 5000 + "}", "not a poolgate JSON report"),  # no traceback
        ("[" * 5000 + "]" * 5000, "not a poolgate JSON report"),
    ],
)
def test_previous_must_be_a_json_report(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "last.json"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        drift.load_previous(str(path))
    with pytest.raises(UsageError, match="no such file"):
        drift.load_previous(str(tmp_path / "missing.json"))
