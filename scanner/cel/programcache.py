"""Compiled CEL programs kept between runs (cpp engine), so a one-file pre-commit run
does not parse and type-check every rule again.

Compiling the ~100 expressions of the bundled rules with cel-cpp, and checking their
comprehension nesting, is a large part of a one-file scan; restoring them with
cel-expr-python's ``deserialize`` is a small part of that (benchmarks/README.md,
"Measurements behind the code"). An entry
is found only by the SHA-256 of its exact source text and required result kind, and
the file's name carries the identity of everything a compiled program depends on:
the cel-expr-python library file, the declared variables and functions, the nesting
limit, poolgate's version, the source of the code that vets a program (``cpp.py``,
``budget.py``, and the CEL reading that tells the nesting, ``analysis.code()``) and
this format. Anything else (a changed rule, another library
build, a stricter check) is a miss and compiles as before; a program is stored only
after it compiled and passed every check. An entry that does not deserialize is a
miss too. Old files of other identities stay until the cache directory is deleted.

The file lives in poolgate's cache directory (``scanner.runtime.cachedir``) and holds records
of a 16-byte key, a 4-byte big-endian length and the serialized program, after the
HMAC that ``cachedir`` checks: a restored program skips the type and nesting checks,
so one that poolgate did not store itself (``[]`` under a rule's key silences the
rule) must never be restored. A file that does not verify is read as empty. It is
rewritten atomically when a run compiled something new, keeping the newest
``MAX_ENTRIES``. It holds only what poolgate itself compiled from rule files the
user runs and the wrappers it builds around them (bound variables, guards), never
anything read from scanned input.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from scanner.runtime import cachedir

FORMAT: Final = 2
MAX_ENTRIES: Final = 4096
_HEADER = struct.Struct(">16sI")


def identity(library: Path, declarations: Iterable[str], checks: Iterable[Path] = ()) -> str:
    """What every program in one cache file was compiled against: the library build,
    the declarations (and poolgate's version), and the text of the code that checks a
    program before it is kept (a stricter check must not be skipped by an old entry)."""
    hasher = hashlib.sha256(f"poolgate-cel-cache {FORMAT}\0".encode())
    try:
        status = library.stat()
        hasher.update(f"{library}\0{status.st_size}\0{status.st_mtime_ns}\0".encode())
    except OSError:
        hasher.update(b"unknown library\0")
    for declaration in declarations:
        hasher.update(declaration.encode("utf-8") + b"\0")
    for path in checks:
        try:
            hasher.update(path.read_bytes() + b"\0")
        except OSError:
            hasher.update(f"unreadable {path}\0".encode())
    return hasher.hexdigest()[:24]


def key(source: str, result: str) -> bytes:
    return hashlib.sha256(f"{result}\0{source}".encode()).digest()[:16]


class ProgramCache:
    """Serialized programs of one identity: read once, written back if it grew."""

    def __init__(self, identity: str) -> None:
        self.name = f"compiled-cel-{identity}"
        self._entries: dict[bytes, bytes] | None = None
        self._added = False

    def get(self, entry: bytes) -> bytes | None:
        return self._load().get(entry)

    def put(self, entry: bytes, data: bytes) -> None:
        entries = self._load()
        entries.pop(entry, None)
        entries[entry] = data  # newest last
        self._added = True

    def forget(self, entry: bytes) -> None:
        self._load().pop(entry, None)
        self._added = True

    def save(self) -> None:
        """Write the file if this run compiled something new (errors ignored)."""
        if not self._added or self._entries is None:
            return
        records = list(self._entries.items())[-MAX_ENTRIES:]
        cachedir.write(self.name, b"".join(_HEADER.pack(k, len(v)) + v for k, v in records))
        self._added = False

    def _load(self) -> dict[bytes, bytes]:
        if self._entries is None:
            self._entries = _parse(cachedir.read(self.name) or b"")
        return self._entries


def _parse(data: bytes) -> dict[bytes, bytes]:
    entries: dict[bytes, bytes] = {}
    offset = 0
    while offset + _HEADER.size <= len(data):
        entry, length = _HEADER.unpack_from(data, offset)
        offset += _HEADER.size
        if offset + length > len(data):
            break  # a truncated file: keep what is whole
        entries[entry] = data[offset : offset + length]
        offset += length
    return entries
