"""Reporters: one module per format, one signature, chosen from a dict.

Each reporter is ``write(report, stream)``; modules are imported only when
their format is asked for, so ``sarif_om`` costs nothing on a text run. The
reports for people (text, GitHub, HTML) also take a ``Display``: how to show the
run, which is the reader's choice and not part of what the run found. The
machine formats (JSON, SARIF) show everything and take none; JUnit takes one for
``fail_on`` alone, since a CI system paints a failed test red.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TextIO

from scanner.findings.records import Finding
from scanner.findings.report import Report


@dataclass(frozen=True, slots=True)
class Display:
    """How the reports for people show a run: the reader's options, not the run's."""

    show_suppressed: bool = False
    """List suppressed findings (``--show-suppressed``); they are counted either way."""
    color: bool = False
    """ANSI colours (``--color``; by default on a terminal: ``scanner.console.color_on``)."""
    verbose: bool = False
    """Count skipped non-Kubernetes documents in the summary line (``--verbose``)."""
    fail_on: str = "error"
    """``--fail-on``: the lowest level that fails the run (``never``: none). JUnit marks
    only findings at or above it as failures."""

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
    "junit": ("scanner.reporters.junit", True),
    "html": ("scanner.reporters.html", True),
    "policyreport": ("scanner.reporters.policyreport", False),
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
