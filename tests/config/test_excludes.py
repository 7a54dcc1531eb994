"""Exclude patterns: ``scanner.config.excludes`` against git's meaning (``pathspec``,
gitignore semantics); through the CLI: tests/e2e/test_exclude_cli.py."""

from __future__ import annotations

import random
import re

import pathspec
import pytest

from scanner.config import excludes


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
