"""Every rule's fixtures, under both CEL engines, plus the meta-tests that keep the catalog honest.

Two independent CEL implementations (the C++ runtime and cel-python) must give
identical findings on every fixture file: the strongest evidence that a rule
means what it says.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from scanner.pipeline import Ruleset, ScanOptions, load_ruleset
from scanner.pipeline.fixtures import FixtureResult, check_file, fixture_files, run
from scanner.ruleset import catalog

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "rules"
RULE_FILE = re.compile(r"^(?P<id>[A-Z]+\d{3})-(?P<name>[a-z0-9-]+)\.yaml$")


@cache
def ruleset(engine: str) -> Ruleset:
    return load_ruleset(ScanOptions(engine=engine, enable_all=True))


@cache
def results(engine: str) -> dict[Path, FixtureResult]:
    return {result.path: result for result in run(FIXTURES, ruleset(engine))}


FIXTURE_FILES = sorted(
    path for path in FIXTURES.glob("*/*") if path.suffix in (".yaml", ".yml", ".json")
)


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_matches_its_markers(path: Path) -> None:
    result = results("cpp")[path]
    assert result.ok, result.explain()


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_both_engines_give_identical_findings(path: Path) -> None:
    cpp = results("cpp")[path]
    python = check_file(
        path, path.parent.name, ruleset("python"), expect_findings=path.name.startswith("fire")
    )
    assert python.findings == cpp.findings
    assert python.ok, python.explain()


def test_every_rule_has_a_firing_and_a_near_miss_fixture() -> None:
    for rule in ruleset("cpp").rules:
        directory = FIXTURES / rule.id
        assert directory.is_dir(), f"{rule.id} has no fixtures/rules/{rule.id}/"
        fire, passing = fixture_files(directory)
        assert fire, f"{rule.id} has no fire*.yaml fixture"
        assert passing, f"{rule.id} has no pass*.yaml near-miss fixture"


def test_rule_ids_are_unique_and_files_are_named_after_them() -> None:
    rules = ruleset("cpp").rules
    assert len({rule.id for rule in rules}) == len(rules)
    for rule in rules:
        match = RULE_FILE.match(Path(rule.doc.source).name)
        assert match, f"{rule.doc.source}: file name must be <ID>-<name>.yaml"
        assert (match["id"], match["name"]) == (rule.id, rule.doc.name)


def test_remediations_end_with_a_period() -> None:
    for rule in ruleset("cpp").rules:
        assert rule.doc.remediation.endswith("."), rule.id


def test_docs_are_generated_and_current() -> None:
    """docs/rules.md is `poolgate rules list --format markdown`; regenerate it when rules change."""
    expected = catalog.render_markdown(ruleset("cpp").rules)
    assert (ROOT / "docs" / "rules.md").read_text() == expected
