"""JUnit XML for CI systems other than GitHub (GitLab, Jenkins, Azure Pipelines, ...).

The common shape those systems read::

    <testsuites name="poolgate" tests="3" failures="1" errors="0" skipped="0">
      <testsuite name="PG301 privileged-outside-operator" tests="1" failures="1" ...>
        <testcase classname="PG301" name="ml/Deployment/train" file="k8s/train.yaml">
          <failure type="error" message="container &quot;cuda&quot; runs privileged">
    k8s/train.yaml:12:9 error container "cuda" runs privileged
          </failure>
        </testcase>
      </testsuite>
    </testsuites>

* One ``testsuite`` per rule of the run, sorted by id; one ``testcase`` per
  (rule, object) with findings, named by the object (``namespace/Kind/name``, or
  the file for a document without identity). Its ``failure`` lists every finding
  of that rule on that object, one line each (the schema allows one ``failure``
  per case). A rule with no finding has one passing case, ``no findings``, so
  dashboards show that it ran.
* A rule that could not be evaluated on an object is an ``error``, not a
  ``failure``. Suppressed findings are ``skipped`` with their justification.
  Findings in the baseline are not in the report at all.
* Notifications (an input that could not be read or rendered) form one more
  suite, ``poolgate``, each an ``error`` case when it makes the run incomplete.
* Text from manifests is untrusted: characters XML 1.0 cannot carry (C0 controls
  other than tab and newline, lone surrogates) are replaced by ``\\uXXXX``
  escapes so the file always parses.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TextIO

from scanner.findings import Finding, Level, Notification, Outcome
from scanner.reporters import Report

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")
NOTIFICATIONS_SUITE = "poolgate"


@dataclass(slots=True)
class _Case:
    name: str
    file: str
    failures: list[Finding] = field(default_factory=list)
    errors: list[Finding] = field(default_factory=list)
    suppressed: list[Finding] = field(default_factory=list)


def write(report: Report, stream: TextIO) -> None:
    """Write one ``<testsuites>`` document with an XML declaration."""
    root = build(report)
    ET.indent(root, space="  ")
    stream.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    stream.write(ET.tostring(root, encoding="unicode"))
    stream.write("\n")


def build(report: Report) -> ET.Element:
    """The report as an element tree (for tests and embedding)."""
    names = {rule.id: rule.name for rule in report.rules}
    by_rule: dict[str, dict[str, _Case]] = {rule.id: {} for rule in report.rules}
    for finding in report.findings:
        cases = by_rule.setdefault(finding.rule_id, {})
        name = finding.ref.logical_name if finding.ref is not None else finding.location.uri
        case = cases.setdefault(name, _Case(name, finding.location.uri))
        if finding.suppression is not None:
            case.suppressed.append(finding)
        elif finding.outcome is Outcome.ERROR:
            case.errors.append(finding)
        else:
            case.failures.append(finding)

    root = ET.Element("testsuites", name="poolgate")
    for rule_id in sorted(by_rule):
        title = f"{rule_id} {names.get(rule_id, '')}".strip()
        suite = _suite(root, title)
        cases = by_rule[rule_id]
        if not cases:
            _add_case(suite, rule_id, "no findings", "")
        for case in cases.values():
            element = _add_case(suite, rule_id, case.name, case.file)
            if case.errors:
                _problem(element, "error", case.errors + case.failures, "rule-error")
            elif case.failures:
                worst = max(finding.level for finding in case.failures)
                _problem(element, "failure", case.failures, str(worst))
            elif case.suppressed:
                first = case.suppressed[0].suppression
                assert first is not None
                message = f"suppressed ({first.kind}): {first.justification}"
                ET.SubElement(element, "skipped", message=_clean(message))
    if report.notifications:
        suite = _suite(root, NOTIFICATIONS_SUITE)
        for notification in report.notifications:
            _notification_case(suite, notification)
    _count(root)
    return root


def _suite(root: ET.Element, name: str) -> ET.Element:
    return ET.SubElement(root, "testsuite", name=_clean(name))


def _add_case(suite: ET.Element, classname: str, name: str, file: str) -> ET.Element:
    attributes = {"classname": _clean(classname), "name": _clean(name), "time": "0"}
    if file:
        attributes["file"] = _clean(file)
    return ET.SubElement(suite, "testcase", attributes)


def _problem(case: ET.Element, tag: str, findings: Sequence[Finding], kind: str) -> None:
    """One ``failure``/``error`` listing ``findings``; ``type`` is the level or rule-error."""
    message = findings[0].message if len(findings) == 1 else f"{len(findings)} findings"
    element = ET.SubElement(case, tag, message=_clean(message), type=kind)
    element.text = "\n" + "\n".join(_finding_line(finding) for finding in findings) + "\n"


def _finding_line(finding: Finding) -> str:
    where = f"{finding.location.uri}:{finding.location.line}:{finding.location.column}"
    label = "rule-error" if finding.outcome is Outcome.ERROR else str(finding.level)
    path = f" ({finding.location.path})" if finding.location.path else ""
    return _clean(f"{where} {label} {finding.message}{path}")


def _notification_case(suite: ET.Element, notification: Notification) -> None:
    where = notification.uri or "run"
    case = _add_case(suite, NOTIFICATIONS_SUITE, where, notification.uri)
    if notification.level is Level.ERROR:
        element = ET.SubElement(
            case, "error", message=_clean(notification.message), type="incomplete"
        )
        element.text = _clean(notification.message)
    else:
        out = ET.SubElement(case, "system-out")
        out.text = _clean(f"{notification.level}: {notification.message}")


def _count(root: ET.Element) -> None:
    """Set tests/failures/errors/skipped on every suite and on the root."""
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    for suite in root:
        cases = suite.findall("testcase")
        counts = {
            "tests": len(cases),
            "failures": sum(1 for case in cases if case.find("failure") is not None),
            "errors": sum(1 for case in cases if case.find("error") is not None),
            "skipped": sum(1 for case in cases if case.find("skipped") is not None),
        }
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", "0")
    for key, value in totals.items():
        root.set(key, str(value))


def _clean(text: str) -> str:
    return _NOT_XML.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
