"""JUnit XML: the common testsuites/testsuite/testcase shape, checked with xml.etree."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET

import pytest
from pg_integration import run_poolgate

from scanner.findings.records import Finding, Level, Location, Notification, Outcome, Suppression
from scanner.findings.report import Report, RunStats
from scanner.inventory import ObjectRef
from scanner.reporters import Display, writer_for
from scanner.ruleset.docs import RuleDoc

TRAIN = ObjectRef("apps/v1", "Deployment", "ml", "train")


def _rule(rule_id: str, name: str, level: Level = Level.ERROR) -> RuleDoc:
    return RuleDoc(
        id=rule_id,
        name=name,
        level=level,
        summary="s",
        description="d",
        remediation="r.",
        subject="workload",
        source=f"rules/{rule_id}-{name}.yaml",
    )


def _finding(rule: str, message: str, line: int, **changes: object) -> Finding:
    values: dict[str, object] = {
        "rule_id": rule,
        "level": Level.ERROR,
        "message": message,
        "location": Location("k8s/train.yaml", line, 9, f"spec.containers[{line}]"),
        "ref": TRAIN,
    }
    values.update(changes)
    return Finding(**values)  # type: ignore[arg-type]


REPORT = Report(
    findings=[
        _finding("PG001", "mapping values are not allowed here", 2, ref=None),
        _finding("PG301", 'container "a" runs privileged', 12),
        _finding("PG301", 'container "b" runs privileged \x1b[31m\x00', 20),
        _finding("PG401", "uses the default ServiceAccount", 4, level=Level.WARNING),
        _finding("PG204", "no such key: sku", 30, outcome=Outcome.ERROR),
        _finding(
            "PG302",
            "shares the host PID namespace",
            8,
            suppression=Suppression("in-source", "node debugger, owned by SRE"),
        ),
    ],
    notifications=[
        Notification(Level.ERROR, "Helm chart not rendered: `helm` is not installed", "charts/x"),
        Notification(Level.WARNING, "unknown key spec.foo", ".poolgate.yaml"),
    ],
    rules=[
        _rule("PG001", "yaml-invalid"),
        _rule("PG103", "gpu-workload-runtimeclass"),
        _rule("PG204", "timeslice-not-renamed", Level.WARNING),
        _rule("PG301", "privileged-outside-operator"),
        _rule("PG302", "host-namespace-outside-operator"),
        _rule("PG401", "gpu-workload-default-sa", Level.WARNING),
    ],
    tool_version="0.1.0",
    repo_root="/repo",
    stats=RunStats(files=1, objects=1),
)


def _render(report: Report, fail_on: str = "error") -> str:
    stream = io.StringIO()
    writer_for("junit", Display(fail_on=fail_on))(report, stream)
    return stream.getvalue()


def _parse(report: Report, fail_on: str = "error") -> ET.Element:
    text = _render(report, fail_on)
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    return ET.fromstring(text.encode("utf-8"))


def test_one_suite_per_rule_and_one_case_per_rule_and_object() -> None:
    root = _parse(REPORT)
    assert root.tag == "testsuites" and root.get("name") == "poolgate"
    suites = {suite.get("name"): suite for suite in root.findall("testsuite")}
    assert list(suites) == [
        "PG001 yaml-invalid",
        "PG103 gpu-workload-runtimeclass",
        "PG204 timeslice-not-renamed",
        "PG301 privileged-outside-operator",
        "PG302 host-namespace-outside-operator",
        "PG401 gpu-workload-default-sa",
        "poolgate",
    ]
    privileged = suites["PG301 privileged-outside-operator"].findall("testcase")
    assert [(case.get("classname"), case.get("name"), case.get("file")) for case in privileged] == [
        ("PG301", "ml/Deployment/train", "k8s/train.yaml")
    ]
    (failure,) = privileged[0].findall("failure")
    assert failure.get("message") == "2 findings" and failure.get("type") == "error"
    assert failure.text is not None
    assert failure.text.strip().splitlines() == [
        'k8s/train.yaml:12:9 error container "a" runs privileged (spec.containers[12])',
        'k8s/train.yaml:20:9 error container "b" runs privileged \\u001b[31m\\u0000 '
        "(spec.containers[20])",
    ]


def test_passes_errors_skips_and_documents_without_identity() -> None:
    suites = {suite.get("name"): suite for suite in _parse(REPORT).findall("testsuite")}
    (clean,) = suites["PG103 gpu-workload-runtimeclass"].findall("testcase")
    assert clean.get("name") == "no findings" and len(clean) == 0

    (errored,) = suites["PG204 timeslice-not-renamed"].findall("testcase")
    (error,) = errored.findall("error")
    assert error.get("type") == "rule-error" and error.get("message") == "no such key: sku"

    (skipped,) = suites["PG302 host-namespace-outside-operator"].findall("testcase/skipped")
    assert skipped.get("message") == "suppressed (in-source): node debugger, owned by SRE"

    (unparsed,) = suites["PG001 yaml-invalid"].findall("testcase")
    assert unparsed.get("name") == "k8s/train.yaml"  # no object: named by its file
    unread = unparsed.find("error")  # not read: the run is incomplete (exit 3)
    assert unread is not None and unread.get("type") == "incomplete"

    # Below --fail-on (error): a passed case, the finding in its output, never red.
    (warning,) = suites["PG401 gpu-workload-default-sa"].findall("testcase")
    assert warning.find("failure") is None and warning.find("skipped") is None
    out = warning.find("system-out")
    assert out is not None and out.text is not None
    assert out.text.splitlines() == [
        "1 finding(s), below --fail-on error:",
        "k8s/train.yaml:4:9 warning uses the default ServiceAccount (spec.containers[4])",
    ]


def test_failures_are_the_findings_at_or_above_fail_on() -> None:
    def failing(fail_on: str) -> list[str]:
        root = _parse(REPORT, fail_on)
        return [
            str(suite.get("name")).split()[0]
            for suite in root.findall("testsuite")
            if suite.find("testcase/failure") is not None
        ]

    assert failing("error") == ["PG301"]
    assert failing("warning") == ["PG301", "PG401"]
    assert failing("note") == ["PG301", "PG401"]
    assert failing("never") == []
    never = _parse(REPORT, "never")
    assert never.get("failures") == "0"
    # A rule error, an unread document and an unrendered chart still say the run is
    # incomplete, as exit code 3 does.
    assert never.get("errors") == "3"


def test_counts_add_up_on_every_suite_and_the_root() -> None:
    root = _parse(REPORT)
    for suite in root.findall("testsuite"):
        cases = suite.findall("testcase")
        assert suite.get("tests") == str(len(cases))
        for tag, attribute in (
            ("failure", "failures"),
            ("error", "errors"),
            ("skipped", "skipped"),
        ):
            assert suite.get(attribute) == str(sum(1 for c in cases if c.find(tag) is not None))
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == (
        "8",
        "1",
        "3",
        "1",
    )


def test_notifications_are_their_own_suite() -> None:
    suites = {suite.get("name"): suite for suite in _parse(REPORT).findall("testsuite")}
    cases = suites["poolgate"].findall("testcase")
    assert [case.get("name") for case in cases] == ["charts/x", ".poolgate.yaml"]
    error = cases[0].find("error")
    assert error is not None and error.get("type") == "incomplete"
    out = cases[1].find("system-out")
    assert out is not None and out.text == "warning: unknown key spec.foo"


@pytest.mark.parametrize("fail_on", ["error", "warning"])
def test_cli_writes_junit_for_the_demo(fail_on: str) -> None:
    """Through the CLI: the failures are exactly the JSON report's findings at or above
    ``--fail-on``; the others are passed cases."""
    result = run_poolgate("scan", "fixtures/demo", "--format", "junit", "--fail-on", fail_on)
    assert result.returncode == 1, result.stderr
    root = ET.fromstring(result.stdout.encode("utf-8"))
    failing = [
        (suite.get("name", "").split()[0], case.get("name"))
        for suite in root.findall("testsuite")
        for case in suite.findall("testcase")
        if case.find("failure") is not None
    ]
    json_run = run_poolgate("scan", "fixtures/demo", "--format", "json")
    findings = json.loads(json_run.stdout)["findings"]
    expected = {
        (
            f["ruleId"],
            "/".join(
                filter(None, [f["object"]["namespace"], f["object"]["kind"], f["object"]["name"]])
            ),
        )
        for f in findings
        if f["suppression"] is None
        and f["outcome"] == "fail"
        and Level.parse(f["level"]) >= Level.parse(fail_on)
    }
    assert sorted(failing) == sorted(expected)
    below = [f for f in findings if Level.parse(f["level"]) < Level.parse(fail_on)]
    assert bool(below) == (fail_on == "error")  # the demo's warnings
    assert ("below --fail-on" in result.stdout) == bool(below)
