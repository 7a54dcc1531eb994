"""The drift of an audit or a scan (``scanner.findings.drift``) in the reports that can
carry it: a section of the text report, the HTML page's changes, the JSON report's
``drift`` section and SARIF's baseline states."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TextIO

from scanner.findings.drift import NEW, RESOLVED, UNCHANGED, UNVERIFIED, Drift, counts
from scanner.findings.records import run_fingerprints
from scanner.findings.report import Report
from scanner.reporters import PLAIN, Display, Writer


def wrap(fmt: str, write: Writer, drift: Drift, display: Display = PLAIN) -> Writer:
    """``write`` for format ``fmt``, with the drift added where that format can carry it;
    ``display``: the one ``write`` was made with (the HTML page is written anew)."""
    if fmt == "text":
        return lambda report, stream: _text(report, stream, write, drift)
    if fmt == "json":
        return lambda report, stream: _json(report, stream, drift)
    if fmt == "sarif":
        return lambda report, stream: _sarif(report, stream, drift)
    if fmt == "html":
        return lambda report, stream: _html(report, stream, drift, display)
    return write


def _text(report: Report, stream: TextIO, write: Writer, drift: Drift) -> None:
    from scanner.reporters.text import safe  # same escaping as the rest of the report

    numbers = counts(drift)
    head = ", ".join(f"{numbers[key]} {key}" for key in (NEW, UNCHANGED, RESOLVED))
    if numbers[UNVERIFIED]:
        head += f", {numbers[UNVERIFIED]} unverified ({drift.unchecked})"
    stream.write(f"Since {drift.since} ({safe(drift.previous)}): {head}\n")
    for finding in drift.new:
        stream.write(
            f"  {NEW:<10} {safe(finding.location.uri)} {finding.level} {finding.rule_id} "
            f"{safe(finding.message)}\n"
        )
    for label, entries in ((RESOLVED, drift.resolved), (UNVERIFIED, drift.unverified)):
        for entry in entries:
            uri, level, rule_id, message = _previous_fields(entry)
            fields = " ".join(safe(field) for field in (uri, level, rule_id, message))
            stream.write(f"  {label:<10} {fields}\n")
    stream.write("\n")
    write(report, stream)


def _previous_fields(entry: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """(uri, level, rule id, message) of a finding of the previous JSON report."""
    location = entry.get("location")
    uri = location.get("uri", "") if isinstance(location, dict) else ""
    return (
        str(uri),
        str(entry.get("level", "")),
        str(entry.get("ruleId", "")),
        str(entry.get("message", "")),
    )


def _html(report: Report, stream: TextIO, drift: Drift, display: Display) -> None:
    from scanner.reporters import html

    numbers = counts(drift)
    rows = [
        html.ChangeRow(
            NEW,
            f.location.uri,
            str(f.level),
            f.rule_id,
            f.message,
            f.ref.logical_name if f.ref is not None else "",
        )
        for f in drift.new
    ]
    for state, entries in ((RESOLVED, drift.resolved), (UNVERIFIED, drift.unverified)):
        rows += [
            html.ChangeRow(state, *_previous_fields(entry), _previous_object(entry))
            for entry in entries
        ]
    changes = html.Changes(
        previous=drift.previous,
        counts=[
            (NEW, numbers[NEW]),
            (UNCHANGED, numbers[UNCHANGED]),
            (RESOLVED, numbers[RESOLVED]),
            (UNVERIFIED, numbers[UNVERIFIED]),
        ],
        rows=rows,
        states=drift.states(),
        since=drift.since,
    )
    html.write(report, stream, changes, display=display)


def _previous_object(entry: Mapping[str, Any]) -> str:
    """``namespace/Kind/name`` of a finding of the previous JSON report, or ``""``."""
    obj = entry.get("object")
    if not isinstance(obj, dict):
        return ""
    parts = [obj.get("namespace"), obj.get("kind"), obj.get("name")]
    return "/".join(str(part) for part in parts if isinstance(part, str) and part)


def _json(report: Report, stream: TextIO, drift: Drift) -> None:
    """The JSON report, written in pieces like any other (scanner/reporters/json.py)."""
    from scanner.reporters import json as json_report

    # The fingerprints the findings have in the report (repeats numbered).
    prints = dict(zip(map(id, report.findings), run_fingerprints(report.findings), strict=True))
    section = {
        "previous": drift.previous,
        "counts": counts(drift),
        "new": [prints.get(id(finding), finding.fingerprint) for finding in drift.new],
        "unchanged": [prints.get(id(finding), finding.fingerprint) for finding in drift.unchanged],
        "resolved": list(drift.resolved),
        "unverified": list(drift.unverified),
    }
    json_report.write(report, stream, states=drift.states(), sections={"drift": section})


def _sarif(report: Report, stream: TextIO, drift: Drift) -> None:
    """The SARIF log, written in pieces like any other (scanner/reporters/sarif.py)."""
    from scanner.reporters import sarif

    sarif.write(report, stream, states=drift.states())
