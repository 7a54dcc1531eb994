"""What a run produced: its findings, notifications, rules and counts, for any reporter."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from scanner.config.provenance import PolicyRecord
from scanner.findings.records import Finding, Level, Notification
from scanner.ruleset.docs import RuleDoc


@dataclass(frozen=True, slots=True)
class RunStats:
    files: int = 0
    objects: int = 0
    skipped_documents: int = 0
    """Documents that are not Kubernetes objects (skipped quietly)."""
    subjects: int = 0
    baselined: int = 0
    """Findings left out because a ``--baseline`` file already holds them."""
    unfinished: frozenset[str] = frozenset()
    """Rules that did not get through all their subjects before an audit's deadline."""
    excluded: int = 0
    """Manifest files the exclude patterns left out (``--exclude``, ``spec.exclude``)."""
    hidden: int = 0
    """Findings left out of the reports for being below ``--min-level``."""


@dataclass(frozen=True, slots=True)
class Report:
    """What a run produced, in deterministic order, ready for any reporter."""

    findings: Sequence[Finding]
    """All findings, sorted; suppressed ones included (reporters decide what to show)."""
    notifications: Sequence[Notification]
    rules: Sequence[RuleDoc]
    """Every rule that was enabled for the run, sorted by id."""
    tool_version: str
    repo_root: str
    """Absolute path the artifact URIs are relative to (SARIF ``%SRCROOT%``)."""
    stats: RunStats = field(default_factory=RunStats)
    policy: PolicyRecord | None = None
    """The configuration, rule files and baseline the run used, with digests
    (``scanner.config.provenance``); ``None`` when the caller did not record it."""

    def input_errors(self) -> int:
        """Error notifications: inputs or kinds the run could not read (exit 3)."""
        return sum(1 for note in self.notifications if note.level is Level.ERROR)
