"""Drift between two audits, decided by fingerprint."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from scanner.errors import UsageError
from scanner.findings import drift
from scanner.findings.records import Finding, Level, Location, Outcome, Suppression
from scanner.findings.report import Report
from scanner.inventory import ObjectRef
from scanner.reporters import drift as drift_report
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
    # The text report calls them what JSON and docs/audit.md do (found in review).
    out = io.StringIO()
    drift_report.wrap("text", lambda r, s: None, changes)(make_report(), out)
    lines = out.getvalue().splitlines()
    assert lines[0] == (
        "Since the last audit (last.json): 0 new, 0 unchanged, 0 resolved, "
        "2 unverified (their rules could not run on them)"
    )
    assert [line.split()[0] for line in lines[1:3]] == ["unverified", "unverified"]


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
    drift_report.wrap("json", lambda r, s: None, changes)(now, out)
    document = json.loads(out.getvalue())
    assert document["drift"]["counts"] == {"new": 1, "unchanged": 1, "resolved": 1, "unverified": 0}
    assert {f["ruleId"]: f["drift"] for f in document["findings"]} == {
        "PG501": "new",
        "PG603": "unchanged",
    }

    out = io.StringIO()
    drift_report.wrap("sarif", lambda r, s: None, changes)(now, out)
    results = json.loads(out.getvalue())["runs"][0]["results"]
    assert {r["ruleId"]: r["baselineState"] for r in results} == {
        "PG501": "new",
        "PG603": "unchanged",
    }

    out = io.StringIO()
    drift_report.wrap("text", lambda r, s: s.write("REPORT\n"), changes)(now, out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "Since the last audit (last.json): 1 new, 1 unchanged, 1 resolved"
    assert lines[1] == "  new        cluster://prod/ml/Pod/fresh error PG501 m"
    assert lines[2] == "  resolved   cluster://prod/ml/Pod/gone error PG301 m"
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


def test_a_finding_not_checked_one_night_is_still_open_the_next(tmp_path: Path) -> None:
    """Night 2 could not list Pods: its report carries night 1's Pod finding as
    unverified, and night 3 (Pods readable again) reads it as a finding still open:
    unchanged if it is there, resolved if it is gone, never new."""
    night1 = previous(tmp_path, finding("PG301", "a"), finding("PG301", "b"))
    night2 = make_report()
    changes = drift.compare(night2, night1, "n1.json", drift.checker({"PG301"}, {("PG301", "Pod")}))
    out = io.StringIO()
    drift_report.wrap("json", lambda r, s: None, changes)(night2, out)
    path = tmp_path / "n2.json"
    path.write_text(out.getvalue())

    carried = drift.load_previous(str(path))
    assert sorted(entry["location"]["uri"] for entry in carried) == [
        "cluster://prod/ml/Pod/a",
        "cluster://prod/ml/Pod/b",
    ]
    night3 = make_report(finding("PG301", "a"))
    changes = drift.compare(night3, carried, "n2.json", drift.checker({"PG301"}, ()))
    assert changes.new == ()
    assert [f.ref.name for f in changes.unchanged if f.ref] == ["a"]
    assert [e["object"]["name"] for e in changes.resolved] == ["b"]


def test_a_rule_error_tonight_leaves_last_nights_finding_unverified(tmp_path: Path) -> None:
    """The rule ran but could not be evaluated on that object tonight (a cost limit,
    say): it did not see the violation gone, so the finding is not resolved."""
    before = previous(tmp_path, finding("PG301", "a"), finding("PG301", "b"))
    now = make_report(finding("PG301", "a", outcome=Outcome.ERROR))
    changes = drift.compare(now, before, "last.json", drift.checker({"PG301"}, ()))
    assert [e["object"]["name"] for e in changes.unverified] == ["a"]
    assert [e["object"]["name"] for e in changes.resolved] == ["b"]


def test_a_new_api_version_of_the_same_object_is_the_same_finding(tmp_path: Path) -> None:
    """After an upgrade the audit reads NodePools as karpenter.sh/v1 instead of
    v1beta1: the fingerprint changes with the version, the finding does not."""

    def on(version: str, name: str = "gpu", path: str = "spec") -> Finding:
        ref = ObjectRef(version, "NodePool", "", name)
        uri = f"cluster://prod/NodePool/{name}"
        return Finding("PG101", Level.ERROR, "m", Location(uri, 1, 1, path), ref, "cluster")

    before = previous(tmp_path, on("karpenter.sh/v1beta1"), on("karpenter.sh/v1beta1", "old"))
    now = make_report(
        on("karpenter.sh/v1"), on("other.example/v1"), on("karpenter.sh/v1", path="x")
    )
    assert on("karpenter.sh/v1").fingerprint != on("karpenter.sh/v1beta1").fingerprint
    changes = drift.compare(now, before, "last.json", drift.checker({"PG101"}, ()))
    assert [f.ref.api_version for f in changes.unchanged if f.ref] == ["karpenter.sh/v1"]
    # Another API group, or another field, is another finding.
    assert sorted((f.ref.api_version, f.location.path) for f in changes.new if f.ref) == [
        ("karpenter.sh/v1", "x"),
        ("other.example/v1", "spec"),
    ]
    assert [e["object"]["name"] for e in changes.resolved] == ["old"]


def test_drift_reports_are_written_in_pieces_with_the_whole_documents_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --compare the JSON and SARIF reports go through the writers that write a
    batch at a time (a nightly audit of 100,000 pods holds ~50,000 findings), and the
    text is exactly the whole document's json.dumps with the drift added to it."""
    from scanner.reporters import json as json_report
    from scanner.reporters import sarif

    monkeypatch.setattr(json_report, "WRITE_BATCH", 2)
    monkeypatch.setattr(sarif, "WRITE_BATCH", 2)
    before = previous(tmp_path, finding("PG603", "a"), finding("PG301", "gone"))
    now = make_report(
        finding("PG603", "a"),
        finding("PG501", "fresh"),
        finding("PG501", "hidden", suppression=Suppression("in-source", "known")),
        finding("PG302", "broken", outcome=Outcome.ERROR),
        finding("PG501", "late \u2028 line"),
    )
    changes = drift.compare(now, before, "last.json", drift.checker({"PG603", "PG301"}, ()))
    states = changes.states()

    document = to_document(now)
    for entry in document["findings"]:
        if entry["fingerprint"] in states:
            entry["drift"] = states[entry["fingerprint"]]
    document["drift"] = {
        "previous": "last.json",
        "counts": drift.counts(changes),
        "new": [f.fingerprint for f in changes.new],
        "unchanged": [f.fingerprint for f in changes.unchanged],
        "resolved": list(changes.resolved),
        "unverified": list(changes.unverified),
    }
    out = io.StringIO()
    drift_report.wrap("json", lambda r, s: None, changes)(now, out)
    assert out.getvalue() == json.dumps(document, indent=2, ensure_ascii=False) + "\n"

    log = sarif.build_log(now)
    for result in log["runs"][0]["results"]:
        fingerprint = result["partialFingerprints"][sarif.FINGERPRINT_KEY]
        if fingerprint in states:
            result["baselineState"] = states[fingerprint]
    out = io.StringIO()
    drift_report.wrap("sarif", lambda r, s: None, changes)(now, out)
    assert out.getvalue() == json.dumps(log, indent=2, ensure_ascii=False) + "\n"
    assert out.getvalue().count('"baselineState"') == len(states) == 3
