"""Reading a commit's tree with git plumbing (``scanner.config.gitref``)."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from scanner.config.gitref import Commit, blob_id, relative
from scanner.errors import UsageError


def _git(*args: str, cwd: Path, data: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=cwd,
        input=data,
        capture_output=True,
        check=True,
        timeout=60,
    )
    return done.stdout.decode().strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "rules" / "sub").mkdir(parents=True)
    (root / ".poolgate.yaml").write_bytes(b"a: 1\n")
    (root / "rules" / "A.yaml").write_bytes(b"id: A\n")
    (root / "rules" / "B.yml").write_bytes(b"id: B\n")
    (root / "rules" / "sub" / "C.yaml").write_bytes(b"id: C\n")
    (root / "rules" / "L.yaml").symlink_to("A.yaml")
    _git("init", "-q", cwd=root)
    _git("add", ".", cwd=root)
    _git("commit", "-q", "-m", "x", cwd=root)
    return root


def test_resolve_names_the_full_commit_or_fails_closed(repo: Path) -> None:
    commit = Commit.resolve(repo, "HEAD")
    assert commit.sha == _git("rev-parse", "HEAD", cwd=repo)
    tree = _git("rev-parse", "HEAD^{tree}", cwd=repo)
    for ref in ("nope", tree, "-h", "HEAD\x1b", ""):
        with pytest.raises(UsageError, match="--policy-ref"):
            Commit.resolve(repo, ref)


def test_entries_are_exact_paths_and_listing_is_one_level(repo: Path) -> None:
    commit = Commit.resolve(repo, "HEAD")
    found = commit.entries([".poolgate.yaml", "rules", "rules/sub/C.yaml", "missing", "rule"])
    assert sorted(found) == [".poolgate.yaml", "rules", "rules/sub/C.yaml"]
    assert found["rules"].is_dir and found[".poolgate.yaml"].is_file
    assert found[".poolgate.yaml"].size == 5
    listed = [(entry.path, entry.mode) for entry in commit.listing("rules")]
    assert listed == [
        ("rules/A.yaml", "100644"),
        ("rules/B.yml", "100644"),
        ("rules/L.yaml", "120000"),
        ("rules/sub", "040000"),
    ]
    assert [entry.path for entry in commit.listing("")] == [".poolgate.yaml", "rules"]


def test_read_returns_each_blob_and_checks_its_size(repo: Path) -> None:
    commit = Commit.resolve(repo, "HEAD")
    found = commit.entries([".poolgate.yaml", "rules/A.yaml"])
    entries = [found[".poolgate.yaml"], found["rules/A.yaml"]]
    assert commit.read(entries, 1024) == [b"a: 1\n", b"id: A\n"]
    with pytest.raises(UsageError, match="not a readable file"):
        commit.read(entries, 4)  # over the limit: never read
    with pytest.raises(UsageError, match="unexpected object"):
        commit.read([replace(entries[0], size=3)], 1024)


def test_blob_id_is_gits_object_id(tmp_path: Path) -> None:
    data = b"apiVersion: v1\n\x00binary"
    (tmp_path / "f").write_bytes(data)
    assert blob_id(data, "0" * 40) == _git("hash-object", "f", cwd=tmp_path)


def test_relative_is_none_outside_the_root(tmp_path: Path) -> None:
    assert relative(tmp_path / "a" / "b.yaml", tmp_path) == "a/b.yaml"
    assert relative(tmp_path, tmp_path) == ""
    assert relative(tmp_path / ".." / "x", tmp_path) is None
    assert relative("/", tmp_path) is None
