"""GitHub Actions workflow commands: findings as annotations on the pull request.

One command per visible finding::

    ::error file=k8s/train.yaml,line=12,col=9,title=PG301 privileged-outside-operator::...

then one per notification, then plain lines for the log: the configuration the
run used (with its source and SHA-256) and the summary. Levels map to
``error``/``warning``/``notice``. Values are escaped as the Actions runner
unescapes them (``%``, CR and LF in the message; also ``:`` and ``,`` in
properties), which also keeps text from an untrusted manifest from starting a
command of its own on a new line. Control characters (an ESC sequence in a
manifest's name) are shown as escapes first, as in the text report
(``scanner.reporters.text.safe``): the log renders ANSI sequences.

Only repository files get ``file=``: a ``cluster://`` or ``<stdin>`` location
has no file in the checkout, so its URI goes into the message instead. GitHub
shows a limited number of annotations per step; SARIF upload is the complete
record, this format is the quick look.
"""

from __future__ import annotations

from typing import TextIO

from scanner.findings.records import Finding, Level, Notification, Outcome
from scanner.findings.report import Report
from scanner.reporters import PLAIN, Display
from scanner.reporters.tally import summary_line, tally
from scanner.reporters.text import safe

_COMMANDS = {Level.ERROR: "error", Level.WARNING: "warning", Level.NOTE: "notice"}


def write(report: Report, stream: TextIO, *, display: Display = PLAIN) -> None:
    """Write workflow commands for findings and notifications, then a summary line."""
    names = {rule.id: rule.name for rule in report.rules}
    for finding in display.visible(report.findings):
        stream.write(_finding_command(finding, names.get(finding.rule_id, "")) + "\n")
    for notification in report.notifications:
        stream.write(_notification_command(notification) + "\n")
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
    if report.policy is not None:
        stream.write(f"poolgate: {safe(report.policy.summary())}\n")
    stream.write(f"poolgate: {summary}\n")


def _finding_command(finding: Finding, rule_name: str) -> str:
    title = f"{finding.rule_id} {rule_name}".strip()
    message = finding.message
    level = finding.level
    if finding.outcome is Outcome.ERROR:
        title += " (rule error)"
        message = f"rule could not be evaluated: {message}"
        level = Level.ERROR
    if finding.suppression is not None:
        # Shown only on request; a notice, so it never reads as a failure.
        title += " (suppressed)"
        message += f" [suppressed {finding.suppression.kind}: {finding.suppression.justification}]"
        level = Level.NOTE
    where = finding.location
    return _command(_COMMANDS[level], where.uri, where.line, where.column, title, message)


def _notification_command(notification: Notification) -> str:
    title = f"poolgate {notification.rule_id}".strip()
    return _command(
        _COMMANDS[notification.level],
        notification.uri,
        notification.line,
        notification.column,
        title,
        notification.message,
    )


def _command(name: str, uri: str, line: int, column: int, title: str, message: str) -> str:
    properties: list[tuple[str, str]] = []
    if _is_repository_file(uri):
        properties.append(("file", uri))
        if line > 0:
            properties.append(("line", str(line)))
            if column > 0:
                properties.append(("col", str(column)))
    elif uri:
        message = f"{uri}: {message}"
    properties.append(("title", title))
    rendered = ",".join(f"{key}={escape_property(safe(value))}" for key, value in properties)
    return f"::{name} {rendered}::{escape_data(safe(message))}"


def _is_repository_file(uri: str) -> bool:
    return bool(uri) and "://" not in uri and uri != "<stdin>"


def escape_data(text: str) -> str:
    """Escape a command's message the way the Actions runner unescapes it."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a property value: as data, plus ``:`` and ``,`` that delimit properties."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")
