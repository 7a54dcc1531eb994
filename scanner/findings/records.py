"""Findings and notifications: the one record every reporter reads.

A ``Finding`` is immutable and carries everything a reporter needs: rule id,
level, message, exact location, object identity and a fingerprint that
survives edits which only move lines.

Fingerprints have versions (``FINGERPRINT_VERSION``):

* v1 (``fingerprint_v1``): rule id + object identity + field path. The same object
  identity in two files (a kustomize base and an overlay, two samples) gave two
  results one fingerprint, and GitHub code scanning merged them into one alert.
* v2 (``fingerprint``): v1 joined with where the object is: its file and the rendered
  unit it came from (two overlays of one base both point at the base's file). A live
  object's place is left out: its ``cluster://`` URI names the kubeconfig context,
  and a renamed context must not make every finding new. Still no line number.

Two findings of one rule on one field of one object in one place still share v2
(a file that repeats an object); ``run_fingerprints`` numbers such repeats in their
order in the file, so every result of a run has its own.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from scanner.inventory import LIVE, ObjectRef, Origin

INCOMPLETE_RULES: Final = frozenset({"PG001"})
"""Findings that mean "could not read this", not "this breaks the policy" (exit 3)."""
FINGERPRINT_VERSION: Final = 2
"""The version of ``Finding.fingerprint``; baselines and JSON reports record it."""


class Level(enum.IntEnum):
    """SARIF levels, ordered so that ``level >= threshold`` means "at least as severe"."""

    NOTE = 1
    WARNING = 2
    ERROR = 3

    @classmethod
    def parse(cls, text: str) -> Level:
        return cls[text.upper()]

    def __str__(self) -> str:
        return self.name.lower()


class Outcome(enum.Enum):
    """``fail``: the rule found a violation. ``error``: the rule could not be evaluated."""

    FAIL = "fail"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Location:
    """A 1-based region in an artifact. ``uri`` is repository-relative or ``cluster://``;
    line and column are 0 for an object of a cluster, which has no position."""

    uri: str
    line: int
    column: int
    path: str = ""
    """The field path the finding is about, relative to the object's root."""

    def __reduce__(self) -> tuple[type[Location], tuple[str, int, int, str]]:
        """Pickled as its fields (``Finding.__reduce__``)."""
        return (Location, (self.uri, self.line, self.column, self.path))

    def shown(self) -> str:
        """``uri:line:column`` as editors jump to it; the bare URI where there is no
        position (line 0: an object read from a cluster has no file and no lines)."""
        if self.line <= 0:
            return self.uri
        return f"{self.uri}:{self.line}" + (f":{self.column}" if self.column > 0 else "")


@dataclass(frozen=True, slots=True)
class Suppression:
    """Why a finding does not count: ``in-source`` annotation or ``external`` config exemption."""

    kind: str
    justification: str


@dataclass(frozen=True, slots=True)
class Finding:
    """One rule result on one place. Reporters never compute anything but layout from it."""

    rule_id: str
    level: Level
    message: str
    location: Location
    ref: ObjectRef | None
    source_type: str = "file"
    outcome: Outcome = Outcome.FAIL
    suppression: Suppression | None = None
    origin: Origin | None = None
    """The document of the object the finding is on (its ``KubeObject.origin``), or None
    when there is none: an in-source suppression holds for the object it is written on
    alone, not for another one with the same identity (``scanner.findings.suppress``)."""

    def __reduce__(self) -> tuple[type[Finding], tuple[object, ...]]:
        """Pickled as its fields and rebuilt by the constructor. The dataclass default
        sets each slot from a state list in Python: reading a helper's findings back
        (scanner/evaluate/shipping.py, ~30,000 of a 100,000-pod audit) took markedly longer."""
        return (
            Finding,
            (
                self.rule_id,
                self.level,
                self.message,
                self.location,
                self.ref,
                self.source_type,
                self.outcome,
                self.suppression,
                self.origin,
            ),
        )

    @property
    def fingerprint(self) -> str:
        """Version 2: ``fingerprint_v1`` joined with the finding's file and rendered unit
        (none for a live object; module docstring). Stable across line moves."""
        if self.source_type == LIVE:
            place = ""
        else:
            place = f"{self.location.uri}|{self.origin.unit if self.origin is not None else ''}"
        return digest(f"v2|{self.fingerprint_v1}|{place}")

    @property
    def fingerprint_v1(self) -> str:
        """Version 1: rule, object identity and field path, never line numbers; what
        baselines and reports of version 1 recorded.

        Findings on documents that have no identity (a file that does not parse)
        fall back to the file and the message.
        """
        if self.ref is not None:
            identity = "|".join(
                (self.ref.api_version, self.ref.kind, self.ref.namespace, self.ref.name)
            )
        else:
            identity = f"{self.location.uri}|{self.message}"
        return digest(f"{self.rule_id}|{identity}|{self.location.path}")

    @property
    def sort_key(self) -> tuple[str, int, int, str, str]:
        return (
            self.location.uri,
            self.location.line,
            self.location.column,
            self.rule_id,
            self.message,
        )


@dataclass(frozen=True, slots=True)
class Notification:
    """Something about the run itself: unreadable input, a rule that could not run.

    Notifications of level ``error`` make the run incomplete (exit code 3).
    """

    level: Level
    message: str
    uri: str = ""
    line: int = 0
    column: int = 0
    rule_id: str = ""


def digest(text: str) -> str:
    """The 32 hex digits fingerprints are made of."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def run_fingerprints(findings: Sequence[Finding]) -> list[str]:
    """Each finding's fingerprint in this run, in order: ``fingerprint``, except that
    findings repeating one (one file holding the same object twice, a rule reporting one
    field twice) are numbered by position (line, column, message): the second gets the
    digest of the fingerprint and ``#1``, and so on. No two findings of a run share one,
    and a repeat keeps its fingerprint while lines move around it."""
    prints = [finding.fingerprint for finding in findings]
    groups: dict[str, list[int]] = {}
    for index, fingerprint in enumerate(prints):
        groups.setdefault(fingerprint, []).append(index)
    for fingerprint, indexes in groups.items():
        if len(indexes) < 2:
            continue
        indexes.sort(key=lambda i: _position(findings[i]))
        for number, index in enumerate(indexes[1:], start=1):
            prints[index] = digest(f"{fingerprint}#{number}")
    return prints


def _position(finding: Finding) -> tuple[int, int, str]:
    return (finding.location.line, finding.location.column, finding.message)


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Deterministic order for every reporter: uri, line, column, rule, message."""
    return sorted(findings, key=lambda finding: finding.sort_key)
