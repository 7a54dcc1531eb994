"""Drift between two runs: which findings are new, unchanged or resolved since last night.

``poolgate audit --compare PREVIOUS.json`` (and ``scan --compare``) reads an
earlier ``--format json`` report and matches findings by fingerprint (rule, object
identity, field path: never line numbers or message text, so a pod Pending for 40 minutes last night
and 1,480 minutes tonight is the same finding). An object's API version is part of
its fingerprint, but not of the match: after an upgrade that serves a kind under a
new version (``karpenter.sh/v1beta1`` to ``v1``), the same rule on the same object
and field is the same finding, not one resolved and one new. Only violations count
on either side; suppressed findings and rules that could not be evaluated do not
(a finding suppressed since last night counts as resolved: it no longer fails the
policy, and the report lists it as suppressed). Matching reads the fields of the
finding, not its ``fingerprint``, so reports written before fingerprint version 2
(which joined the file) are read alike (``Key``).

A finding of last night is *resolved* only if tonight's audit could have seen it
again: when its rule did not run, or did not run on its object's kind (forbidden,
not in the snapshot, disabled), or could not be evaluated on its object tonight
(a rule error there), it is *unverified* instead. A nightly report that turns "403
on Pods" into "all Pending pods fixed" would be worse than none. The unverified
findings are part of tonight's JSON report (``drift.unverified``) and the next
comparison reads them as findings still open: a night with a forbidden kind does
not turn them into new ones the night after. A scan sees files, not a cluster: a
previous finding is resolved only if its rule ran and its file lies under a path this
scan was given and was read (``scan_locator``); a file left out of tonight's paths, or
one that did not parse, leaves its findings unverified.

Reports (``scanner.reporters.drift``): the text report leads with what changed; JSON
gains a ``drift`` section and a ``drift`` key on every finding (``new`` |
``unchanged``); SARIF results get ``baselineState`` (``new`` | ``unchanged``), which
code-scanning viewers understand; the HTML report gains a "Since the last audit"
("Since the previous scan") section and a badge on every finding.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from scanner.errors import UsageError
from scanner.findings.records import INCOMPLETE_RULES, Finding, Level, Outcome
from scanner.findings.report import Report
from scanner.inventory import CLUSTER_SCHEME

NEW, UNCHANGED, RESOLVED, UNVERIFIED = "new", "unchanged", "resolved", "unverified"


@dataclass(frozen=True, slots=True)
class Drift:
    previous: str
    """The previous report's path, as given."""
    new: tuple[Finding, ...]
    unchanged: tuple[Finding, ...]
    resolved: tuple[Mapping[str, Any], ...]
    """Last night's findings (as the JSON report had them) that are gone."""
    unverified: tuple[Mapping[str, Any], ...]
    """Last night's findings tonight's audit could not check again."""
    since: str = "the last audit"
    """What the previous report was, as headings name it."""
    unchecked: str = "their rules could not run on them"
    """Why the unverified findings could not be checked again, as the text report
    says it."""

    def states(self) -> dict[str, str]:
        states = {f.fingerprint: UNCHANGED for f in self.unchanged}
        states.update({f.fingerprint: NEW for f in self.new})
        return states


def load_previous(path: str) -> list[Mapping[str, Any]]:
    """The violations of a previous ``--format json`` report, with the findings it could
    not check again (its ``drift.unverified``); a usage error if it is not one."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"--compare {path}: no such file", hint="give last night's JSON report")
    try:
        document = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"--compare {path}: cannot read: {error}") from None
    except json.JSONDecodeError as error:
        raise UsageError(
            f"{path}:{error.lineno}:{error.colno}: invalid JSON: {error.msg}"
        ) from None
    except (ValueError, RecursionError) as error:  # a number too long, nesting too deep
        raise UsageError(f"--compare {path}: not a poolgate JSON report: {error}") from None
    if (
        not isinstance(document, dict)
        or document.get("version") != 1
        or not isinstance(document.get("findings"), list)
    ):
        raise UsageError(
            f"--compare {path}: not a poolgate JSON report (version 1)",
            hint="write one with `poolgate audit --format json --output FILE`",
        )
    section = document.get("drift")
    carried = section.get("unverified") if isinstance(section, dict) else None
    return [
        entry
        for entry in [*document["findings"], *(carried if isinstance(carried, list) else ())]
        if isinstance(entry, dict)
        and isinstance(entry.get("fingerprint"), str)
        and entry.get("outcome", "fail") == "fail"
        and entry.get("suppression") is None
    ]


def at_least(previous: Sequence[Mapping[str, Any]], level: Level) -> list[Mapping[str, Any]]:
    """The previous findings at ``level`` or above (``--min-level``): those below are out
    of tonight's view, so they are neither resolved nor unverified. An entry whose level
    is not one poolgate writes is kept."""
    names = {str(item): item for item in Level}
    return [entry for entry in previous if names.get(str(entry.get("level")), Level.ERROR) >= level]


Checked = Callable[[str, str], bool]
"""(rule id, object kind) -> whether tonight's audit could have reported it again."""
Located = Callable[[str], bool]
"""A finding's location URI -> whether this run read that place again."""


def compare(
    report: Report,
    previous: Sequence[Mapping[str, Any]],
    path: str,
    checked: Checked,
    located: Located | None = None,
    since: str = "the last audit",
    unchecked: str = "their rules could not run on them",
) -> Drift:
    current = [
        finding
        for finding in report.findings
        if finding.outcome is Outcome.FAIL and finding.suppression is None
    ]
    before = {_entry_key(entry): entry for entry in previous}
    now = {_key(finding) for finding in current}
    errored = {_key(finding) for finding in report.findings if finding.outcome is Outcome.ERROR}
    resolved: list[Mapping[str, Any]] = []
    unverified: list[Mapping[str, Any]] = []
    for key, entry in before.items():
        if key in now:
            continue
        obj, location = entry.get("object"), entry.get("location")
        kind = obj.get("kind", "") if isinstance(obj, dict) else ""
        uri = location.get("uri", "") if isinstance(location, dict) else ""
        if (
            key not in errored
            and checked(str(entry.get("ruleId", "")), str(kind))
            and (located is None or located(str(uri)))
        ):
            resolved.append(entry)
        else:
            unverified.append(entry)
    return Drift(
        previous=path,
        new=tuple(f for f in current if _key(f) not in before),
        unchanged=tuple(f for f in current if _key(f) in before),
        resolved=tuple(resolved),
        unverified=tuple(unverified),
        since=since,
        unchecked=unchecked,
    )


Key = tuple[str, ...]
"""What makes two findings of two audits the same: (rule id, API group, kind,
namespace, name, field path, place) for a finding on an object, whatever version the
object was read as; place is the file for an object read from one, "" for a live
object (its URI names the kubeconfig context, which may be renamed). For a finding
without an object (a file that does not parse): (rule id, file, field path, message),
what its version 1 fingerprint was made of. Keys are built from the fields every JSON
report has, so reports of either fingerprint version match alike."""


def _key(finding: Finding) -> Key:
    ref, location = finding.ref, finding.location
    if ref is None:
        return ("", finding.rule_id, location.uri, location.path, finding.message)
    group = ref.api_version.rpartition("/")[0]
    return (
        finding.rule_id,
        group,
        ref.kind,
        ref.namespace,
        ref.name,
        location.path,
        _place(location.uri),
    )


def _place(uri: str) -> str:
    return "" if uri.startswith(CLUSTER_SCHEME) else uri


def _entry_key(entry: Mapping[str, Any]) -> Key:
    """``_key`` of a finding as the JSON report has it."""
    obj, location = entry.get("object"), entry.get("location")
    at = location if isinstance(location, dict) else {}
    uri, path = at.get("uri"), at.get("path")
    if obj is None:
        fields: tuple[object, ...] = (entry.get("ruleId"), uri, path, entry.get("message"))
        if all(isinstance(field, str) for field in fields):
            return ("", *cast(tuple[str, ...], fields))
        return (str(entry["fingerprint"]),)
    fields = (
        entry.get("ruleId"),
        obj.get("apiVersion") if isinstance(obj, dict) else None,
        obj.get("kind") if isinstance(obj, dict) else None,
        obj.get("namespace") if isinstance(obj, dict) else None,
        obj.get("name") if isinstance(obj, dict) else None,
        path,
        uri,
    )
    if not all(isinstance(field, str) for field in fields):
        return (str(entry["fingerprint"]),)
    rule_id, api_version, kind, namespace, name, path, uri = cast(tuple[str, ...], fields)
    group = api_version.rpartition("/")[0]
    return (rule_id, group, kind, namespace, name, path, _place(uri))


def checker(ran: Collection[str], unseen: Collection[tuple[str, str]]) -> Checked:
    """``checked`` for an audit where rules ``ran`` and (rule, kind) pairs were ``unseen``."""
    ran_set, unseen_set = frozenset(ran), frozenset(unseen)
    return lambda rule, kind: rule in ran_set and (rule, kind) not in unseen_set


def scan_locator(paths: Collection[str], unread: Collection[str]) -> Located:
    """``located`` for a scan of ``paths`` (repository-relative, ``.`` for the root, as
    ``Report.scanned`` has them): a URI under one of them, whose file was not among
    the ``unread`` (a read error, a document that did not parse)."""
    roots = tuple(path.rstrip("/") for path in paths)
    missed = frozenset(unread)

    def located(uri: str) -> bool:
        if uri in missed:
            return False
        return any(root in (".", "") or uri == root or uri.startswith(root + "/") for root in roots)

    return located


def unread_uris(report: Report) -> set[str]:
    """Files a run could not read: error notifications with a URI, and PG001 findings."""
    unread = {note.uri for note in report.notifications if note.uri and note.level is Level.ERROR}
    unread.update(f.location.uri for f in report.findings if f.rule_id in INCOMPLETE_RULES)
    return unread


def counts(drift: Drift) -> dict[str, int]:
    return {
        NEW: len(drift.new),
        UNCHANGED: len(drift.unchanged),
        RESOLVED: len(drift.resolved),
        UNVERIFIED: len(drift.unverified),
    }
