"""Suppressions: the stage between the engine and the reporters.

Two ways to say "this finding is accepted":

* in the manifest, an annotation on the object's own ``metadata.annotations``
  (not on a pod template's metadata, which is copied to every pod)::

      poolgate.io/ignore: "PG501=vendor image, digest pinned by the operator, PG401=legacy"

  Entries are ``RULE=reason`` (``RULE`` a rule id or name), separated by commas or
  newlines; a reason may itself contain commas as long as what follows a comma does
  not look like ``RULE=`` (an id, a loaded rule's name, or a hyphenated word).
  It holds for findings on the object that carries it, found by its document
  (``Finding.origin``), never by identity alone: a benign ``team-a/web`` with the
  annotation must not silence a privileged ``team-a/web`` in the same file, the
  one ``kubectl apply`` leaves running (PG005 reports the pair).
* in the config, ``spec.exemptions`` with a rule, an object match, a reason and an
  optional expiry date.

A suppressed finding stays in the report with a ``Suppression`` (SARIF
``suppressions``; text hides it unless ``--show-suppressed``) and never fails the
run. A suppression that names no reason, names an unknown rule, or has expired
does not suppress; it is reported itself: annotation problems as findings of the
built-in rule PG004 at the annotation's line, exemption problems as notifications
at the config file's line. An annotation cannot suppress PG004 (it would silence
reports about itself); a config exemption can.
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from scanner.config.values import Config, Exemption
from scanner.findings.records import Finding, Level, Location, Notification, Outcome, Suppression
from scanner.inventory import KubeObject, ObjectRef, Origin, is_mapping, join_path
from scanner.model.wildcards import Dialect, compile_pattern
from scanner.ruleset.names import RuleNames

IGNORE_ANNOTATION: Final = "poolgate.io/ignore"
INVALID_RULE: Final = "PG004"
IN_SOURCE: Final = "in-source"
EXTERNAL: Final = "external"

_ID: Final = re.compile(r"[A-Za-z][A-Za-z0-9]*[0-9]{3}")
# The shape of a rule name with a hyphen: after a comma, one starts an entry even when
# no loaded rule has it, so a misspelt name is reported rather than read as reason.
_NAME: Final = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)+")
# A rule: an id, or a rule's name (one character class: nothing to backtrack over).
_RULE: Final = r"[A-Za-z0-9][A-Za-z0-9-]*"
# A newline always starts a new entry; a comma only when a rule id or the name of a
# loaded rule (then "=", a comma or the end) follows, so reasons may contain commas.
_ENTRY_START: Final = re.compile(rf"\s*(?P<rule>{_RULE})\s*(?:=|$)")
_ENTRY: Final = re.compile(rf"(?P<id>{_RULE})\s*(?:=(?P<reason>.*))?")
_ANNOTATION_PATH: Final = join_path(join_path("metadata", "annotations"), IGNORE_ANNOTATION)


@dataclass(frozen=True, slots=True)
class Applied:
    findings: list[Finding]
    """Every finding, suppressed ones marked, plus PG004 findings."""
    notifications: list[Notification]
    """Exemptions that do not suppress (no reason, expired)."""


@dataclass(frozen=True, slots=True)
class Ignore:
    """A parsed ``poolgate.io/ignore`` value: valid entries and what is wrong with the rest."""

    reasons: Mapping[str, str]
    problems: tuple[str, ...]


def parse_ignore(value: object, known_rules: Collection[str] | RuleNames) -> Ignore:
    """Parse an annotation value; only entries with a known rule (by id or name,
    ``known_rules``) and a reason suppress."""
    names = _names(known_rules)
    if not isinstance(value, str):
        return Ignore({}, (f'{IGNORE_ANNOTATION} must be a string "RULE=reason, ..."',))
    if not value.strip():
        return Ignore({}, (f"{IGNORE_ANNOTATION} is empty; it suppresses nothing",))
    reasons: dict[str, str] = {}
    problems: list[str] = []
    lines = value.strip().splitlines()
    for raw in (part for line in lines for part in _entries(line, names)):
        entry = raw.strip().strip(",").strip()
        if not entry:
            continue
        parsed = _ENTRY.fullmatch(entry)
        if parsed is None:
            problems.append(f"{IGNORE_ANNOTATION} entry {_quote(entry)} is not RULE=reason")
            continue
        reason = " ".join((parsed["reason"] or "").split())
        rule_id = names.resolve(parsed["id"])
        if rule_id is None:
            shown = parsed["id"].upper() if _ID.fullmatch(parsed["id"]) else parsed["id"]
            problems.append(
                f"{IGNORE_ANNOTATION} names unknown rule {shown}{names.suggestion(shown)}; "
                "it suppresses nothing"
            )
        elif rule_id == INVALID_RULE:
            problems.append(
                f"{IGNORE_ANNOTATION} cannot suppress {INVALID_RULE} (reports about itself); "
                "use a config exemption"
            )
        elif not reason:
            problems.append(
                f"{IGNORE_ANNOTATION} entry {rule_id} has no reason, so it does not suppress; "
                f"write {rule_id}=<why it is accepted>"
            )
        else:
            reasons.setdefault(rule_id, reason)
    return Ignore(reasons, tuple(problems))


def _entries(line: str, names: RuleNames) -> list[str]:
    """``line`` cut at the commas that start an entry (``_ENTRY_START`` on what follows,
    up to the next comma, naming an id or a loaded rule's name). Each piece is read
    once: splitting with a regular expression that begins with ``\\s*`` retried every
    blank of a long run of blanks (quadratic in an annotation the input writes)."""
    groups: list[list[str]] = []
    for part in line.split(","):
        if groups and not _starts_entry(part, names):
            groups[-1].append(part)
        else:
            groups.append([part])
    return [",".join(group) for group in groups]


def _starts_entry(part: str, names: RuleNames) -> bool:
    start = _ENTRY_START.match(part)
    if start is None:
        return False
    rule = start["rule"]
    return _ID.fullmatch(rule) is not None or _NAME.fullmatch(rule) is not None or rule in names


def _names(known_rules: Collection[str] | RuleNames) -> RuleNames:
    return known_rules if isinstance(known_rules, RuleNames) else RuleNames.of_ids(known_rules)


def _quote(text: str) -> str:
    return '"' + (text if len(text) <= 60 else text[:57] + "...") + '"'


def exemption_problem(exemption: Exemption, today: datetime.date) -> str:
    """Why ``exemption`` does not suppress, or ``""`` when it does."""
    if not exemption.reason:
        return f"exemption for {exemption.rule} has no reason, so it does not suppress"
    if exemption.expires is not None and exemption.expires < today:
        return (
            f"exemption for {exemption.rule} expired on {exemption.expires.isoformat()}; "
            "it no longer suppresses"
        )
    return ""


def exemption_matches(exemption: Exemption, finding: Finding) -> bool:
    """Same rule, and the finding's object matches every pattern the exemption gives.

    An object without ``metadata.namespace`` matches ``default`` too: that is where
    ``kubectl apply`` puts it, and where rules judge it.
    """
    if exemption.rule != finding.rule_id:
        return False
    ref = finding.ref
    if ref is None:
        return not (exemption.namespace or exemption.kind or exemption.name)
    namespaces = (ref.namespace,) if ref.namespace else ("", "default")
    return (
        _glob_match(exemption.kind, ref.kind)
        and _glob_match(exemption.name, ref.name)
        and any(_glob_match(exemption.namespace, namespace) for namespace in namespaces)
    )


def _glob_match(pattern: str, value: str) -> bool:
    """``*`` matches any run of characters; everything else is literal. The config may
    come with the pull request, so no regular expression: ``scanner.model.wildcards``."""
    return not pattern or compile_pattern(pattern, Dialect.GLOB).matches(value)


def apply(
    findings: Iterable[Finding],
    objects: Iterable[KubeObject],
    config: Config,
    *,
    known_rules: Collection[str] | RuleNames,
    invalid_level: Level | None,
    repo_root: Path,
    today: datetime.date | None = None,
) -> Applied:
    """Mark suppressed findings and report suppressions that do not hold.

    ``objects`` are the reportable objects (their annotations are read);
    ``invalid_level`` is PG004's level, ``None`` when PG004 is not part of the run
    (then nothing about invalid suppressions is reported, and they still do not
    suppress). ``today`` decides expiry; tests pass a fixed date.
    """
    today = today or datetime.date.today()
    names = _names(known_rules)
    ignores: dict[tuple[Origin, ObjectRef], dict[str, str]] = {}
    invalid: list[Finding] = []
    for obj in objects:
        annotations = obj.metadata.get("annotations")
        if not is_mapping(annotations) or IGNORE_ANNOTATION not in annotations:
            continue
        parsed = parse_ignore(annotations[IGNORE_ANNOTATION], names)
        reasons = ignores.setdefault((obj.origin, obj.ref), {})
        for rule_id, reason in parsed.reasons.items():
            reasons.setdefault(rule_id, reason)
        if invalid_level is not None:
            invalid.extend(
                _invalid_finding(obj, message, invalid_level) for message in parsed.problems
            )

    exemptions: list[Exemption] = []
    notifications: list[Notification] = []
    config_uri = _uri(config.source, repo_root) if config.source else ""
    for exemption in config.exemptions:
        problem = exemption_problem(exemption, today)
        if not problem:
            exemptions.append(exemption)
        elif invalid_level is not None:
            notifications.append(
                Notification(
                    Level.WARNING,
                    problem,
                    uri=config_uri,
                    line=exemption.line,
                    rule_id=INVALID_RULE,
                )
            )

    result = []
    for finding in [*findings, *invalid]:
        suppression = None
        if finding.outcome is Outcome.FAIL:
            suppression = _suppression(finding, ignores, exemptions)
        result.append(finding if suppression is None else replace(finding, suppression=suppression))
    return Applied(result, notifications)


def _suppression(
    finding: Finding,
    ignores: Mapping[tuple[Origin, ObjectRef], Mapping[str, str]],
    exemptions: Iterable[Exemption],
) -> Suppression | None:
    origin, ref = finding.origin, finding.ref
    if origin is not None and ref is not None and finding.rule_id != INVALID_RULE:
        reason = ignores.get((origin, ref), {}).get(finding.rule_id)
        if reason:
            return Suppression(IN_SOURCE, reason)
    for exemption in exemptions:
        if exemption_matches(exemption, finding):
            return Suppression(EXTERNAL, exemption.reason)
    return None


def _invalid_finding(obj: KubeObject, message: str, level: Level) -> Finding:
    line, column = obj.position(_ANNOTATION_PATH)
    return Finding(
        rule_id=INVALID_RULE,
        level=level,
        message=message,
        location=Location(obj.origin.uri, line, column, _ANNOTATION_PATH),
        ref=obj.ref,
        source_type=obj.origin.source_type,
        origin=obj.origin,
    )


def _uri(source: str, repo_root: Path) -> str:
    """The config file's URI, relative to the repository root like every finding's."""
    path = Path(os.path.abspath(source))
    try:
        return path.relative_to(Path(os.path.abspath(repo_root))).as_posix()
    except ValueError:
        return path.as_posix()
