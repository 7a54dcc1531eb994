"""Plain data as block-style YAML text, every string safe whatever it holds.

PyYAML's dumper represents every node in Python, even with libyaml's emitter: for a
large audit it took many times as long as every other report together. The reports
are plain data (mappings, lists, strings, integers, booleans), so this writes them
directly. Strings come from pull requests and
clusters: one that could be read as anything but itself (``yes``, ``1.0``, ``~``,
``- x``, a line break followed by ``---`` and another object) is double-quoted, and
inside quotes everything but printable text is escaped (line breaks of any kind,
controls, the byte order mark, and the invisible and bidirectional-override
characters a reader of the file would not see), so a string never ends its scalar,
its document or its line. A test reads the text back with PyYAML, and through
kustomize's Go YAML parser, and compares it with the data.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Final

_PLAIN: Final = re.compile(r"[A-Za-z_/][A-Za-z0-9_./-]*")
"""Strings written without quotes: a letter, ``_`` or ``/`` first, then letters,
digits and ``_./-``. None of them is a number, an indicator or a comment."""

_RESERVED: Final = frozenset(
    word
    for base in ("y", "n", "yes", "no", "true", "false", "on", "off", "null")
    for word in (base, base.capitalize(), base.upper())
)
"""Plain words YAML 1.1 (PyYAML) or 1.2 reads as booleans or null."""

_ESCAPE: Final = re.compile(
    "[^\x20-\x7e\xa0-\ufffd\U00010000-\U0010ffff]"  # controls, C1, non-characters
    '|["\\\\\u2028\u2029\ufeff\u200b-\u200f\u202a-\u202e\u2060-\u206f\ud800-\udfff]'
)
_NAMED: Final = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}

Value = Mapping[str, "Value"] | Sequence["Value"] | str | int | bool


def scalar(value: str | int | bool) -> str:
    """One scalar as YAML reads it back: ``true``, ``12``, ``plain/name`` or ``"quoted"``."""
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return _string(value)


@functools.lru_cache(maxsize=4096)
def _string(value: str) -> str:
    """Cached: a report repeats its keys and most of its values (rule, result,
    severity, kind, namespace) on every result."""
    if _PLAIN.fullmatch(value) and value not in _RESERVED:
        return value
    return '"' + _ESCAPE.sub(_escape, value) + '"'


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def document(value: Mapping[str, Value]) -> str:
    """A mapping as one block-style YAML document (without the ``---`` before it)."""
    lines: list[str] = []
    _mapping(value, "", lines)
    return "\n".join(lines) + "\n"


def _mapping(value: Mapping[str, Value], pad: str, lines: list[str], first: str = "") -> None:
    """The entries of ``value`` at indentation ``pad``; the first line starts with
    ``first`` instead (``- `` for a mapping that is an item of a list)."""
    lead = first or pad
    for key, item in value.items():
        _entry(lead + _string(key) + ":", item, pad, lines)
        lead = pad


def _entry(head: str, item: Value, pad: str, lines: list[str]) -> None:
    if isinstance(item, str):
        lines.append(f"{head} {_string(item)}")
    elif isinstance(item, int):  # booleans too
        lines.append(f"{head} {scalar(item)}")
    elif isinstance(item, Mapping):
        if not item:
            lines.append(f"{head} {{}}")
        else:
            lines.append(head)
            _mapping(item, pad + "  ", lines)
    elif not item:
        lines.append(f"{head} []")
    else:
        lines.append(head)
        for element in item:
            if isinstance(element, Mapping) and element:
                _mapping(element, pad + "  ", lines, first=pad + "- ")
            else:
                _entry(pad + "-", element, pad + "  ", lines)
