"""One self-contained HTML page: the report a platform team opens from a CI artifact
or from the nightly audit.

Top to bottom::

    poolgate report (tool version)
    Summary              the summary line the text report ends with, the config the run
                         used (source, SHA-256), a table of counts, and a banner when
                         the results are incomplete
    Since the last audit only with ``audit --compare`` (scanner/findings/drift.py)
    Notifications        what could not be read or evaluated; always present
    Findings             one table per file or ``cluster://`` URI, in the run's order
    Rules                every rule of the run, each an anchor its findings link to

The page loads nothing: one inline ``<style>``, no script, font or image, and a
Content-Security-Policy that forbids them all, so opening it makes no request even
if an escape were ever missed. Every string from a manifest, a cluster object, a
rule file or an earlier report goes through ``_text``: control characters and bidi
overrides become visible escapes exactly as in the text report, then the result is
HTML-escaped, quotes included. Attributes hold only such escaped text or values made
here (levels, counts, anchors of safe characters); links go to anchors in the page,
or to a rule's documentation when that is a plain http(s) URL.

As in the text report, suppressed findings are listed only with
``--show-suppressed`` and always counted. No timestamp: the same report gives the
same bytes.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TextIO
from urllib.parse import urlsplit

from scanner.findings.records import Finding, Level, Notification, Outcome
from scanner.findings.report import Report
from scanner.reporters import PLAIN, Display
from scanner.reporters.tally import Tally, plural, summary_line, tally
from scanner.reporters.text import safe
from scanner.ruleset.docs import RuleDoc


class ChangeRow(NamedTuple):
    """One line of the drift table."""

    state: str
    """``new``, ``resolved``, or ``not checked`` when this run could not have seen it again."""
    uri: str
    level: str
    rule_id: str
    message: str


@dataclass(frozen=True, slots=True)
class Changes:
    """What changed since a previous report (``audit --compare``), ready to lay out."""

    previous: str
    """The previous report's path, as given."""
    counts: Sequence[tuple[str, int]]
    """``(state, count)`` in the order the sentence names them."""
    rows: Sequence[ChangeRow]
    """New findings, then previous findings that are gone (unchanged ones are not listed)."""
    states: Mapping[str, str]
    """Fingerprint -> ``new`` | ``unchanged``, shown on each finding."""


_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:80rem;padding:1rem 2rem;
color:#1b1f24;background:#fff}
h1{font-size:1.5rem;margin:.5rem 0}h2{font-size:1.2rem;margin-top:2rem;
border-bottom:1px solid #d0d7de}h3{font-size:1rem;margin:1.5rem 0 .5rem}
code{font:12.5px/1.4 ui-monospace,monospace;overflow-wrap:anywhere}
code,td,li,p,h3{unicode-bidi:isolate}
table{border-collapse:collapse;width:100%}th,td{text-align:left;vertical-align:top;
padding:.3rem .5rem;border-bottom:1px solid #eaeef2}
table.counts{width:auto}table.counts td{text-align:right}
.level{display:inline-block;padding:0 .4rem;border-radius:.6rem;font-size:12px;
font-weight:600;color:#fff;background:#57606a}
.level-error{background:#cf222e}.level-warning{background:#9a6700}.level-note{background:#0969da}
.level-rule-error{background:#8250df}.drift{display:inline-block;padding:0 .4rem;
font-size:12px;border:1px solid #57606a;border-radius:.6rem}
tr.suppressed{color:#57606a}.justification{font-style:italic}
.banner{padding:.6rem 1rem;border-left:4px solid #8250df;background:#fbefff}
.muted,.api{color:#57606a}.rule{border-top:1px solid #eaeef2}
""".strip()

_CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
_ANCHOR_UNSAFE = re.compile("[^A-Za-z0-9-]")


def write(
    report: Report, stream: TextIO, changes: Changes | None = None, *, display: Display = PLAIN
) -> None:
    """Write the whole page; ``changes`` adds the drift section of ``audit --compare``.

    Written in the order it is built, findings a row at a time: a 100,000-pod audit's
    page as one string took its size several times over at once."""
    counts = tally(report.findings)
    visible = display.visible(report.findings)
    documented = {rule.id for rule in report.rules}
    headline = summary_line(
        counts,
        files=report.stats.files,
        objects=report.stats.objects,
        suppressed_shown=display.show_suppressed,
        baselined=report.stats.baselined,
        incomplete=report.input_errors(),
    )
    version = _text(report.tool_version)
    parts = [
        "<!DOCTYPE html>\n",
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n',
        '<meta name="referrer" content="no-referrer">\n',
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
        f'<meta name="generator" content="poolgate {version}">\n',
        f"<title>poolgate: {_text(headline)}</title>\n",
        f"<style>\n{_STYLE}\n</style>\n</head>\n<body>\n",
        f'<header>\n<h1>poolgate report</h1>\n<p class="muted">poolgate {version}</p>\n</header>\n',
        _summary(report, counts, headline, display.show_suppressed),
    ]
    if changes is not None:
        parts.append(_changes(changes, documented))
    parts.append(_notifications(report.notifications, documented))
    stream.write("".join(parts))
    for piece in _findings(visible, counts, display.show_suppressed, documented, changes):
        stream.write(piece)
    stream.write(_rules(report.rules, visible))
    stream.write("</body>\n</html>\n")


def _summary(report: Report, counts: Tally, headline: str, suppressed_shown: bool) -> str:
    stats = report.stats
    suppressed = "listed below" if suppressed_shown else "not listed"
    rows = (
        ("Errors", counts.errors, "violations of level error, not suppressed"),
        ("Warnings", counts.warnings, "violations of level warning, not suppressed"),
        ("Notes", counts.notes, "violations of level note, not suppressed"),
        ("Rule errors", counts.rule_errors, "a rule could not be evaluated on an object"),
        ("Suppressed", counts.suppressed, f"any outcome; {suppressed}"),
        ("Baselined", stats.baselined, "already in the --baseline file; not listed"),
        ("Notifications", len(report.notifications), "about the run itself; listed below"),
        ("Files scanned", stats.files, ""),
        ("Objects scanned", stats.objects, ""),
        ("Non-Kubernetes documents skipped", stats.skipped_documents, ""),
    )
    table = "".join(
        f'<tr><th scope="row">{name}</th><td>{number}</td><td class="muted">{note}</td></tr>\n'
        for name, number, note in rows
        # An audit reads objects, not files: as in the summary line, no "0 files".
        if name != "Files scanned" or stats.files or not stats.objects
    )
    out = f'<section id="summary">\n<h2>Summary</h2>\n<p>{_text(headline)}</p>\n'
    if report.policy is not None:
        out += f'<p class="muted">{_text(report.policy.summary())}</p>\n'
    unread = sum(1 for note in report.notifications if note.level is Level.ERROR)
    if counts.rule_errors or unread:
        reasons = []
        if counts.rule_errors:
            reasons.append(plural(counts.rule_errors, "rule error"))
        if unread:
            reasons.append(plural(unread, "error notification"))
        out += (
            f'<p class="banner"><strong>Results incomplete:</strong> {", ".join(reasons)}. '
            "What the run could not read or evaluate is not a clean result; see "
            '<a href="#notifications">Notifications</a>.</p>\n'
        )
    return out + f'<table class="counts">\n{table}</table>\n</section>\n'


def _changes(changes: Changes, documented: set[str]) -> str:
    head = ", ".join(f"{number} {_text(state)}" for state, number in changes.counts)
    out = (
        '<section id="drift">\n<h2>Since the last audit</h2>\n'
        f"<p>Compared with <code>{_text(changes.previous)}</code>: {head}.</p>\n"
    )
    if changes.rows:
        out += (
            "<table>\n<thead><tr><th>Change</th><th>Rule</th><th>Level</th><th>Where</th>"
            "<th>Message</th></tr></thead>\n<tbody>\n"
        )
        for state, uri, level, rule_id, message in changes.rows:
            out += (
                f'<tr><td><span class="drift">{_text(state)}</span></td>'
                f"<td>{_rule_link(rule_id, documented)}</td><td>{_badge(level)}</td>"
                f"<td><code>{_text(uri)}</code></td><td>{_text(message)}</td></tr>\n"
            )
        out += "</tbody>\n</table>\n"
    return out + "</section>\n"


def _notifications(notifications: Sequence[Notification], documented: set[str]) -> str:
    out = f'<section id="notifications">\n<h2>Notifications ({len(notifications)})</h2>\n'
    if not notifications:
        return out + "<p>None: every input was read and every rule ran.</p>\n</section>\n"
    out += (
        '<p class="muted">What the run could not read or evaluate. An error here makes '
        "the results incomplete.</p>\n<ul>\n"
    )
    for note in notifications:
        where = note.uri
        if where and note.line > 0:
            where += f":{note.line}"
            if note.column > 0:
                where += f":{note.column}"
        item = _badge(str(note.level))
        if where:
            item += f" <code>{_text(where)}</code>"
        item += f" {_text(note.message)}"
        if note.rule_id:
            item += f" ({_rule_link(note.rule_id, documented)})"
        out += f"<li>{item}</li>\n"
    return out + "</ul>\n</section>\n"


def _findings(
    visible: Sequence[Finding],
    counts: Tally,
    suppressed_shown: bool,
    documented: set[str],
    changes: Changes | None,
) -> Iterator[str]:
    """The findings section, in pieces (``write``)."""
    out = '<section id="findings">\n<h2>Findings</h2>\n'
    if counts.suppressed and not suppressed_shown:
        out += (
            f'<p class="muted">{plural(counts.suppressed, "suppressed finding")} not listed '
            "(run with --show-suppressed to list them).</p>\n"
        )
    if not visible:
        yield out + "<p>No findings.</p>\n</section>\n"
        return
    groups: dict[str, list[Finding]] = {}
    for finding in visible:
        groups.setdefault(finding.location.uri, []).append(finding)
    yield out
    if len(groups) > 1:
        yield "<nav>\n<ul>\n"
        yield "".join(
            f'<li><a href="#file-{number}"><code>{_text(uri)}</code></a> '
            f"({plural(len(findings), 'finding')})</li>\n"
            for number, (uri, findings) in enumerate(groups.items(), 1)
        )
        yield "</ul>\n</nav>\n"
    states = changes.states if changes is not None else {}
    for number, (uri, findings) in enumerate(groups.items(), 1):
        yield (
            f'<section class="file" id="file-{number}">\n<h3><code>{_text(uri)}</code></h3>\n'
            "<table>\n<thead><tr><th>Rule</th><th>Level</th><th>Message</th>"
            "<th>Location</th><th>Object</th></tr></thead>\n<tbody>\n"
        )
        yield "".join(_finding_row(finding, documented, states) for finding in findings)
        yield "</tbody>\n</table>\n</section>\n"
    yield "</section>\n"


def _finding_row(finding: Finding, documented: set[str], states: Mapping[str, str]) -> str:
    level = _badge(_label(finding))
    state = states.get(finding.fingerprint) if states else None
    if state is not None:
        level += f' <span class="drift">{_text(state)}</span>'
    message = _text(finding.message)
    row_class = ""
    if finding.suppression is not None:
        row_class = ' class="suppressed"'
        message += (
            f"<br><strong>suppressed</strong> ({_text(finding.suppression.kind)}): "
            f'<span class="justification">{_text(finding.suppression.justification)}</span>'
        )
    where = f"{finding.location.line}:{finding.location.column}" if finding.location.line else ""
    if finding.location.path:
        where += f"<br><code>{_text(finding.location.path)}</code>"
    ref = finding.ref
    if ref is None:
        obj = '<span class="muted">none</span>'
    else:
        name = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name
        obj = (
            f"{_text(ref.kind)} <code>{_text(name)}</code><br>"
            f'<span class="api">{_text(ref.api_version)}</span>'
        )
    return (
        f"<tr{row_class}><td>{_rule_link(finding.rule_id, documented)}</td><td>{level}</td>"
        f"<td>{message}</td><td>{where}</td><td>{obj}</td></tr>\n"
    )


def _rules(rules: Sequence[RuleDoc], visible: Sequence[Finding]) -> str:
    shown: dict[str, int] = {}
    for finding in visible:
        shown[finding.rule_id] = shown.get(finding.rule_id, 0) + 1
    out = f'<section id="rules">\n<h2>Rules in this run ({len(rules)})</h2>\n'
    for rule in rules:
        facts = [f"level {_badge(str(rule.level))}", f"subject {_text(rule.subject)}"]
        if rule.security_severity is not None:
            facts.append(f"security severity {rule.security_severity:g}")
        if rule.tags:
            facts.append("tags " + ", ".join(_text(tag) for tag in rule.tags))
        facts.append(plural(shown.get(rule.id, 0), "finding") + " listed")
        out += (
            f'<section class="rule" id="{_anchor(rule.id)}">\n'
            f"<h3>{_text(rule.id)} {_text(rule.name)}</h3>\n"
            f'<p class="muted">{" · ".join(facts)}</p>\n'
            f"{_paragraphs(rule.summary)}{_paragraphs(rule.description)}"
            f"<p><strong>Remediation:</strong> {_lines(rule.remediation)}</p>\n"
            f'<p class="muted">Defined in <code>{_text(rule.source)}</code>'
        )
        uri = rule.uri
        if _plain_web_url(uri):
            link = _text(uri)
            out += f'; documentation: <a href="{link}" rel="noopener noreferrer">{link}</a>'
        out += ".</p>\n</section>\n"
    return out + "</section>\n"


# -- helpers --------------------------------------------------------------------


def _text(value: str) -> str:
    """Untrusted text as HTML: control characters and bidi overrides as visible escapes
    (as the text report shows them), then ``&<>"'`` as entities."""
    return html.escape(safe(value), quote=True)


def _lines(value: str) -> str:
    """Multi-line documentation (rule files): each line escaped; a newline stays whitespace."""
    return "\n".join(_text(line) for line in value.strip().split("\n"))


def _paragraphs(value: str) -> str:
    blocks = [block for block in re.split(r"\n[ \t]*\n", value.strip()) if block.strip()]
    return "".join(f"<p>{_lines(block)}</p>\n" for block in blocks)


def _label(finding: Finding) -> str:
    return "rule-error" if finding.outcome is Outcome.ERROR else str(finding.level)


def _badge(label: str) -> str:
    """A level badge; its class comes from the escaped-and-anchored label, its text escaped."""
    return f'<span class="level level-{_anchor_part(label)}">{_text(label)}</span>'


def _rule_link(rule_id: str, documented: set[str]) -> str:
    """The rule id, linking to its entry in the Rules section when the run has one."""
    if rule_id in documented:
        return f'<a href="#{_anchor(rule_id)}"><code>{_text(rule_id)}</code></a>'
    return f"<code>{_text(rule_id)}</code>"


def _anchor(rule_id: str) -> str:
    return f"rule-{_anchor_part(rule_id)}"


def _anchor_part(text: str) -> str:
    """Letters, digits and ``-`` as they are; anything else as ``_<hex>_`` (so ``_`` too:
    two different ids never share an anchor)."""
    return _ANCHOR_UNSAFE.sub(lambda match: f"_{ord(match.group()):x}_", text)


def _plain_web_url(uri: str) -> bool:
    """Whether ``uri`` may be a link: http(s), with nothing the text report would escape."""
    if not uri or safe(uri) != uri or any(char.isspace() for char in uri):
        return False
    try:
        return urlsplit(uri).scheme in ("http", "https")
    except ValueError:
        return False
