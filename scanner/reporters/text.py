"""Human-readable report for terminals and CI logs.

Layout::

    k8s/train.yaml
    k8s/train.yaml:12:9 error PG301 container "cuda" runs privileged
      privileged-outside-operator: poolgate rules show PG301
    k8s/train.yaml:30:5 rule-error PG204 could not evaluate: no such key: sku
      untolerated-gpu-taint: poolgate rules show PG204

    poolgate: warning: k8s/secret.yaml: cannot read: permission denied

    RULE   NAME                         LEVEL  FINDINGS
    PG301  privileged-outside-operator  error  1

    config: .poolgate.yaml (work tree), sha256 9f86d081...
    1 finding (1 error) in 4 files, 12 objects; 1 rule error (results incomplete)

Findings are grouped under their file so a long run stays scannable, yet each
line repeats ``uri:line:col`` so editors and terminals can jump to it; the
indented line under it names the rule and where to read about it (``poolgate
rules show``: the rule's documentation, its remediation and its CEL, offline and
for user rules too). Before the closing lines, the findings that count are
counted per rule, most severe first. Rule
errors say ``rule-error`` instead of a level: a rule that could not run is not
a verdict on the manifest. The line before the summary names the configuration
the run used, where it came from and its SHA-256 (``scanner.config.provenance``).
Manifests come from untrusted pull requests, so
control characters in messages are escaped before they reach a terminal.
"""

from __future__ import annotations

from typing import TextIO

from scanner.console import paint as _paint_style
from scanner.errors import printable
from scanner.findings.records import Finding, Notification, Outcome
from scanner.findings.report import Report
from scanner.reporters import PLAIN, Display
from scanner.reporters.tally import RuleCount, by_rule, summary_line, tally


def write(report: Report, stream: TextIO, *, display: Display = PLAIN) -> None:
    """Write findings grouped by file, then notifications, the config used and a
    one-line summary."""
    paint = _Paint(display.color)
    names = {rule.id: rule.name for rule in report.rules}
    groups: dict[str, list[Finding]] = {}
    for finding in display.visible(report.findings):
        groups.setdefault(finding.location.uri, []).append(finding)
    for index, (uri, findings) in enumerate(groups.items()):
        if index:
            stream.write("\n")
        stream.write(paint("header", printable(uri, line_start=True)) + "\n")
        for finding in findings:
            stream.write(_finding_line(finding, paint) + "\n")
            stream.write(paint("help", _help_line(finding, names)) + "\n")
    if groups and report.notifications:
        stream.write("\n")
    for notification in report.notifications:
        stream.write(_notification_line(notification, paint) + "\n")
    if groups or report.notifications:
        stream.write("\n")
    rows = by_rule(report.findings, report.rules)
    if rows:
        stream.write("".join(line + "\n" for line in _rule_table(rows)) + "\n")
    if report.policy is not None:
        stream.write(safe(report.policy.summary()) + "\n")
    counts = tally(report.findings)
    summary = summary_line(
        counts,
        files=report.stats.files,
        objects=report.stats.objects,
        suppressed_shown=display.show_suppressed,
        skipped_documents=report.stats.skipped_documents if display.verbose else None,
        baselined=report.stats.baselined,
        excluded=report.stats.excluded,
        hidden=report.stats.hidden,
        incomplete=report.input_errors(),
    )
    style = "error" if counts.errors else "warning" if counts.findings else "header"
    stream.write(paint(style, summary) + "\n")


def _finding_line(finding: Finding, paint: _Paint) -> str:
    where = finding.location.shown()
    label = "rule-error" if finding.outcome is Outcome.ERROR else str(finding.level)
    where = printable(where, line_start=True)  # a file named ::error ... starts the line
    line = f"{where} {paint(label, label)} {finding.rule_id} {safe(finding.message)}"
    if finding.suppression is not None:
        note = f"[suppressed {finding.suppression.kind}: {finding.suppression.justification}]"
        line += " " + paint("suppressed", safe(note))
    return line


def _help_line(finding: Finding, names: dict[str, str]) -> str:
    """Where to read about the finding's rule: its documentation, remediation and CEL."""
    command = f"poolgate rules show {safe(finding.rule_id)}"
    name = names.get(finding.rule_id)
    return f"  {safe(name)}: {command}" if name else f"  see {command}"


def _rule_table(rows: list[RuleCount]) -> list[str]:
    """The findings that count, per rule: id, name, level and count, aligned."""
    table = [("RULE", "NAME", "LEVEL", "FINDINGS")]
    table += [(safe(r.rule_id), safe(r.name), str(r.level), str(r.count)) for r in rows]
    widths = [max(len(row[column]) for row in table) for column in range(3)]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True))
        + f"  {row[3]}"
        for row in table
    ]


def _notification_line(notification: Notification, paint: _Paint) -> str:
    label = str(notification.level)
    parts = ["poolgate", paint(label, label)]
    if notification.uri:
        where = notification.uri
        if notification.line > 0:
            where += f":{notification.line}"
            if notification.column > 0:
                where += f":{notification.column}"
        parts.append(safe(where))
    message = safe(notification.message)
    if notification.rule_id:
        message += f" ({notification.rule_id})"
    parts.append(message)
    return ": ".join(parts)


class _Paint:
    """Wraps text in ANSI styles (``scanner.console.STYLES``), or leaves it alone when
    colour is off."""

    def __init__(self, enabled: bool) -> None:
        self._enabled = enabled

    def __call__(self, style: str, text: str) -> str:
        return _paint_style(style, text, self._enabled)


def safe(text: str) -> str:
    r"""Show control characters as escapes (ESC becomes ``\x1b``): they must not drive a
    tty, nor disguise what a report says. Every reporter of text for people uses it."""
    return printable(text)
