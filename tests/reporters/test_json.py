from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from scanner.config.provenance import PolicyRecord
from scanner.findings.report import Report, RunStats
from scanner.reporters import json as json_reporter
from scanner.reporters.json import to_document

from .conftest import FLEET, FLEET_JSON, POLICY, POLICY_JSON

Render = Callable[[Report, str], str]


def _load(report: Report, render: Render) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(render(report, "json"))
    return document


def test_top_level_shape_and_summary(report: Report, render: Render) -> None:
    document = _load(report, render)
    assert list(document) == [
        "version",
        "fingerprintVersion",
        "tool",
        "config",
        "summary",
        "findings",
        "notifications",
        "fleet",
    ]
    assert document["version"] == 1 and document["fingerprintVersion"] == 2
    assert document["config"] is None  # a report built without a policy record
    assert document["fleet"] is None  # nor a fleet
    assert document["tool"] == {"name": "poolgate", "version": "0.1.0"}
    assert document["summary"] == {
        "findings": 3,
        "errors": 2,
        "warnings": 0,
        "notes": 1,
        "ruleErrors": 1,
        "suppressed": 1,
        "baselined": 0,
        "hidden": 0,
        "notifications": 2,
        "files": 4,
        "objects": 12,
        "skippedDocuments": 2,
        "excluded": 0,
        # The findings counted above, per rule and level; the run did not list PG001.
        "byRule": [
            {"ruleId": "PG001", "ruleName": "", "level": "error", "count": 1},
            {
                "ruleId": "PG301",
                "ruleName": "privileged-outside-operator",
                "level": "error",
                "count": 1,
            },
            {"ruleId": "PG401", "ruleName": "node-pool-label", "level": "note", "count": 1},
        ],
    }


def test_the_config_record_names_source_digests_and_work_tree_changes(
    make_report: Callable[..., Report], render: Render
) -> None:
    document = _load(make_report(policy=POLICY, stats=RunStats(files=1, baselined=4)), render)
    assert document["config"] == POLICY_JSON
    assert document["summary"]["suppressed"] == 1
    assert document["summary"]["baselined"] == 4
    left_out = _load(make_report(stats=RunStats(excluded=3, hidden=2)), render)["summary"]
    assert (left_out["excluded"], left_out["hidden"]) == (3, 2)
    defaults = _load(make_report(policy=PolicyRecord(source="defaults")), render)["config"]
    assert defaults == {
        "path": None,
        "source": "defaults",
        "ref": None,
        "commit": None,
        "sha256": None,
        "ruleFiles": [],
        "baseline": None,
        "workTreeChanges": None,
    }


def test_the_fleet_lists_every_pool_with_its_tenants_and_members(
    make_report: Callable[..., Report], render: Render
) -> None:
    document = _load(make_report(fleet=FLEET), render)
    assert document["fleet"] == FLEET_JSON
    assert list(document)[-1] == "fleet"


def test_every_finding_is_listed_in_order_with_its_state(report: Report, render: Render) -> None:
    findings = _load(report, render)["findings"]
    assert [item["ruleId"] for item in findings] == ["PG001", "PG401", "PG103", "PG301", "PG204"]
    privileged = findings[3]
    assert privileged == {
        "ruleId": "PG301",
        "ruleName": "privileged-outside-operator",
        "level": "error",
        "message": 'container "cuda" runs privileged',
        "remediation": "Drop privileged: true.",
        "helpUri": "https://github.com/poolgate/poolgate/blob/main/docs/rules.md"
        "#pg301-privileged-outside-operator",
        "outcome": "fail",
        "location": {
            "uri": "k8s/train.yaml",
            "line": 12,
            "column": 9,
            "path": "spec.template.spec.containers[0].securityContext",
        },
        "object": {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "namespace": "ml",
            "name": "train",
        },
        "fingerprint": report.findings[3].fingerprint,
        "suppression": None,
    }
    assert findings[0]["object"] is None
    # A rule the run did not list (PG001 here): its documentation is not at hand.
    assert (findings[0]["ruleName"], findings[0]["remediation"], findings[0]["helpUri"]) == (
        "",
        "",
        "",
    )
    assert findings[2]["outcome"] == "error"
    assert findings[4]["suppression"] == {
        "kind": "in-source",
        "justification": "pool is untainted during migration",
    }


def test_notifications_use_null_for_unknown_fields(report: Report, render: Render) -> None:
    assert _load(report, render)["notifications"] == [
        {
            "level": "warning",
            "message": "cannot read: permission denied",
            "uri": "k8s/secret.yaml",
            "line": None,
            "column": None,
            "ruleId": None,
        },
        {
            "level": "note",
            "message": "rule disabled by config",
            "uri": None,
            "line": None,
            "column": None,
            "ruleId": "PG204",
        },
    ]


def test_output_is_deterministic_and_indented(report: Report, render: Render) -> None:
    first = render(report, "json")
    assert first == render(report, "json")
    assert first.startswith('{\n  "version": 1,\n')
    assert first.endswith("}\n")


def test_fast_writer_matches_the_standard_library(report: Report, render: Render) -> None:
    """Findings are formatted from a template for speed; the text must stay exactly
    what ``json.dumps(indent=2)`` writes, including escapes and non-ASCII text."""
    tricky = replace(
        report.findings[0],
        message='quote " backslash \\ tab \t newline \n ünïcode \u2028 control \x01 "findings": []',
    )
    for case in (
        report,
        replace(report, findings=[tricky, *report.findings]),
        replace(report, findings=[]),
    ):
        expected = json.dumps(to_document(case), indent=2, ensure_ascii=False) + "\n"
        assert render(case, "json") == expected


@pytest.mark.parametrize("count", [1, 2, 3, 4, 6, 7])
def test_findings_written_in_batches_make_the_same_text(
    report: Report, render: Render, count: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Findings are written a batch at a time (memory); batch edges, a last batch that
    is full or not, change nothing in the text."""
    monkeypatch.setattr(json_reporter, "WRITE_BATCH", 3)
    findings = [
        replace(report.findings[index % len(report.findings)], message=f"finding {index}")
        for index in range(count)
    ]
    case = replace(report, findings=findings)
    expected = json.dumps(to_document(case), indent=2, ensure_ascii=False) + "\n"
    assert render(case, "json") == expected
