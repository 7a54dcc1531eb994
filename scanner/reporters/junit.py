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
* Only findings at or above ``--fail-on`` are ``failure``s: the report agrees
  with the exit code, and a job that passed has no red test. A case whose
  findings are all below it passes, its findings listed in ``system-out``: CI
  systems (GitLab, Jenkins, Azure Pipelines) show a passed case's output with
  it, while ``skipped`` would claim the check did not run, and is kept for
  suppressed findings.
* A rule that could not be evaluated on an object is an ``error`` (type
  ``rule-error``), not a ``failure``, and so is a document that could not be read
  (PG001, type ``incomplete``): like the exit code (3), they say the run is
  incomplete, whatever ``--fail-on``. Suppressed findings are ``skipped`` with their justification.
  Findings in the baseline, or below ``--min-level``, are not in the report at all.
* Notifications (an input that could not be read or rendered) form one more
  suite, ``poolgate``, each an ``error`` case when it makes the run incomplete.
* Text from manifests is untrusted: characters XML 1.0 cannot carry (C0 controls
  other than tab and newline, lone surrogates) are replaced by ``\\uXXXX``
  escapes so the file always parses.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from io import StringIO
from typing import Final, TextIO

from scanner.findings.records import INCOMPLETE_RULES, Finding, Level, Outcome
from scanner.findings.report import Report
from scanner.reporters import PLAIN, Display

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")
NOTIFICATIONS_SUITE = "poolgate"


@dataclass(slots=True)
class _Case:
    name: str
    file: str
    failures: list[Finding] = field(default_factory=list)
    errors: list[Finding] = field(default_factory=list)
    suppressed: list[Finding] = field(default_factory=list)


def write(report: Report, stream: TextIO, *, display: Display = PLAIN) -> None:
    """Write one ``<testsuites>`` document with an XML declaration; ``display.fail_on``
    decides which findings are failures.

    Written as text, suite by suite: an element tree of a 100,000-pod audit's findings
    took seconds to build, indent and serialize; the text is the same."""
    threshold = None if display.fail_on == "never" else Level.parse(display.fail_on)
    suites = list(_suites(report, threshold))
    totals = [sum(suite.counts[i] for suite in suites) for i in range(4)]
    stream.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    stream.write(f'<testsuites name="poolgate"{_counts(totals)}')
    if not suites:
        stream.write(" />\n")
        return
    stream.write(">\n")
    for suite in suites:
        stream.write(f'  <testsuite name={_attribute(suite.name)}{_counts(suite.counts)} time="0"')
        stream.write(">\n" if suite.cases else " />\n")
        for case in suite.cases:
            stream.write(case)
        if suite.cases:
            stream.write("  </testsuite>\n")
    stream.write("</testsuites>\n")


def build(report: Report, display: Display = PLAIN) -> ET.Element:
    """The report as an element tree (for tests and embedding)."""
    text = StringIO()
    write(report, text, display=display)
    return ET.fromstring(text.getvalue().partition("\n")[2])


@dataclass(slots=True)
class _Suite:
    name: str
    cases: list[str] = field(default_factory=list)
    """Each ``testcase`` element, written out with its indentation and newline."""
    counts: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    """tests, failures, errors, skipped."""

    def add(self, case: str, outcome: int = 0) -> None:
        """Add a case; ``outcome``: 1 failure, 2 error, 3 skipped, 0 passed."""
        self.cases.append(case)
        self.counts[0] += 1
        if outcome:
            self.counts[outcome] += 1


_FAILURE, _ERROR, _SKIPPED = 1, 2, 3


def _suites(report: Report, threshold: Level | None) -> Iterator[_Suite]:
    """The suites; ``threshold``: the lowest level of a failure (``None``: no finding
    fails)."""
    names = {rule.id: rule.name for rule in report.rules}
    by_rule: dict[str, dict[str, _Case]] = {rule.id: {} for rule in report.rules}
    for finding in report.findings:
        cases = by_rule.setdefault(finding.rule_id, {})
        name = finding.ref.logical_name if finding.ref is not None else finding.location.uri
        case = cases.setdefault(name, _Case(name, finding.location.uri))
        if finding.suppression is not None:
            case.suppressed.append(finding)
        elif finding.outcome is Outcome.ERROR or finding.rule_id in INCOMPLETE_RULES:
            case.errors.append(finding)
        else:
            case.failures.append(finding)
    for rule_id in sorted(by_rule):
        suite = _Suite(_clean(f"{rule_id} {names.get(rule_id, '')}".strip()))
        cases = by_rule[rule_id]
        if not cases:
            suite.add(_testcase(rule_id, "no findings", ""))
        for case in cases.values():
            if case.errors:
                errored = any(finding.outcome is Outcome.ERROR for finding in case.errors)
                kind = "rule-error" if errored else "incomplete"
                inner = _problem("error", case.errors + case.failures, kind)
                suite.add(_testcase(rule_id, case.name, case.file, inner), _ERROR)
            elif case.failures:
                worst = max(finding.level for finding in case.failures)
                if threshold is not None and worst >= threshold:
                    inner = _problem("failure", case.failures, str(worst))
                    suite.add(_testcase(rule_id, case.name, case.file, inner), _FAILURE)
                else:
                    inner = _output(case.failures, threshold)
                    suite.add(_testcase(rule_id, case.name, case.file, inner))
            else:  # only suppressed findings
                first = case.suppressed[0].suppression
                assert first is not None
                message = f"suppressed ({first.kind}): {first.justification}"
                inner = f"      <skipped message={_attribute(message)} />\n"
                suite.add(_testcase(rule_id, case.name, case.file, inner), _SKIPPED)
        yield suite
    if report.notifications:
        suite = _Suite(NOTIFICATIONS_SUITE)
        for notification in report.notifications:
            where = notification.uri or "run"
            if notification.level is Level.ERROR:
                message = _clean(notification.message)
                inner = (
                    f"      <error message={_attribute(message)} "
                    f'type="incomplete">{_text(message)}</error>\n'
                )
                suite.add(_testcase(NOTIFICATIONS_SUITE, where, notification.uri, inner), _ERROR)
            else:
                out = _text(_clean(f"{notification.level}: {notification.message}"))
                inner = f"      <system-out>{out}</system-out>\n"
                suite.add(_testcase(NOTIFICATIONS_SUITE, where, notification.uri, inner))
        yield suite


def _testcase(classname: str, name: str, file: str, inner: str = "") -> str:
    """One ``testcase`` element; ``inner``: its child, written with its indentation."""
    head = f'    <testcase classname={_attribute(classname)} name={_attribute(name)} time="0"'
    if file:
        head += f" file={_attribute(file)}"
    if not inner:
        return head + " />\n"
    return f"{head}>\n{inner}    </testcase>\n"


def _problem(tag: str, findings: Sequence[Finding], kind: str) -> str:
    """One ``failure``/``error`` listing ``findings``; ``type`` is the level or rule-error."""
    message = findings[0].message if len(findings) == 1 else f"{len(findings)} findings"
    lines = "\n".join(_finding_line(finding) for finding in findings)
    return (
        f"      <{tag} message={_attribute(message)} type={_attribute(kind)}>"
        f"\n{_text(lines)}\n</{tag}>\n"
    )


def _output(findings: Sequence[Finding], threshold: Level | None) -> str:
    """A passed case's ``system-out``: its findings, and why they do not fail."""
    why = "--fail-on never" if threshold is None else f"below --fail-on {threshold}"
    lines = "\n".join([f"{len(findings)} finding(s), {why}:", *map(_finding_line, findings)])
    return f"      <system-out>{_text(lines)}</system-out>\n"


def _finding_line(finding: Finding) -> str:
    where = finding.location.shown()
    label = "rule-error" if finding.outcome is Outcome.ERROR else str(finding.level)
    path = f" ({finding.location.path})" if finding.location.path else ""
    return _clean(f"{where} {label} {finding.message}{path}")


def _counts(counts: Sequence[int]) -> str:
    tests, failures, errors, skipped = counts
    return f' tests="{tests}" failures="{failures}" errors="{errors}" skipped="{skipped}"'


_SPECIAL: Final = re.compile('[&<>"\r\n\t]')
"""Characters an attribute value escapes; character data escapes the first three."""


def _text(text: str) -> str:
    """Character data, escaped as ElementTree does (the text is already ``_clean``)."""
    if "&" in text:
        text = text.replace("&", "&amp;")
    if "<" in text:
        text = text.replace("<", "&lt;")
    if ">" in text:
        text = text.replace(">", "&gt;")
    return text


def _attribute(value: str) -> str:
    """A quoted attribute value, ``_clean`` and escaped as ElementTree does."""
    value = _clean(value)
    if _SPECIAL.search(value):
        value = _text(value).replace('"', "&quot;")
        value = value.replace("\r", "&#13;").replace("\n", "&#10;").replace("\t", "&#09;")
    return f'"{value}"'


def _clean(text: str) -> str:
    return _NOT_XML.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
