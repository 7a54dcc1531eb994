"""Machine-readable report with a stable, versioned shape.

Scripts and dashboards parse this, so the shape only grows; a change that
removes or renames a key bumps ``version``. Keys appear in the order below,
findings in the run's deterministic order, indented by 2::

    {
      "version": 1,
      "fingerprintVersion": 2,    # of every finding's "fingerprint"; absent: 1
      "tool": {"name": "poolgate", "version": "0.1.0"},
      "config": {                 # the policy the run used; null when not recorded
        "path": ".poolgate.yaml",           # repository-relative; null: built-in defaults
        "source": "git-ref",                # git-ref | work-tree | explicit | defaults
        "ref": "origin/main",               # --policy-ref as given, else null
        "commit": "<40 hex digits>",        # the commit it named, else null
        "sha256": "<64 hex digits>",        # of the config file's bytes; null: defaults
        "ruleFiles": [{"path": "policy/rules/ACME001.yaml", "source": "git-ref",
                       "sha256": "<64 hex digits>"}],   # user rules; source git-ref | file
        "baseline": {"path": "poolgate-baseline.json", "source": "git-ref",
                     "sha256": "<64 hex digits>"},      # or null
        "workTreeChanges": {"ref": "origin/main", "commit": "<40 hex digits>",
                            "files": [{"path": "k8s/.poolgate.yaml", "change": "added"}]}
      },                          # workTreeChanges: null unless a commit was compared
      "summary": {
        "findings": 3,            # violations that are not suppressed
        "errors": 2, "warnings": 1, "notes": 0,
        "ruleErrors": 1,          # rules that could not be evaluated (run incomplete)
        "suppressed": 1,          # suppressed findings of any outcome
        "baselined": 0,           # left out: already in the --baseline file
        "hidden": 0,              # left out: below --min-level
        "notifications": 1,
        "files": 4, "objects": 12, "skippedDocuments": 0,
        "excluded": 0,            # files left out by --exclude / spec.exclude
        "byRule": [               # the findings counted above, per rule and level,
          {"ruleId": "PG301", "ruleName": "privileged-outside-operator",
           "level": "error", "count": 2}       # most severe first, then by id
        ]
      },
      "findings": [
        {
          "ruleId": "PG301",
          "ruleName": "privileged-outside-operator",   # "" for a rule the run did not list
          "level": "error",                   # error | warning | note
          "message": "...",
          "remediation": "...",               # the rule's; "" when not listed
          "helpUri": "https://...",           # the rule's documentation; "" when not listed
          "outcome": "fail",                  # fail | error (rule could not run)
          "location": {"uri": "k8s/train.yaml", "line": 12, "column": 9,
                       "path": "spec.template.spec.containers[0].securityContext"},
          "object": {"apiVersion": "apps/v1", "kind": "Deployment",
                     "namespace": "ml", "name": "train"},    # or null
          "fingerprint": "<32 hex digits>",    # unique in the report, stable across
                                              # line moves (scanner/findings/records.py)
          "suppression": null                 # or {"kind": "in-source"|"external",
        }                                     #     "justification": "..."}
      ],
      "notifications": [
        {"level": "warning", "message": "...", "uri": "k8s/x.yaml",
         "line": 3, "column": null, "ruleId": null}   # null when unknown
      ],
      "fleet": {                  # the GPU pools the run saw (scanner/findings/fleet.py); null
        "pools": [                # when not recorded
          {"name": "a100-train",              # pool label value or declaration name;
                                              # "" for GPU nodes without a pool label
           "skus": ["a100"], "products": ["NVIDIA-A100-SXM4-80GB"],
           "sharing": "mig",                  # exclusive | time-slicing | mps | mig |
                                              # mig+time-slicing | mig+mps | mixed
           "migStrategies": ["single"],
           "trustDomains": ["research"],      # of tenants whose Namespace is in scope
           "tenants": [{"namespace": "ml", "trustDomain": "research", "workloads": 2}],
           "nodes": 3, "declarations": 0, "gpus": 24,
           "members": ["Node/gpu-a-1"]}       # as a finding's object is named
        ],
        "trustDomains": {"ml": "research"}    # namespace -> trust domain, in scope
      }
    }

Unlike the text reporter, every finding is listed, suppressed or not: a
consumer decides what to show from ``suppression``, exactly as with SARIF.
Lines and columns are 1-based; ``uri`` is repository-relative or ``cluster://``. An
object read from a cluster has no position: its ``line`` and ``column`` are null.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from json.encoder import encode_basestring
from typing import Any, TextIO

from scanner.findings.records import (
    FINGERPRINT_VERSION,
    Finding,
    Notification,
    run_fingerprints,
)
from scanner.findings.report import Report
from scanner.reporters.tally import by_rule, tally
from scanner.ruleset.docs import RuleDoc

SHAPE_VERSION = 1


def write(
    report: Report,
    stream: TextIO,
    *,
    states: Mapping[str, str] | None = None,
    sections: Mapping[str, Any] | None = None,
) -> None:
    """Write the whole report as one JSON document followed by a newline.

    ``states`` (fingerprint -> state) adds a ``drift`` key to those findings, and
    ``sections`` add keys after ``notifications``: ``--compare`` (scanner/findings/drift.py)
    writes its report through here too.

    The text is exactly ``json.dumps(to_document(report), indent=2,
    ensure_ascii=False)``, but findings are formatted from a template: with
    ``indent`` the standard library falls back to its pure-Python encoder, which is
    slow at the hundreds of thousands of findings of a large audit.
    They are written ``WRITE_BATCH`` at a time: that audit's findings as one text
    (their dicts, each one's text, the joined text and the whole document) took
    ~3 times the report's size at once.
    """
    document = _document(report)
    document.update(sections or {})
    text = json.dumps(document, indent=2, ensure_ascii=False)
    findings = report.findings
    rules = _rules(report)
    if not findings:
        stream.write(text + "\n")
        return
    marks = states or {}
    prints = run_fingerprints(findings)
    empty = '"findings": []'  # a key: inside a string its quotes would be escaped
    at = text.index(empty)
    stream.write(f'{text[:at]}"findings": [\n')
    for start in range(0, len(findings), WRITE_BATCH):
        end = start + WRITE_BATCH
        items = ",\n".join(
            _finding_text(_finding(finding, fingerprint, rules), marks.get(finding.fingerprint))
            for finding, fingerprint in zip(findings[start:end], prints[start:end], strict=True)
        )
        stream.write(items if start == 0 else ",\n" + items)
    stream.write(f"\n  ]{text[at + len(empty) :]}\n")


WRITE_BATCH = 2048
"""Findings formatted and written at a time (~1.5 MB of text)."""


def _finding_text(item: dict[str, Any], state: str | None = None) -> str:
    """One finding of ``to_document`` as ``json.dumps(indent=2)`` writes it at depth 2,
    with ``"drift": state`` last when there is a state."""
    text = _string
    location = item["location"]
    ref = item["object"]
    suppression = item["suppression"]
    obj = (
        "null"
        if ref is None
        else "{\n"
        f'        "apiVersion": {text(ref["apiVersion"])},\n'
        f'        "kind": {text(ref["kind"])},\n'
        f'        "namespace": {text(ref["namespace"])},\n'
        f'        "name": {text(ref["name"])}\n'
        "      }"
    )
    suppressed = (
        "null"
        if suppression is None
        else "{\n"
        f'        "kind": {text(suppression["kind"])},\n'
        f'        "justification": {text(suppression["justification"])}\n'
        "      }"
    )
    return (
        "    {\n"
        f'      "ruleId": {text(item["ruleId"])},\n'
        f'      "ruleName": {text(item["ruleName"])},\n'
        f'      "level": {text(item["level"])},\n'
        f'      "message": {text(item["message"])},\n'
        f'      "remediation": {text(item["remediation"])},\n'
        f'      "helpUri": {text(item["helpUri"])},\n'
        f'      "outcome": {text(item["outcome"])},\n'
        '      "location": {\n'
        f'        "uri": {text(location["uri"])},\n'
        f'        "line": {_position(location["line"])},\n'
        f'        "column": {_position(location["column"])},\n'
        f'        "path": {text(location["path"])}\n'
        "      },\n"
        f'      "object": {obj},\n'
        f'      "fingerprint": {text(item["fingerprint"])},\n'
        f'      "suppression": {suppressed}'
        + ("" if state is None else f',\n      "drift": {text(state)}')
        + "\n    }"
    )


def _position(value: int | None) -> str:
    """A line or column: a number, or null for an object of a cluster (no position)."""
    return "null" if value is None else str(int(value))


def _string(value: str) -> str:
    """A JSON string as ``ensure_ascii=False`` writes it (the C encoder json uses)."""
    return encode_basestring(value)


def to_document(report: Report) -> dict[str, Any]:
    """The report as plain JSON-ready data (for tests and other reporters)."""
    document = _document(report)
    prints = run_fingerprints(report.findings)
    rules = _rules(report)
    document["findings"] = [
        _finding(finding, fingerprint, rules)
        for finding, fingerprint in zip(report.findings, prints, strict=True)
    ]
    return document


def _rules(report: Report) -> dict[str, RuleDoc]:
    return {rule.id: rule for rule in report.rules}


def _document(report: Report) -> dict[str, Any]:
    """``to_document`` with its findings left out (an empty list in their place)."""
    counts = tally(report.findings)
    return {
        "version": SHAPE_VERSION,
        "fingerprintVersion": FINGERPRINT_VERSION,
        "tool": {"name": "poolgate", "version": report.tool_version},
        "config": report.policy.as_json() if report.policy is not None else None,
        "summary": {
            "findings": counts.findings,
            "errors": counts.errors,
            "warnings": counts.warnings,
            "notes": counts.notes,
            "ruleErrors": counts.rule_errors,
            "suppressed": counts.suppressed,
            "baselined": report.stats.baselined,
            "hidden": report.stats.hidden,
            "notifications": len(report.notifications),
            "files": report.stats.files,
            "objects": report.stats.objects,
            "skippedDocuments": report.stats.skipped_documents,
            "excluded": report.stats.excluded,
            "byRule": [
                {
                    "ruleId": row.rule_id,
                    "ruleName": row.name,
                    "level": str(row.level),
                    "count": row.count,
                }
                for row in by_rule(report.findings, report.rules)
            ],
        },
        "findings": [],
        "notifications": [_notification(item) for item in report.notifications],
        "fleet": report.fleet.as_json() if report.fleet is not None else None,
    }


def _finding(finding: Finding, fingerprint: str, rules: Mapping[str, RuleDoc]) -> dict[str, Any]:
    ref = finding.ref
    suppression = finding.suppression
    rule = rules.get(finding.rule_id)
    return {
        "ruleId": finding.rule_id,
        "ruleName": rule.name if rule is not None else "",
        "level": str(finding.level),
        "message": finding.message,
        "remediation": rule.remediation if rule is not None else "",
        "helpUri": rule.uri if rule is not None else "",
        "outcome": finding.outcome.value,
        "location": {
            "uri": finding.location.uri,
            "line": finding.location.line or None,
            "column": finding.location.column or None,
            "path": finding.location.path,
        },
        "object": None
        if ref is None
        else {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "namespace": ref.namespace,
            "name": ref.name,
        },
        "fingerprint": fingerprint,
        "suppression": None
        if suppression is None
        else {"kind": suppression.kind, "justification": suppression.justification},
    }


def _notification(notification: Notification) -> dict[str, Any]:
    return {
        "level": str(notification.level),
        "message": notification.message,
        "uri": notification.uri or None,
        "line": notification.line or None,
        "column": notification.column or None,
        "ruleId": notification.rule_id or None,
    }
