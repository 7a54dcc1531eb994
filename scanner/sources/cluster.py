"""Live objects from a Kubernetes API server, through the official ``kubernetes`` client.

Connection: ``--kubeconfig`` (else ``KUBECONFIG``, else in-cluster service
account config when running in a pod, else ``~/.kube/config``) and
``--context``; bearer tokens, client certificates and exec plugins are whatever
the kubeconfig says, handled by the client; TLS verification stays on.

Reading: every GET goes through the client's own HTTP layer (its TLS, proxy and
auth settings, token refresh included), and the raw body is decoded into plain
dicts (``scanner.sources.apihttp``; ``_preload_content=False`` on older clients).
The client's typed models are never built: they reject objects that lack fields
their schema marks required (kubernetes 37) and are slow at 100,000 pods; its
generated API classes are not even imported (``CoreV1Api`` alone is slow to import).
Every list is paginated (``limit``/``continue``); an expired continue token
(``410 Gone``) restarts the list from scratch, so the objects of one kind come
from one consistent list. ``429`` and ``5xx`` answers,
timeouts and dropped connections are retried with a bounded backoff (``429``
honours ``Retry-After``). The whole read has a deadline (``Settings.deadline``): once
it has passed, no request is made and no retry waited for, and every kind not yet
read is ``not read``, so a nightly audit still writes its report before its Job's
own deadline kills it. A ``403`` on one kind is not fatal: that kind is
reported ``forbidden`` and the audit goes on. Discovery (``/api``, ``/apis``
and the group-version documents) decides which kinds exist, so groups a cluster
does not serve (no Karpenter, no GPU Operator) are skipped quietly.

The ``kubernetes`` package is imported only by this module and the two it uses
(``scanner.sources.kubeconfig`` configures the client, ``scanner.sources.apihttp``
makes the requests), and they only when a command talks to a cluster, so
``poolgate scan`` never pays for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import quote

from scanner.kinds.resources import FORBIDDEN_RESOURCES, Resource
from scanner.sources import apihttp
from scanner.sources.kubeconfig import ClusterError as ClusterError
from scanner.sources.kubeconfig import api_client
from scanner.sources.snapshot import json_type

_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_STRIP_MANAGED_FIELDS_EXCEPT = frozenset({"Node"})
"""``metadata.managedFields`` is dropped on read (it is most of an object's size and
no rule reads it), except on Nodes, where it dates label changes (PG604)."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded retries: ``attempts`` tries in all, ``base_delay`` doubling up to
    ``max_delay``; a 429's ``Retry-After`` is waited as asked, up to ``retry_after_limit``."""

    attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 8.0
    retry_after_limit: float = 60.0
    """An overloaded API server (priority and fairness) says how long to stay away;
    coming back sooner only adds to its load. Longer asks wait this long."""
    relists: int = 3
    """How many times an expired continue token may restart one kind's list."""

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.retry_after_limit)
        return float(min(self.base_delay * (2**attempt), self.max_delay))


EMPTY_PAGES_LIMIT: Final = 100
"""Pages in a row without an object that end a list as a failed read. kube-apiserver
fills every page but the last (no selectors are sent); a proxy or an aggregated API
that keeps handing out new tokens for empty pages would page until the Job's
deadline."""


@dataclass(frozen=True, slots=True)
class Settings:
    page_size: int = 500
    request_timeout: float = 60.0
    """Seconds to wait for one response (read timeout)."""
    connect_timeout: float = 10.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    deadline: float = 2700.0
    """Seconds from ``connect`` that reading the cluster may take in all. An API server
    that stops answering costs five request timeouts and the backoff per kind: without
    it, two dozen kinds outlast the nightly Job's ``activeDeadlineSeconds`` (3600),
    which kills it before any report is written."""
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic


@dataclass(frozen=True, slots=True)
class Served:
    """A resource as this API server serves it: the version and plural discovery chose."""

    resource: Resource
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        group = self.resource.group
        return f"{group}/{self.version}" if group else self.version


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a request did not give an answer: ``forbidden``, ``absent``, ``failed``, or
    ``not read`` (the deadline passed first)."""

    status: str
    message: str


class _RequestFailed(Exception):
    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class _Expired(Exception):
    """410 Gone: the continue token is too old."""


Progress = Callable[[Served, str, int], None]
"""Called after every page: (resource, namespace or "", objects so far)."""


class Cluster:
    """One API server, reached with one kubeconfig context (or in-cluster config)."""

    def __init__(self, api_client: Any, context: str, host: str, settings: Settings) -> None:
        self._client = api_client
        self.context = context
        self.host = host
        self._settings = settings
        self._ends = settings.clock() + settings.deadline
        self._group_versions: dict[str, list[str]] = {}
        self._preferred: dict[str, str] = {}
        self._resource_lists: dict[tuple[str, str], dict[str, tuple[str, bool]] | Failure] = {}
        self._group_failures: dict[str, str] = {}

    def close(self) -> None:
        self._client.close()

    @property
    def api_client(self) -> Any:
        """The client's ``ApiClient``, for requests other than reads (``scanner.publish``)."""
        return self._client

    # -- discovery -----------------------------------------------------------------

    def discover(self, resources: Iterable[Resource]) -> dict[Resource, Served | Failure]:
        """Which of ``resources`` this server serves, at which version.

        A resource whose group or kind is not served is ``absent``; a discovery
        document that cannot be read makes its resources ``failed``. Failing to
        read ``/api`` or ``/apis`` at all means the cluster is unreachable or
        refuses us: ``ClusterError``.
        """
        self._load_groups()
        return {resource: self._served(resource) for resource in resources}

    def _load_groups(self) -> None:
        core = self._fetch_root("/api", "versions")
        self._group_versions[""] = [str(v) for v in core["versions"]]
        self._preferred[""] = "v1"
        for group in self._fetch_root("/apis", "groups")["groups"]:
            if not isinstance(group, Mapping) or not isinstance(group.get("name"), str):
                continue
            name = group["name"]
            versions = group.get("versions")
            if not isinstance(versions, list):
                # Served, at versions it does not say: its kinds cannot be read.
                self._group_failures[name] = f"/apis lists API group {name} without its versions"
                continue
            self._group_versions[name] = [
                str(v.get("version")) for v in versions if isinstance(v, Mapping)
            ]
            preferred = group.get("preferredVersion")
            if isinstance(preferred, Mapping) and isinstance(preferred.get("version"), str):
                self._preferred[name] = preferred["version"]

    def _fetch_root(self, path: str, field: str) -> dict[str, Any]:
        """``/api`` or ``/apis``, which must hold the list ``field``."""
        try:
            return self._get(path, shape=_holding_list(field))
        except _RequestFailed as error:
            raise ClusterError(
                f"cannot read API discovery ({path}) from {self.host} "
                f"(context {self.context}): {error.failure.message}",
                hint="check the kubeconfig, the context and that the API server is reachable",
            ) from None

    def _served(self, resource: Resource) -> Served | Failure:
        group = resource.group
        if group in self._group_failures:
            return Failure("failed", f"discovery: {self._group_failures[group]}")
        served_versions = self._group_versions.get(group)
        if not served_versions:
            return Failure("absent", f"API group {group or 'core'} is not served")
        preferred = self._preferred.get(group)
        candidates = [v for v in resource.versions if v == preferred and v in served_versions]
        candidates += [v for v in resource.versions if v != preferred and v in served_versions]
        for version in candidates:
            listing = self._resource_list(group, version)
            if isinstance(listing, Failure):
                return listing
            entry = listing.get(resource.kind)
            if entry is not None:
                return Served(resource, version, entry[0], entry[1])
        # Served at a version poolgate does not know (resource.k8s.io only at v1alpha3 on
        # Kubernetes 1.31)? Then its objects exist but cannot be read: say so.
        elsewhere = []
        for version in served_versions:
            if version in resource.versions:
                continue
            listing = self._resource_list(group, version)
            if isinstance(listing, Failure):
                return listing  # cannot tell whether the kind is there: not "none"
            if resource.kind in listing:
                elsewhere.append(version)
        if elsewhere:
            return Failure(
                "unsupported version",
                f"{group} serves {resource.kind} at {', '.join(elsewhere)} only; "
                f"poolgate reads it at {', '.join(resource.versions)}",
            )
        return Failure("absent", f"{resource.kind} is not served by {group or 'core'}")

    def _resource_list(self, group: str, version: str) -> dict[str, tuple[str, bool]] | Failure:
        """Kind -> (plural, namespaced) of one group-version, from its discovery document."""
        key = (group, version)
        if key not in self._resource_lists:
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            try:
                document = self._get(path, shape=_holding_list("resources"))
            except _RequestFailed as error:
                if error.failure.status == "absent":
                    # 404: gone since /apis listed it (a CRD deleted): none of its kinds.
                    self._resource_lists[key] = {}
                elif error.failure.status == "not read":  # the deadline passed first
                    self._resource_lists[key] = error.failure
                else:
                    self._resource_lists[key] = Failure(
                        "failed", f"discovery of {path}: {error.failure.message}"
                    )
            else:
                kinds: dict[str, tuple[str, bool]] = {}
                for entry in document["resources"]:
                    if not isinstance(entry, Mapping):
                        continue
                    name, kind = entry.get("name"), entry.get("kind")
                    # "pods/log" and friends are subresources, not lists of objects.
                    if isinstance(name, str) and isinstance(kind, str) and "/" not in name:
                        kinds.setdefault(kind, (name, bool(entry.get("namespaced"))))
                self._resource_lists[key] = kinds
        return self._resource_lists[key]

    # -- listing -------------------------------------------------------------------

    def list_objects(
        self, served: Served, namespace: str = "", progress: Progress | None = None
    ) -> list[dict[str, Any]]:
        """Every object of one kind (in one namespace, or all), as plain dicts.

        Raises ``ListError`` (status ``forbidden``, ``absent`` or ``failed``) when the
        kind cannot be listed; an expired continue token restarts the whole list.
        """
        if served.plural in FORBIDDEN_RESOURCES:
            raise ValueError(f"poolgate never lists {served.plural}")
        for _ in range(self._settings.retry.relists + 1):
            try:
                return self._list_once(served, namespace, progress)
            except _Expired:
                continue
            except _RequestFailed as error:
                raise ListError(error.failure) from None
        raise ListError(
            Failure(
                "failed",
                f"the list expired {self._settings.retry.relists + 1} times "
                "before it could be read to the end (410 Gone)",
            )
        )

    def _list_once(
        self, served: Served, namespace: str, progress: Progress | None
    ) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        token = ""
        seen: set[str] = set()
        empty = 0  # pages in a row that held no object
        path = _list_path(served, namespace)
        strip = served.resource.kind not in _STRIP_MANAGED_FIELDS_EXCEPT
        while True:
            query: list[tuple[str, str | int]] = [("limit", self._settings.page_size)]
            if token:
                query.append(("continue", token))
            page = self._get(path, query, expiring=bool(token), shape=_a_list)
            for item in page["items"]:
                # List items of built-in kinds come without their own apiVersion and kind.
                item["apiVersion"] = served.api_version
                item["kind"] = served.resource.kind
                metadata = item.get("metadata")
                if strip and isinstance(metadata, dict):
                    metadata.pop("managedFields", None)
                items.append(item)
            if progress is not None:
                progress(served, namespace, len(items))
            metadata = page.get("metadata")
            token = metadata.get("continue", "") if isinstance(metadata, Mapping) else ""
            if not isinstance(token, str) or not token:
                return items
            empty = 0 if page["items"] else empty + 1
            if empty >= EMPTY_PAGES_LIMIT:
                # New tokens, no objects: nothing says such a list ever ends.
                raise _RequestFailed(
                    Failure(
                        "failed",
                        f"the server answered {empty} pages in a row with no object and "
                        f"a new continue token, after {len(items):,} objects",
                    )
                )
            if token in seen:
                # A server (or a proxy in front of it) that hands back a token it already
                # gave would page forever: the list cannot be read to its end.
                raise _RequestFailed(
                    Failure(
                        "failed",
                        f"the server repeated a continue token after {len(items):,} objects: "
                        "the list never ends",
                    )
                )
            seen.add(token)

    # -- one request, with retries ---------------------------------------------------

    def _get(
        self,
        path: str,
        query: Sequence[tuple[str, str | int]] = (),
        *,
        expiring: bool = False,
        shape: Callable[[Mapping[str, Any]], str] | None = None,
    ) -> dict[str, Any]:
        """One GET, retried on 429/5xx/timeouts and cut connections; the decoded JSON body.

        ``shape`` says what is wrong with a decoded body ("" when nothing is): a 2xx
        answer of the wrong shape (a ``Status`` where a list belongs) is a definite
        answer, not retried, and the request fails."""
        import urllib3

        settings = self._settings
        last = "no answer"
        for attempt in range(settings.retry.attempts):
            retry_after: float | None = None
            left = self._time_left()
            if left <= 0:
                raise _RequestFailed(self._past_deadline(last if attempt else ""))
            # No request runs past the deadline either.
            timeout = (min(settings.connect_timeout, left), min(settings.request_timeout, left))
            try:
                status, data, headers = apihttp.raw_get(self._client, path, query, timeout)
                if 200 <= status < 300:
                    body = apihttp.decode(data)
                    wrong = shape(body) if shape is not None else ""
                    if wrong:
                        raise _RequestFailed(Failure("failed", f"200 OK, but {wrong}"))
                    return body
                message = apihttp.status_message(status, data)
                if status == 410 and expiring:
                    raise _Expired()
                if status == 403:
                    raise _RequestFailed(Failure("forbidden", message))
                if status == 404:
                    raise _RequestFailed(Failure("absent", message))
                if status == 401:
                    raise _RequestFailed(
                        Failure("failed", "401 Unauthorized: the credentials were rejected")
                    )
                if status not in _RETRY_STATUSES:
                    raise _RequestFailed(Failure("failed", message))
                last = message
                retry_after = apihttp.retry_after(headers) if status == 429 else None
            except apihttp.TransportFailed as error:  # the client's own failure (TLS, for one)
                if not error.transient:  # a certificate that does not verify, ...
                    raise _RequestFailed(Failure("failed", str(error))) from None
                last = str(error)
            except urllib3.exceptions.HTTPError as error:
                last = apihttp.transport_message(error, settings.request_timeout)
            except ValueError as error:  # a 2xx body that is not a JSON object
                last = f"unreadable response: {error}"
            if attempt + 1 < settings.retry.attempts:
                delay = settings.retry.delay(attempt, retry_after)
                settings.sleep(max(min(delay, self._time_left()), 0.0))
        raise _RequestFailed(
            Failure("failed", f"{last} (gave up after {settings.retry.attempts} attempts)")
        )

    def _time_left(self) -> float:
        return self._ends - self._settings.clock()

    def _past_deadline(self, last: str) -> Failure:
        """Why a request was not made (again): the deadline passed; ``last``, what the
        tries before it got."""
        text = f"the deadline for reading the cluster ({self._settings.deadline:g} s) passed"
        return Failure("not read", f"{text}; the last try: {last}" if last else text)


def _a_list(body: Mapping[str, Any]) -> str:
    """What is wrong with a list answer: it must hold ``items``, a list of objects.

    kube-apiserver sends ``"items": []`` for an empty list (``meta.SetList`` makes a
    non-nil slice; CRDs and aggregated APIs built on apimachinery do the same), so
    ``null``, a missing ``items`` or a ``Status`` object is a broken answer, never "none".
    """
    items = body.get("items")
    if body.get("kind") == "Status":
        detail = body.get("message") or body.get("status") or ""
        return f"the answer is a Status, not a list{f' ({detail})' if detail else ''}"
    if not isinstance(items, list):
        what = "missing" if "items" not in body else f"{json_type(items)}, not a list"
        return f"the answer is not a list: items is {what}"
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            return f"the answer is not a list of objects: item {index} is {json_type(item)}"
    return ""


def _holding_list(field: str) -> Callable[[Mapping[str, Any]], str]:
    """What is wrong with a discovery document: it must hold the list ``field``."""

    def check(body: Mapping[str, Any]) -> str:
        value = body.get(field)
        if isinstance(value, list):
            return ""
        what = "missing" if field not in body else f"{json_type(value)}, not a list"
        return f"the discovery document's {field} is {what}"

    return check


def _list_path(served: Served, namespace: str) -> str:
    group = served.resource.group
    base = f"/apis/{group}/{served.version}" if group else f"/api/{served.version}"
    if namespace:
        return f"{base}/namespaces/{quote(namespace, safe='')}/{served.plural}"
    return f"{base}/{served.plural}"


class ListError(Exception):
    """A kind that could not be listed: ``failure.status`` says why."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


# -- connecting ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """Where the cluster is: ``kubeconfig`` (None: the usual search) and ``context``."""

    kubeconfig: str | None = None
    context: str | None = None


def connect(target: Target, settings: Settings) -> Cluster:
    """A ``Cluster`` for ``target``; ``ClusterError`` when the configuration is unusable.

    Search order, as ``kubectl`` does it: ``--kubeconfig``, then ``KUBECONFIG``, then
    the in-cluster service account (inside a pod), then ``~/.kube/config``
    (``scanner.sources.kubeconfig.api_client``, which reads and checks every file first).
    """
    api, context, host = api_client(target.kubeconfig, target.context)
    return Cluster(api, context, host, settings)
