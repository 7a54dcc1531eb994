"""Reporters: one module per format, one signature, chosen from a dict.

Each reporter is ``write(report, stream)``; modules are imported only when
their format is asked for, so ``sarif_om`` costs nothing on a text run.
"""

from __future__ import annotations

import datetime
import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from scanner.findings import Finding, Level, Notification
from scanner.fleet import Fleet
from scanner.provenance import PolicyRecord
from scanner.ruledoc import RuleDoc


@dataclass(frozen=True, slots=True)
class RunStats:
    files: int = 0
    objects: int = 0
    skipped_documents: int = 0
    """Documents that are not Kubernetes objects (skipped quietly)."""
    subjects: int = 0
    baselined: int = 0
    """Findings left out because a ``--baseline`` file already holds them."""


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
    (``scanner.provenance``); ``None`` when the caller did not record it."""
    scanned: Scanned | None = None
    """What the run read; ``None`` when the caller did not say."""
    fleet: Fleet | None = None
    """The GPU pools the model saw (``scanner.fleet``); ``None`` when not recorded."""
    generated_at: datetime.datetime | None = None
    """When the report was made (``report_time``); only the HTML page shows it, so
    the other formats stay the same bytes for the same input."""
    show_suppressed: bool = False
    color: bool = False
    verbose: bool = False

    def visible(self) -> list[Finding]:
        """Findings that text-like reporters show."""
        if self.show_suppressed:
            return list(self.findings)
        return [finding for finding in self.findings if finding.suppression is None]

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


Writer = Callable[[Report, TextIO], None]

_MODULES = {
    "text": "scanner.reporters.text",
    "json": "scanner.reporters.json",
    "sarif": "scanner.reporters.sarif",
    "github": "scanner.reporters.github",
    "junit": "scanner.reporters.junit",
    "html": "scanner.reporters.html",
}

FORMATS: tuple[str, ...] = tuple(_MODULES)


def writer_for(fmt: str) -> Writer:
    """The ``write`` function of format ``fmt`` (one of ``FORMATS``)."""
    module = importlib.import_module(_MODULES[fmt])
    write: Writer = module.write
    return write
