"""``poolgate audit --publish-reports``: the audit's PolicyReports applied in the cluster it read.

Each report (``scanner.reporters.policyreport``) is sent as a Kubernetes
server-side apply: ``PATCH`` with ``Content-Type: application/apply-patch+yaml``,
``fieldManager=poolgate`` and ``force=true`` (poolgate owns these objects; a field
another manager set is taken over, never a conflict), through the official
client's HTTP layer as the audit's reads are (its TLS, proxy, auth and token
refresh; ``scanner.sources.cluster``). Then poolgate's own reports that this run
did not write — listed by the label ``app.kubernetes.io/managed-by=poolgate`` —
are deleted (with their uid as a precondition, so a report made again meanwhile
stays), so the cluster shows the current state: a namespace whose findings are
gone loses its report.

A publish that fails is never a crash and never stops the audit's own reports:
the ``wgpolicyk8s.io/v1alpha2`` API not served (the CRDs are not installed), a
``403`` (the RBAC of ``deploy/optional/`` not applied), an answer that is not
a success after the retries each become one problem, which the command reports
as an error notification (exit code 3 when nothing else failed). The first
``401`` or ``403`` ends the publish (the same credentials would meet it on every
report); nothing is deleted unless every report was applied. ``429`` and ``5xx``
answers, timeouts and dropped connections are retried as the audit retries
reads, within ``PUBLISH_DEADLINE``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final
from urllib.parse import quote

from scanner import console
from scanner.findings.records import Level, Notification
from scanner.findings.report import Report
from scanner.reporters import policyreport
from scanner.reporters.policyreport import API_VERSION, GROUP, MANAGED_BY
from scanner.sources import apihttp
from scanner.sources.cluster import ClusterError, Settings, Target, connect

FIELD_MANAGER: Final = "poolgate"
APPLY_PATCH: Final = "application/apply-patch+yaml"
PUBLISH_DEADLINE: Final = 300.0
"""Seconds the whole publish may take: it runs after the audit read the cluster, inside
the same Job deadline."""
PLURALS: Final = {"PolicyReport": "policyreports", "ClusterPolicyReport": "clusterpolicyreports"}
MAX_PROBLEMS: Final = 5
"""Reports that may fail to apply before the rest are not tried."""
LIST_PAGES: Final = 1000
"""Pages of 500 reports read when pruning, at most (far more reports than namespaces)."""

_RETRY_STATUSES: Final = frozenset({429, 500, 502, 503, 504})
_BASE: Final = f"/apis/{API_VERSION}"


@dataclass(frozen=True, slots=True)
class Published:
    """What a publish did: the reports applied and deleted (``namespace/name``, or
    ``name`` for cluster reports), and what went wrong (each an error notification)."""

    applied: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    """Reports not applied for a reason that is not a failure (their namespace is gone)."""


def publish_report(
    report: Report, found: policyreport.Found, target: Target, settings: Settings
) -> Report:
    """``report`` with what publishing its PolicyReports could not do as notifications:
    an error each (exit code 3 when nothing else failed), a warning for a report whose
    namespace is gone; a note on standard error says what was done."""
    done = publish(target, settings, policyreport.build(report, found))
    if not done.problems:
        deleted = f", deleted {len(done.deleted)} stale ones" if done.deleted else ""
        console.note(f"published {len(done.applied)} policy reports{deleted}")
    notes = [Notification(Level.ERROR, problem) for problem in done.problems]
    notes += [Notification(Level.WARNING, note) for note in done.notes]
    return replace(report, notifications=[*report.notifications, *notes])


def publish(target: Target, settings: Settings, objects: Sequence[Mapping[str, Any]]) -> Published:
    """Apply ``objects`` (PolicyReports and ClusterPolicyReports) in the cluster of
    ``target``, then delete poolgate's reports that are not among them."""
    try:
        cluster = connect(target, settings)
    except ClusterError as error:  # the audit connected a moment ago; still, no crash
        return Published(problems=(f"cannot connect to publish the PolicyReports: {error}",))
    try:
        return _Publisher(_Session(cluster.api_client, settings)).run(objects)
    finally:
        cluster.close()


class _Failed(Exception):
    """A request that got no usable answer (transport failure, deadline, retries spent)."""


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    data: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def message(self) -> str:
        return apihttp.status_message(self.status, self.data)

    def details_kind(self) -> str:
        """``details.kind`` of a ``Status`` body (``namespaces`` when the namespace of a
        namespaced request does not exist), or ``""``."""
        try:
            body = json.loads(self.data)
        except (ValueError, RecursionError):
            return ""
        details = body.get("details") if isinstance(body, Mapping) else None
        kind = details.get("kind") if isinstance(details, Mapping) else None
        return kind if isinstance(kind, str) else ""


class _Session:
    """Requests with the audit's retry policy, all within ``PUBLISH_DEADLINE``."""

    def __init__(self, api_client: Any, settings: Settings) -> None:
        self._client = api_client
        self._settings = settings
        self._ends = settings.clock() + PUBLISH_DEADLINE

    def request(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str | int]] = (),
        body: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> _Answer:
        import urllib3

        settings = self._settings
        last = "no answer"
        for attempt in range(settings.retry.attempts):
            left = self._ends - settings.clock()
            if left <= 0:
                raise _Failed(
                    f"the deadline for publishing ({PUBLISH_DEADLINE:g} s) passed: {last}"
                )
            timeout = (min(settings.connect_timeout, left), min(settings.request_timeout, left))
            retry_after: float | None = None
            try:
                status, data, headers = _call(
                    self._client, method, path, query, body, content_type, timeout
                )
                if status not in _RETRY_STATUSES:
                    return _Answer(status, data)
                last = apihttp.status_message(status, data)
                retry_after = apihttp.retry_after(headers) if status == 429 else None
            except apihttp.TransportFailed as error:
                if not error.transient:
                    raise _Failed(str(error)) from None
                last = str(error)
            except urllib3.exceptions.HTTPError as error:
                last = apihttp.transport_message(error, settings.request_timeout)
            if attempt + 1 < settings.retry.attempts:
                delay = settings.retry.delay(attempt, retry_after)
                settings.sleep(max(min(delay, self._ends - settings.clock()), 0.0))
        raise _Failed(f"{last} (gave up after {settings.retry.attempts} attempts)")


def _call(
    api_client: Any,
    method: str,
    path: str,
    query: Sequence[tuple[str, str | int]],
    body: Mapping[str, Any] | None,
    content_type: str,
    timeout: tuple[float, float],
) -> tuple[int, bytes, Mapping[str, str]]:
    """(status, body, headers) of one request (``apihttp.raw_request``)."""
    return apihttp.raw_request(
        api_client, method, path, query, timeout, body=body, content_type=content_type
    )


def report_path(obj: Mapping[str, Any]) -> str:
    """The API path of one report: ``/apis/wgpolicyk8s.io/v1alpha2/namespaces/<ns>/
    policyreports/<name>`` or ``.../clusterpolicyreports/<name>``."""
    metadata = obj["metadata"]
    plural = PLURALS[obj["kind"]]
    name = quote(metadata["name"], safe="")
    namespace = metadata.get("namespace")
    if namespace:
        return f"{_BASE}/namespaces/{quote(namespace, safe='')}/{plural}/{name}"
    return f"{_BASE}/{plural}/{name}"


def _label(obj: Mapping[str, Any]) -> str:
    """``PolicyReport team-a/poolgate`` or ``ClusterPolicyReport poolgate``."""
    metadata = obj["metadata"]
    namespace = metadata.get("namespace")
    where = f"{namespace}/{metadata['name']}" if namespace else metadata["name"]
    return f"{obj['kind']} {where}"


@dataclass
class _Publisher:
    session: _Session
    applied: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def run(self, objects: Sequence[Mapping[str, Any]]) -> Published:
        try:
            if self._served():
                self._apply_all(objects)
                if not self.problems:
                    self._prune(objects)
        except _Failed as error:
            self.problems.append(f"cannot publish the PolicyReports: {error}")
        return Published(
            tuple(self.applied), tuple(self.deleted), tuple(self.problems), tuple(self.notes)
        )

    def _served(self) -> bool:
        """Whether the cluster serves both report kinds at ``API_VERSION``."""
        answer = self.session.request("GET", _BASE)
        missing = (
            f"the cluster does not serve {API_VERSION}: the PolicyReport CRDs are not "
            "installed (Kyverno and Policy Reporter install them, or apply "
            "policy-report/crd/v1alpha2 of kubernetes-sigs/wg-policy-prototypes)"
        )
        if answer.status == 404:
            self.problems.append(missing)
            return False
        if not answer.ok:
            self.problems.append(f"cannot read API discovery ({_BASE}): {answer.message()}")
            return False
        try:
            document = apihttp.decode(answer.data)
        except ValueError as error:
            self.problems.append(f"cannot read API discovery ({_BASE}): {error}")
            return False
        resources = document.get("resources")
        names = {
            entry.get("name")
            for entry in (resources if isinstance(resources, list) else [])
            if isinstance(entry, Mapping)
        }
        if not set(PLURALS.values()) <= names:
            self.problems.append(missing)
            return False
        return True

    def _apply_all(self, objects: Sequence[Mapping[str, Any]]) -> None:
        for index, obj in enumerate(objects):
            if len(self.problems) >= MAX_PROBLEMS:
                self.problems.append(f"{len(objects) - index} more reports were not tried")
                return
            answer = self.session.request(
                "PATCH",
                report_path(obj),
                [("fieldManager", FIELD_MANAGER), ("force", "true")],
                body=obj,
                content_type=APPLY_PATCH,
            )
            label = _label(obj)
            if answer.ok:
                self.applied.append(label)
            elif answer.status == 404 and answer.details_kind() == "namespaces":
                self.notes.append(f"{label} not applied: its namespace no longer exists")
            else:
                self.problems.append(f"cannot apply {label}: {answer.message()}")
                if answer.status in (401, 403):
                    left = len(objects) - index - 1
                    if left:
                        self.problems.append(f"{left} more reports were not tried")
                    return

    def _prune(self, objects: Sequence[Mapping[str, Any]]) -> None:
        """Delete poolgate's reports this run did not write."""
        keep = {(obj["kind"], report_path(obj)) for obj in objects}
        for kind, plural in PLURALS.items():
            for path, uid in self._listed(plural):
                if (kind, path) in keep:
                    continue
                body = {
                    "apiVersion": "v1",
                    "kind": "DeleteOptions",
                    "preconditions": {"uid": uid},
                }
                answer = self.session.request("DELETE", path, body=body)
                if answer.ok:
                    self.deleted.append(path.removeprefix(_BASE + "/"))
                elif answer.status not in (404, 409):  # gone, or made again meanwhile
                    self.problems.append(
                        f"cannot delete the stale report {path}: {answer.message()}"
                    )
                    return

    def _listed(self, plural: str) -> list[tuple[str, str]]:
        """(API path, uid) of every report of ``plural`` poolgate manages."""
        selector = "=".join(MANAGED_BY)
        found: list[tuple[str, str]] = []
        token = ""
        for _ in range(LIST_PAGES):
            query: list[tuple[str, str | int]] = [("labelSelector", selector), ("limit", 500)]
            if token:
                query.append(("continue", token))
            answer = self.session.request("GET", f"{_BASE}/{plural}", query)
            if not answer.ok:
                raise _Failed(f"cannot list {plural}.{GROUP}: {answer.message()}")
            try:
                page = apihttp.decode(answer.data)
            except ValueError as error:
                raise _Failed(f"cannot read the list of {plural}: {error}") from None
            items = page.get("items")
            for item in items if isinstance(items, list) else []:
                entry = _entry(item, plural)
                if entry is not None:
                    found.append(entry)
            metadata = page.get("metadata")
            token = metadata.get("continue", "") if isinstance(metadata, Mapping) else ""
            if not isinstance(token, str) or not token:
                return found
        raise _Failed(f"the list of {plural} did not end after {LIST_PAGES} pages")


def _entry(item: object, plural: str) -> tuple[str, str] | None:
    """(API path, uid) of one listed report, None when it lacks them."""
    if not isinstance(item, Mapping):
        return None
    metadata = item.get("metadata")
    if not isinstance(metadata, Mapping):
        return None
    name, uid, namespace = metadata.get("name"), metadata.get("uid"), metadata.get("namespace")
    if not isinstance(name, str) or not name or not isinstance(uid, str):
        return None
    namespaced = plural == PLURALS["PolicyReport"]
    if namespaced != (isinstance(namespace, str) and bool(namespace)):
        return None
    kind = "PolicyReport" if namespaced else "ClusterPolicyReport"
    ref: dict[str, Any] = {"kind": kind, "metadata": {"name": name}}
    if namespaced:
        ref["metadata"]["namespace"] = namespace
    return report_path(ref), uid
