"""Image normalisation and pattern matching, checked against the projects' own test tables
(sigstore/policy-controller ``pkg/apis/glob/glob_test.go``, kyverno ``ext/wildcard``)."""

from __future__ import annotations

import pytest

from scanner.model.imagerefs import (
    kyverno_name,
    kyverno_wildcard_matches,
    sigstore_glob_matches,
    sigstore_name,
)

DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("image", "name"),
    [
        ("busybox", "index.docker.io/library/busybox:latest"),
        ("busybox:1.36", "index.docker.io/library/busybox:1.36"),
        ("docker.io/library/busybox", "index.docker.io/library/busybox:latest"),
        ("myuser/myapp", "index.docker.io/myuser/myapp:latest"),
        ("ghcr.io/x/y", "ghcr.io/x/y:latest"),
        ("localhost:5000/a/b:1", "localhost:5000/a/b:1"),
        (f"nvcr.io/nvidia/pytorch:24.05-py3@{DIGEST}", f"nvcr.io/nvidia/pytorch@{DIGEST}"),
        (f"busybox@{DIGEST}", f"index.docker.io/library/busybox@{DIGEST}"),
        ("Upper/Case", None),
        ("x@sha256:short", None),
    ],
)
def test_sigstore_normalisation(image: str, name: str | None) -> None:
    assert sigstore_name(image) == name


@pytest.mark.parametrize(
    ("image", "glob", "matched"),
    [
        ("foo", "index.docker.io/library/foo:latest", True),
        ("foo", "index.docker.io/library/foo:*", True),
        ("foo", "index.docker.io/library/*", True),
        ("foo", "index.docker.io/*/*", True),
        ("foo", "index.docker.io/**", True),
        ("foo", "inde**", True),
        ("foo", "**", True),
        ("foo", "foo", True),  # deprecated fallback to the image as written
        ("foo", "foo*", True),
        ("foo", "*", True),  # "*" means index.docker.io/library/*
        ("myuser/myapp", "*/*", True),
        ("myuser/myapp", "index.docker.io/myuser/*", True),
        ("ghcr.io/foo/bar", "ghcr.io/*/*", True),
        ("ghcr.io/foo", "ghcr.io/*/*", False),
        ("ghcr.io/foo", "*/**", True),
        ("ghcr.io/a/b/c", "ghcr.io/a/*", False),  # "*" does not cross "/"
        ("ghcr.io/a/b/c", "ghcr.io/a/**", True),
        ("prefix-ghcr.io/foo", "ghcr.io/foo", False),
        ("ghcr.io/foo-suffix", "ghcr.io/foo", False),
        ("ghcrxio/foo", "ghcr.io/**", False),
        ("invalid&name", "**", False),
        ("invalid-glob", "[a-z]*", False),
        (f"ghcr.io/a/b@{DIGEST}", "ghcr.io/a/*", True),
        (f"ghcr.io/a/b@{DIGEST}", "ghcr.io/a/b:*", False),
    ],
)
def test_sigstore_glob(image: str, glob: str, matched: bool) -> None:
    assert sigstore_glob_matches(glob, image) is matched


@pytest.mark.parametrize(
    ("image", "name"),
    [
        ("busybox", "docker.io/busybox:latest"),
        ("nginx:1.27", "docker.io/nginx:1.27"),
        ("myuser/myapp:1", "docker.io/myuser/myapp:1"),
        ("ghcr.io/x/y", "ghcr.io/x/y:latest"),
        ("localhost/x", "localhost/x:latest"),
        (f"ghcr.io/x/y:1.0@{DIGEST}", f"ghcr.io/x/y@{DIGEST}"),
    ],
)
def test_kyverno_normalisation(image: str, name: str) -> None:
    assert kyverno_name(image) == name


@pytest.mark.parametrize(
    ("pattern", "text", "matched"),
    [
        ("*", "s3:GetObject", True),
        ("", "s3:GetObject", False),
        ("", "", True),
        ("my-bucket/In*", "my-bucket/India/Karnataka/", True),
        ("my-bucket/In*/Ka*/Ban", "my-bucket/India/Karnataka/Bangalore", False),
        ("my-bucket?/abc*", "mybucket/abc", False),
        ("my-bucket?/abc*", "my-bucket1/abc", True),
        ("my-bucket/abc?efg", "my-bucket/abc/efg", True),
        ("my-bucket/abc?", "my-bucket/abc", False),
        ("my-bucket/mnop*?and", "my-bucket/mnopand", False),
        ("ghcr.io/acme/*", "ghcr.io/acme/tools/x:1", True),
    ],
)
def test_kyverno_wildcard(pattern: str, text: str, matched: bool) -> None:
    assert kyverno_wildcard_matches(pattern, text) is matched
