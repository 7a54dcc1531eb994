"""SARIF 2.1.0 for GitHub code scanning and other SARIF viewers.

Built from the ``sarif_om`` object model so property names come from the
standard, not from memory; ``sarif_om`` ships no serializer, so ``_to_json``
walks the attrs fields itself. ``sarif_om`` is imported only when a log is
built, so loading this module (or any other reporter) costs nothing extra.

Choices that matter to consumers:

* ``ruleIndex`` always points into ``tool.driver.rules``: a finding whose rule
  is not in the run's catalog gets a minimal descriptor, because GitHub drops
  results whose index is wrong.
* File URIs are repository-relative, percent-encoded and anchored at
  ``%SRCROOT%`` (declared in ``originalUriBaseIds``) so results land on the right
  file after checkout. Every result names its object as a logical location; an
  object read from a cluster has only that (no file, no lines), with its
  ``cluster://`` URI in the logical location's ``properties.uri``; a notification
  about one has that URI as its artifact, absolute and with no base.
* ``partialFingerprints["poolgate/v2"]`` is the finding's fingerprint in the run
  (rule, object identity, field path, file and rendered unit, repeats numbered:
  ``scanner.findings.records``), so alerts survive edits that only move lines, and
  no two results share one: GitHub merges results with one fingerprint into one
  alert. (Version 1 left out the file: an object of a kustomize base and of its
  overlay were one alert.)
* Suppressed findings stay in the log with ``suppressions``: viewers show them
  as dismissed instead of forgetting them.
* ``invocations[0].properties`` names the policy the run used and its digests
  (``poolgateConfig``, the shape of the JSON report's ``config``) and counts the
  suppressed and baselined findings (``poolgateCounts``); the Action's job summary
  reads them.
* A rule that could not be evaluated (outcome ``error``) is not a verdict on the
  manifest, so it is a ``toolExecutionNotification`` tied to its rule, not a
  result; like any error notification it marks the invocation unsuccessful.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Mapping
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any, TextIO, cast
from urllib.parse import quote, unquote

from scanner.findings.records import (
    FINGERPRINT_VERSION,
    INCOMPLETE_RULES,
    Finding,
    Level,
    Notification,
    Outcome,
    run_fingerprints,
)
from scanner.findings.report import Report
from scanner.ruleset.docs import HELP_URI, RuleDoc

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/poolgate/poolgate"
FINGERPRINT_KEY = f"poolgate/v{FINGERPRINT_VERSION}"
SRCROOT = "%SRCROOT%"
_CLUSTER_SCHEME = "cluster://"
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?")
_SUPPRESSION_KINDS = {"in-source": "inSource", "external": "external"}
# Properties kept even when equal to sarif_om's default: a result without
# "level" takes its rule's default level, not sarif_om's "warning".
_ALWAYS_EMIT = frozenset({"level"})
_LEADING = {
    name: rank
    for rank, name in enumerate(
        ("id", "ruleId", "ruleIndex", "name", "version", "level", "message")
    )
}


def write(report: Report, stream: TextIO, *, states: Mapping[str, str] | None = None) -> None:
    """Write one SARIF log with a single run, indented by 2: exactly
    ``json.dumps(build_log(report), indent=2, ensure_ascii=False)`` and a newline.
    ``states`` (fingerprint -> ``new`` | ``unchanged``) gives those results a
    ``baselineState``, last (``--compare``, scanner/findings/drift.py).

    The results are built and written ``WRITE_BATCH`` at a time, in their place in
    the log: as one text (their objects, their JSON data and the whole log at once)
    the 184,000 results of a 100,000-pod audit took 2.8 GB.
    """
    import sarif_om as om  # lazy: only SARIF runs pay for it

    rules = _descriptors(report)
    index = {rule_id: position for position, (rule_id, _) in enumerate(rules)}
    text = json.dumps(_log(om, report, rules, []), indent=2, ensure_ascii=False)
    failed = _failed(report)
    if not failed:
        stream.write(text + "\n")
        return
    empty = '"results": []'  # a key: inside a string its quotes would be escaped
    at = text.index(empty)
    indent = "\n" + " " * (at - text.rindex("\n", 0, at) - 1)  # the line "results" is on
    pad = indent + "  "  # json.dumps indents each item one level deeper
    marks = states or {}
    stream.write(text[:at] + '"results": [')
    for start in range(0, len(failed), WRITE_BATCH):
        items = []
        for finding, fingerprint in failed[start : start + WRITE_BATCH]:
            built = _result(om, finding, index[finding.rule_id], fingerprint)
            result = cast(dict[str, JSON], _to_json(built))
            state = marks.get(finding.fingerprint) if marks else None
            if state is not None:
                result["baselineState"] = state
            items.append(pad + _result_text(result).replace("\n", pad))
        stream.write(("," if start else "") + ",".join(items))
    stream.write(indent + "]" + text[at + len(empty) :] + "\n")


WRITE_BATCH = 1024
"""Results built and written at a time (~1.5 MB of text)."""


def _result_text(value: JSON) -> str:
    """``_dumps(value)`` for a result, and faster: msgspec's encoder and formatter,
    both in C, write exactly the text of ``json.dumps(indent=2, ensure_ascii=False)``
    for JSON without floats (msgspec spells a float its own way, ``1e16`` for
    ``1e+16``, and NaN as ``null``). A result holds none: ``_result`` builds it from a
    finding's strings and integers. What msgspec cannot encode (a lone surrogate in
    a message) takes ``_dumps``."""
    encode, format_ = _msgspec_json()
    try:
        return format_(encode(value), indent=2).decode()
    except (UnicodeEncodeError, TypeError):
        return _dumps(value)


@functools.cache
def _msgspec_json() -> tuple[Callable[[Any], bytes], Callable[..., bytes]]:
    """msgspec's JSON encoder and formatter, imported when a log has results."""
    import msgspec

    return msgspec.json.Encoder().encode, msgspec.json.format


def _dumps(value: JSON) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False)``, exactly, and faster: with
    ``indent`` the standard library uses its pure-Python encoder, slow at the tens of
    thousands of results of a large audit. Strings are encoded by the
    standard library's C function, as ``json.dumps`` encodes them."""
    return _indented(value, "\n")


def _indented(value: JSON, pad: str) -> str:
    """``value`` as ``json.dumps(indent=2)`` writes it where ``pad`` (a newline and the
    indentation) starts its lines."""
    cls = value.__class__
    if cls is str:
        return encode_basestring(cast(str, value))
    if cls is dict:
        items = cast(dict[str, JSON], value)
        if not items:
            return "{}"
        inner = pad + "  "
        fields = (
            f"{inner}{encode_basestring(key)}: {_indented(item, inner)}"
            for key, item in items.items()
        )
        return "{" + ",".join(fields) + pad + "}"
    if cls is list:
        entries = cast(list[JSON], value)
        if not entries:
            return "[]"
        inner = pad + "  "
        return "[" + ",".join(inner + _indented(item, inner) for item in entries) + pad + "]"
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if cls is int:
        return int.__repr__(cast(int, value))
    return json.dumps(value)  # floats (NaN, Infinity), and anything else, as json writes them


def build_log(report: Report) -> dict[str, Any]:
    """The SARIF log as JSON-ready data."""
    import sarif_om as om  # lazy: only SARIF runs pay for it

    rules = _descriptors(report)
    index = {rule_id: position for position, (rule_id, _) in enumerate(rules)}
    results = [
        _result(om, finding, index[finding.rule_id], fingerprint)
        for finding, fingerprint in _failed(report)
    ]
    return _log(om, report, rules, results)


def _failed(report: Report) -> list[tuple[Finding, str]]:
    """The findings that are results, with their fingerprints in the run."""
    failed = [finding for finding in report.findings if finding.outcome is Outcome.FAIL]
    return list(zip(failed, run_fingerprints(failed), strict=True))


def _log(
    om: Any, report: Report, rules: list[tuple[str, RuleDoc | None]], results: list[Any]
) -> dict[str, Any]:
    """The log around ``results`` (sarif_om objects), as JSON-ready data."""
    index = {rule_id: position for position, (rule_id, _) in enumerate(rules)}
    notifications = [_notification(om, item, index) for item in report.notifications]
    notifications += [
        _rule_error(om, finding, index[finding.rule_id])
        for finding in report.findings
        if finding.outcome is Outcome.ERROR
    ]
    driver = om.ToolComponent(
        name="poolgate",
        version=report.tool_version,
        semantic_version=report.tool_version,
        information_uri=INFORMATION_URI,
        rules=[_descriptor(om, rule_id, doc) for rule_id, doc in rules],
    )
    # Incomplete as the exit code says (3): an error notification, or an input that was
    # not read whose finding (PG001) stands, not suppressed.
    unread = any(
        finding.rule_id in INCOMPLETE_RULES and finding.suppression is None
        for finding in report.findings
    )
    invocation = om.Invocation(
        execution_successful=not unread
        and not any(item.level == "error" for item in notifications),
        tool_execution_notifications=notifications or None,
        properties=_invocation_properties(report),
    )
    run = om.Run(
        tool=om.Tool(driver=driver),
        invocations=[invocation],
        original_uri_base_ids={SRCROOT: om.ArtifactLocation(uri=_root_uri(report.repo_root))},
        column_kind="unicodeCodePoints",
        results=results,
    )
    body = cast(dict[str, Any], _to_json(om.SarifLog(version="2.1.0", runs=[run])))
    return {"$schema": SCHEMA_URI, **body}


def _invocation_properties(report: Report) -> dict[str, Any]:
    """What the results alone do not say: the policy the run used (``poolgateConfig``,
    the JSON report's ``config``) and how many findings were suppressed (they stay in
    the log with ``suppressions``) or left out as already in the baseline."""
    properties: dict[str, Any] = {}
    if report.policy is not None:
        properties["poolgateConfig"] = report.policy.as_json()
    suppressed = sum(1 for finding in report.findings if finding.suppression is not None)
    properties["poolgateCounts"] = {"suppressed": suppressed, "baselined": report.stats.baselined}
    return properties


def _descriptors(report: Report) -> list[tuple[str, RuleDoc | None]]:
    """The run's rules sorted by id, plus an undocumented entry for every rule that
    findings or notifications name but the catalog lacks, so every index is valid."""
    known: dict[str, RuleDoc | None] = {rule.id: rule for rule in report.rules}
    referenced = [finding.rule_id for finding in report.findings]
    referenced += [item.rule_id for item in report.notifications if item.rule_id]
    for rule_id in referenced:
        known.setdefault(rule_id, None)
    return sorted(known.items(), key=lambda item: item[0])


def _descriptor(om: Any, rule_id: str, rule: RuleDoc | None) -> Any:
    if rule is None:
        # GitHub rejects descriptors without help (Multitool GH2012), so even an
        # undocumented rule says where its documentation would be.
        short = f"{rule_id} is not in this run's rule catalog."
        text = f"{short} Run `poolgate rules show {rule_id}` to read about a bundled rule."
        return om.ReportingDescriptor(
            id=rule_id,
            short_description=om.MultiformatMessageString(text=short),
            full_description=om.MultiformatMessageString(text=short),
            help=om.MultiformatMessageString(text=text, markdown=text),
            help_uri=HELP_URI.partition("#")[0],
        )
    properties: dict[str, Any] = {"precision": "high"}
    if rule.tags:
        properties["tags"] = list(rule.tags)
    if rule.security_severity is not None:
        # GitHub reads this as a string holding a number in 0.0-10.0.
        properties["security-severity"] = f"{rule.security_severity:.1f}"
    return om.ReportingDescriptor(
        id=rule.id,
        name=rule.name,
        short_description=om.MultiformatMessageString(text=rule.summary),
        full_description=om.MultiformatMessageString(text=rule.description),
        help=om.MultiformatMessageString(text=rule.help_text(), markdown=rule.help_markdown()),
        help_uri=rule.uri,
        default_configuration=om.ReportingConfiguration(level=str(rule.level)),
        properties=properties,
    )


def _result(om: Any, finding: Finding, rule_index: int, fingerprint: str) -> Any:
    suppressions = None
    if finding.suppression is not None:
        suppressions = [
            om.Suppression(
                # Anything not written in the manifest itself lives outside it.
                kind=_SUPPRESSION_KINDS.get(finding.suppression.kind, "external"),
                justification=finding.suppression.justification,
            )
        ]
    return om.Result(
        rule_id=finding.rule_id,
        rule_index=rule_index,
        level=str(finding.level),
        message=om.Message(text=finding.message),
        locations=[_location(om, finding)],
        partial_fingerprints={FINGERPRINT_KEY: fingerprint},
        suppressions=suppressions,
    )


def _location(om: Any, finding: Finding) -> Any:
    where = finding.location
    if finding.ref is None:
        return om.Location(physical_location=_physical(om, where.uri, where.line, where.column))
    live = where.uri.startswith(_CLUSTER_SCHEME)
    logical = om.LogicalLocation(
        name=finding.ref.name,
        fully_qualified_name=finding.ref.logical_name,
        kind="resource",
        # An object of a cluster has no file and no region: which cluster it is in.
        properties={"uri": cluster_uri(where.uri)} if live else None,
    )
    if live:
        return om.Location(logical_locations=[logical])
    return om.Location(
        physical_location=_physical(om, where.uri, where.line, where.column),
        logical_locations=[logical],
    )


def _physical(om: Any, uri: str, line: int, column: int) -> Any:
    region = None
    if line > 0:  # 0 means "unknown"; SARIF lines start at 1
        region = om.Region(start_line=line, start_column=column if column > 0 else None)
    return om.PhysicalLocation(artifact_location=_artifact(om, uri), region=region)


def _artifact(om: Any, uri: str) -> Any:
    if uri.startswith(_CLUSTER_SCHEME):
        return om.ArtifactLocation(uri=cluster_uri(uri))
    # quote() keeps '/' and encodes ':' too, so "a:b.yaml" is not read as a scheme.
    return om.ArtifactLocation(uri=quote(uri), uri_base_id=SRCROOT)


def cluster_uri(uri: str) -> str:
    """``cluster://<context>/<path>`` as a URI every SARIF consumer can parse.

    The context is the URI's host, but kubeconfig context names are free text
    (``admin@prod``, EKS ARNs with ':'). A percent-encoded host is valid RFC 3986
    yet .NET's ``Uri`` (SARIF SDK, Multitool) rejects it and silently drops the
    whole log, so such a context moves into the first path segment behind an
    empty authority: ``cluster:///admin%40prod/...``. Plain host names stay put.
    Live objects arrive with the context already percent-encoded (an EKS ARN holds
    '/'), so it is decoded first and encoded exactly once here.
    """
    context, _, path = uri[len(_CLUSTER_SCHEME) :].partition("/")
    context = unquote(context)
    if _HOST.fullmatch(context):
        return f"{_CLUSTER_SCHEME}{context}/{quote(path)}"
    return f"{_CLUSTER_SCHEME}/{quote(context, safe='')}/{quote(path)}"


def _root_uri(repo_root: str) -> str:
    uri = Path(os.path.abspath(repo_root)).as_uri()
    return uri if uri.endswith("/") else uri + "/"


def _notification(om: Any, notification: Notification, index: dict[str, int]) -> Any:
    locations = None
    if notification.uri:
        physical = _physical(om, notification.uri, notification.line, notification.column)
        locations = [om.Location(physical_location=physical)]
    rule = None
    if notification.rule_id:
        rule = om.ReportingDescriptorReference(
            id=notification.rule_id, index=index[notification.rule_id]
        )
    return om.Notification(
        level=str(notification.level),
        message=om.Message(text=notification.message),
        locations=locations,
        associated_rule=rule,
    )


def _rule_error(om: Any, finding: Finding, rule_index: int) -> Any:
    """A rule that could not be evaluated on one subject, as a notification.

    A suppressed one is only a note: the object's owner already opted out of
    that rule there, so it does not make the run incomplete.
    """
    level = Level.ERROR if finding.suppression is None else Level.NOTE
    subject = f" on {finding.ref.logical_name}" if finding.ref is not None else ""
    text = f"{finding.rule_id} could not be evaluated{subject}: {finding.message}"
    return om.Notification(
        level=str(level),
        message=om.Message(text=text),
        locations=[_location(om, finding)],
        associated_rule=om.ReportingDescriptorReference(id=finding.rule_id, index=rule_index),
    )


JSON = dict[str, Any] | list[Any] | str | int | float | bool | None
_SCALARS = (str, int, float, bool)
_NO_DEFAULT = object()


def _to_json(value: Any) -> JSON:
    """Serialize sarif_om objects: schema property names, defaults left out.

    A property equal to its default says nothing (``rank: -1``, ``kind: "fail"``),
    so it is dropped, except those in ``_ALWAYS_EMIT``.
    """
    if value is None or isinstance(value, _SCALARS):
        return cast(JSON, value)
    if isinstance(value, dict):
        return {str(key): _to_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_to_json(item) for item in value]
    cls: type = type(value)
    fields = _fields(cls)
    if fields is None:
        raise TypeError(f"cannot serialize {cls.__name__} into SARIF")
    out: dict[str, Any] = {}
    for name, json_name, default in fields:
        item = getattr(value, name)
        # type() first: bool is an int, and True must not equal a default of 1.
        if item is None or (type(item) is type(default) and item == default):
            continue
        out[json_name] = item if isinstance(item, _SCALARS) else _to_json(item)
    return out


@functools.cache
def _fields(cls: type) -> tuple[tuple[str, str, Any], ...] | None:
    """(attribute, JSON name, default) of an attrs class, identity first; None for others.

    Worked out once per class: a large audit serializes hundreds of thousands of
    objects. Fields in ``_ALWAYS_EMIT`` get a default nothing equals.
    """
    import attr  # sarif_om's own dependency

    if not attr.has(cls):
        return None
    fields = []
    for field in attr.fields(cls):
        default = field.default
        if isinstance(default, attr.Factory):  # type: ignore[arg-type]
            default = default.factory()
        if field.name in _ALWAYS_EMIT or default is attr.NOTHING:
            default = _NO_DEFAULT
        fields.append((field.name, field.metadata["schema_property_name"], default))
    # Identity first, the rest in sarif_om's order: easier to read.
    fields.sort(key=lambda entry: _LEADING.get(entry[1], len(_LEADING)))
    return tuple(fields)
