"""Counting findings the same way in every reporter.

The text, GitHub and JSON reporters all print a summary; counting in one place
keeps "3 findings (2 errors, 1 warning)" identical across formats, and keeps
suppressed findings and rule errors out of the finding counts everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scanner.findings.records import Finding, Level, Outcome
from scanner.ruleset.docs import RuleDoc


@dataclass(frozen=True, slots=True)
class Tally:
    """Counts over one run's findings.

    ``errors``/``warnings``/``notes`` count violations that are not suppressed;
    ``rule_errors`` counts rules that could not be evaluated on a subject (not
    suppressed); ``suppressed`` counts every suppressed finding, whatever its outcome.
    """

    errors: int = 0
    warnings: int = 0
    notes: int = 0
    rule_errors: int = 0
    suppressed: int = 0

    @property
    def findings(self) -> int:
        return self.errors + self.warnings + self.notes


def tally(findings: Iterable[Finding]) -> Tally:
    """Count ``findings`` by level, keeping rule errors and suppressed ones apart."""
    by_level = {Level.ERROR: 0, Level.WARNING: 0, Level.NOTE: 0}
    rule_errors = suppressed = 0
    for finding in findings:
        if finding.suppression is not None:
            suppressed += 1
        elif finding.outcome is Outcome.ERROR:
            rule_errors += 1
        else:
            by_level[finding.level] += 1
    return Tally(
        errors=by_level[Level.ERROR],
        warnings=by_level[Level.WARNING],
        notes=by_level[Level.NOTE],
        rule_errors=rule_errors,
        suppressed=suppressed,
    )


@dataclass(frozen=True, slots=True)
class RuleCount:
    """The violations of one rule at one level that count (not suppressed)."""

    rule_id: str
    name: str
    """The rule's name; empty when the run did not list the rule."""
    level: Level
    count: int


def by_rule(findings: Iterable[Finding], rules: Sequence[RuleDoc]) -> list[RuleCount]:
    """Counts per rule (and level), most severe first, then by rule id; the same
    findings ``tally`` counts as errors, warnings and notes."""
    names = {rule.id: rule.name for rule in rules}
    counts: dict[tuple[str, Level], int] = {}
    for finding in findings:
        if finding.suppression is None and finding.outcome is Outcome.FAIL:
            key = (finding.rule_id, finding.level)
            counts[key] = counts.get(key, 0) + 1
    rows = [
        RuleCount(rule_id, names.get(rule_id, ""), level, count)
        for (rule_id, level), count in counts.items()
    ]
    return sorted(rows, key=lambda row: (-row.level, row.rule_id))


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 error``, ``2 errors``; ``nouns`` for irregular plurals."""
    return f"{count} {noun if count == 1 else (nouns or noun + 's')}"


def summary_line(
    counts: Tally,
    *,
    files: int,
    objects: int,
    suppressed_shown: bool,
    skipped_documents: int | None = None,
    baselined: int = 0,
    incomplete: int = 0,
    excluded: int = 0,
    hidden: int = 0,
) -> str:
    """One line a person reads last: what was found, where, and what was left out.

    ``skipped_documents`` is given only in verbose mode; ``None`` leaves it out.
    ``incomplete``: error notifications (an input not read or rendered, a kind not
    listed), so "no findings" never reads as a clean run about what was not seen.
    ``excluded``: files the exclude patterns left out; ``hidden``: findings below
    ``--min-level``. Both are said, so what a report leaves out is never silent.
    """
    if counts.findings:
        parts = [
            plural(n, noun)
            for n, noun in (
                (counts.errors, "error"),
                (counts.warnings, "warning"),
                (counts.notes, "note"),
            )
            if n
        ]
        head = f"{plural(counts.findings, 'finding')} ({', '.join(parts)})"
    else:
        head = "no findings"
    scope = [plural(files, "file")] if files or not objects else []
    if objects:
        scope.append(plural(objects, "object"))
    line = f"{head} in {', '.join(scope)}"
    extras: list[str] = []
    if counts.suppressed:
        shown = "shown" if suppressed_shown else "hidden"
        extras.append(f"{plural(counts.suppressed, 'suppressed finding')} {shown}")
    if baselined:
        extras.append(f"{plural(baselined, 'finding')} in the baseline hidden")
    if hidden:
        extras.append(f"{plural(hidden, 'finding')} below --min-level hidden")
    if excluded:
        extras.append(f"{plural(excluded, 'file')} excluded")
    if counts.rule_errors:
        extras.append(f"{plural(counts.rule_errors, 'rule error')} (results incomplete)")
    if incomplete:
        extras.append(f"{plural(incomplete, 'input error')} above (results incomplete)")
    if skipped_documents is not None:
        extras.append(f"{plural(skipped_documents, 'non-Kubernetes document')} skipped")
    return "; ".join([line, *extras])
