"""One self-contained HTML page: the report a platform lead opens from a CI artifact
or after the nightly audit.

Top to bottom::

    header          the verdict line; when the report was made; what was scanned
                    (paths, or the cluster context and when it was read); the config
                    and its SHA-256, rule files and baseline; the poolgate version
    Summary         counts by level and outcome, and charts (inline SVG) of the
                    findings by level, by rule, by namespace and by trust domain
    Since ...       only with ``--compare`` (scanner/findings/drift.py): new, unchanged,
                    resolved and unverified, and what is new or gone
    GPU fleet       every pool: SKU, sharing mode, MIG strategy, members drawn by
                    their worst finding, tenants and their trust domains
    Notifications   what could not be read or evaluated; always present
    Findings        grouped by object, most severe first, with a filter bar
    Rules           the documentation of the rules that fired (Markdown rendered);
                    the others named in one line

The page loads nothing: one style sheet and one small script, both inline and both
admitted by their SHA-256 in the Content-Security-Policy (``htmlassets``), no font,
image or request. Every string from the input goes through ``htmltext.text``; links
go to anchors in the page or to plain http(s) documentation URLs. Paths of the
machine that ran poolgate are not shown (``htmltext.LocalPaths``).

As in the text report, suppressed findings are listed only with
``--show-suppressed`` and always counted. The only time on the page is
``Report.generated_at`` (and when an audited cluster was read): with
``SOURCE_DATE_EPOCH`` set, the same input gives the same bytes.
"""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple, TextIO

from scanner.findings.fleet import Fleet
from scanner.findings.records import Finding, Level, Notification, Outcome
from scanner.findings.report import Report
from scanner.reporters import PLAIN, Display
from scanner.reporters.htmlassets import CSP, SCRIPT, STYLE
from scanner.reporters.htmlfleet import fleet_section
from scanner.reporters.htmlrules import rules_section
from scanner.reporters.htmlsvg import LEVELS, Bar, bars, donut
from scanner.reporters.htmltext import LocalPaths, anchor_part, badge, rule_anchor, text
from scanner.reporters.tally import Tally, plural, summary_line, tally


class ChangeRow(NamedTuple):
    """One line of the drift table."""

    state: str
    """``new``, ``resolved``, or ``unverified`` when this run could not have seen it again."""
    uri: str
    level: str
    rule_id: str
    message: str
    obj: str = ""
    """The object's logical name (``namespace/Kind/name``), when it has one."""


@dataclass(frozen=True, slots=True)
class Changes:
    """What changed since a previous report (``--compare``), ready to lay out."""

    previous: str
    """The previous report's path, as given."""
    counts: Sequence[tuple[str, int]]
    """``(state, count)`` in the order the sentence names them."""
    rows: Sequence[ChangeRow]
    """New findings, then previous findings that are gone (unchanged ones are not listed)."""
    states: Mapping[str, str]
    """Fingerprint -> ``new`` | ``unchanged``, shown on each finding."""
    since: str = "the last audit"


TOP_BARS = 12
"""Rows of a bar chart; the rest are counted."""
OPEN_ROWS = 400
"""Finding groups start open until this many findings are shown; later ones closed
(a 10,000-finding page lays out only what is open; the filter opens what it finds)."""
CHANGE_ROWS = 300
"""Rows of each state in the drift table; the findings themselves carry their state."""
_RANK = {"error": 0, "warning": 1, "note": 2, "rule-error": 3}
CLUSTER = "cluster://"
_LEVELS = {level: str(level) for level in Level}


def write(
    report: Report, stream: TextIO, changes: Changes | None = None, *, display: Display = PLAIN
) -> None:
    """Write the whole page; ``changes`` adds the drift section of ``--compare``.

    Written in the order it is built, finding groups a few at a time: a 100,000-pod
    audit's page as one string took its size several times over at once."""
    page = _Page(report, changes, display)
    stream.write(page.head())
    stream.write(page.summary())
    if changes is not None:
        stream.write(page.changes(changes))
    stream.write(fleet_section(report.fleet, page.visible))
    stream.write(page.notifications())
    for piece in page.findings():
        stream.write(piece)
    stream.write(page.rules())
    stream.write(f"</main>\n<script>{SCRIPT}</script>\n</body>\n</html>\n")


class _Group(NamedTuple):
    uri: str
    findings: list[Finding]


class _Page:
    def __init__(self, report: Report, changes: Changes | None, display: Display) -> None:
        self.report = report
        self.drift = changes
        self.display = display
        self.counts: Tally = tally(report.findings)
        self.visible = display.visible(report.findings)
        scanned = report.scanned
        given = [*scanned.paths, *scanned.context_paths, scanned.snapshot] if scanned else []
        self.paths = LocalPaths(report.repo_root, given)
        self.states: Mapping[str, str] = changes.states if changes is not None else {}
        fired = {finding.rule_id for finding in self.visible}
        fired.update(note.rule_id for note in report.notifications if note.rule_id)
        if changes is not None:
            fired.update(row.rule_id for row in changes.rows)
        self.documented = {rule.id for rule in report.rules if rule.id in fired}
        self.names = {rule.id: rule.name for rule in report.rules}
        self._badges: dict[str, str] = {}
        """Row label -> its badge, and rule id -> its Rule cell: made once, not per row."""
        self._rules: dict[str, str] = {}

    # -- header and summary ----------------------------------------------------------

    def head(self) -> str:
        report = self.report
        version = text(report.tool_version)
        headline = summary_line(
            self.counts,
            files=report.stats.files,
            objects=report.stats.objects,
            suppressed_shown=self.display.show_suppressed,
            baselined=report.stats.baselined,
            excluded=report.stats.excluded,
            hidden=report.stats.hidden,
            incomplete=report.input_errors(),
        )
        sections = ["summary", "drift" if self.drift else "", "fleet", "notifications"]
        toc = "".join(
            f'<li><a href="#{name}">{name.capitalize()}</a></li>'
            for name in [*sections, "findings", "rules"]
            if name
        )
        return (
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            '<meta name="referrer" content="no-referrer">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f'<meta name="generator" content="poolgate {version}">\n'
            f"<title>poolgate: {text(headline)}</title>\n"
            f"<style>{STYLE}</style>\n</head>\n<body>\n"
            f'<header class="top">\n<div>\n<h1>poolgate report</h1>\n'
            f'<p class="verdict">{text(headline)}</p>\n'
            f'<dl class="meta">\n{self._meta()}</dl>\n</div>\n</header>\n'
            f'<nav class="toc"><ul>{toc}</ul></nav>\n<main>\n'
        )

    def _meta(self) -> str:
        report = self.report
        items: list[tuple[str, str]] = []
        if report.generated_at is not None:
            items.append(("Generated", _time(report.generated_at)))
        scanned = report.scanned
        if scanned is not None and scanned.cluster:
            where = f"context <code>{text(scanned.cluster)}</code>"
            if scanned.read_at is not None:
                where += f", read {_time(scanned.read_at)}"
            if scanned.snapshot:
                where += f", from snapshot <code>{text(self.paths.path(scanned.snapshot))}</code>"
            items.append(("Cluster", where))
        elif scanned is not None:
            items.append(("Scanned", self._path_list(scanned.paths)))
            if scanned.context_paths:
                items.append(("Context (not reported on)", self._path_list(scanned.context_paths)))
        policy = report.policy
        if policy is None:
            items.append(("Config", '<span class="muted">not recorded</span>'))
        else:
            local = self.paths.path
            shown = replace(
                policy,
                path=local(policy.path) if policy.path else "",
                rule_files=tuple(replace(f, path=local(f.path)) for f in policy.rule_files),
                baseline=None
                if policy.baseline is None
                else replace(policy.baseline, path=local(policy.baseline.path)),
            )
            items.append(("Config", text(shown.summary().removeprefix("config: "))))
        fired = {finding.rule_id for finding in self.visible}
        with_findings = sum(1 for rule in report.rules if rule.id in fired)
        items.append(
            (
                "Rules",
                f"{plural(len(report.rules), 'rule')} in this run, {with_findings} with findings",
            )
        )
        items.append(("poolgate", text(report.tool_version)))
        return "".join(f"<div><dt>{name}</dt><dd>{value}</dd></div>\n" for name, value in items)

    def _path_list(self, paths: Sequence[str]) -> str:
        shown = [f"<code>{text(self.paths.path(path))}</code>" for path in paths[:20]]
        if len(paths) > 20:
            shown.append(f"and {len(paths) - 20:,} more")
        return ", ".join(shown) or '<span class="muted">none</span>'

    def summary(self) -> str:
        report, counts, stats = self.report, self.counts, self.report.stats
        tiles = [
            ("t-error", "Errors", counts.errors),
            ("t-warning", "Warnings", counts.warnings),
            ("t-note", "Notes", counts.notes),
            ("t-rule-error", "Rule errors", counts.rule_errors),
            ("", "Suppressed", counts.suppressed),
            ("", "Baselined", stats.baselined),
            ("", "Notifications", len(report.notifications)),
            ("", "Objects scanned", stats.objects),
        ]
        # An audit reads objects, not files: as in the summary line, no "0 files".
        if stats.files or not stats.objects:
            tiles.append(("", "Files scanned", stats.files))
        if stats.skipped_documents:
            tiles.append(("", "Non-Kubernetes documents skipped", stats.skipped_documents))
        body = "".join(
            f'<div class="{css}"><dt>{name}</dt><dd>{number:,}</dd></div>'
            if css
            else f"<div><dt>{name}</dt><dd>{number:,}</dd></div>"
            for css, name, number in tiles
        )
        out = f'<section id="summary">\n<h2>Summary</h2>\n{self._banner()}'
        out += f'<dl class="tiles">{body}</dl>\n{self._charts()}</section>\n'
        return out

    def _banner(self) -> str:
        unread = self.report.input_errors()
        if not self.counts.rule_errors and not unread:
            return ""
        reasons = []
        if self.counts.rule_errors:
            reasons.append(plural(self.counts.rule_errors, "rule error"))
        if unread:
            reasons.append(plural(unread, "error notification"))
        return (
            f'<p class="banner"><strong>Results incomplete:</strong> {", ".join(reasons)}. '
            "What the run could not read or evaluate is not a clean result; see "
            '<a href="#notifications">Notifications</a>.</p>\n'
        )

    def _charts(self) -> str:
        active = [f for f in self.visible if f.suppression is None]
        if not active:
            return '<p class="muted">No findings to chart.</p>\n'
        by_level: Counter[str] = Counter(_label(f) for f in active)
        figures = [("chart-level", "Findings by level", donut(by_level, "Findings by level"))]
        fleet = self.report.fleet
        for key, caption, name in (
            ("rule", "By rule", lambda f: f"{f.rule_id} {self.names.get(f.rule_id, '')}".strip()),
            ("namespace", "By namespace", _namespace),
            ("team", "By trust domain (team)", lambda f: _team(f, fleet)),
        ):
            rows = _bar_rows(active, name)
            shown = bars(rows[:TOP_BARS], caption, more=len(rows) - TOP_BARS)
            figures.append((f"chart-{key}", caption, shown))
        body = "".join(
            f'<figure class="chart" id="{ident}"><figcaption>{caption}</figcaption>{svg}</figure>\n'
            for ident, caption, svg in figures
        )
        return f'<div class="charts">\n{body}</div>\n'

    # -- drift and notifications ----------------------------------------------------

    def changes(self, changes: Changes) -> str:
        head = ", ".join(f"{number:,} {text(state)}" for state, number in changes.counts)
        title = f"Since {text(changes.since)}"
        out = (
            f'<section id="drift">\n<h2>{title[0].upper()}{title[1:]}</h2>\n'
            f"<p>Compared with <code>{text(self.paths.path(changes.previous))}</code>: "
            f"{head}.</p>\n"
        )
        if changes.rows:
            out += (
                '<div class="rows"><table>\n<thead><tr><th>Change</th><th>Rule</th><th>Level</th>'
                "<th>Object</th><th>Where</th><th>Message</th></tr></thead>\n<tbody>\n"
            )
            listed: Counter[str] = Counter()
            for row in changes.rows:
                listed[row.state] += 1
                if listed[row.state] > CHANGE_ROWS:
                    continue
                out += (
                    f'<tr><td><span class="drift drift-{anchor_part(row.state)}">'
                    f"{text(row.state)}</span></td>"
                    f'<td class="r">{self._rule_link(row.rule_id)}</td>'
                    f"<td>{badge(row.level)}</td><td><code>{text(row.obj)}</code></td>"
                    f"<td>{self._where(row.uri, row.obj)}</td>"
                    f"<td>{text(self.paths.message(row.message))}</td></tr>\n"
                )
            out += "</tbody>\n</table></div>\n"
            cut = [
                f"{count - CHANGE_ROWS:,} more {text(state)}"
                for state, count in listed.items()
                if count > CHANGE_ROWS
            ]
            if cut:
                out += f'<p class="muted">Not listed here: {", ".join(cut)}.</p>\n'
        return out + "</section>\n"

    def _where(self, uri: str, obj: str) -> str:
        """A drift row's file; nothing for a cluster object, whose URI repeats its name."""
        if obj and uri.startswith(CLUSTER):
            return ""
        return f"<code>{text(self.paths.path(uri))}</code>"

    def notifications(self) -> str:
        notes: Sequence[Notification] = self.report.notifications
        out = f'<section id="notifications">\n<h2>Notifications ({len(notes):,})</h2>\n'
        if not notes:
            return out + "<p>None: every input was read and every rule ran.</p>\n</section>\n"
        out += (
            '<p class="muted">What the run could not read or evaluate. An error here makes '
            "the results incomplete.</p>\n<ul>\n"
        )
        for note in notes:
            where = self.paths.path(note.uri)
            if where and note.line > 0:
                where += f":{note.line}"
                if note.column > 0:
                    where += f":{note.column}"
            item = badge(str(note.level))
            if where:
                item += f" <code>{text(where)}</code>"
            item += f" {text(self.paths.message(note.message))}"
            if note.rule_id:
                item += f" ({self._rule_link(note.rule_id)})"
            out += f"<li>{item}</li>\n"
        return out + "</ul>\n</section>\n"

    # -- findings -------------------------------------------------------------------

    def findings(self) -> Iterator[str]:
        """The findings section, in pieces (``write``)."""
        counts = self.counts
        out = '<section id="findings">\n<h2>Findings</h2>\n'
        if counts.suppressed and not self.display.show_suppressed:
            out += (
                f'<p class="muted">{plural(counts.suppressed, "suppressed finding")} not '
                "listed (run with --show-suppressed to list them).</p>\n"
            )
        if not self.visible:
            yield out + "<p>No findings.</p>\n</section>\n"
            return
        groups = _groups(self.visible)
        listed = Counter(_row_label(finding) for finding in self.visible)
        what = [plural(len(self.visible) - listed["rule-error"] - listed["suppressed"], "finding")]
        if listed["rule-error"]:
            what.append(plural(listed["rule-error"], "rule error"))
        if listed["suppressed"]:
            what.append(f"{listed['suppressed']:,} suppressed")
        yield out + (
            f'<p class="muted">{", ".join(what)} on {plural(len(groups), "object")}, '
            "most severe first.</p>\n"
        )
        yield self._filters()
        shown = 0
        for number, group in enumerate(groups, 1):
            opened = shown < OPEN_ROWS
            shown += len(group.findings)
            yield self._group(number, group, opened)
        yield "</section>\n"

    def _filters(self) -> str:
        levels: Counter[str] = Counter(_row_label(f) for f in self.visible)
        boxes = "".join(
            f'<label><input type="checkbox" name="level" value="{level}" checked> '
            f"{level} ({levels[level]:,})</label>"
            for level in (*LEVELS, "suppressed")
            if levels[level]
        )
        rules: Counter[str] = Counter(f.rule_id for f in self.visible)
        rule_options = "".join(
            f'<option value="{text(rule)}">{text(rule)} {text(self.names.get(rule, ""))} '
            f"({count:,})</option>"
            for rule, count in sorted(rules.items())
        )
        spaces: Counter[str] = Counter(_namespace(f) for f in self.visible)
        ns_options = "".join(
            f'<option value="{text(ns)}">{text(ns)} ({count:,})</option>'
            for ns, count in sorted(spaces.items())
        )
        drift = ""
        if self.drift is not None:
            drift = (
                '<label>Drift <select name="drift"><option value="">all</option>'
                '<option value="new">new</option><option value="unchanged">unchanged</option>'
                "</select></label>"
            )
        total = len(self.visible)
        return (
            '<div class="filters" id="filters" hidden>\n'
            f"<fieldset><legend>Level</legend>{boxes}</fieldset>\n"
            f'<label>Rule <select name="rule"><option value="">all rules</option>'
            f"{rule_options}</select></label>\n"
            f'<label>Namespace <select name="ns"><option value="">all namespaces</option>'
            f"{ns_options}</select></label>\n{drift}"
            '<label>Text <input type="search" name="q" '
            'placeholder="object, message, file or field"></label>\n'
            '<button type="button" data-act="open">Expand all</button>'
            '<button type="button" data-act="close">Collapse all</button>\n'
            f"<output>Showing {total:,} of {total:,} findings</output>\n</div>\n"
        )

    def _group(self, number: int, group: _Group, opened: bool) -> str:
        findings = group.findings
        first = findings[0]
        ref = first.ref
        where = f"<code>{text(self.paths.path(group.uri))}</code>"
        if ref is None:
            title = f"file {where}"
        else:
            name = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name
            # A cluster object's URI repeats the context of the header and the name.
            origin = "" if group.uri.startswith(CLUSTER) else f" · {where}"
            title = (
                f"{text(ref.kind)} <code>{text(name)}</code> "
                f'<span class="muted">{text(ref.api_version)}{origin}</span>'
            )
        rows = "".join(self._row(finding) for finding in findings)
        return (
            f'<details class="obj" id="obj-{number}" data-ns="{text(_namespace(first))}"'
            f"{' open' if opened else ''}>\n"
            f"<summary>{badge(_label(first))} {title}"
            f'<span class="n">{plural(len(findings), "finding")}</span></summary>\n'
            '<div class="rows"><table>\n<thead><tr><th>Level</th><th>Rule</th><th>Message</th>'
            f"<th>Where</th></tr></thead>\n<tbody>\n{rows}</tbody>\n</table></div>\n</details>\n"
        )

    def _row(self, finding: Finding) -> str:
        label = _row_label(finding)
        state = self.states.get(finding.fingerprint) if self.states else None
        shown = self._badges.get(label)
        if shown is None:
            shown = self._badges[label] = badge(_label(finding), label == "suppressed")
        rule = self._rules.get(finding.rule_id)
        if rule is None:
            rule = self._rules[finding.rule_id] = self._rule_cell(finding.rule_id)
        data = f' data-l="{label}" data-r="{text(finding.rule_id)}"'
        if state is not None:
            shown += f' <span class="drift drift-{anchor_part(state)}">{text(state)}</span>'
            data += f' data-d="{text(state)}"'
        message = text(self.paths.message(finding.message))
        row_class = ""
        if finding.suppression is not None:
            row_class = ' class="suppressed"'
            message += (
                f"<br><strong>suppressed</strong> ({text(finding.suppression.kind)}): "
                f'<span class="justification">{text(finding.suppression.justification)}</span>'
            )
        location = finding.location
        where = ""
        if location.line > 0 and not location.uri.startswith(CLUSTER):
            where = f"<code>{location.line}:{location.column}</code>"
        if location.path:
            where += f"{'<br>' if where else ''}<code>{text(location.path)}</code>"
        return (
            f'<tr{row_class}{data}><td class="l">{shown}</td><td class="r">{rule}</td>'
            f'<td>{message}</td><td class="w">{where}</td></tr>\n'
        )

    def _rule_cell(self, rule_id: str) -> str:
        """A row's Rule cell: the id (a link to its documentation) over its name."""
        cell = self._rule_link(rule_id)
        name = self.names.get(rule_id, "")
        return cell + f'<span class="rn">{text(name)}</span>' if name else cell

    def rules(self) -> str:
        return rules_section(self.report.rules, self.visible, self.documented, self.paths)

    def _rule_link(self, rule_id: str) -> str:
        """The rule id, linking to its entry in the Rules section when the page has one."""
        if rule_id in self.documented:
            return f'<a href="#{rule_anchor(rule_id)}"><code>{text(rule_id)}</code></a>'
        return f"<code>{text(rule_id)}</code>"


# -- helpers -----------------------------------------------------------------------


def _groups(findings: Sequence[Finding]) -> list[_Group]:
    """Findings by object (or by file, for a document without identity), each group's
    findings most severe first, and the groups by their most severe finding, then by
    how many they hold."""
    grouped: dict[tuple[str, ...], _Group] = {}
    for finding in findings:
        ref = finding.ref
        identity = (ref.api_version, ref.kind, ref.namespace, ref.name) if ref else ("",) * 4
        key = (finding.location.uri, *identity)
        grouped.setdefault(key, _Group(finding.location.uri, [])).findings.append(finding)
    for group in grouped.values():
        group.findings.sort(key=lambda f: (_rank(f), f.location.line, f.location.column))
    return sorted(
        grouped.values(),
        key=lambda g: (_rank(g.findings[0]), -len(g.findings), _namespace(g.findings[0]), g.uri),
    )


def _rank(finding: Finding) -> int:
    """Severity order: error, warning, note, rule error; suppressed findings last."""
    return _RANK[_label(finding)] + (10 if finding.suppression is not None else 0)


def _label(finding: Finding) -> str:
    return "rule-error" if finding.outcome is Outcome.ERROR else _LEVELS[finding.level]


def _row_label(finding: Finding) -> str:
    """What the level filter knows a row as: suppressed findings apart."""
    return "suppressed" if finding.suppression is not None else _label(finding)


def _namespace(finding: Finding) -> str:
    ref = finding.ref
    if ref is None:
        return "(no object)"
    return ref.namespace or "(cluster-scoped)"


def _team(finding: Finding, fleet: Fleet | None) -> str:
    """The trust domain of a finding's namespace, as the team it belongs to."""
    ref = finding.ref
    if ref is None or not ref.namespace:
        return _namespace(finding)
    domain = fleet.trust_domain(ref.namespace) if fleet is not None else None
    return domain if domain is not None else "(namespace not in scope)"


def _bar_rows(findings: Sequence[Finding], name: Callable[[Finding], str]) -> list[Bar]:
    """Bars of ``findings`` counted by ``name(finding)``, largest first."""
    counts: dict[str, Counter[str]] = {}
    for finding in findings:
        key = name(finding)
        if key not in counts:
            counts[key] = Counter()
        counts[key][_label(finding)] += 1
    ordered = sorted(counts.items(), key=lambda item: (-item[1].total(), item[0]))
    return [Bar(label, dict(levels)) for label, levels in ordered]


def _time(moment: datetime.datetime) -> str:
    utc = moment.astimezone(datetime.UTC)
    return (
        f'<time datetime="{utc.strftime("%Y-%m-%dT%H:%M:%SZ")}">'
        f"{utc.strftime('%Y-%m-%d %H:%M')} UTC</time>"
    )
