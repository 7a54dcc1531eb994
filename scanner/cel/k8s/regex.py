"""Kubernetes' regex library (``library/regex.go``): ``find`` and ``findAll`` with Go's
RE2 syntax and Go's ``FindString``/``FindAllString`` semantics, on the RE2 engine
cel-python already depends on. A constant pattern that does not compile is refused
when the rule loads, as the API server refuses it (``scanner.cel.k8s.literals``)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from scanner.cel.k8s.library import KubernetesError, function, member


@lru_cache(maxsize=256)
def compiled(pattern: str) -> Any:
    """The RE2 program for ``pattern``; ``KubernetesError`` if it does not compile."""
    import re2  # type: ignore[import-untyped]  # on first use only

    options = re2.Options()
    options.log_errors = False  # RE2 would print every bad pattern to stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as error:
        reason = error.args[0] if error.args else error
        text = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        raise KubernetesError(f"Illegal regex: error parsing regexp: {text}") from None


def _find(text: str, pattern: str) -> str:
    match = compiled(pattern).search(text)
    return "" if match is None else str(match.group(0))


def find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    """Go's ``FindAllString``: successive non-overlapping matches, an empty match
    right after a match ignored, at most ``limit`` of them (all if negative)."""
    program = compiled(pattern)
    found: list[str] = []
    if limit < 0:
        limit = len(text) + 1
    position, previous_end, end = 0, -1, len(text)
    while len(found) < limit and position <= end:
        match = program.search(text, position)
        if match is None:
            break
        start, stop = match.span()
        accept = True
        if stop == position:
            if start == previous_end:
                accept = False
            position += 1
        else:
            position = stop
        previous_end = stop
        if accept:
            found.append(text[start:stop])
    return found


FUNCTIONS = (
    function("find", member("string_find_string", ["string", "string"], "string", _find)),
    function(
        "findAll",
        member("string_find_all_string", ["string", "string"], "list(string)", find_all),
        member("string_find_all_string_int", ["string", "string", "int"], "list(string)", find_all),
    ),
)
