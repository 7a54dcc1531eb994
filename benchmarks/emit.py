"""A small block-style YAML writer for the generated benchmark inputs.

PyYAML's emitter runs in Python and would dominate the time to build a
50,000-object corpus; the generators only produce dicts, lists, strings,
ints, floats, bools and None, so a direct writer is enough. It writes what
``kubectl``/Helm users write: block mappings, sequences indented under their
key, literal block scalars for multi-line strings, and double quotes only
where a plain scalar would change meaning. The round trip is checked in
``tests/benchmarks/test_corpus.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import yaml

# Characters a plain scalar may start with / contain in block context without
# any indicator ambiguity. ':' and ' ' only when followed by a safe character,
# so ': ' and ' #' never appear.
_PLAIN = re.compile(r"[A-Za-z0-9_/.][A-Za-z0-9_./@=+()-]*(?:[ :][A-Za-z0-9_./@=+()-]+)*")
# Literal block scalars only for printable ASCII (YAML 1.1 also breaks lines
# at NEL, LS and PS, and control characters must be escaped).
_LITERAL_SAFE = re.compile(r"[\t\n -~]*")
_RESOLVER = yaml.resolver.Resolver()
_STR_TAG = "tag:yaml.org,2002:str"


def _implicit_tag(text: str) -> str:
    tag: str = _RESOLVER.resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
    return tag


@lru_cache(maxsize=65536)
def _string(text: str) -> str:
    # The same resolver the loader uses decides whether the plain form would
    # read back as a bool, null, int, float or timestamp.
    if _PLAIN.fullmatch(text) and _implicit_tag(text) == _STR_TAG:
        return text
    return _double_quoted(text)


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t"}


def _double_quoted(text: str) -> str:
    """A YAML double-quoted scalar: printable ASCII as is, the rest escaped.

    (JSON's escapes would write astral characters as surrogate pairs, which
    YAML reads as two invalid code points; YAML has ``\\U`` for those.)
    """
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif 0x20 <= code <= 0x7E:
            out.append(ch)
        elif code <= 0xFF:
            out.append(f"\\x{code:02x}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def scalar(value: Any) -> str:
    """Render one scalar as YAML text."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        return _string(value)
    raise TypeError(f"cannot write {type(value).__name__} as a YAML scalar")


def _float(value: float) -> str:
    if value != value:
        return ".nan"
    if value in (float("inf"), float("-inf")):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    if "." not in text:  # YAML 1.1 floats need a dot: 1e-05 would read as a string
        mantissa, _, exponent = text.partition("e")
        text = f"{mantissa}.0" + (f"e{exponent}" if exponent else "")
    return text


def _literal(text: str) -> str | None:
    """The block-scalar header for ``text``, or None when quoting is safer."""
    if text.startswith((" ", "\n")) or text.endswith("\n\n") or not _LITERAL_SAFE.fullmatch(text):
        return None
    return "|" if text.endswith("\n") else "|-"


def _value(key: str, value: Any, pad: str, out: list[str]) -> None:
    if isinstance(value, Mapping):
        if value:
            out.append(f"{pad}{key}:")
            _mapping(value, pad + "  ", out)
        else:
            out.append(f"{pad}{key}: {{}}")
    elif isinstance(value, list | tuple):
        if value:
            out.append(f"{pad}{key}:")
            _sequence(value, pad + "  ", out)
        else:
            out.append(f"{pad}{key}: []")
    elif isinstance(value, str) and "\n" in value and (header := _literal(value)):
        out.append(f"{pad}{key}: {header}")
        inner = pad + "  "
        out.extend(inner + line if line else "" for line in value.rstrip("\n").split("\n"))
    else:
        out.append(f"{pad}{key}: {scalar(value)}")


def _mapping(mapping: Mapping[str, Any], pad: str, out: list[str]) -> None:
    for key, value in mapping.items():
        text = scalar(key)
        if len(text) > 1000:  # YAML caps implicit keys at 1024 characters
            raise ValueError(f"mapping key too long to write: {text[:40]}...")
        _value(text, value, pad, out)


def _sequence(items: Sequence[Any], pad: str, out: list[str]) -> None:
    for item in items:
        if isinstance(item, Mapping) and item:
            start = len(out)
            _mapping(item, pad + "  ", out)
            # Put the first key on the dash line: "- name: x".
            out[start] = f"{pad}- {out[start][len(pad) + 2 :]}"
        elif isinstance(item, list | tuple) and item:
            start = len(out)
            _sequence(item, pad + "  ", out)
            out[start] = f"{pad}- {out[start][len(pad) + 2 :]}"
        elif isinstance(item, Mapping):
            out.append(f"{pad}- {{}}")
        elif isinstance(item, list | tuple):
            out.append(f"{pad}- []")
        elif isinstance(item, str) and "\n" in item:
            out.append(f"{pad}- {_double_quoted(item)}")
        else:
            out.append(f"{pad}- {scalar(item)}")


def document_lines(obj: Mapping[str, Any]) -> list[str]:
    """The lines of one YAML document (no ``---`` marker)."""
    out: list[str] = []
    _mapping(obj, "", out)
    return out


def dump_document(obj: Mapping[str, Any]) -> str:
    """One YAML document, newline-terminated."""
    return "\n".join(document_lines(obj)) + "\n"


def dump_stream(objs: Iterable[Mapping[str, Any]]) -> str:
    """A multi-document stream: every document starts with ``---``."""
    parts: list[str] = []
    for obj in objs:
        parts.append("---")
        parts.extend(document_lines(obj))
    return "\n".join(parts) + "\n"


def _entry_lines(value: Any) -> int:
    """Lines that ``key: value`` (or ``- value``) takes, as this module writes it."""
    if isinstance(value, Mapping | list | tuple):
        return 1 + _body_lines(value) if value else 1
    if isinstance(value, str) and "\n" in value and _literal(value):
        return 1 + value.rstrip("\n").count("\n") + 1
    return 1


def _body_lines(value: Mapping[str, Any] | Sequence[Any]) -> int:
    if isinstance(value, Mapping):
        return sum(_entry_lines(v) for v in value.values())
    total = 0
    for item in value:
        if isinstance(item, Mapping | list | tuple) and item:
            total += _body_lines(item)  # the first line shares the dash
        else:
            total += 1
    return total


def count_lines(value: Mapping[str, Any] | Sequence[Any]) -> int:
    """Lines of ``document_lines(value)`` for a mapping, or of one sequence item, cheaply."""
    return _body_lines(value) if value else 1


def sequence_item(obj: Mapping[str, Any], pad: str = "") -> str:
    """One mapping written as a block-sequence item at ``pad`` (for streamed ``items:``)."""
    out: list[str] = []
    _sequence([obj], pad, out)
    return "\n".join(out) + "\n"
