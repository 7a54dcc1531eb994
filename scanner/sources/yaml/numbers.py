"""Integers as the API server stores them, for objects read from JSON.

The API server decodes a JSON number into an int64, or into a float64 when it does
not fit (``kubectl get -o json`` then shows ``1.8446744073709552e+19``). CEL integers
are int64 too: cel-cpp cannot convert a larger one and fails every rule that reads
the object, while a guard (scanner/evaluate/optimize/guards.py) or a rule given only
other fields (scanner/evaluate/optimize/projection.py) would not, so the answer would
depend on the optimization. A snapshot or a list response holding such an integer is
therefore read the API server's way, as manifests are (scanner/sources/yaml/walk.py): a
float, or, past float64 too, the number's text.

Documents are decoded by msgspec: faster than the standard parser calling back into
Python for every integer, and no larger in memory (orjson was as fast but held a
second copy of the document while decoding; benchmarks/README.md). msgspec keeps
integers of any size, so a document that may hold one of 19 digits or more goes to
the standard parser instead (``_may_hold_long_integer``: one scan of the bytes), and
so does anything msgspec refuses: what the standard parser
accepts (``NaN``, lone surrogate escapes) and what it rejects with the position users
see. Both keep the last of duplicate keys. Real API servers never send such integers.
Nesting is bounded by the interpreter's recursion limit in both; msgspec reaches a
few levels deeper (~980 in a snapshot's pod, against ~978), and deeper documents are
"nested too deeply" either way.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from typing import Any, Final

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1


def api_number(value: int, text: str) -> int | float | str:
    """``value`` if it fits int64, else a float, else (past float64) ``text``."""
    if INT64_MIN <= value <= INT64_MAX:
        return value
    try:
        return float(value)
    except OverflowError:
        return text


def json_int(text: str) -> int | float | str:
    """``json.loads``'s ``parse_int``: every integer of a document passes here."""
    if len(text) < 19:  # 18 digits always fit int64
        return int(text)
    if len(text) > 330:  # past float64 whatever the digits; int() refuses 4,300 of them
        return text
    return api_number(int(text), text)


def loads(data: str | bytes, raw: bytes | None = None) -> Any:
    """``json.loads(data)`` with integers read the API server's way (module docstring).

    ``raw``: ``data`` (text) encoded in UTF-8, when the caller holds it; the standard
    parser still reads ``data`` itself (given bytes, it would guess UTF-16 or UTF-32
    from NUL bytes where text is only invalid JSON)."""
    if raw is None:
        try:
            raw = data if isinstance(data, bytes) else data.encode()
        except UnicodeEncodeError:  # a lone surrogate: the standard parser's error
            raw = b""
    if raw and not _may_hold_long_integer(raw):
        decode, refused = _decoder()
        try:
            return decode(raw)
        except (refused, RecursionError):
            pass  # read, or rejected with a position, by the standard parser
    return json.loads(data, parse_int=json_int)


@cache
def _decoder() -> tuple[Callable[[bytes], Any], type[Exception]]:
    """msgspec's decoder and its error, imported on first use: a scan of manifests
    (this module's ``api_number`` is on its path) does not pay for the import."""
    import msgspec

    return msgspec.json.Decoder().decode, msgspec.DecodeError


_AS_ZERO: Final = bytes.maketrans(b"123456789", b"000000000")
_LONG: Final = b"0" * 19
"""The digits of an integer that may not fit int64 (its 19th digit can)."""
_ZERO, _MINUS = ord("0"), ord("-")
_SPACE: Final = frozenset(b" \t\r\n")
_BEFORE: Final = frozenset(b":,[")
_AFTER: Final = frozenset(b",}]")


def _may_hold_long_integer(data: bytes) -> bool:
    """Whether a run of 19 digits or more in ``data`` may be a JSON integer: after
    ``:``, ``,`` or ``[`` (and a minus sign) and before ``,``, ``}`` or ``]``, spaces
    aside. Runs inside strings (image digests) are surrounded by other characters;
    one that is not only sends the document to the standard parser."""
    digits = data.translate(_AS_ZERO)
    size = len(digits)
    start = digits.find(_LONG)
    while start >= 0:
        end = start + len(_LONG)
        while end < size and digits[end] == _ZERO:
            end += 1
        before = start - 1
        if before >= 0 and data[before] == _MINUS:
            before -= 1
        while before >= 0 and data[before] in _SPACE:
            before -= 1
        after = end
        while after < size and data[after] in _SPACE:
            after += 1
        if (before < 0 or data[before] in _BEFORE) and (after == size or data[after] in _AFTER):
            return True
        start = digits.find(_LONG, end)
    return False
