"""Lone UTF-16 surrogates and NUL from escapes, replaced as manifests' are.

JSON may spell a character as ``\\ud800`` without its pair; ``json.loads`` then
returns a Python string no UTF-8 output can hold, and every report crashed on it.
Kubernetes stores UTF-8, so a real API server never sends one; a hand-made or
hostile snapshot can. Such strings get U+FFFD, as Go's encoding does for invalid
text. NUL (``\\u0000``, or YAML's ``\\0``, ``\\x00``) gets U+FFFD too, as in
manifests (scanner/sources/yaml/notes.py): cel-cpp ends a string at a NUL, so a guard
reading the string in Python and CEL would disagree about it. The walk runs only
when the raw text holds such an escape at all.
"""

from __future__ import annotations

import re
from typing import Any, Final

_ESCAPE_PATTERN: Final = r"\\(?:[uU]0{0,4}(?:[dD][89a-fA-F][0-9a-fA-F]{2}|0000)|x00|0)"
_ESCAPE: Final = re.compile(_ESCAPE_PATTERN)
_ESCAPE_BYTES: Final = re.compile(_ESCAPE_PATTERN.encode())
_LONE: Final = re.compile("[\ud800-\udfff\x00]")
REPLACEMENT: Final = "\ufffd"


def may_hold(text: str | bytes) -> bool:
    """Whether ``text`` (JSON or YAML) spells a surrogate or NUL with an escape."""
    if isinstance(text, bytes):  # an API response: no decoded copy just to look
        return _ESCAPE_BYTES.search(text) is not None
    return _ESCAPE.search(text) is not None


def replaced(value: Any) -> Any:
    """``value`` with every lone surrogate and NUL in its strings (keys too) as U+FFFD."""
    if isinstance(value, str):
        return _LONE.sub(REPLACEMENT, value)
    if isinstance(value, list):
        return [replaced(item) for item in value]
    if isinstance(value, dict):
        return {replaced(key): replaced(item) for key, item in value.items()}
    return value


_PAIR: Final = re.compile(
    r"(?<!\\)((?:\\\\)*)\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})"
)
"""A UTF-16 surrogate pair spelled with escapes (``\\ud83d\\ude00``), after an even
number of backslashes (an odd one escapes the first backslash of ``\\u``)."""


def joined_pairs(json_text: str) -> str:
    """JSON text with each surrogate pair escape written as the character it spells.

    JSON spells a character outside the Basic Multilingual Plane as two ``\\u``
    escapes (what ``json.dumps`` writes for an emoji); the YAML parser that reads JSON
    manifests (for positions) refuses surrogate escapes one by one. Only for JSON:
    in YAML a single-quoted ``'\\ud83d'`` is six plain characters. A column after
    such an escape on its line moves left by the escape's length, less one."""
    if "\\u" not in json_text:
        return json_text
    return _PAIR.sub(_joined, json_text)


def _joined(match: re.Match[str]) -> str:
    high, low = int(match.group(2), 16), int(match.group(3), 16)
    return match.group(1) + chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
