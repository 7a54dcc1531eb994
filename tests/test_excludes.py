"""Exclude patterns: ``scanner.config.excludes`` against git's meaning (``pathspec``,
gitignore semantics), and ``--exclude`` / ``spec.exclude`` through the CLI."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pathspec
import pytest
from cli_run import poolgate

from scanner.config import excludes

HEADER = "apiVersion: poolgate.io/v1alpha1\nkind: GpuPoolGate\n"
PRIVILEGED = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: ml
spec:
  containers:
    - name: c
      image: busybox
      securityContext:
        privileged: true
"""


@pytest.mark.parametrize(
    ("pattern", "path", "is_dir", "expected"),
    [
        ("fixtures/", "rules/fixtures/x.yaml", False, True),  # a name in any directory
        ("fixtures/", "fixtures", False, False),  # a trailing / : directories only
        ("fixtures/", "fixtures", True, True),
        ("fixtures", "a/fixtures/b.yaml", False, True),
        ("/fixtures", "a/fixtures/b.yaml", False, False),  # anchored at the root
        ("a/**/b", "a/b", False, True),
        ("a/**/b", "a/x/y/b", False, True),
        ("a/**/b", "a/xb", False, False),
        ("a/**/b", "x/a/b", False, False),
        ("a/**", "a/x/y", False, True),
        ("a/*.yaml", "a/b/c.yaml", False, False),  # * never crosses a /
        ("*.tmpl.yaml", "k8s/x.tmpl.yaml", False, True),
        ("fixtures/rules/PG[0-9]0?", "fixtures/rules/PG101/fire.yaml", False, True),
        ("fixtures/rules/PG[!0-9]0?", "fixtures/rules/PG101/fire.yaml", False, False),
        (r"k8s/\*.yaml", "k8s/a.yaml", False, False),  # an escaped star is a star
        (r"k8s/\*.yaml", "k8s/*.yaml", False, True),
    ],
)
def test_patterns_mean_what_they_mean_in_gitignore(
    pattern: str, path: str, is_dir: bool, expected: bool
) -> None:
    assert excludes.compile_glob(pattern).matches(path, is_dir) is expected


def test_random_patterns_agree_with_gitignore() -> None:
    """pathspec implements gitignore with regular expressions; it departs from git in
    corners poolgate keeps git's meaning of (``**`` inside a component is a ``*``,
    ``[!a]`` never takes a ``/``, ``a/**/`` of a file), so those are not generated."""
    rng = random.Random(25)
    pieces = ["a", "b", "/", "*", "?", "/**/", "**/", "/**", "[ab]", "[a-b]"]
    compared = 0
    for _ in range(40_000):
        pattern = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 7)))
        if re.search(r"[^/]\*\*|\*\*[^/]|\*\*/$", pattern) or excludes.check(pattern):
            continue
        parts = ["".join(rng.choice("ab") for _ in range(rng.randint(1, 3))) for _ in range(4)]
        path = "/".join(parts[: rng.randint(1, 4)])
        expected = pathspec.GitIgnoreSpec.from_lines([pattern]).match_file(path)
        assert excludes.compile_glob(pattern).matches(path) is expected, (pattern, path)
        compared += 1
    assert compared > 10_000


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("!k8s/", "negation (!) is not supported"),
        ("a//b", "empty, '.' or '..' path component"),
        ("../other", "empty, '.' or '..' path component"),
        ("/", "matches the whole repository"),
        ("k8s/[ab", "a '[' without its ']'"),
        ("k8s/[z-a]", "range z-a is reversed"),
        ("x" * 1025, "longer than 1024 characters"),
    ],
)
def test_patterns_that_cannot_be_used_say_why(pattern: str, problem: str) -> None:
    assert problem in excludes.check(pattern)


def _repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    for path in ("k8s/app.yaml", "fixtures/rules/PG301/fire.yaml", "fixtures/demo/x.yml"):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(PRIVILEGED.format(name=Path(path).stem))
    (repo / ".git").mkdir()
    return repo


def _summary_and_uris(stdout: str) -> tuple[dict[str, object], list[str]]:
    document = json.loads(stdout)
    return document["summary"], sorted({f["location"]["uri"] for f in document["findings"]})


def test_exclude_leaves_out_walked_and_named_files_and_counts_them(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    walked = poolgate("scan", ".", "--exclude", "fixtures/", "--format", "json", cwd=repo)
    assert walked.returncode == 1, walked.stderr
    summary, uris = _summary_and_uris(walked.stdout)
    assert uris == ["k8s/app.yaml"]
    assert (summary["files"], summary["excluded"]) == (1, 2)
    # pre-commit names the staged files one by one: a named file is excluded too.
    named = poolgate(
        "scan",
        "fixtures/rules/PG301/fire.yaml",
        "fixtures/demo/x.yml",
        "--exclude",
        "fixtures/rules/**",
        "--exclude",
        "*.yml",
        cwd=repo,
    )
    assert named.returncode == 0, named.stdout + named.stderr
    assert named.stdout.splitlines()[-1] == "no findings in 0 files; 2 files excluded"


def test_config_exclude_adds_to_the_command_lines(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    (repo / ".poolgate.yaml").write_text(HEADER + "spec:\n  exclude: ['fixtures/rules/']\n")
    result = poolgate("scan", ".", "--exclude", "/k8s", "--format", "json", cwd=repo)
    summary, uris = _summary_and_uris(result.stdout)
    assert uris == ["fixtures/demo/x.yml"]
    assert summary["excluded"] == 2


def test_bad_patterns_are_usage_and_config_errors_before_any_work(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    flag = poolgate("scan", ".", "--exclude", "!fixtures/", cwd=repo)
    assert flag.returncode == 2
    assert "'--exclude': '!fixtures/': negation (!) is not supported" in flag.stderr
    (repo / ".poolgate.yaml").write_text(HEADER + "spec:\n  exclude:\n    - k8s/\n    - a//b\n")
    config = poolgate("scan", ".", cwd=repo)
    assert config.returncode == 2
    assert ".poolgate.yaml:6: spec.exclude[1]: 'a//b': empty, '.' or '..' path component" in (
        config.stderr
    )
