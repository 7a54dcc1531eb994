"""An object read from a cluster has no file and no lines: no report gives its
findings a made-up ``:1:1`` position (issue 25). Through the CLI, every format."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from .conftest import HERE, cli

DUMP = HERE / "controlled" / "dump.yaml"


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """One audit of a kubectl dump, written in every format that has positions."""
    out = tmp_path_factory.mktemp("reports")
    formats = ("text", "json", "sarif", "junit", "github", "html")
    args = ["audit", "--snapshot", str(DUMP), "--context", "prod"]
    for fmt in formats:
        args += ["--format", fmt, "--output", str(out / fmt)]
    result = cli(*args)
    assert result.returncode == 1, result.stderr
    return {fmt: (out / fmt).read_text() for fmt in formats}


def test_text_and_junit_name_the_object_without_a_position(reports: dict[str, str]) -> None:
    for fmt in ("text", "junit"):
        lines = [line for line in reports[fmt].splitlines() if "cluster://prod/" in line]
        assert lines, fmt
        assert not [line for line in lines if re.search(r"cluster://\S+:\d+", line)], fmt
    assert "cluster://prod/team-a/Deployment/embedder error PG104 " in reports["text"]
    suites = ET.fromstring(reports["junit"])
    assert suites.findall(".//failure")


def test_json_positions_are_null(reports: dict[str, str]) -> None:
    findings = json.loads(reports["json"])["findings"]
    assert findings
    for finding in findings:
        assert finding["location"]["uri"].startswith("cluster://prod/")
        assert (finding["location"]["line"], finding["location"]["column"]) == (None, None)


def test_sarif_results_are_logical_locations_only(reports: dict[str, str]) -> None:
    results = json.loads(reports["sarif"])["runs"][0]["results"]
    assert results
    for result in results:
        [location] = result["locations"]
        assert set(location) == {"logicalLocations"}, location
        [logical] = location["logicalLocations"]
        assert logical["properties"]["uri"].startswith("cluster://prod/")
        assert logical["fullyQualifiedName"]


def test_github_annotations_have_no_file_or_line(reports: dict[str, str]) -> None:
    commands = [line for line in reports["github"].splitlines() if line.startswith("::")]
    assert commands
    assert not [line for line in commands if "file=" in line or "line=" in line]
    assert "::cluster://prod/team-a/Deployment/embedder: " in reports["github"]


def test_html_shows_no_position(reports: dict[str, str]) -> None:
    assert not re.search(r">\s*[01]:[01]\s*<", reports["html"])  # the old fake cell


def test_the_sarif_log_still_passes_its_schema(reports: dict[str, str]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((HERE.parent / "schemas" / "sarif-schema-2.1.0.json").read_text())
    jsonschema.validate(json.loads(reports["sarif"]), schema)
