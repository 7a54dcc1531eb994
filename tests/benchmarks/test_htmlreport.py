"""The generated HTML report the benchmark measures, and its line in the report (no
timing is asserted here)."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import pytest

from benchmarks import browser, htmlreport
from benchmarks.htmlreport import AgainstPage, HtmlResult, lines, measure, synthetic_report
from benchmarks.run import Report, format_report, parse_args
from scanner.reporters import html


def test_exactly_the_findings_asked_for_spread_like_an_audit() -> None:
    report = synthetic_report(2_000, seed=3)
    assert len(report.findings) == 2_000
    namespaces = Counter(f.ref.namespace for f in report.findings if f.ref is not None)
    assert len(namespaces) == htmlreport.NAMESPACES + 1  # and the cluster-scoped Nodes
    assert report.fleet is not None and len(report.fleet.pools) == htmlreport.POOLS
    assert 3 <= len(report.findings) / report.stats.subjects <= 7
    # Same seed, same page; the bundled rules' own documentation.
    first, second = io.StringIO(), io.StringIO()
    html.write(report, first)
    html.write(synthetic_report(2_000, seed=3), second)
    assert first.getvalue() == second.getvalue()
    assert {doc.id for doc in report.rules} >= {"PG301", "PG501", "PG601"}


def test_without_chromium_the_size_is_still_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(browser, "find_chromium", lambda: None)
    result = measure(tmp_path / "r.html", repeats=1, findings=500)
    assert result.findings == 500
    assert result.bytes == (tmp_path / "r.html").stat().st_size
    assert result.browser == "not installed" and result.load == []
    assert lines(result)[1] == "  headless Chromium: not installed"


def test_against_another_checkout_its_reporter_writes_the_same_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--against``: the page of another checkout (here this one again, so the same
    bytes), written in a child process whose ``scanner`` is that checkout's."""
    monkeypatch.setattr(browser, "find_chromium", lambda: None)
    root = Path(__file__).resolve().parents[2]
    result = measure(tmp_path / "r.html", repeats=1, findings=300, against=root)
    assert result.against is not None and result.against.error is None
    assert len(result.against.write) == 1
    mine, theirs = (tmp_path / "r.html").read_bytes(), (tmp_path / "against.html").read_bytes()
    assert theirs == mine and result.against.bytes == result.bytes
    assert lines(result)[2].startswith(f"  against {root}: ")
    broken = tmp_path / "not-a-checkout"
    broken.mkdir()
    failed = measure(tmp_path / "r.html", repeats=1, findings=300, against=broken)
    assert failed.against is not None and failed.against.error is not None
    assert lines(failed)[2].startswith(f"  against {broken}: FAILED (exit 1")


def test_the_report_line() -> None:
    result = HtmlResult(10_000, 2_084, 5_600_000, [0.1, 0.2, 0.3], [0.6, 0.7, 0.9], 0.12, 0.18)
    assert lines(result) == [
        "html report, 10,000 findings on 2,084 objects: 5.6 MB, written in 0.200 s",
        "  headless Chromium: loaded in 0.700 s (median of 3); text filter over every "
        "finding 0.120 s, level filter 0.180 s",
    ]
    result.against = AgainstPage("../main", 5_200_000, [0.1], [2.0, 3.0, 3.5])
    assert lines(result)[2] == (
        "  against ../main: 5.2 MB, written in 0.100 s, loaded in 3.000 s (median of 3, "
        "alternating); this/against load 0.23x"
    )
    assert lines(None) == ["html report: skipped (--no-html)"]
    assert "html report: skipped (--no-html)" in format_report(Report(machine=_machine()))
    args = parse_args(["--quick", "--no-html"])
    assert args.html is False and args.html_findings == 10_000
    assert parse_args(["--html-findings", "500"]).html_findings == 500


def _machine() -> dict[str, object]:
    return {
        "python": "3",
        "platform": "p",
        "cpus": 2,
        "pyyaml": "6",
        "libyaml": True,
        "loadavg_start": None,
    }
