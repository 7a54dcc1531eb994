"""What a run produced: its findings, notifications, rules and counts, what it read
and the GPU fleet it saw, for any reporter."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scanner.config.provenance import PolicyRecord
from scanner.findings.fleet import Fleet
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
class Scanned:
    """What a run read: manifest paths (``scan``) or a cluster (``audit``)."""

    paths: tuple[str, ...] = ()
    """The paths given to ``scan``, repository-relative (POSIX) inside the repository."""
    context_paths: tuple[str, ...] = ()
    """``--context`` paths: read for joins, not reported on."""
    cluster: str = ""
    """The kubeconfig context an audit read (or a snapshot was taken from)."""
    snapshot: str = ""
    """``audit --snapshot FILE``: the file, as the paths above."""
    read_at: datetime.datetime | None = None
    """When the cluster was read (an audit)."""


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
    scanned: Scanned | None = None
    """What the run read; ``None`` when the caller did not say."""
    fleet: Fleet | None = None
    """The GPU pools the model saw (``scanner.findings.fleet``); ``None`` when not
    recorded."""
    generated_at: datetime.datetime | None = None
    """When the report was made (``report_time``); only the HTML page shows it, so
    the other formats stay the same bytes for the same input."""

    def input_errors(self) -> int:
        """Error notifications: inputs or kinds the run could not read (exit 3)."""
        return sum(1 for note in self.notifications if note.level is Level.ERROR)


def report_time(environ: Mapping[str, str]) -> datetime.datetime:
    """Now, or ``SOURCE_DATE_EPOCH`` when set (reproducible-builds.org): a report made
    twice from the same input with it set is the same bytes."""
    epoch = environ.get("SOURCE_DATE_EPOCH", "").strip()
    if epoch.isdigit():
        try:
            return datetime.datetime.fromtimestamp(int(epoch), datetime.UTC)
        except (OverflowError, OSError, ValueError):
            pass  # out of range: the time of day is the honest answer
    return datetime.datetime.now(datetime.UTC)
