"""Reporters: one module per format, one signature, chosen from a dict.

Each reporter is ``write(report, stream)``; modules are imported only when
their format is asked for, so ``sarif_om`` costs nothing on a text run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from scanner.findings import Finding, Level, Notification
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


Writer = Callable[[Report, TextIO], None]

_MODULES = {
    "text": "scanner.reporters.text",
    "json": "scanner.reporters.json",
    "sarif": "scanner.reporters.sarif",
    "github": "scanner.reporters.github",
    "junit": "scanner.reporters.junit",
    "html": "scanner.reporters.html",
    "policyreport": "scanner.reporters.policyreport",
}

FORMATS: tuple[str, ...] = tuple(_MODULES)


def writer_for(fmt: str) -> Writer:
    """The ``write`` function of format ``fmt`` (one of ``FORMATS``)."""
    module = importlib.import_module(_MODULES[fmt])
    write: Writer = module.write
    return write
