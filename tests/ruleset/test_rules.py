"""Rule loading: schema, every problem at once with file and line, CEL compiled once."""

from __future__ import annotations

from pathlib import Path

import pytest

from scanner.cel import get_engine
from scanner.config.values import Config, RuleOverride
from scanner.errors import RuleLoadError
from scanner.findings.records import Level
from scanner.ruleset.load import RuleText, bundled_rules_dir, load_rules, select

GOOD = """\
id: ACME001
name: team-label
level: warning
summary: Workloads carry a team label.
description: Ownership.
remediation: Add metadata.labels.team.
subject: object
match:
  kinds: [Deployment]
validations:
  - expression: has(object.metadata.labels) && 'team' in object.metadata.labels
    message: no team label
    path: metadata
"""


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text)
    return path


def test_good_user_rule_loads(tmp_path: Path) -> None:
    write(tmp_path, "ACME001.yaml", GOOD)
    [rule] = load_rules([tmp_path], get_engine("cpp"))
    assert rule.id == "ACME001" and rule.kinds == {"Deployment"} and len(rule.validations) == 1


def test_rules_already_read_load_like_files_and_name_their_source(tmp_path: Path) -> None:
    """``--policy-ref`` reads rule files from a commit; they go through the same
    loader, checks and messages as files, named ``REF:path``."""
    write(tmp_path, "ACME001.yaml", GOOD)
    [from_file] = load_rules([tmp_path], get_engine("cpp"))
    [from_text] = load_rules(
        [], get_engine("cpp"), texts=[RuleText("main:r/A.yaml", GOOD.encode())]
    )
    assert from_text.doc.source == "main:r/A.yaml"
    assert from_text.kinds == from_file.kinds and from_text.doc.summary == from_file.doc.summary
    broken = [
        RuleText("main:r/B.yaml", GOOD.replace("level: warning", "level: fatal").encode()),
        RuleText("main:r/C.yaml", b"\xff\xfe"),
        RuleText("main:r/D.yaml", b"# pad\n" * 50_000),
        RuleText("main:r/E.yaml", GOOD.encode()),
    ]
    with pytest.raises(RuleLoadError) as caught:
        load_rules([tmp_path], get_engine("cpp"), texts=broken)
    problems = caught.value.problems
    assert problems[0].startswith("main:r/B.yaml:3: level:")
    assert problems[1].startswith("main:r/C.yaml: cannot read: 'utf-8' codec")
    assert problems[2] == "main:r/D.yaml: larger than 256 KiB"
    assert (
        problems[3]
        == f"main:r/E.yaml: id ACME001 is already defined in {tmp_path / 'ACME001.yaml'}"
    )


def test_every_problem_of_every_file_is_reported_with_file_and_line(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", GOOD.replace("level: warning", "level: fatal"))
    write(
        tmp_path,
        "b.yaml",
        GOOD.replace("ACME001", "ACME002").replace(
            "has(object.metadata.labels) && 'team' in object.metadata.labels", "1 + 'x'"
        ),
    )
    write(tmp_path, "c.yaml", "id: [unclosed\n")
    write(
        tmp_path,
        "d.yaml",
        GOOD.replace("ACME001", "ACME004").replace(
            "validations:", "violations: '[]'\nvalidations:"
        ),
    )
    with pytest.raises(RuleLoadError) as caught:
        load_rules([tmp_path], get_engine("cpp"))
    problems = caught.value.problems
    assert len(problems) == 4, problems
    joined = "\n".join(problems)
    assert f"{tmp_path / 'a.yaml'}:3: level:" in joined
    assert (
        f"{tmp_path / 'b.yaml'}:11: validations[0].expression: CEL found no matching overload"
        in joined
    )
    assert f"{tmp_path / 'c.yaml'}:" in joined
    assert f"{tmp_path / 'd.yaml'}:" in joined


def test_result_types_are_checked_at_load(tmp_path: Path) -> None:
    write(
        tmp_path,
        "a.yaml",
        GOOD.replace(
            "has(object.metadata.labels) && 'team' in object.metadata.labels",
            "object.metadata.name + 'x'",
        ),
    )
    with pytest.raises(RuleLoadError, match="must evaluate to bool, but evaluates to string"):
        load_rules([tmp_path], get_engine("python"))


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", GOOD)
    write(tmp_path, "b.yaml", GOOD)
    with pytest.raises(RuleLoadError, match="already defined"):
        load_rules([tmp_path], get_engine("cpp"))


def test_user_rules_cannot_claim_builtin(tmp_path: Path) -> None:
    text = (
        GOOD.replace("subject: object", "subject: document").split("match:")[0] + "builtin: true\n"
    )
    write(tmp_path, "a.yaml", text)
    with pytest.raises(
        RuleLoadError, match="only PG001, PG002, PG003, PG004, PG005, PG606 are built in"
    ):
        load_rules([tmp_path], get_engine("cpp"))


def test_missing_rule_directory(tmp_path: Path) -> None:
    with pytest.raises(RuleLoadError, match="does not exist"):
        load_rules([tmp_path / "nope"], get_engine("cpp"))


def test_config_overrides_level_enablement_and_params(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", GOOD + "params:\n  team: ml\n")
    config = Config(
        rules={"ACME001": RuleOverride(level=Level.ERROR, enabled=False, params={"x": 1})}
    )
    [rule] = load_rules([tmp_path], get_engine("cpp"), config)
    assert (
        rule.doc.level is Level.ERROR and not rule.enabled and rule.params == {"team": "ml", "x": 1}
    )
    assert select([rule], enable=["ACME001"], disable=[]) == [rule]
    assert select([rule], enable=[], disable=[]) == []


def test_bundled_rules_load_on_both_engines() -> None:
    cpp = load_rules([bundled_rules_dir()], get_engine("cpp"))
    python = load_rules([bundled_rules_dir()], get_engine("python"))
    assert [r.id for r in cpp] == [r.id for r in python]
    assert {
        "PG001",
        "PG002",
        "PG003",
        "PG103",
        "PG104",
        "PG107",
        "PG301",
        "PG302",
        "PG401",
        "PG501",
    } <= {r.id for r in cpp}


def test_only_regular_files_of_reasonable_size_inside_the_directory_are_read(
    tmp_path: Path,
) -> None:
    """A FIFO would block and /dev/zero never end; a symlink may not take the loader
    out of the rule directory (found in review). Each is one problem, named."""
    import os

    rules = tmp_path / "rules"
    rules.mkdir()
    write(rules, "ACME001.yaml", GOOD)
    os.mkfifo(rules / "fifo.yaml")
    secret = write(tmp_path, "kubeconfig", "token: SECRET-TOKEN\n")
    (rules / "leak.yaml").symlink_to(secret)
    (rules / "zero.yaml").symlink_to("/dev/zero")
    write(rules, "huge.yaml", "# " + "x" * (300 * 1024) + "\n")
    with pytest.raises(RuleLoadError) as caught:
        load_rules([rules], get_engine("cpp"))
    message = str(caught.value)
    assert "fifo.yaml: not a regular file" in message
    assert "zero.yaml: not a regular file" in message
    assert "leak.yaml: a symbolic link out of its rule directory" in message
    assert "huge.yaml: larger than 256 KiB" in message
    assert "SECRET-TOKEN" not in message
