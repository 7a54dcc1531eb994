"""``poolgate rules`` in a user's repository (issue 25): ``list`` and ``show`` apply the
repository's ``.poolgate.yaml`` (its ruleDirs, enablement and levels), mark audit-only
rules, filter by tag and level and align ids of any length; ``rules test`` finds the
fixtures of the configured rule directories."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from cli_run import ROOT, poolgate

LONG_ID = "ACMEGPUPOL001"  # the longest id a rule may have


@pytest.fixture
def user_repo(tmp_path: Path) -> Path:
    """A repository with its own rule (PG501 under another id), its fixtures beside it
    in the rule directory, and a config that turns PG301 off and PG501 down to a note."""
    (tmp_path / ".git").mkdir()
    rules = tmp_path / "policy" / "rules"
    rules.mkdir(parents=True)
    text = (ROOT / "rules" / "PG501-image-not-digest-pinned.yaml").read_text()
    text = text.replace("id: PG501", f"id: {LONG_ID}", 1)
    text = re.sub(r"(?m)^name: .*$", "name: acme-digest-pin", text, count=1)
    text = re.sub(r"(?m)^tags: .*$", "tags: [acme]", text, count=1)
    (rules / "acme.yaml").write_text(text)
    fixtures = rules / "fixtures" / LONG_ID
    fixtures.mkdir(parents=True)
    for name in ("fire-tags.yaml", "pass-digest-pinned.yaml"):
        fixture = (ROOT / "fixtures" / "rules" / "PG501" / name).read_text()
        (fixtures / name).write_text(fixture.replace("expect: PG501", f"expect: {LONG_ID}"))
    (tmp_path / ".poolgate.yaml").write_text(
        "apiVersion: poolgate.io/v1alpha1\nkind: GpuPoolGate\nspec:\n"
        "  ruleDirs: [policy/rules]\n"
        "  rules:\n    PG301: {enabled: false}\n    PG501: {level: note}\n"
    )
    return tmp_path


def rows(stdout: str) -> dict[str, str]:
    return {line.split()[0]: line for line in stdout.splitlines()[1:]}


def test_list_applies_the_config_and_marks_audit_only_rules(user_repo: Path) -> None:
    result = poolgate("rules", "list", cwd=user_repo)
    assert result.returncode == 0, result.stderr
    listed = rows(result.stdout)
    assert LONG_ID in listed  # from the config's ruleDirs, without --rules
    assert listed["PG301"].endswith("(off in config)")
    assert listed["PG501"].split()[1] == "note"
    assert listed["PG603"].endswith("(audit only)")
    assert listed["PG101"].split()[1] == "error" and "(" not in listed["PG101"].split()[-1]
    summary_at = {line.index(line.split(maxsplit=3)[3]) for line in listed.values()}
    level_at = {line.index(line.split()[1], len(line.split()[0])) for line in listed.values()}
    assert len(summary_at) == 1 and len(level_at) == 1  # one column each, whatever the id
    assert result.stdout.splitlines()[0].index("LEVEL") == level_at.pop()

    elsewhere = poolgate("rules", "list", cwd=ROOT)  # poolgate's checkout: no config there
    assert rows(elsewhere.stdout)["PG501"].split()[1] == "error"
    assert LONG_ID not in elsewhere.stdout


def test_list_as_json_carries_modes_tags_and_the_configured_level(user_repo: Path) -> None:
    result = poolgate("rules", "list", "--format", "json", cwd=user_repo)
    by_id = {row["id"]: row for row in json.loads(result.stdout)}
    assert by_id["PG501"]["level"] == "note"
    assert by_id["PG301"]["enabled"] is False
    assert by_id["PG603"]["modes"] == ["audit"] and by_id["PG101"]["modes"] == ["scan", "audit"]
    assert by_id[LONG_ID]["tags"] == ["acme"]


def test_list_filters_by_tag_and_level(user_repo: Path) -> None:
    notes = rows(poolgate("rules", "list", "--level", "note", cwd=user_repo).stdout)
    assert "PG501" in notes and "PG101" not in notes
    assert {line.split()[1] for line in notes.values()} == {"note"}
    tagged = rows(poolgate("rules", "list", "--tag", "acme", cwd=user_repo).stdout)
    assert list(tagged) == [LONG_ID]
    both = poolgate("rules", "list", "--tag", "acme", "--level", "note", cwd=user_repo)
    assert rows(both.stdout) == {}
    either = poolgate("rules", "list", "--level", "note", "--level", "warning", cwd=user_repo)
    assert {line.split()[1] for line in rows(either.stdout).values()} == {"note", "warning"}


def test_show_applies_the_config(user_repo: Path) -> None:
    pg501 = poolgate("rules", "show", "PG501", cwd=user_repo)
    assert "level:     note\n" in pg501.stdout
    assert (
        "level:     error (off in config)\n"
        in poolgate("rules", "show", "PG301", cwd=user_repo).stdout
    )
    assert "runs in:   audit only" in poolgate("rules", "show", "PG603", cwd=user_repo).stdout
    own = poolgate("rules", "show", LONG_ID, cwd=user_repo)
    assert own.returncode == 0 and own.stdout.startswith(f"{LONG_ID} acme-digest-pin\n")
    other = user_repo / "strict.yaml"
    other.write_text("apiVersion: poolgate.io/v1alpha1\nkind: GpuPoolGate\n")
    plain = poolgate("rules", "show", "PG501", "--config", str(other), cwd=user_repo)
    assert "level:     error\n" in plain.stdout


def test_rules_test_finds_the_fixtures_of_the_configured_rule_directories(
    user_repo: Path,
) -> None:
    result = poolgate("rules", "test", cwd=user_repo)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.endswith("rule fixtures: 2 of 2 files as expected (1 rules, 0 failing)\n")
    fire = user_repo / "policy" / "rules" / "fixtures" / LONG_ID / "fire-tags.yaml"
    fire.write_text(fire.read_text().replace(f"# expect: {LONG_ID}", "", 1))
    failing = poolgate("rules", "test", cwd=user_repo)
    assert failing.returncode == 1
    assert f"FAIL {LONG_ID} " in failing.stdout


def test_rules_test_without_fixtures_anywhere_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    result = poolgate("rules", "test", cwd=tmp_path)
    assert result.returncode == 2
    assert "no fixtures/rules here and no fixtures/ in a rule directory" in result.stderr


def test_a_broken_config_is_reported_not_ignored(user_repo: Path) -> None:
    shutil.rmtree(user_repo / "policy")
    result = poolgate("rules", "list", cwd=user_repo)
    assert result.returncode == 2
    assert "spec.ruleDirs[0]: policy/rules: no such directory" in result.stderr
