"""Display options belong to the writers for people, not to the report: the text,
GitHub and HTML writers show a run as a ``Display`` says; the machine formats
write the same bytes whatever the reader's options."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from scanner.findings.report import Report
from scanner.reporters import FORMATS, PLAIN, Display

Render = Callable[..., str]

EVERYTHING = Display(show_suppressed=True, color=True, verbose=True)
JUSTIFICATION = "pool is untainted during migration"
"""The suppressed finding's justification in the standard report (conftest)."""

FOR_PEOPLE = ("text", "github", "html")


def test_every_format_is_either_for_people_or_for_machines() -> None:
    assert set(FOR_PEOPLE) <= set(FORMATS)
    assert set(FORMATS) - set(FOR_PEOPLE) == {"json", "sarif", "junit", "policyreport"}


@pytest.mark.parametrize("fmt", sorted(set(FORMATS) - set(FOR_PEOPLE)))
def test_machine_formats_write_the_same_bytes_whatever_the_display(
    report: Report, render: Render, fmt: str
) -> None:
    plain = _timeless(render(report, fmt))
    for display in (PLAIN, EVERYTHING, Display(show_suppressed=True), Display(color=True)):
        assert _timeless(render(report, fmt, display)) == plain


def _timeless(text: str) -> str:
    """``text`` without the time of writing: a scan's PolicyReports are stamped with
    it (there is no capture time), and each render runs at another moment."""
    return re.sub(r"(?m)^(\s*)(seconds|nanos): \d+$", r"\1\2: T", text)


@pytest.mark.parametrize("fmt", FOR_PEOPLE)
def test_writers_for_people_list_suppressed_findings_only_when_asked(
    report: Report, render: Render, fmt: str
) -> None:
    assert JUSTIFICATION not in render(report, fmt)
    assert JUSTIFICATION in render(report, fmt, Display(show_suppressed=True))


def test_only_the_text_report_is_ever_coloured(report: Report, render: Render) -> None:
    assert "\x1b[" in render(report, "text", Display(color=True))
    for fmt in FORMATS:
        assert "\x1b[" not in render(report, fmt, PLAIN)
        if fmt != "text":
            assert "\x1b[" not in render(report, fmt, EVERYTHING)


def test_visible_keeps_the_order_and_drops_only_suppressed_findings(report: Report) -> None:
    shown = PLAIN.visible(report.findings)
    assert shown == [f for f in report.findings if f.suppression is None]
    assert len(shown) < len(report.findings)
    assert EVERYTHING.visible(report.findings) == list(report.findings)
