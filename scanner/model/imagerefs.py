"""Image references and the two pattern languages signature policies match them with.

Sigstore policy-controller and Kyverno normalise an image reference differently
before matching, and their wildcards differ, so each gets its own pair of
functions here, written after the projects' own code and tests:

* policy-controller (``pkg/apis/glob/glob.go``, ``glob.Match``): the image is
  parsed with go-containerregistry (``name.ParseReference``, weak validation) and
  matched by its ``Name()``: Docker Hub is ``index.docker.io``, official images
  live under ``library/``, a missing tag is ``:latest`` and a digest reference
  keeps its digest (``busybox`` -> ``index.docker.io/library/busybox:latest``;
  ``ghcr.io/x/y`` -> ``ghcr.io/x/y:latest``). In a glob ``*`` matches any run of
  characters except ``/`` and ``**`` any run including ``/``; the glob must match
  the whole name. The bare globs ``*`` and ``*/*`` mean ``index.docker.io/library/*``
  and ``index.docker.io/*/*``; a glob with characters outside ``[a-zA-Z0-9-_:/*.]``
  is invalid and matches nothing. When the normalised name does not match, the
  image as written is tried too (a deprecated fallback the project still keeps).
* Kyverno (``pkg/utils/image/infos.go`` ``GetImageInfo`` and ``ImageInfo.String``,
  ``ext/wildcard``): the image gets the default registry ``docker.io`` when its
  first path component is not a registry host (no ``library/`` is added), a
  missing tag is ``:latest``, and a digest reference is ``registry/path@digest``
  (the tag dropped). ``imageReferences`` are wildcards where ``*`` matches any
  run of characters *including* ``/`` and ``?`` exactly one character.

The patterns are the input's, so both are matched by ``scanner.model.wildcards``, which
never backtracks (a regular expression made of ``*a*a*a*a*a*a*a*a*a*a*!`` took
minutes on an image of sixty ``a``).
"""

from __future__ import annotations

import re
from functools import lru_cache

from scanner.model.wildcards import Dialect, Wildcard, compile_pattern

DOCKER_HUB = "index.docker.io"
"""go-containerregistry's name for Docker Hub (``docker.io`` is an alias of it)."""

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_REPOSITORY = re.compile(r"^[a-z0-9_./-]+$")
_VALID_GLOB = re.compile(r"^[a-zA-Z0-9\-_:/*.]+$")


@lru_cache(maxsize=4096)
def sigstore_name(image: str) -> str | None:
    """The reference policy-controller matches globs against, or None when it is invalid."""
    base, at, digest = image.partition("@")
    if at:
        if not _DIGEST.match(digest):
            return None
        repository, _ = _split_tag(base)
        normalized = _sigstore_repository(repository)
        return f"{normalized}@{digest}" if normalized else None
    repository, tag = _split_tag(image)
    normalized = _sigstore_repository(repository)
    if normalized is None or not _TAG.match(tag):
        return None
    return f"{normalized}:{tag}"


def _split_tag(reference: str) -> tuple[str, str]:
    """``repo:tag`` -> (repo, tag); a ``:`` before the last ``/`` is a registry port."""
    head, colon, tail = reference.rpartition(":")
    if colon and "/" not in tail:
        return head, tail
    return reference, "latest"


def _sigstore_repository(repository: str) -> str | None:
    registry, slash, path = repository.partition("/")
    # go-containerregistry: the first component is a registry iff it has "." or ":".
    if not slash or not ("." in registry or ":" in registry):
        registry, path = DOCKER_HUB, repository
    elif registry == "docker.io":
        registry = DOCKER_HUB
    if registry == DOCKER_HUB and "/" not in path:
        path = f"library/{path}"
    if not path or not _REPOSITORY.match(path):
        return None
    return f"{registry}/{path}"


@lru_cache(maxsize=4096)
def _sigstore_glob(glob: str) -> Wildcard | None:
    if glob == "*/*":
        glob = f"{DOCKER_HUB}/*/*"
    elif glob == "*":
        glob = f"{DOCKER_HUB}/library/*"
    if not _VALID_GLOB.fullmatch(glob):  # Go's "$" ends the text; Python's also allows "\n"
        return None
    return compile_pattern(glob, Dialect.SIGSTORE)


def sigstore_glob_matches(glob: str, image: str) -> bool:
    """Whether a ClusterImagePolicy ``spec.images[].glob`` matches ``image`` (as written)."""
    pattern = _sigstore_glob(glob)
    name = sigstore_name(image)
    if pattern is None or name is None:
        return False
    return pattern.matches(name) or (name != image and pattern.matches(image))


@lru_cache(maxsize=4096)
def kyverno_name(image: str) -> str:
    """The string Kyverno matches ``imageReferences`` against."""
    first, slash, _ = image.partition("/")
    if not slash or (
        "." not in first and ":" not in first and first != "localhost" and first == first.lower()
    ):
        image = f"docker.io/{image}"
    base, at, digest = image.partition("@")
    if at:
        repository, _ = _split_tag(base)
        return f"{repository}@{digest}"
    repository, tag = _split_tag(image)
    return f"{repository}:{tag}"


def kyverno_wildcard_matches(pattern: str, text: str) -> bool:
    """Kyverno's wildcard match: ``*`` any run (``/`` included), ``?`` one character."""
    return _kyverno_pattern(pattern).matches(text)


@lru_cache(maxsize=4096)
def _kyverno_pattern(pattern: str) -> Wildcard:
    return compile_pattern(pattern, Dialect.KYVERNO)
