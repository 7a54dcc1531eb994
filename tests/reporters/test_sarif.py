"""SARIF output: valid against the official schema, and right where GitHub looks."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scanner.audit import run as audit
from scanner.findings.records import Finding, Level, Location, Notification, Outcome, Suppression
from scanner.findings.report import Report, RunStats
from scanner.inventory import ObjectRef
from scanner.kinds.resources import RESOURCES
from scanner.pipeline import ScanOptions, load_ruleset
from scanner.reporters import PLAIN, Display
from scanner.reporters.sarif import cluster_uri
from scanner.sources.snapshot import Capture

from .conftest import POLICY, POLICY_JSON

Render = Callable[..., str]
SCHEMA = Path(__file__).parent.parent / "schemas" / "sarif-schema-2.1.0.json"


@cache
def _validator() -> Any:
    import jsonschema

    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    # The official schema declares draft-04.
    assert schema["$schema"] == "http://json-schema.org/draft-04/schema#"
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def _run(report: Report, render: Render, display: Display = PLAIN) -> dict[str, Any]:
    log: dict[str, Any] = json.loads(render(report, "sarif", display))
    errors = sorted(_validator().iter_errors(log), key=lambda error: list(error.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)
    run: dict[str, Any] = log["runs"][0]
    return run


def test_log_header(report: Report, render: Render) -> None:
    log = json.loads(render(report, "sarif"))
    assert list(log)[:2] == ["$schema", "version"]
    assert log["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json"
    assert log["version"] == "2.1.0"
    assert len(log["runs"]) == 1


@pytest.mark.parametrize(
    ("changes", "display"),
    [
        ({}, PLAIN),
        ({"findings": (), "notifications": ()}, PLAIN),
        ({"findings": (), "notifications": (), "rules": ()}, PLAIN),
        ({}, Display(show_suppressed=True, color=True, verbose=True)),
    ],
    ids=["full", "clean", "no-rules", "display-flags"],
)
def test_output_is_valid_sarif_2_1_0(
    make_report: Callable[..., Report], render: Render, changes: dict[str, Any], display: Display
) -> None:
    run = _run(make_report(**changes), render, display)
    assert isinstance(run["results"], list)  # present even when empty: "ran, found nothing"


def test_driver_describes_tool_and_rules(report: Report, render: Render) -> None:
    driver = _run(report, render)["tool"]["driver"]
    assert driver["name"] == "poolgate"
    assert driver["version"] == driver["semanticVersion"] == "0.1.0"
    assert driver["informationUri"].startswith("https://")
    ids = [rule["id"] for rule in driver["rules"]]
    assert ids == sorted(ids) == ["PG001", "PG103", "PG204", "PG301", "PG401"]
    privileged = driver["rules"][ids.index("PG301")]
    assert privileged["name"] == "privileged-outside-operator"
    assert privileged["shortDescription"]["text"].startswith("Only the GPU Operator")
    assert privileged["fullDescription"]["text"].startswith("A privileged container")
    assert privileged["help"]["text"].endswith("Remediation: Drop privileged: true.")
    assert "**Remediation:**" in privileged["help"]["markdown"]
    assert privileged["helpUri"].endswith("#pg301-privileged-outside-operator")
    assert privileged["defaultConfiguration"] == {"level": "error"}
    assert privileged["properties"] == {
        "precision": "high",
        "tags": ["security", "gpu"],
        "security-severity": "8.0",
    }
    # A rule without severity or tags carries neither.
    assert driver["rules"][ids.index("PG204")]["properties"] == {"precision": "high"}


def test_rule_missing_from_the_catalog_gets_a_descriptor_github_accepts(
    report: Report, render: Render
) -> None:
    rules = _run(report, render)["tool"]["driver"]["rules"]
    assert rules[0]["id"] == "PG001"
    assert rules[0]["help"]["text"]  # GitHub requires help (Multitool GH2012)
    assert rules[0]["shortDescription"]["text"]


def test_rule_index_points_at_the_result_rule(report: Report, render: Render) -> None:
    run = _run(report, render)
    rules = run["tool"]["driver"]["rules"]
    assert run["results"]
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    for notification in run["invocations"][0]["toolExecutionNotifications"]:
        if "associatedRule" in notification:
            rule = notification["associatedRule"]
            assert rules[rule["index"]]["id"] == rule["id"]


def test_results_carry_level_message_region_and_fingerprint(report: Report, render: Render) -> None:
    results = _run(report, render)["results"]
    fail_findings = [f for f in report.findings if f.outcome.value == "fail"]
    assert [r["ruleId"] for r in results] == [f.rule_id for f in fail_findings]
    for result, finding in zip(results, fail_findings, strict=True):
        # level is explicit even for "warning": absent, it would be the rule's default.
        assert result["level"] == str(finding.level)
        assert result["message"] == {"text": finding.message}  # same words as every format
        if finding.location.uri.startswith("cluster://"):
            assert "physicalLocation" not in result["locations"][0]  # no file, no lines
            continue
        region = result["locations"][0]["physicalLocation"]["region"]
        assert region == {
            "startLine": finding.location.line,
            "startColumn": finding.location.column,
        }
        assert result["partialFingerprints"] == {"poolgate/v2": finding.fingerprint}
        assert "kind" not in result and "rank" not in result  # sarif_om defaults left out


def test_file_locations_are_repository_relative_and_encoded(report: Report, render: Render) -> None:
    run = _run(report, render)
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": "file:///work/repo%20with%20space/"}}
    assert run["columnKind"] == "unicodeCodePoints"
    broken = run["results"][0]["locations"][0]
    assert broken["physicalLocation"]["artifactLocation"] == {
        "uri": "bad%20dir/broken%231.yaml",
        "uriBaseId": "%SRCROOT%",
    }
    assert "logicalLocations" not in broken  # no object identity for an unparsable file


def test_cluster_objects_have_a_logical_location_only(report: Report, render: Render) -> None:
    """An object read from a cluster has no file and no lines: no physical location
    (no fake region 1:1), and its cluster URI in the logical location's properties."""
    node = _run(report, render)["results"][1]["locations"][0]
    assert node == {
        "logicalLocations": [
            {
                "name": "gpu-node-1",
                "fullyQualifiedName": "Node/gpu-node-1",
                "kind": "resource",
                "properties": {"uri": "cluster:///prod%40eks/v1/Node/gpu-node-1"},
            }
        ]
    }


def test_a_finding_about_the_cluster_has_no_file(render: Render) -> None:
    """PG605 from a real audit: the cluster subject's finding is a valid result whose
    only location is the Cluster, logical, with the cluster's URI."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train-0", "namespace": "ml"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
    }
    listed = frozenset(resource.key for resource in RESOURCES)
    capture = Capture("admin@prod", datetime.datetime.now(datetime.UTC), [pod], listed)
    report, _ = audit.evaluate(capture, load_ruleset(ScanOptions(mode="audit")))
    run = _run(replace(report, repo_root="/work/repo"), render)
    [result] = [result for result in run["results"] if result["ruleId"] == "PG605"]
    assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == "PG605"
    assert result["level"] == "warning"
    assert result["message"]["text"].startswith("no ValidatingAdmissionPolicy with a Deny binding")
    [location] = result["locations"]
    # Not a file. The context is not a host name, so it is the first path segment
    # (see test_cluster_uri_keeps_the_context_parsable).
    assert location == {
        "logicalLocations": [
            {
                "name": "cluster",
                "fullyQualifiedName": "Cluster/cluster",
                "kind": "resource",
                "properties": {"uri": "cluster:///admin%40prod/_cluster"},
            }
        ]
    }
    assert len(result["partialFingerprints"]["poolgate/v2"]) == 32


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("cluster://prod/ml/Deployment/train", "cluster://prod/ml/Deployment/train"),
        ("cluster://kind-gpu.local/v1/Node/n 1", "cluster://kind-gpu.local/v1/Node/n%201"),
        ("cluster://admin@prod/v1/Node/n", "cluster:///admin%40prod/v1/Node/n"),
        ("cluster://arn:aws:eks:1/v1/Node/n", "cluster:///arn%3Aaws%3Aeks%3A1/v1/Node/n"),
        ("cluster://admin%40prod/_cluster", "cluster:///admin%40prod/_cluster"),
        ("cluster://gpu-prod/_cluster", "cluster://gpu-prod/_cluster"),
    ],
)
def test_cluster_uri_keeps_the_context_parsable(uri: str, expected: str) -> None:
    assert cluster_uri(uri) == expected


def test_suppressions_map_to_sarif_kinds(
    make_report: Callable[..., Report], render: Render
) -> None:
    def suppressed(kind: str, line: int) -> Finding:
        return Finding(
            rule_id="PG301",
            level=Level.ERROR,
            message="privileged",
            location=Location("k8s/a.yaml", line, 1),
            ref=ObjectRef("v1", "Pod", "ml", f"p{line}"),
            suppression=Suppression(kind, "owned by the platform team"),
        )

    report = make_report(findings=(suppressed("in-source", 1), suppressed("external", 2)))
    results = _run(report, render)["results"]
    assert [r["suppressions"] for r in results] == [
        [{"kind": "inSource", "justification": "owned by the platform team"}],
        [{"kind": "external", "justification": "owned by the platform team"}],
    ]
    assert "suppressions" not in _run(make_report(), render)["results"][0]


def test_rule_errors_are_notifications_not_results(report: Report, render: Render) -> None:
    run = _run(report, render)
    assert "PG103" not in {r["ruleId"] for r in run["results"]}
    invocation = run["invocations"][0]
    notes = invocation["toolExecutionNotifications"]
    rule_error = next(n for n in notes if n.get("associatedRule", {}).get("id") == "PG103")
    assert rule_error["level"] == "error"
    assert rule_error["message"]["text"] == (
        "PG103 could not be evaluated on ml/Deployment/train: no such key: runtimeClassName"
    )
    location = rule_error["locations"][0]
    assert location["physicalLocation"]["region"] == {"startLine": 5, "startColumn": 3}
    assert location["logicalLocations"][0]["fullyQualifiedName"] == "ml/Deployment/train"
    assert invocation["executionSuccessful"] is False


def test_run_notifications(report: Report, render: Render) -> None:
    notes = _run(report, render)["invocations"][0]["toolExecutionNotifications"]
    assert notes[0] == {
        "level": "warning",
        "message": {"text": "cannot read: permission denied"},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": "k8s/secret.yaml", "uriBaseId": "%SRCROOT%"}
                }
            }
        ],
    }
    assert notes[1] == {
        "level": "note",
        "message": {"text": "rule disabled by config"},
        "associatedRule": {"id": "PG204", "index": 2},
    }


def test_invocation_properties_name_the_config_and_count_what_was_left_out(
    make_report: Callable[..., Report], render: Render
) -> None:
    stats = RunStats(files=4, objects=12, baselined=3)
    invocation = _run(make_report(policy=POLICY, stats=stats), render)["invocations"][0]
    assert invocation["properties"] == {
        "poolgateConfig": POLICY_JSON,
        "poolgateCounts": {"suppressed": 1, "baselined": 3},
    }
    unrecorded = _run(make_report(), render)["invocations"][0]["properties"]
    assert unrecorded == {"poolgateCounts": {"suppressed": 1, "baselined": 0}}


def test_execution_successful_unless_an_error_notification(
    make_report: Callable[..., Report], render: Render
) -> None:
    clean = make_report(findings=(), notifications=(Notification(Level.WARNING, "slow"),))
    assert _run(clean, render)["invocations"][0]["executionSuccessful"] is True
    broken = make_report(findings=(), notifications=(Notification(Level.ERROR, "forbidden"),))
    assert _run(broken, render)["invocations"][0]["executionSuccessful"] is False


def test_an_unread_input_makes_the_run_unsuccessful(
    make_report: Callable[..., Report], render: Render
) -> None:
    """Found in review: a file that did not parse (PG001, exit 3) left the invocation
    successful, unless PG001 was disabled (then it is an error notification)."""
    unread = Finding("PG001", Level.ERROR, "YAML does not parse", Location("a.yaml", 4, 1), None)
    report = make_report(findings=(unread,), notifications=())
    assert _run(report, render)["invocations"][0]["executionSuccessful"] is False
    hidden = replace(unread, suppression=Suppression("external", "vendored file"))
    report = make_report(findings=(hidden,), notifications=())
    assert _run(report, render)["invocations"][0]["executionSuccessful"] is True


def test_unknown_line_has_no_region(make_report: Callable[..., Report], render: Render) -> None:
    finding = Finding("PG001", Level.ERROR, "empty stream", Location("<stdin>", 0, 0), None)
    report = make_report(findings=(finding,), notifications=(), stats=RunStats())
    location = _run(report, render)["results"][0]["locations"][0]["physicalLocation"]
    assert location == {"artifactLocation": {"uri": "%3Cstdin%3E", "uriBaseId": "%SRCROOT%"}}


def test_sarif_om_is_imported_only_when_sarif_is_written() -> None:
    # A fresh interpreter: this one has loaded sarif_om already.
    code = (
        "import sys, scanner.reporters.sarif, scanner.reporters.text\n"
        "assert 'sarif_om' not in sys.modules, 'sarif_om imported at module load'"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).parents[2],
    )
    assert completed.returncode == 0, completed.stderr


@pytest.mark.parametrize("count", [0, 1, 2, 3, 4, 7])
def test_results_written_in_batches_make_the_log_build_log_describes(
    report: Report, render: Render, count: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Results are built and written a batch at a time (memory), spliced into the log
    at their place and depth: the text stays exactly what ``json.dumps`` writes for
    the whole log, batch edges, rule errors and tricky text included."""
    from scanner.reporters import sarif

    monkeypatch.setattr(sarif, "WRITE_BATCH", 3)
    findings = [
        replace(
            report.findings[index % len(report.findings)],
            message=f'finding {index}: "results": [] quote " newline \n ünï \u2028',
        )
        for index in range(count + 1)  # one more: the standard report has a rule error
    ]
    case = replace(report, findings=findings)
    expected = json.dumps(sarif.build_log(case), indent=2, ensure_ascii=False) + "\n"
    assert render(case, "sarif") == expected
    assert len(json.loads(expected)["runs"][0]["results"]) == sum(
        finding.outcome.value == "fail" for finding in findings
    )


def _json_values(scalars: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Any JSON value built from ``scalars``: nested lists and maps, empty ones too."""
    return st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=8), children, max_size=4)
        ),
        max_leaves=20,
    )


_RESULT_SCALARS = (
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.text()
)
"""What a SARIF result holds: no floats (``_result`` builds it from strings and ints)."""
_JSON_VALUES = _json_values(_RESULT_SCALARS | st.floats(allow_nan=True, allow_infinity=True))


@settings(max_examples=400, deadline=None)
@given(_JSON_VALUES)
def test_results_are_encoded_exactly_as_json_dumps_indents(value: Any) -> None:
    """The results' encoder is the standard library's text, ~3x as fast: any JSON
    value (control characters, non-ASCII, huge integers, NaN, empty and nested
    containers) comes out exactly as ``json.dumps(indent=2, ensure_ascii=False)``."""
    from scanner.reporters import sarif

    assert sarif._dumps(value) == json.dumps(value, indent=2, ensure_ascii=False)


_RESULT_VALUES = _json_values(_RESULT_SCALARS)


@settings(max_examples=400, deadline=None)
@given(_RESULT_VALUES)
def test_results_without_floats_are_formatted_exactly_as_json_dumps_indents(value: Any) -> None:
    """Results go through msgspec's encoder and formatter: for what a result holds
    (strings with control characters, non-ASCII and lone surrogates, integers past
    64 bits, booleans, null, empty and nested containers) the text is exactly
    ``json.dumps(indent=2, ensure_ascii=False)``'s."""
    from scanner.reporters import sarif

    assert sarif._result_text(value) == json.dumps(value, indent=2, ensure_ascii=False)


def test_a_message_msgspec_cannot_encode_is_written_by_the_standard_encoder(
    report: Report, render: Render
) -> None:
    """A lone surrogate (which a JSON manifest can spell as an escape) is not UTF-8:
    msgspec refuses it and that result is written as ``json.dumps`` writes it."""
    from scanner.reporters import sarif

    lone = {"message": {"text": "bad \ud800 name"}, "ruleId": "PG301"}
    assert sarif._result_text(lone) == json.dumps(lone, indent=2, ensure_ascii=False)
    findings = list(report.findings)
    first = next(i for i, f in enumerate(findings) if f.outcome is Outcome.FAIL)
    findings[first] = replace(findings[first], message="bad \ud800 name")
    case = replace(report, findings=findings)
    expected = json.dumps(sarif.build_log(case), indent=2, ensure_ascii=False) + "\n"
    written = render(case, "sarif")
    assert written == expected
    assert '"text": "bad \ud800 name"' in written  # the character itself, as json.dumps writes it
