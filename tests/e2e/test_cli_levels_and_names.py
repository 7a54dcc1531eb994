"""Through the CLI (issue 25, section 2): ``--min-level``, rule names wherever ids
go, and what the text and JSON reports say about each rule."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from cli_run import poolgate

from scanner.findings.records import Level

HEADER = "apiVersion: poolgate.io/v1alpha1\nkind: GpuPoolGate\n"
POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {namespace}
{annotations}spec:
  containers:
    - name: c
      image: busybox
      securityContext:
        privileged: true
      resources:
        limits:
          nvidia.com/gpu: 1
"""


def pod(name: str, namespace: str = "ml", ignore: str = "") -> str:
    annotations = (
        f"  annotations:\n    poolgate.io/ignore: {json.dumps(ignore)}\n" if ignore else ""
    )
    return POD.format(name=name, namespace=namespace, annotations=annotations)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """Privileged GPU pods: PG301 at error in ``ml``, at note in ``kube-system``; PG303
    and PG401 warnings; PG501 errors."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "k8s").mkdir()
    (root / "k8s" / "ml.yaml").write_text(pod("train"))
    (root / "k8s" / "system.yaml").write_text(pod("debug", "kube-system"))
    return root


def scan_json(repo: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    result = poolgate("scan", "k8s", "--format", "json", *args, cwd=repo)
    assert result.stdout, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return result, document


def levels(document: dict[str, Any]) -> set[str]:
    return {finding["level"] for finding in document["findings"]}


def rules_at(document: dict[str, Any]) -> set[tuple[str, str]]:
    return {(f["ruleId"], f["level"]) for f in document["findings"] if f["suppression"] is None}


# --- --min-level ---------------------------------------------------------------------


def test_min_level_hides_findings_from_every_report_and_counts_them(repo: Path) -> None:
    _, everything = scan_json(repo)
    assert levels(everything) == {"error", "warning", "note"}
    below = sum(1 for f in everything["findings"] if f["level"] != "error")

    result, document = scan_json(repo, "--min-level", "error")
    assert result.returncode == 1  # --fail-on error still decides: errors are shown
    assert levels(document) == {"error"}
    assert document["summary"]["hidden"] == below
    assert document["summary"]["warnings"] == document["summary"]["notes"] == 0
    for fmt in ("text", "sarif", "junit", "github", "html"):
        shown = poolgate("scan", "k8s", "--format", fmt, "--min-level", "error", cwd=repo)
        assert shown.returncode == 1, shown.stderr
        assert "does not drop ALL capabilities" not in shown.stdout, fmt  # a PG303 warning
    text = poolgate("scan", "k8s", "--min-level", "warning", cwd=repo).stdout
    assert "note PG301" not in text
    assert text.splitlines()[-1].endswith("; 1 finding below --min-level hidden")


def test_min_level_above_fail_on_is_a_usage_error(repo: Path) -> None:
    result = poolgate("scan", "k8s", "--min-level", "error", "--fail-on", "warning", cwd=repo)
    assert result.returncode == 2
    assert "--min-level error would hide warning findings" in result.stderr
    assert (
        poolgate("scan", "k8s", "--min-level", "error", "--fail-on", "never", cwd=repo).returncode
        == 0
    )


def test_findings_hidden_by_min_level_are_not_written_to_the_baseline(repo: Path) -> None:
    written = poolgate(
        "scan", "k8s", "--min-level", "error", "--write-baseline", "base.json", cwd=repo
    )
    assert written.returncode == 0, written.stderr
    recorded = json.loads((repo / "base.json").read_text())["fingerprints"]
    assert recorded and {entry["ruleId"] for entry in recorded} >= {"PG501"}
    _, document = scan_json(repo)
    with_baseline = scan_json(repo, "--baseline", "base.json")[1]
    # The warnings and notes were never accepted: without --min-level they are back.
    assert levels(with_baseline) == {"warning", "note"}
    assert with_baseline["summary"]["baselined"] == sum(
        1 for f in document["findings"] if f["level"] == "error"
    )


def test_audit_takes_min_level_too(repo: Path, tmp_path: Path) -> None:
    items = [json.loads(json.dumps(_as_object(repo / "k8s" / name))) for name in ("ml.yaml",)]
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    result = poolgate(
        "audit", "--snapshot", str(snapshot), "--format", "json", "--min-level", "error", cwd=repo
    )
    document = json.loads(result.stdout)
    assert document["findings"] and levels(document) == {"error"}
    assert document["summary"]["hidden"] > 0


def _as_object(path: Path) -> dict[str, Any]:
    import yaml

    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


# --- rule names ------------------------------------------------------------------------


def test_enable_and_disable_take_rule_names(repo: Path) -> None:
    _, document = scan_json(repo, "--disable", "privileged-outside-operator,PG501")
    ids = {rule for rule, _ in rules_at(document)}
    assert "PG301" not in ids and "PG501" not in ids and ids
    typo = poolgate("scan", "k8s", "--disable", "privileged-outside-operater", cwd=repo)
    assert typo.returncode == 2
    assert (
        "--disable: unknown rule privileged-outside-operater "
        "(did you mean privileged-outside-operator?)" in typo.stderr
    )


def test_config_rules_and_exemptions_take_rule_names(repo: Path) -> None:
    (repo / ".poolgate.yaml").write_text(
        HEADER
        + """\
spec:
  rules:
    privileged-outside-operator: {level: warning}
  exemptions:
    - rule: image-not-digest-pinned
      match: {namespace: ml}
      reason: vendor image, pinned by the operator.
"""
    )
    _, document = scan_json(repo)
    assert ("PG301", "warning") in rules_at(document)
    assert ("PG301", "error") not in rules_at(document)
    pinned = [f for f in document["findings"] if f["ruleId"] == "PG501"]
    suppressed = {f["object"]["namespace"]: f["suppression"] for f in pinned}
    assert suppressed["ml"] == {
        "kind": "external",
        "justification": "vendor image, pinned by the operator.",
    }
    assert suppressed["kube-system"] is None


def test_config_naming_a_rule_twice_or_misspelt_is_a_config_error(repo: Path) -> None:
    config = repo / ".poolgate.yaml"
    config.write_text(
        HEADER + "spec:\n  rules:\n    PG301: {level: note}\n    privileged-outside-operator: {}\n"
    )
    twice = poolgate("scan", "k8s", cwd=repo)
    assert twice.returncode == 2
    assert "spec.rules sets a rule twice (by id and by name)" in twice.stderr
    config.write_text(HEADER + "spec:\n  rules:\n    privileged-outside-operatr: {}\n")
    typo = poolgate("scan", "k8s", cwd=repo)
    assert typo.returncode == 2
    assert (
        "unknown rule id privileged-outside-operatr (did you mean privileged-outside-operator?)"
        in typo.stderr
    )


def test_ignore_annotations_take_rule_names(repo: Path) -> None:
    (repo / "k8s" / "ml.yaml").write_text(
        pod("train", ignore="privileged-outside-operator=device test rig, image-not-digest-pined=x")
    )
    _, document = scan_json(repo)
    mine = [f for f in document["findings"] if f["object"] and f["object"]["name"] == "train"]
    privileged = next(f for f in mine if f["ruleId"] == "PG301")
    assert privileged["suppression"] == {"kind": "in-source", "justification": "device test rig"}
    (problem,) = [f for f in mine if f["ruleId"] == "PG004"]
    assert problem["message"] == (
        "poolgate.io/ignore names unknown rule image-not-digest-pined "
        "(did you mean image-not-digest-pinned?); it suppresses nothing"
    )


def test_rules_show_takes_a_name(repo: Path) -> None:
    shown = poolgate("rules", "show", "privileged-outside-operator", cwd=repo)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("PG301 privileged-outside-operator\n")
    assert poolgate("rules", "show", "pg301", cwd=repo).stdout == shown.stdout
    typo = poolgate("rules", "show", "privileged-outside", cwd=repo)
    assert typo.returncode == 2
    assert "no rule privileged-outside (did you mean privileged-outside-operator?)" in typo.stderr


# --- what the reports say about rules ------------------------------------------------------


def test_text_report_says_where_to_read_more_and_counts_per_rule(repo: Path) -> None:
    result = poolgate("scan", "k8s", cwd=repo)
    lines = result.stdout.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("k8s/") and " PG" in line:  # a finding: its help line follows
            rule = line.split()[2]
            assert lines[index + 1].endswith(f": poolgate rules show {rule}"), lines[index + 1]
    _, document = scan_json(repo)
    header = next(index for index, line in enumerate(lines) if line.startswith("RULE "))
    assert lines[header].split() == ["RULE", "NAME", "LEVEL", "FINDINGS"]
    table = lines[header + 1 :]
    rows = [row.split() for row in table[: table.index("")]]
    counted = {
        (r["ruleId"], r["ruleName"], r["level"], str(r["count"]))
        for r in document["summary"]["byRule"]
    }
    assert {tuple(row) for row in rows} == counted
    assert [Level.parse(row[2]) for row in rows] == sorted(
        (Level.parse(row[2]) for row in rows), reverse=True
    )
    assert ("PG301", "privileged-outside-operator", "note", "1") in counted


def test_json_findings_carry_the_rules_name_remediation_and_help(repo: Path) -> None:
    _, document = scan_json(repo)
    (privileged,) = [
        f for f in document["findings"] if f["ruleId"] == "PG301" and f["level"] == "error"
    ]
    assert privileged["ruleName"] == "privileged-outside-operator"
    assert privileged["remediation"].endswith(".")
    assert privileged["helpUri"].endswith("docs/rules.md#pg301-privileged-outside-operator")
    summary = document["summary"]
    assert sum(row["count"] for row in summary["byRule"]) == summary["findings"]
    for level in ("error", "warning", "note"):
        assert (
            sum(r["count"] for r in summary["byRule"] if r["level"] == level)
            == summary[f"{level}s"]
        )


def test_junit_through_the_cli_fails_only_at_fail_on(repo: Path) -> None:
    def failures(*args: str) -> set[str]:
        result = poolgate("scan", "k8s", "--format", "junit", *args, cwd=repo)
        root = ET.fromstring(result.stdout)
        return {
            str(case.find("failure").get("type"))  # type: ignore[union-attr]
            for case in root.iter("testcase")
            if case.find("failure") is not None
        }

    assert failures() == {"error"}
    assert failures("--fail-on", "warning") == {"error", "warning"}
    assert failures("--fail-on", "note") == {"error", "warning", "note"}
    assert failures("--fail-on", "never") == set()


def test_min_level_never_hides_what_makes_a_run_incomplete() -> None:
    """A rule error or an unread document (PG001) of a low level stays: hiding it would
    turn exit 3 into 0, a run calling clean what it could not judge."""
    from scanner.findings.records import Finding, Location, Outcome
    from scanner.findings.report import Report
    from scanner.pipeline import exit_code, hide_below

    def finding(rule: str, level: Level, outcome: Outcome = Outcome.FAIL) -> Finding:
        return Finding(rule, level, "m", Location("k8s/a.yaml", 1, 1), None, outcome=outcome)

    report = Report(
        findings=[
            finding("PG303", Level.WARNING),
            finding("PG204", Level.NOTE, Outcome.ERROR),
            finding("PG001", Level.NOTE),
            finding("PG301", Level.ERROR),
        ],
        notifications=[],
        rules=[],
        tool_version="0",
        repo_root="/",
    )
    shown = hide_below(report, Level.ERROR)
    assert [f.rule_id for f in shown.findings] == ["PG204", "PG001", "PG301"]
    assert shown.stats.hidden == 1
    without_errors = hide_below(Report([*report.findings[:3]], [], [], "0", "/"), Level.ERROR)
    assert exit_code(without_errors, "error") == 3
    assert hide_below(report, Level.NOTE) is report


def test_audit_compare_leaves_previous_findings_below_min_level_out() -> None:
    """With --min-level, last night's findings below it are neither resolved nor
    unverified tonight: they are out of view on both sides."""
    from scanner.findings.drift import at_least

    previous = [{"level": "warning", "fingerprint": "a"}, {"level": "error", "fingerprint": "b"}]
    assert at_least(previous, Level.ERROR) == [previous[1]]
    assert at_least(previous, Level.NOTE) == previous
    assert at_least([{"level": "bogus"}], Level.ERROR) == [{"level": "bogus"}]
