"""The report options ``scan`` and ``audit`` share, and the one loop that writes
their reports: each ``--format`` with its ``--output``, each shown as its reader
asked (``scanner.reporters.Display``), in colour as ``--color`` says.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING

import click

from scanner import console
from scanner.cli.options import option_group
from scanner.errors import UsageError
from scanner.findings.records import Level
from scanner.reporters import FORMATS, Display, Writer

if TYPE_CHECKING:
    from scanner.findings.drift import Drift
    from scanner.findings.report import Report
    from scanner.reporters.output import Destination


@dataclass(frozen=True, slots=True)
class ReportOptions:
    """``--format``, ``--output``, ``--fail-on``, ``--min-level`` and ``--show-suppressed``."""

    formats: tuple[str, ...]
    outputs: tuple[str, ...]
    fail_on: str
    min_level: str
    show_suppressed: bool

    def __post_init__(self) -> None:
        """A run never fails on findings it does not show: ``--min-level`` above
        ``--fail-on`` is a usage error, before any work."""
        if self.fail_on != "never" and self.shown_from > Level.parse(self.fail_on):
            raise UsageError(
                f"--min-level {self.min_level} would hide {self.fail_on} findings "
                f"that --fail-on {self.fail_on} fails the run on",
                hint=f"lower --min-level to {self.fail_on} or raise --fail-on to {self.min_level}",
            )

    @property
    def shown_from(self) -> Level:
        """The lowest level reports show (``--min-level``)."""
        return Level.parse(self.min_level)

    def destinations(self) -> list[Destination]:
        """Each format paired with its output, checked before any work (``output.pair``)."""
        from scanner.reporters import output

        return output.pair(self.formats, self.outputs, _default_format())

    def display(self, verbose: bool) -> Display:
        return Display(show_suppressed=self.show_suppressed, verbose=verbose, fail_on=self.fail_on)


report_options = option_group(
    "reports",
    ReportOptions,
    [
        click.option(
            "--format",
            "formats",
            multiple=True,
            type=click.Choice(FORMATS),
            help="Report format (repeatable, paired with --output). Default: github under "
            "GitHub Actions, else text.",
        ),
        click.option(
            "--output", "-o", "outputs", multiple=True, help="Report file for each --format."
        ),
        click.option(
            "--fail-on",
            type=click.Choice(["error", "warning", "note", "never"]),
            default="error",
            show_default=True,
            help="Lowest level that makes the exit code 1.",
        ),
        click.option(
            "--min-level",
            type=click.Choice(["error", "warning", "note"]),
            default="note",
            show_default=True,
            help="Lowest level reports show (and --write-baseline records); the rest are "
            "counted as hidden. May not be above --fail-on.",
        ),
        click.option(
            "--show-suppressed",
            is_flag=True,
            help="Show suppressed findings in text and HTML reports.",
        ),
    ],
)


def write_reports(
    report: Report,
    destinations: Sequence[Destination],
    display: Display,
    changes: Drift | None = None,
    writers: Mapping[str, Writer] | None = None,
) -> None:
    """Write ``report`` to each destination as ``display`` says, with what changed since
    a previous report (``--compare``) where the format can carry it. ``writers``:
    formats written otherwise than by default (an audit's PolicyReports carry when the
    cluster was read and the objects' uids)."""
    from scanner.reporters import output, writer_for

    for destination in destinations:
        shown = replace(display, color=_color(destination))
        special = writers.get(destination.format) if writers is not None else None
        write = special or writer_for(destination.format, shown)
        if changes is not None:
            from scanner.reporters import drift as drift_report

            write = drift_report.wrap(destination.format, write, changes, shown)
        output.write(destination, partial(write, report))


def _color(destination: Destination) -> bool:
    """Colour for a text report on standard output as ``--color`` says (on a terminal
    by default); a report written to a file never has any."""
    return destination.is_stdout and destination.format == "text" and console.color_on(sys.stdout)


def _default_format() -> str:
    return "github" if os.environ.get("GITHUB_ACTIONS") == "true" else "text"
