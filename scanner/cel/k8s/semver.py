"""Kubernetes' semantic version library (``library/semverlib.go``, version 1) with the
rules of ``github.com/blang/semver/v4``: ``semver(text)``, ``semver(text, normalize)``,
``isSemver``, ``major``/``minor``/``patch`` and comparisons (build metadata ignored).

The payload is the version without its build metadata, so two versions that compare
equal are equal.
"""

from __future__ import annotations

import re
from typing import Final

from scanner.cel.k8s.library import KubernetesError, function, glob, member, opaque, payload

_NUMBERS: Final = re.compile("[0-9]*")
_ALPHANUM: Final = re.compile("[0-9A-Za-z-]*")
_UINT64: Final = 2**64


def parse(text: str) -> tuple[int, int, int, tuple[int | str, ...]]:
    """blang/semver's ``Parse``: (major, minor, patch, pre-release parts)."""
    if not text:
        raise KubernetesError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise KubernetesError("No Major.Minor.Patch elements found")
    major = _number(parts[0], "major")
    minor = _number(parts[1], "minor")
    rest = parts[2]
    build: list[str] = []
    if "+" in rest:
        rest, _, meta = rest.partition("+")
        build = meta.split(".")
    pre: list[str] = []
    if "-" in rest:
        rest, _, release = rest.partition("-")
        pre = release.split(".")
    patch = _number(rest, "patch")
    release_parts: list[int | str] = []
    for part in pre:
        if not part:
            raise KubernetesError("Prerelease is empty")
        if _NUMBERS.fullmatch(part):
            if len(part) > 1 and part[0] == "0":
                raise KubernetesError(
                    f"Prerelease version must not contain leading zeroes {_q(part)}"
                )
            release_parts.append(int(part))
        elif _ALPHANUM.fullmatch(part):
            release_parts.append(part)
        else:
            raise KubernetesError(f"Invalid character(s) found in prerelease {_q(part)}")
    for part in build:
        if not part:
            raise KubernetesError("Build meta data is empty")
        if not _ALPHANUM.fullmatch(part):
            raise KubernetesError(f"Invalid character(s) found in build meta data {_q(part)}")
    return major, minor, patch, tuple(release_parts)


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _number(text: str, name: str) -> int:
    if not _NUMBERS.fullmatch(text):
        raise KubernetesError(f"Invalid character(s) found in {name} number {_q(text)}")
    if len(text) > 1 and text[0] == "0":
        raise KubernetesError(
            f"{name.capitalize()} number must not contain leading zeroes {_q(text)}"
        )
    if not text or int(text) >= _UINT64:
        raise KubernetesError(f"strconv.ParseUint: parsing {_q(text)}: invalid syntax")
    return int(text)


def normalized(text: str) -> str:
    """semverlib.go's ``normalizeAndParse`` rewriting: no ``v``, no leading zeros,
    missing minor and patch filled with 0."""
    if text.startswith("v"):
        text = text[1:]
    parts = text.split(".", 2)
    for index, part in enumerate(parts):
        if len(part) > 1:
            stripped = part.lstrip("0")
            if not stripped or not stripped[0].isdigit():
                stripped = "0" + stripped
            parts[index] = stripped
    if len(parts) < 3:
        if any(char in parts[-1] for char in "+-"):
            raise KubernetesError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


def _text(version: tuple[int, int, int, tuple[int | str, ...]]) -> str:
    major, minor, patch, pre = version
    release = "-" + ".".join(str(part) for part in pre) if pre else ""
    return f"{major}.{minor}.{patch}{release}"


def _semver(text: str, normalize: bool = False) -> object:
    return opaque("Semver", _text(parse(normalized(text) if normalize else text)))


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        parse(normalized(text) if normalize else text)
    except KubernetesError:
        return False
    return True


def _load(value: object) -> tuple[int, int, int, tuple[int | str, ...]]:
    return parse(str(payload(value, "Semver")))


def compare(left: object, right: object) -> int:
    """blang/semver's ``Compare``: numbers, then pre-release (none is greater; numeric
    parts before alphanumeric ones, a shorter list of equal parts first)."""
    a, b = _load(left), _load(right)
    numbers_a, numbers_b = a[:3], b[:3]
    if numbers_a != numbers_b:
        return 1 if numbers_a > numbers_b else -1
    pre_a, pre_b = a[3], b[3]
    if not pre_a or not pre_b:
        return (not pre_a) - (not pre_b)
    for x, y in zip(pre_a, pre_b, strict=False):
        if x == y:
            continue
        if isinstance(x, int) and isinstance(y, int):
            return 1 if x > y else -1
        if isinstance(x, str) and isinstance(y, str):
            return 1 if x > y else -1
        return -1 if isinstance(x, int) else 1
    return (len(pre_a) > len(pre_b)) - (len(pre_a) < len(pre_b))


FUNCTIONS = (
    function(
        "semver",
        glob("string_to_semver", ["string"], "Semver", _semver),
        glob("string_bool_to_semver", ["string", "bool"], "Semver", _semver),
    ),
    function(
        "isSemver",
        glob("is_semver_string", ["string"], "bool", _is_semver),
        glob("is_semver_string_bool", ["string", "bool"], "bool", _is_semver),
    ),
    function(
        "isGreaterThan",
        member(
            "semver_is_greater_than",
            ["Semver", "Semver"],
            "bool",
            lambda a, b: compare(a, b) == 1,
        ),
    ),
    function(
        "isLessThan",
        member(
            "semver_is_less_than", ["Semver", "Semver"], "bool", lambda a, b: compare(a, b) == -1
        ),
    ),
    function("compareTo", member("semver_compare_to", ["Semver", "Semver"], "int", compare)),
    function("major", member("semver_major", ["Semver"], "int", lambda v: _load(v)[0])),
    function("minor", member("semver_minor", ["Semver"], "int", lambda v: _load(v)[1])),
    function("patch", member("semver_patch", ["Semver"], "int", lambda v: _load(v)[2])),
)
