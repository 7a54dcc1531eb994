"""Exclude patterns from a pull request (issue 25, section 2).

``spec.exclude`` is part of the policy: a pull request that adds ``exclude: [k8s/]``
to ``.poolgate.yaml`` must not hide its own manifests when the policy comes from the
base commit (``--policy-ref``, the Action's default). Patterns are matched in one
pass: a pattern written to make a backtracking matcher take minutes against a deep
path costs a scan nothing.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from cli_run import poolgate

from scanner.config import excludes

from .test_policy_ref import HEADER, TRAIN, commit_all, git, write


def _findings(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.stdout, result.stderr
    document = json.loads(result.stdout)
    return sorted({f["location"]["uri"] for f in document["findings"]})


def test_a_pull_requests_exclude_does_not_hide_its_manifests_under_policy_ref(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    write(repo / ".poolgate.yaml", HEADER + "spec:\n  exclude: [fixtures/]\n")
    write(repo / "k8s" / "train.yaml", TRAIN)
    git("init", "-q", cwd=repo)
    base = commit_all(repo, "base: the reviewed policy")
    # The pull request: its own exclude patterns, every spelling of "hide k8s/".
    write(
        repo / ".poolgate.yaml",
        HEADER + "spec:\n  exclude: [fixtures/, k8s/, '**/train.yaml', '*.yaml']\n",
    )
    commit_all(repo, "pull request: exclude its own manifests")

    attacked = poolgate("scan", ".", "--format", "json", cwd=repo)
    assert attacked.returncode == 0, attacked.stderr  # the attack works on the work tree
    assert _findings(attacked) == []
    assert json.loads(attacked.stdout)["summary"]["excluded"] == 1

    judged = poolgate("scan", ".", "--policy-ref", base, "--format", "json", cwd=repo)
    assert judged.returncode == 1, judged.stderr
    assert _findings(judged) == ["k8s/train.yaml"]
    document = json.loads(judged.stdout)
    assert document["summary"]["excluded"] == 0
    assert document["config"]["source"] == "git-ref"
    changed = [item["path"] for item in document["config"]["workTreeChanges"]["files"]]
    assert changed == [".poolgate.yaml"]  # and the report says the pull request changed it


def test_the_base_commits_excludes_apply_under_policy_ref(tmp_path: Path) -> None:
    """The other half: the reviewed policy's own excludes do apply (the repository's
    rule fixtures, which are meant to fire)."""
    repo = tmp_path / "repo"
    write(repo / ".poolgate.yaml", HEADER + "spec:\n  exclude: [fixtures/]\n")
    write(repo / "fixtures" / "rules" / "PG301" / "fire.yaml", TRAIN)
    write(repo / "k8s" / "clean.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n")
    git("init", "-q", cwd=repo)
    base = commit_all(repo, "base")
    result = poolgate("scan", ".", "--policy-ref", base, "--format", "json", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["summary"]["excluded"] == 1


BACKTRACKING = "**/" + "*a" * 400 + "*!"
"""A pattern that takes a backtracking glob matcher exponential time on a path of
many ``a``: every star can take any share of the run."""


def test_a_backtracking_pattern_against_a_deep_path_is_one_pass(tmp_path: Path) -> None:
    deep = tmp_path / "repo" / Path(*["a" * 200] * 15)
    write(deep / ("a" * 200 + ".yaml"), TRAIN)
    repo = tmp_path / "repo"
    git("init", "-q", cwd=repo)
    write(repo / ".poolgate.yaml", HEADER + f"spec:\n  exclude: ['{BACKTRACKING}']\n")
    result = poolgate("scan", ".", "--format", "json", cwd=repo, timeout=60)
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout)["summary"]["excluded"] == 0  # it does not match
    # In-process: the same pattern against a path of 4,250 characters, many times.
    glob = excludes.compile_glob(BACKTRACKING)
    path = "/".join(["a" * 250] * 15 + ["a" * 500])
    assert not any(glob.matches(path) for _ in range(200))
    assert excludes.compile_glob("**/" + "*a" * 400).matches(path)  # 500 a: it fits
