"""Rule files that passed the schema are remembered by content, and only that is skipped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scanner import cachedir, rulecache, rules
from scanner.cel import get_engine
from scanner.errors import RuleLoadError

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
    does not is not read at all: tests/security/test_cache_trust.py)."""
    cachedir.write(rulecache.FILE_NAME, ("not a digest\n" + "a" * 64 + "\n").encode())
    assert rulecache.load() == ["a" * 64]


def test_cache_location_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("POOLGATE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cachedir.cache_dir() == tmp_path / "poolgate"
