"""Baselines: accept the findings a repository already has, report only new ones.

``poolgate scan --write-baseline FILE`` records the fingerprint of every current
finding and its file; ``--baseline FILE`` drops as many findings of each
fingerprint as it recorded, those in the recorded files first. A fingerprint is
rule id + object identity + field path (``Finding.fingerprint``), never a line
number, so edits that only move lines keep old findings baselined, and moving an
object to another file does too; but a second copy of a recorded object (the same
Deployment added for another cluster's overlay) is new, not hidden with the first.

What is never baselined, because hiding it would hide a problem with the run
rather than accepted debt: rule errors (outcome ``error``) and findings that say
an input could not be read (``incomplete_rules``, PG001). Suppressed findings are
not baselined either; they already carry their own justification.

The file is JSON with entries sorted for small diffs; ``ruleId`` and ``message``
are only there for people reviewing the file::

    {
      "version": 2,
      "tool": {"name": "poolgate", "version": "0.1.0"},
      "fingerprints": [
        {"fingerprint": "<32 hex>", "objectFingerprint": "<32 hex>", "ruleId": "PG301",
         "uri": "k8s/a.yaml", "message": "container \\"agent\\" runs privileged"}
      ]
    }

Version 2 (written now) records the finding's fingerprint as reports show it
(version 2: with its file, ``scanner.findings.records``) and ``objectFingerprint``,
the rule, object and field alone (version 1's fingerprint), which finds the object
in another file. A version 1 file (``fingerprint`` of version 1, no
``objectFingerprint``) is still read and matched the same way. In version 2 the
``fingerprint`` must be the one of ``objectFingerprint`` in ``uri``.

An entry has ``"count": N`` when its file holds the finding N times (N > 1). Counts
stay counts: reading a file costs time and memory in proportion to its size, never to
the counts it claims, and a file over ``MAX_SIZE`` is refused before it is parsed.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

from scanner.errors import UsageError
from scanner.findings.records import Finding, Outcome, digest

BASELINE_VERSION = 2
READ_VERSIONS: Final = (1, 2)
MAX_SIZE: Final = 32 * 1024 * 1024
"""The largest baseline file read: about 100,000 findings with long messages. Parsed,
a file takes some ten times its size in memory."""
MAX_COUNT: Final = 1_000_000
_FINGERPRINT = re.compile(r"^[0-9a-f]{32}$")


def eligible(finding: Finding, incomplete_rules: Collection[str]) -> bool:
    """Whether ``finding`` may be recorded in (and hidden by) a baseline."""
    return (
        finding.suppression is None
        and finding.outcome is Outcome.FAIL
        and finding.rule_id not in incomplete_rules
    )


Recorded = Counter[tuple[str, str]]
"""(object fingerprint, file URI) -> how many findings with them a baseline holds.
The object fingerprint is ``Finding.fingerprint_v1``: rule, object and field."""


def recorded(findings: Iterable[Finding], incomplete_rules: Collection[str]) -> Recorded:
    """What a baseline written now would hold."""
    return Counter(
        (finding.fingerprint_v1, finding.location.uri)
        for finding in findings
        if eligible(finding, incomplete_rules)
    )


def split(
    findings: Sequence[Finding], known: Recorded, incomplete_rules: Collection[str]
) -> tuple[list[Finding], int]:
    """(findings to report, how many were dropped because the baseline holds them).

    Each recorded finding hides one finding with its fingerprint: one in its own file
    if there is one, else one elsewhere (the object moved)."""
    left: dict[str, Counter[str]] = {}  # object fingerprint -> file -> recorded, not yet used
    for (fingerprint, uri), count in known.items():
        if count > 0:
            left.setdefault(fingerprint, Counter())[uri] += count
    candidates = [
        (index, finding)
        for index, finding in enumerate(findings)
        if eligible(finding, incomplete_rules) and finding.fingerprint_v1 in left
    ]
    hidden: set[int] = set()
    for same_file in (True, False):
        for index, finding in candidates:
            files = left[finding.fingerprint_v1]
            if index in hidden or not files:
                continue
            uri = finding.location.uri
            if uri not in files:
                if same_file:
                    continue
                uri = next(iter(files))  # moved here from a file that no longer has it
            files[uri] -= 1
            if not files[uri]:
                del files[uri]
            hidden.add(index)
    kept = [finding for index, finding in enumerate(findings) if index not in hidden]
    return kept, len(hidden)


def document(
    findings: Iterable[Finding], tool_version: str, incomplete_rules: Collection[str]
) -> dict[str, Any]:
    """The baseline file's content: one entry per fingerprint and file, sorted."""
    entries: dict[tuple[str, str], dict[str, Any]] = {}
    for finding in findings:
        if not eligible(finding, incomplete_rules):
            continue
        key = (finding.fingerprint_v1, finding.location.uri)
        entry = entries.get(key)
        if entry is not None:
            entry["count"] = entry.get("count", 1) + 1
            continue
        entries[key] = {
            "fingerprint": in_file(finding.fingerprint_v1, finding.location.uri),
            "objectFingerprint": finding.fingerprint_v1,
            "ruleId": finding.rule_id,
            "uri": finding.location.uri,
            "message": finding.message,
        }
    ordered = sorted(
        entries.values(), key=lambda entry: (entry["uri"], entry["ruleId"], entry["fingerprint"])
    )
    return {
        "version": BASELINE_VERSION,
        "tool": {"name": "poolgate", "version": tool_version},
        "fingerprints": ordered,
    }


def in_file(object_fingerprint: str, uri: str) -> str:
    """A baseline entry's ``fingerprint``: its object fingerprint joined with its file.
    The finding's own (``Finding.fingerprint``) joins its rendered unit too; an entry
    counts the findings of all units of the file (``count``)."""
    return digest(f"v2|{object_fingerprint}|{uri}|")


def write(content: dict[str, Any], stream: TextIO) -> None:
    stream.write(json.dumps(content, indent=2, ensure_ascii=False) + "\n")


def load(path: Path) -> Recorded:
    """The findings recorded in a baseline file.

    Every problem is a ``UsageError`` naming the file (and the entry), raised before
    the scan starts.
    """
    return parse(read(path), str(path))


def read(path: Path) -> bytes:
    """A baseline file's bytes; a ``UsageError`` when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            # Read one byte past the limit rather than trust a size: a pipe has none.
            return handle.read(MAX_SIZE + 1)
    except FileNotFoundError:
        raise UsageError(
            f"--baseline {path}: no such file",
            hint="create one with --write-baseline FILE",
        ) from None
    except OSError as error:
        raise UsageError(f"--baseline {path}: cannot read: {error.strerror or error}") from None


def parse(data: bytes, name: str) -> Recorded:
    """The findings recorded in a baseline's bytes; ``name`` names it in errors (a
    file, or ``REF:path`` for one read from a git commit)."""
    if len(data) > MAX_SIZE:
        raise UsageError(
            f"--baseline {name}: larger than {MAX_SIZE // (1024 * 1024)} MiB",
            hint="a baseline holds one entry per finding; is it the right file?",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UsageError(f"--baseline {name}: cannot read: {error}") from None
    try:
        content = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(
            f"--baseline {name}:{error.lineno}:{error.colno}: not valid JSON: {error.msg}"
        ) from None
    except (ValueError, RecursionError) as error:  # a number too long, nesting too deep
        raise UsageError(f"--baseline {name}: not a baseline file: {error}") from None
    return _fingerprints_of(content, name)


def _fingerprints_of(data: object, path: str) -> Recorded:
    if not isinstance(data, dict):
        raise UsageError(f"--baseline {path}: not a poolgate baseline (expected a JSON object)")
    version = data.get("version")
    if version not in READ_VERSIONS or isinstance(version, bool):
        raise UsageError(
            f"--baseline {path}: unsupported baseline version {version!r}",
            hint=f"poolgate reads versions {', '.join(map(str, READ_VERSIONS))};"
            " write it again: --write-baseline",
        )
    entries = data.get("fingerprints")
    if not isinstance(entries, list):
        raise UsageError(f"--baseline {path}: 'fingerprints' must be a list")
    found: Recorded = Counter()
    for index, entry in enumerate(entries):
        value = _hex(entry, "fingerprint", path, index)
        uri = entry.get("uri")
        uri = uri if isinstance(uri, str) else ""
        if version != 1:  # the object's fingerprint, and the file's that it must agree with
            recorded_in_file, value = value, _hex(entry, "objectFingerprint", path, index)
            if recorded_in_file != in_file(value, uri):
                raise UsageError(
                    f"--baseline {path}: fingerprints[{index}].fingerprint is not the one "
                    "of its objectFingerprint and uri"
                )
        count = entry.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_COUNT:
            raise UsageError(
                f"--baseline {path}: fingerprints[{index}].count must be 1 to {MAX_COUNT:,}"
            )
        found[value, uri] += count
    return found


def _hex(entry: object, key: str, path: str, index: int) -> str:
    value = entry.get(key) if isinstance(entry, dict) else None
    if not isinstance(value, str) or not _FINGERPRINT.match(value):
        raise UsageError(
            f"--baseline {path}: fingerprints[{index}] has no valid '{key}' "
            "(32 lower-case hex digits)"
        )
    return value
