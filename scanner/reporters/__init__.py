"""Reporters: one module per format, one signature, chosen from a dict.

Each reporter is ``write(report, stream)``; modules are imported only when
their format is asked for, so ``sarif_om`` costs nothing on a text run. The
reports for people (text, GitHub, HTML) also take a ``Display``: how to show the
run, which is the reader's choice and not part of what the run found. The
machine formats (JSON, SARIF, JUnit) show everything and take none.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TextIO

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


@dataclass(frozen=True, slots=True)
class Display:
    """How the reports for people show a run: the reader's options, not the run's."""

    show_suppressed: bool = False
    """List suppressed findings (``--show-suppressed``); they are counted either way."""
    color: bool = False
    """ANSI colours: the text report on a terminal, unless ``NO_COLOR`` is set."""
    verbose: bool = False
    """Count skipped non-Kubernetes documents in the summary line (``--verbose``)."""

    def visible(self, findings: Sequence[Finding]) -> list[Finding]:
        """The findings listed: suppressed ones only with ``show_suppressed``."""
        if self.show_suppressed:
            return list(findings)
        return [finding for finding in findings if finding.suppression is None]


PLAIN = Display()
"""Suppressed findings not listed, no colour, not verbose: the default."""

Writer = Callable[[Report, TextIO], None]

_MODULES: dict[str, tuple[str, bool]] = {
    # format: (its module, whether its ``write`` takes a ``display``)
    "text": ("scanner.reporters.text", True),
    "json": ("scanner.reporters.json", False),
    "sarif": ("scanner.reporters.sarif", False),
    "github": ("scanner.reporters.github", True),
    "junit": ("scanner.reporters.junit", False),
    "html": ("scanner.reporters.html", True),
}

FORMATS: tuple[str, ...] = tuple(_MODULES)


def writer_for(fmt: str, display: Display = PLAIN) -> Writer:
    """The ``write`` function of format ``fmt`` (one of ``FORMATS``), showing the run
    as ``display`` says when the format is one for people."""
    name, displayed = _MODULES[fmt]
    module = importlib.import_module(name)
    if displayed:
        return partial(module.write, display=display)
    write: Writer = module.write
    return write
