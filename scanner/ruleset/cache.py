"""What a run learns about its rule files and keeps for the next: which files passed
the rule schema, so a run need not import jsonschema, and what each expression reads,
so a run need not parse the rules' CEL.

Every run loads every rule file and validates it against ``rule.schema.json``.
Importing jsonschema alone is a large share of the pre-commit budget (one small file,
start-up included; benchmarks/README.md), and the rule files rarely change between
runs. So a file that passed is remembered by the SHA-256
of the schema and the file's text together, in ``validated-rules`` under poolgate's
cache directory; a later run skips validation only for a file whose digest is listed.
Anything else is validated as before: a changed rule, a changed schema, a new user
rule, an empty or unreadable cache. A file that fails is never listed, so its errors
are reported on every run.

The cache directory is ``$POOLGATE_CACHE_DIR``, else ``$XDG_CACHE_HOME/poolgate``, else
``~/.cache/poolgate`` (``scanner.runtime.cachedir``). The list is believed only from a private
directory and with a valid HMAC (``cachedir.read``): a digest someone else added would
let a broken rule file skip its checks. It is best effort: when it cannot be read,
verified or written, rules are validated every time and nothing else changes. It only
ever skips work whose result is already known for exactly that content; delete it at
any time.

The analyses of the rules' expressions (``scanner.cel.analysis``) are kept the same
way, by the digest of each expression's text, in ``cel-analyses-<identity>`` (JSON),
where the identity hashes the parser's and the analysis's code: a changed rule is a
new text, a changed reader a new file. Only what poolgate analysed from rule files
is kept, never CEL read from scanned input; an entry that does not read back (or
does not verify) is parsed again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from scanner.cel import analysis
from scanner.runtime import cachedir

FILE_NAME: Final = "validated-rules"
MAX_ENTRIES: Final = 4096
"""Digests kept; the oldest go first, so the file stays a few hundred kilobytes."""


def digest(schema: str, text: str) -> str:
    """The identity of one rule file's validation: schema and rule text together."""
    hasher = hashlib.sha256(schema.encode("utf-8"))
    hasher.update(b"\0")
    hasher.update(text.encode("utf-8"))
    return hasher.hexdigest()


def load() -> list[str]:
    """The digests of rule files known to pass, oldest first ([] when there is no cache)."""
    data = cachedir.read(FILE_NAME)
    if data is None:
        return []
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return []
    return [line for line in text.split() if len(line) == 64]


def save(known: list[str], new: Iterable[str]) -> None:
    """Add ``new`` digests to ``known`` and write the list atomically (errors ignored)."""
    seen = set(known)
    entries = known + [entry for entry in dict.fromkeys(new) if entry not in seen]
    if len(entries) == len(known):
        return
    cachedir.write(FILE_NAME, ("\n".join(entries[-MAX_ENTRIES:]) + "\n").encode("ascii"))


ANALYSES: Final = "cel-analyses"


def load_analyses() -> dict[str, Any]:
    """Digest of an expression's text -> its analysis as JSON ({} when none is kept)."""
    data = cachedir.read(f"{ANALYSES}-{analysis.identity()}")
    if data is None:
        return {}
    try:
        entries = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {}
    return entries if isinstance(entries, dict) else {}


def save_analyses(known: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """Add ``new`` analyses to ``known`` and write them atomically (errors ignored)."""
    if not new.keys() - known.keys():
        return
    entries = list({**known, **new}.items())[-MAX_ENTRIES:]
    text = json.dumps(dict(entries), separators=(",", ":"))  # ASCII: lone surrogates too
    cachedir.write(f"{ANALYSES}-{analysis.identity()}", text.encode("ascii"))
