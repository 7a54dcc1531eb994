"""PolicyReports: the findings as ``wgpolicyk8s.io/v1alpha2`` objects, the cluster's own format.

Kyverno, Kubescape, Trivy (through its adapter) and Falco write these objects, and
Policy Reporter shows them in a UI, sends alerts and aggregates many clusters; a
poolgate audit written this way shows up beside them. The output is a YAML
stream ready for ``kubectl apply --server-side -f``: one ``PolicyReport`` per
namespace with results, then (always, even empty) one ``ClusterPolicyReport``,
each valid against the upstream CRD schema (a test validates them against the
CRDs vendored in ``tests/data/policyreport-crd/``). ``poolgate audit
--publish-reports`` applies the same objects itself (``scanner.audit.publish``).

How a finding becomes a result (``results[]``)::

    policy      "<rule id>-<rule name>" (PG301-privileged-outside-operator): as Kyverno
                and Trivy put the policy's name here and the check in ``rule``; the id
                makes it unique (rule names need not be) and sorts it as the catalog does
    rule        the rule id (PG301)
    result      fail: a violation; error: the rule could not be evaluated on the object
                (outcome ``error``); skip: suppressed (an annotation or a config
                exemption), as Kyverno reports a resource a PolicyException exempts
    severity    note -> info; otherwise the rule's securitySeverity in GitHub's bands
                (>= 9.0 critical, >= 7.0 high, >= 4.0 medium, > 0 low, 0 info), or
                without one error -> high, warning -> medium
    category    the rule's first tag (security, gpu, correctness); none without tags
    message     the finding's message
    source      poolgate
    scored      true
    timestamp   when the objects were read (the audit's capture time), else now
    resources   [{apiVersion, kind, namespace, name, uid}]: uid when the run read the
                object from a cluster or a snapshot that has it; none for a document
                without identity or the cluster itself
    properties  level (error | warning | note), fingerprint, path (the field), file
                ("uri:line" for manifests), suppression and justification (skip)

Where a result goes: a namespaced object's namespace (``default`` for a manifest
that names none, where ``kubectl apply`` puts it); a cluster-scoped object
(Namespace, Node, ClusterPolicy, ...), the cluster as a whole (PG605), a document
without identity (PG001) and a namespace that is not a valid name go to the
ClusterPolicyReport. Error notifications (a kind the audit could not list) are
``error`` results of policy ``poolgate`` in the ClusterPolicyReport, so a cluster
read in part never looks clean. poolgate records violations, not passes:
``summary.pass`` is 0.

Names are stable across runs (``poolgate``, then ``poolgate-2``, ... when a
namespace's results are split) and every object carries
``app.kubernetes.io/managed-by: poolgate``, the label ``--publish-reports`` prunes
by. A report is one etcd object (1.5 MiB at most): results are split into
reports of at most ``MAX_REPORT_BYTES`` of JSON, at most ``MAX_REPORTS`` per
namespace; past that the most severe results are kept, and the last report says
how many were left out (a ``warn`` result and an annotation).
"""

from __future__ import annotations

import datetime
import functools
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TextIO

from scanner.findings.records import Finding, Level, Notification, Outcome
from scanner.findings.report import Report
from scanner.inventory import LIVE, ObjectRef
from scanner.kinds import CLUSTER_SCOPED, api_group
from scanner.model import cluster as synthetic
from scanner.reporters import Writer, blockyaml
from scanner.ruleset.docs import RuleDoc

GROUP: Final = "wgpolicyk8s.io"
VERSION: Final = "v1alpha2"
API_VERSION: Final = f"{GROUP}/{VERSION}"
SOURCE: Final = "poolgate"
NAME: Final = "poolgate"
"""Every report's name (``poolgate-2``, ... for the further parts of a split one)."""
MANAGED_BY: Final = ("app.kubernetes.io/managed-by", "poolgate")
"""The label every report carries; ``--publish-reports`` deletes stale reports by it."""
LEFT_OUT_ANNOTATION: Final = "poolgate.io/results-left-out"
VERSION_ANNOTATION: Final = "poolgate.io/version"

MAX_REPORT_BYTES: Final = 1024 * 1024
"""The most JSON one report holds. etcd refuses objects past 1.5 MiB; the rest is room
for metadata and the ``managedFields`` a server-side apply adds."""
MAX_REPORTS: Final = 5
"""Reports per namespace (and for the cluster): results past 5 MiB are left out."""
STRING_LIMIT: Final = 4096
"""Characters kept of any one string from the input (a name, a path, a message), so
one result always fits in a report, whatever a manifest holds."""
_ENVELOPE: Final = 16 * 1024
"""Room left in a report for everything but its results (metadata, summary)."""

_DNS_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
"""A valid namespace name (RFC 1123 label)."""

_RESULT_RANK: Final = {"fail": 0, "error": 1, "warn": 2, "skip": 3}
_SEVERITY_RANK: Final = {"critical": 0, "high": 1, "medium": 2, "low": 3, "info": 4}


@dataclass(frozen=True, slots=True)
class Found:
    """What a run knows beyond its findings: when the objects were read, and the uid of
    each object it read from a cluster (``object_uids``)."""

    timestamp: datetime.datetime
    uids: Mapping[ObjectRef, str] = field(default_factory=dict)


def object_uids(
    objects: Iterable[Mapping[str, Any]], findings: Iterable[Finding]
) -> dict[ObjectRef, str]:
    """The ``metadata.uid`` of every object of ``objects`` that a finding names."""
    wanted = {finding.ref for finding in findings if finding.ref is not None}
    uids: dict[ObjectRef, str] = {}
    if not wanted:
        return uids
    for obj in objects:
        metadata = obj.get("metadata")
        if not isinstance(metadata, Mapping):
            continue
        uid = metadata.get("uid")
        if not isinstance(uid, str) or not uid:
            continue
        ref = ObjectRef(
            _str(obj.get("apiVersion")),
            _str(obj.get("kind")),
            _str(metadata.get("namespace")),
            _str(metadata.get("name")),
        )
        if ref in wanted:
            uids[ref] = uid
    return uids


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def writer(found: Found | None) -> Writer:
    """``write`` with what the run knows beyond its findings (``Found``)."""
    return functools.partial(write, found=found)


def write(report: Report, stream: TextIO, *, found: Found | None = None) -> None:
    """Write the reports as one YAML stream, ready for ``kubectl apply --server-side -f``."""
    stream.write(
        f"# PolicyReports ({API_VERSION}) written by poolgate {report.tool_version}.\n"
        "# Apply with `kubectl apply --server-side -f FILE` where the wgpolicyk8s.io CRDs\n"
        "# are installed (Kyverno and Policy Reporter install them).\n"
    )
    for obj in build(report, found):
        left_out = obj["metadata"].get("annotations", {}).get(LEFT_OUT_ANNOTATION)
        if left_out is not None and obj["metadata"]["name"] == NAME:
            where = obj["metadata"].get("namespace") or "the cluster"
            stream.write(f"# {where}: {left_out} results left out (see the last report)\n")
        stream.write("---\n")
        stream.write(blockyaml.document(obj))


def build(report: Report, found: Found | None = None) -> list[dict[str, Any]]:
    """The ClusterPolicyReports, then the PolicyReports by namespace, as plain data."""
    found = found or Found(datetime.datetime.now(datetime.UTC))
    stamp = _timestamp(found.timestamp)
    docs = {doc.id: doc for doc in report.rules}
    scopes: dict[str, list[tuple[tuple[int, int, int], dict[str, Any]]]] = {"": []}
    for position, finding in enumerate(report.findings):
        namespace = _namespace(finding)
        result = _result(finding, docs.get(finding.rule_id), stamp, found.uids, namespace)
        scopes.setdefault(namespace, []).append((_rank(result, position), result))
    last = len(_SEVERITY_RANK)  # a note has no severity
    for position, note in enumerate(_errors(report.notifications), start=len(report.findings)):
        scopes[""].append(((_RESULT_RANK["error"], last, position), _note(note, stamp)))
    objects: list[dict[str, Any]] = []
    for namespace in sorted(scopes):
        ordered = [result for _, result in sorted(scopes[namespace], key=lambda item: item[0])]
        objects.extend(_reports(namespace, ordered, stamp, report.tool_version))
    return objects


def _rank(result: Mapping[str, Any], position: int) -> tuple[int, int, int]:
    """Most important first: failures, then rule errors, then suppressed; by severity;
    then in the run's own order. What a full namespace leaves out is the least."""
    severity = _SEVERITY_RANK.get(result.get("severity", ""), len(_SEVERITY_RANK))
    return (_RESULT_RANK[result["result"]], severity, position)


def _timestamp(when: datetime.datetime) -> dict[str, int]:
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    seconds = int(when.timestamp() // 1)
    return {"seconds": seconds, "nanos": when.microsecond * 1000}


def _namespace(finding: Finding) -> str:
    """The namespace whose PolicyReport holds ``finding``, or ``""``: the cluster's."""
    ref = finding.ref
    if ref is None or _is_synthetic(ref):
        return ""
    namespace = ref.namespace
    if not namespace:
        if finding.source_type == LIVE or _cluster_scoped(ref):
            return ""  # a live namespaced object always has its namespace
        namespace = "default"  # where kubectl apply puts a manifest that names none
    return namespace if _DNS_LABEL.fullmatch(namespace) else ""


def _is_synthetic(ref: ObjectRef) -> bool:
    """The made-up object cluster findings attach to (``scanner.model.cluster``)."""
    return (ref.api_version, ref.kind) == (synthetic.API_VERSION, synthetic.KIND)


def _cluster_scoped(ref: ObjectRef) -> bool:
    """Whether a manifest's object is of a cluster-scoped kind (a manifest does not say)."""
    return (api_group(ref.api_version), ref.kind) in CLUSTER_SCOPED


def _result(
    finding: Finding,
    doc: RuleDoc | None,
    stamp: dict[str, int],
    uids: Mapping[ObjectRef, str],
    namespace: str,
) -> dict[str, Any]:
    if finding.suppression is not None:
        verdict = "skip"
    elif finding.outcome is Outcome.ERROR:
        verdict = "error"
    else:
        verdict = "fail"
    result: dict[str, Any] = {
        "policy": policy_name(finding.rule_id, doc),
        "rule": finding.rule_id,
        "result": verdict,
        "severity": severity(finding.level, doc),
    }
    if doc is not None and doc.tags:
        result["category"] = doc.tags[0]
    result["message"] = _text(finding.message)
    result["source"] = SOURCE
    result["scored"] = True
    result["timestamp"] = stamp
    ref = finding.ref
    if ref is not None and not _is_synthetic(ref):
        result["resources"] = [_resource(ref, namespace, uids.get(ref))]
    result["properties"] = _properties(finding)
    return result


def policy_name(rule_id: str, doc: RuleDoc | None) -> str:
    """``PG301-privileged-outside-operator``; the id alone for a rule the run does not
    document."""
    return f"{rule_id}-{doc.name}" if doc is not None else rule_id


def severity(level: Level, doc: RuleDoc | None) -> str:
    """``info`` for a note; else the rule's security severity in GitHub code scanning's
    bands, or high for an error and medium for a warning."""
    if level is Level.NOTE:
        return "info"
    score = doc.security_severity if doc is not None else None
    if score is None:
        return "high" if level is Level.ERROR else "medium"
    if score >= 9.0:
        return "critical"
    if score >= 7.0:
        return "high"
    if score >= 4.0:
        return "medium"
    return "low" if score > 0 else "info"


def _resource(ref: ObjectRef, namespace: str, uid: str | None) -> dict[str, str]:
    resource = {"apiVersion": _text(ref.api_version), "kind": _text(ref.kind)}
    shown = namespace or ref.namespace  # a manifest's "default", as it is placed
    if shown:
        resource["namespace"] = _text(shown)
    if ref.name:
        resource["name"] = _text(ref.name)
    if uid:
        resource["uid"] = _text(uid)
    return resource


def _properties(finding: Finding) -> dict[str, str]:
    location = finding.location
    properties = {"level": str(finding.level), "fingerprint": finding.fingerprint}
    if location.path:
        properties["path"] = _text(location.path)
    if finding.source_type != LIVE and location.line:
        properties["file"] = _text(f"{location.uri}:{location.line}")
    suppression = finding.suppression
    if suppression is not None:
        properties["suppression"] = suppression.kind
        properties["justification"] = _text(suppression.justification)
    return properties


def _errors(notifications: Iterable[Notification]) -> Iterator[Notification]:
    """The notifications that make a run incomplete: an ``error`` result each."""
    return (note for note in notifications if note.level is Level.ERROR)


def _note(note: Notification, stamp: dict[str, int]) -> dict[str, Any]:
    result: dict[str, Any] = {"policy": SOURCE}
    if note.rule_id:
        result["rule"] = _text(note.rule_id)
    result.update(
        {
            "result": "error",
            "message": _text(note.message),
            "source": SOURCE,
            "scored": False,
            "timestamp": stamp,
        }
    )
    if note.uri:
        where = f"{note.uri}:{note.line}" if note.line else note.uri
        result["properties"] = {"file": _text(where)}
    return result


def _text(value: str) -> str:
    """A string from the input, capped at ``STRING_LIMIT`` and encodable: the bytes of
    a name that is not UTF-8 (lone surrogates) as ``\\udcXX`` escapes."""
    if len(value) > STRING_LIMIT:
        value = value[: STRING_LIMIT - 1] + "…"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


# -- reports -------------------------------------------------------------------------


def _reports(
    namespace: str, results: Sequence[dict[str, Any]], stamp: dict[str, int], version: str
) -> list[dict[str, Any]]:
    """The reports of one namespace (``""``: the cluster), split by size, at most
    ``MAX_REPORTS``; the cluster always gets one, even empty."""
    parts, left_out = _split(results)
    if left_out:
        parts[-1].append(_left_out_result(left_out, namespace, stamp))
    reports = []
    for index, part in enumerate(parts):
        name = NAME if index == 0 else f"{NAME}-{index + 1}"
        reports.append(_report(namespace, name, part, version, left_out))
    return reports


def _split(results: Sequence[dict[str, Any]]) -> tuple[list[list[dict[str, Any]]], int]:
    """``results`` in parts of at most ``MAX_REPORT_BYTES`` of JSON, in order, at most
    ``MAX_REPORTS`` of them; and how many results did not fit. When some did not, the
    last part keeps room for the note that says so."""
    budget = MAX_REPORT_BYTES - _ENVELOPE
    parts: list[list[dict[str, Any]]] = [[]]
    sizes: list[list[int]] = [[]]
    used = 0
    for result in results:
        size = _size(result) + 1  # and its comma
        if used + size > budget and parts[-1]:
            if len(parts) == MAX_REPORTS:
                last, last_sizes = parts[-1], sizes[-1]
                while last and used + _NOTE_ROOM > budget:
                    last.pop()
                    used -= last_sizes.pop()
                return parts, len(results) - sum(len(part) for part in parts)
            parts.append([])
            sizes.append([])
            used = 0
        parts[-1].append(result)
        sizes[-1].append(size)
        used += size
    return parts, 0


def _size(result: Mapping[str, Any]) -> int:
    return len(json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode())


_NOTE_ROOM: Final = 1024
"""The most the note on left-out results takes (``_left_out_result``)."""


def _left_out_result(count: int, namespace: str, stamp: dict[str, int]) -> dict[str, Any]:
    where = f"namespace {namespace}" if namespace else "the cluster"
    return {
        "policy": SOURCE,
        "rule": "results-left-out",
        "result": "warn",
        "message": (
            f"{count:,} more results for {where} are not listed: it gets at most "
            f"{MAX_REPORTS} reports of {MAX_REPORT_BYTES // (1024 * 1024)} MiB (etcd "
            "keeps objects of up to 1.5 MiB). The most severe are listed; poolgate's "
            "JSON and SARIF reports hold every finding"
        ),
        "source": SOURCE,
        "scored": False,
        "timestamp": stamp,
    }


def _report(
    namespace: str, name: str, results: list[dict[str, Any]], version: str, left_out: int
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    metadata["labels"] = dict([MANAGED_BY])
    annotations = {VERSION_ANNOTATION: version}
    if left_out:
        annotations[LEFT_OUT_ANNOTATION] = str(left_out)
    metadata["annotations"] = annotations
    return {
        "apiVersion": API_VERSION,
        "kind": "PolicyReport" if namespace else "ClusterPolicyReport",
        "metadata": metadata,
        "summary": _summary(results),
        "results": results,
    }


def _summary(results: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    counts = {"pass": 0, "fail": 0, "warn": 0, "error": 0, "skip": 0}
    for result in results:
        counts[result["result"]] += 1
    return counts
