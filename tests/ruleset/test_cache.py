"""Rule files that passed the schema are remembered by content, and only that is skipped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scanner.cel import get_engine
from scanner.errors import RuleLoadError
from scanner.ruleset import cache as rulecache
from scanner.ruleset import load as rules
from scanner.runtime import cachedir

RULE = """\
id: PG901
name: cached-rule
level: warning
summary: A rule for the validation cache.
description: Exercises the cache.
remediation: Nothing to do.
subject: workload
violations: "[]"
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("POOLGATE_CACHE_DIR", str(directory))
    return directory


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every body the schema validator is asked about."""
    seen: list[Any] = []
    real = rules._schema_validator()

    class Counting:
        def iter_errors(self, body: Any) -> Any:
            seen.append(body)
            return real.iter_errors(body)

    monkeypatch.setattr(rules, "_schema_validator", Counting)
    return seen


def _write(directory: Path, text: str) -> Path:
    directory.mkdir(exist_ok=True)
    (directory / "PG901-cached-rule.yaml").write_text(text)
    return directory


def test_a_valid_rule_is_validated_once_then_remembered(
    tmp_path: Path, cache: Path, validations: list[Any]
) -> None:
    directory = _write(tmp_path / "rules", RULE)
    engine = get_engine("cpp")
    first = rules.load_rules([directory], engine)
    second = rules.load_rules([directory], engine)
    assert len(validations) == 1
    assert [rule.id for rule in first] == [rule.id for rule in second] == ["PG901"]
    assert rulecache.load() == [rulecache.digest(rules._schema_text(), RULE)]


def test_a_changed_rule_is_validated_again(
    tmp_path: Path, cache: Path, validations: list[Any]
) -> None:
    directory = _write(tmp_path / "rules", RULE)
    rules.load_rules([directory], get_engine("cpp"))
    _write(directory, RULE.replace("level: warning", "level: loud"))
    with pytest.raises(RuleLoadError, match="level"):
        rules.load_rules([directory], get_engine("cpp"))
    with pytest.raises(RuleLoadError, match="level"):  # failures are never remembered
        rules.load_rules([directory], get_engine("cpp"))
    assert len(validations) == 3
    assert len(rulecache.load()) == 1


def test_the_schema_is_part_of_the_digest() -> None:
    assert rulecache.digest("{}", RULE) != rulecache.digest('{"type": "object"}', RULE)


def test_an_unwritable_cache_changes_nothing_but_speed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, validations: list[Any]
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("POOLGATE_CACHE_DIR", str(blocker / "poolgate"))
    directory = _write(tmp_path / "rules", RULE)
    for _ in range(2):
        assert [rule.id for rule in rules.load_rules([directory], get_engine("cpp"))] == ["PG901"]
    assert len(validations) == 2
    assert rulecache.load() == []


def test_the_list_is_bounded_and_keeps_the_newest(cache: Path) -> None:
    old = [f"{index:064x}" for index in range(rulecache.MAX_ENTRIES)]
    rulecache.save([], old)
    rulecache.save(old, ["f" * 64])
    kept = rulecache.load()
    assert len(kept) == rulecache.MAX_ENTRIES
    assert kept[-1] == "f" * 64 and old[0] not in kept


def test_garbage_in_the_cache_file_is_ignored(cache: Path) -> None:
    """Lines that are no digest are skipped, even in a file that verifies (a file that
    does not is not read at all: tests/e2e/security/test_cache_trust.py)."""
    cachedir.write(rulecache.FILE_NAME, ("not a digest\n" + "a" * 64 + "\n").encode())
    assert rulecache.load() == ["a" * 64]


def test_cache_location_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("POOLGATE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cachedir.cache_dir() == tmp_path / "poolgate"


# --- what each expression reads ----------------------------------------------------------


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text the CEL parser reads, from an empty memory of earlier analyses."""
    from scanner.cel import analysis, parser

    monkeypatch.setattr(analysis, "_memo", {})
    monkeypatch.setattr(analysis, "_stored", {})
    analysis.analyze_rule.cache_clear()
    seen: list[str] = []
    real = parser.parse

    def counting(source: str) -> Any:
        seen.append(source)
        return real(source)

    monkeypatch.setattr(parser, "parse", counting)
    return seen


def test_a_warm_start_does_not_parse_the_rules(
    cache: Path, parses: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from scanner.cel import analysis

    engine = get_engine("cpp")
    first = rules.load_rules([rules.bundled_rules_dir()], engine)
    assert len(parses) > 50  # every expression, once
    kept = list(cache.glob("cel-analyses-*"))
    assert len(kept) == 1
    readings = {rule.id: rule.analysis for rule in first}
    parses.clear()
    monkeypatch.setattr(analysis, "_memo", {})  # a new process
    analysis.analyze_rule.cache_clear()
    second = rules.load_rules([rules.bundled_rules_dir()], engine)
    assert {rule.id: rule.analysis for rule in second} == readings
    assert parses == []


def test_a_changed_rule_is_parsed_and_a_damaged_cache_is_ignored(
    tmp_path: Path, cache: Path, parses: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from scanner.cel import analysis

    directory = _write(tmp_path / "rules", RULE)
    engine = get_engine("cpp")
    rules.load_rules([directory], engine)
    assert parses == ["[]"]
    _write(directory, RULE.replace('"[]"', '"[] // nothing"'))
    monkeypatch.setattr(analysis, "_memo", {})
    rules.load_rules([directory], engine)
    assert parses == ["[]", "[] // nothing"]
    [kept] = cache.glob("cel-analyses-*")
    kept.write_text("{not json")
    monkeypatch.setattr(analysis, "_memo", {})
    [rule] = rules.load_rules([directory], engine)
    assert parses[-1] == "[] // nothing" and len(parses) == 3
    assert not rule.analysis.reads


def test_a_rule_the_parser_cannot_read_is_refused_with_its_position(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engines compiled it, but what it reads cannot be told: refused, not guessed."""
    from scanner.cel import parser

    directory = _write(tmp_path / "rules", RULE.replace('"[]"', '"[1, 2]"'))

    def refusing(source: str) -> Any:
        raise parser.ParseError("unexpected '2'", source, 4)

    monkeypatch.setattr(parser, "parse", refusing)
    with pytest.raises(RuleLoadError) as raised:
        rules.load_rules([directory], get_engine("cpp"))
    [problem] = raised.value.problems
    assert problem.endswith("violations: CEL unexpected '2' (expression line 1, column 5)")
