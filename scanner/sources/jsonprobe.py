"""Which ``.json`` files found in a walk hold Kubernetes objects.

``kubectl apply -f DIR -R`` applies every ``.json`` file under DIR, decoded as JSON
or, when that fails, as YAML; so a manifest can hide in a ``.json`` file behind an
escaped key (``"\\u0061piVersion"``), megabytes of padding, or YAML syntax. A
repository's other JSON must not fail a scan of ``.`` either: a ``tsconfig.json``
with comments is not valid JSON, and a 14 MB ``package-lock.json`` is over the size
limit. ``may_be_manifest`` tells them apart, its cost bounded by the file's size:

1. A key ``apiVersion`` cannot be decoded from bytes that hold neither
   ``piVersion`` (an escaped ``a`` leaves that), nor an escaped ASCII letter
   (``\\u0056``, YAML's ``\\x56`` and ``\\U00000056``), nor an escaped line break
   (YAML joins ``"apiVer\\`` and ``sion"``), nor a NUL byte (UTF-16 or UTF-32 text).
   A file without any is not read: one fast pass over its bytes, which is all a
   ``package-lock.json`` costs, over the size limit or not.
2. Otherwise, a file over the size limit or not UTF-8 is read, so that the loader
   reports why it cannot be scanned.
3. Otherwise the text is decoded as a JSON stream (kubectl reads one object after
   another); it is a manifest when a value is an object with ``apiVersion`` and
   ``kind`` (or a list holding one: the loader warns that Kubernetes rejects it).
   Valid JSON without one is skipped (a JSON schema naming ``apiVersion``).
4. Text that is not JSON is composed as YAML, document by document, and is a
   manifest at the first one that may be a Kubernetes object; YAML without one is
   skipped. Text that is neither, yet names ``apiVersion`` (1.), is read, and the
   loader reports where it stops parsing (a truncated manifest is PG001).

A manifest is then parsed like any other (``yamldoc.parse_stream``), which keeps
every field's line and column.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, BinaryIO, Final

from scanner.sources.yaml.document import may_hold_objects

_KEY: Final = b"piVersion"
_ESCAPES: Final = re.compile(
    rb"\\(?:u00[4-7][0-9A-Fa-f]|x[4-7][0-9A-Fa-f]|U000000[4-7][0-9A-Fa-f]|[\r\n])"
)
"""An escaped character in U+0040..U+007F (every ASCII letter; ``json.dumps`` and
kubectl never escape these), or an escaped line break."""
_OVERLAP: Final = len(b"\\U00000056") - 1
"""Bytes a chunk keeps from the one before, so no key or escape is cut in two."""
_CHUNK: Final = 1024 * 1024
_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")
_DECODER: Final = json.JSONDecoder()


def may_be_manifest(path: str | os.PathLike[str], max_file_size: int) -> bool:
    """Whether a ``.json`` file found in a walk is read as a manifest (see above).

    A file that cannot be opened is read, so that the loader reports why.
    """
    try:
        with open(path, "rb") as handle:
            if os.fstat(handle.fileno()).st_size > max_file_size:
                return _stream_names_key(handle)
            data = handle.read(max_file_size + 1)
    except OSError:
        return True
    if not names_key(data):
        return False
    if len(data) > max_file_size:  # grew since fstat: the loader reports the size
        return True
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        return True
    values, complete = _json_values(text)
    if any(_holds_object(value) for value in values):
        return True
    if complete:
        return False
    found = may_hold_objects(text)
    return found is None or found


def names_key(data: bytes) -> bool:
    """Whether ``data`` may spell the key ``apiVersion`` in JSON or YAML (step 1).

    Escaped backslashes go first: ``"C:\\\\x64"`` escapes no letter. (A chunk that
    starts inside a run of backslashes may pair them wrongly; a key spelling
    ``apiVersion`` holds no backslash, so each of its escapes stands after another
    character, and is found whole in some chunk.)
    """
    if _KEY in data or b"\0" in data:
        return True
    if _ESCAPES.search(data) is None:  # most files: no copy made
        return False
    return _ESCAPES.search(data.replace(b"\\\\", b"")) is not None


def _stream_names_key(handle: BinaryIO) -> bool:
    """``names_key`` over a whole file, a chunk at a time: a file over the size limit
    is never held in memory."""
    tail = b""
    while chunk := handle.read(_CHUNK):
        if names_key(tail + chunk):
            return True
        tail = chunk[-_OVERLAP:]
    return False


def _json_values(text: str) -> tuple[list[Any], bool]:
    """The JSON values ``text`` holds one after another, and whether all of it
    decoded (the values before an error are kept, as kubectl applies them)."""
    values: list[Any] = []
    index = _after_whitespace(text, 0)
    while index < len(text):
        try:
            value, index = _DECODER.raw_decode(text, index)
        except (ValueError, RecursionError):  # RecursionError: nesting too deep
            return values, False
        values.append(value)
        index = _after_whitespace(text, index)
    return values, True


def _after_whitespace(text: str, index: int) -> int:
    match = _WHITESPACE.match(text, index)
    return match.end() if match else index


def _holds_object(value: Any) -> bool:
    """An object with ``apiVersion`` and ``kind``, or a list holding one."""
    if isinstance(value, list):
        return any(_is_object(item) for item in value)
    return _is_object(value)


def _is_object(value: Any) -> bool:
    return isinstance(value, dict) and "apiVersion" in value and "kind" in value
