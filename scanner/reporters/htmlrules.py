"""The Rules section of the HTML report: the documentation of the rules that fired.

A report is read for its findings: each rule with a finding on the page (or named
by a notification or the drift table) gets its summary, description and remediation,
rendered from the Markdown of its file (``markdown``), its facts, where it is defined
and a link to its documentation when that is a plain http(s) URL. The other rules
of the run are named in one line, so the page still says what was checked.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Collection, Sequence
from pathlib import Path

from scanner.findings.records import Finding
from scanner.reporters.htmltext import LocalPaths, badge, plain_web_url, rule_anchor, text
from scanner.reporters.markdown import render as markdown
from scanner.reporters.tally import plural
from scanner.ruleset.docs import RuleDoc


def rules_section(
    rules: Sequence[RuleDoc],
    visible: Sequence[Finding],
    documented: Collection[str],
    paths: LocalPaths,
) -> str:
    listed: Counter[str] = Counter(finding.rule_id for finding in visible)
    fired = [rule for rule in rules if rule.id in documented]
    out = f'<section id="rules">\n<h2>Rules ({len(fired):,} with findings or notes)</h2>\n'
    for rule in fired:
        facts = [f"level {badge(str(rule.level))}", f"subject {text(rule.subject)}"]
        if rule.security_severity is not None:
            facts.append(f"security severity {rule.security_severity:g}")
        if rule.tags:
            facts.append("tags " + ", ".join(text(tag) for tag in rule.tags))
        facts.append(plural(listed[rule.id], "finding") + " listed")
        out += (
            f'<section class="rule" id="{rule_anchor(rule.id)}">\n'
            f"<h3>{text(rule.id)} {text(rule.name)}</h3>\n"
            f'<p class="muted">{" · ".join(facts)}</p>\n'
            f"{markdown(rule.summary)}{markdown(rule.description)}"
            f"<p><strong>Remediation:</strong></p>\n{markdown(rule.remediation)}"
            f'<p class="muted">Defined in <code>{text(rule_file(rule.source, paths))}</code>'
        )
        if plain_web_url(rule.uri):
            link = text(rule.uri)
            out += f'; documentation: <a href="{link}" rel="noopener noreferrer">{link}</a>'
        out += ".</p>\n</section>\n"
    quiet = [rule for rule in rules if rule.id not in documented]
    if quiet:
        names = ", ".join(f"<code>{text(rule.id)}</code> {text(rule.name)}" for rule in quiet)
        out += (
            f'<p class="quiet">{plural(len(quiet), "other rule")} of the run with no findings '
            f"here (<code>poolgate rules show ID</code> documents each): {names}.</p>\n"
        )
    return out + "</section>\n"


def rule_file(source: str, paths: LocalPaths) -> str:
    """A rule's file: ``bundled: NAME`` for poolgate's own rules; else repository-
    relative, or by its directory and name outside the repository."""
    from scanner.ruleset.load import bundled_rules_dir  # loaded already by the run

    if os.path.isabs(source) and os.path.dirname(source) == str(bundled_rules_dir()):
        return f"bundled: {Path(source).name}"
    return paths.path(source, keep=2)
