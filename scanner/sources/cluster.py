"""Live objects from a Kubernetes API server, through the official ``kubernetes`` client.

Connection: ``--kubeconfig`` (else ``KUBECONFIG``, else in-cluster service
account config when running in a pod, else ``~/.kube/config``) and
``--context``; bearer tokens, client certificates and exec plugins are whatever
the kubeconfig says, handled by the client; TLS verification stays on.

Reading: every GET goes through the client's own HTTP layer (its TLS, proxy and
auth settings, token refresh included), and the raw body is decoded with
``json.loads`` into plain dicts (``_preload_content=False`` on older clients).
The client's typed models are never built: they reject objects that lack fields
their schema marks required (kubernetes 37) and are slow at 100,000 pods; its
generated API classes are not even imported (``CoreV1Api`` takes 5 s to import).
Every list is paginated (``limit``/``continue``); an expired continue token
(``410 Gone``) restarts the list from scratch, so the objects of one kind come
from one consistent list. ``429`` and ``5xx`` answers,
timeouts and dropped connections are retried with a bounded backoff (``429``
honours ``Retry-After``). A ``403`` on one kind is not fatal: that kind is
reported ``forbidden`` and the audit goes on. Discovery (``/api``, ``/apis``
and the group-version documents) decides which kinds exist, so groups a cluster
does not serve (no Karpenter, no GPU Operator) are skipped quietly.

The ``kubernetes`` package is imported here only, and this module only when a
command talks to a cluster, so ``poolgate scan`` never pays for it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from scanner.errors import PoolgateError
from scanner.sources import numbers, surrogates
from scanner.sources.resources import FORBIDDEN_RESOURCES, Resource

IN_CLUSTER = "in-cluster"
"""The context name live objects carry when poolgate runs inside the cluster."""

_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_STRIP_MANAGED_FIELDS_EXCEPT = frozenset({"Node"})
"""``metadata.managedFields`` is dropped on read (it is most of an object's size and
no rule reads it), except on Nodes, where it dates label changes (PG604)."""


class ClusterError(PoolgateError):
    """The cluster cannot be reached or refuses the credentials: nothing can be audited."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded retries: ``attempts`` tries in all, ``base_delay`` doubling up to ``max_delay``."""

    attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 8.0
    relists: int = 3
    """How many times an expired continue token may restart one kind's list."""

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay)
        return float(min(self.base_delay * (2**attempt), self.max_delay))


@dataclass(frozen=True, slots=True)
class Settings:
    page_size: int = 500
    request_timeout: float = 60.0
    """Seconds to wait for one response (read timeout)."""
    connect_timeout: float = 10.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Callable[[float], None] = time.sleep


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
    """Why a request did not give an answer: ``forbidden``, ``absent`` or ``failed``."""

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
        self._group_versions: dict[str, list[str]] = {}
        self._preferred: dict[str, str] = {}
        self._resource_lists: dict[tuple[str, str], dict[str, tuple[str, bool]] | Failure] = {}

    def close(self) -> None:
        self._client.close()

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
        core = self._fetch_root("/api")
        self._group_versions[""] = [str(v) for v in core.get("versions", [])]
        self._preferred[""] = "v1"
        for group in self._fetch_root("/apis").get("groups", []):
            if not isinstance(group, Mapping) or not isinstance(group.get("name"), str):
                continue
            versions = [
                str(v.get("version")) for v in group.get("versions", []) if isinstance(v, Mapping)
            ]
            self._group_versions[group["name"]] = versions
            preferred = group.get("preferredVersion")
            if isinstance(preferred, Mapping) and isinstance(preferred.get("version"), str):
                self._preferred[group["name"]] = preferred["version"]

    def _fetch_root(self, path: str) -> dict[str, Any]:
        try:
            return self._get(path)
        except _RequestFailed as error:
            raise ClusterError(
                f"cannot read API discovery ({path}) from {self.host} "
                f"(context {self.context}): {error.failure.message}",
                hint="check the kubeconfig, the context and that the API server is reachable",
            ) from None

    def _served(self, resource: Resource) -> Served | Failure:
        served_versions = self._group_versions.get(resource.group)
        if not served_versions:
            return Failure("absent", f"API group {resource.group or 'core'} is not served")
        preferred = self._preferred.get(resource.group)
        candidates = [v for v in resource.versions if v == preferred]
        candidates += [v for v in resource.versions if v != preferred and v in served_versions]
        for version in candidates:
            listing = self._resource_list(resource.group, version)
            if isinstance(listing, Failure):
                return listing
            entry = listing.get(resource.kind)
            if entry is not None:
                return Served(resource, version, entry[0], entry[1])
        return Failure("absent", f"{resource.kind} is not served by {resource.group or 'core'}")

    def _resource_list(self, group: str, version: str) -> dict[str, tuple[str, bool]] | Failure:
        """Kind -> (plural, namespaced) of one group-version, from its discovery document."""
        key = (group, version)
        if key not in self._resource_lists:
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            try:
                document = self._get(path)
            except _RequestFailed as error:
                self._resource_lists[key] = Failure(
                    "failed", f"discovery of {path}: {error.failure.message}"
                )
            else:
                kinds: dict[str, tuple[str, bool]] = {}
                for entry in document.get("resources", []):
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
        path = _list_path(served, namespace)
        strip = served.resource.kind not in _STRIP_MANAGED_FIELDS_EXCEPT
        while True:
            query: list[tuple[str, str | int]] = [("limit", self._settings.page_size)]
            if token:
                query.append(("continue", token))
            page = self._get(path, query, expiring=bool(token))
            for item in page.get("items") or []:
                if not isinstance(item, dict):
                    continue
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

    # -- one request, with retries ---------------------------------------------------

    def _get(
        self, path: str, query: Sequence[tuple[str, str | int]] = (), *, expiring: bool = False
    ) -> dict[str, Any]:
        """One GET, retried on 429/5xx/timeouts; the decoded JSON body."""
        import urllib3

        settings = self._settings
        last = "no answer"
        for attempt in range(settings.retry.attempts):
            retry_after: float | None = None
            try:
                status, data, headers = _raw_get(
                    self._client, path, query, (settings.connect_timeout, settings.request_timeout)
                )
                if 200 <= status < 300:
                    return _decode(data)
                message = _status_message(status, data)
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
                retry_after = _retry_after(headers) if status == 429 else None
            except _TransportFailed as error:  # the client's own failure (TLS, for one)
                raise _RequestFailed(Failure("failed", str(error))) from None
            except urllib3.exceptions.SSLError as error:
                raise _RequestFailed(Failure("failed", f"TLS: {error}")) from None
            except urllib3.exceptions.HTTPError as error:
                last = _transport_message(error, settings.request_timeout)
            except ValueError as error:  # a 2xx body that is not a JSON object
                last = f"unreadable response: {error}"
            if attempt + 1 < settings.retry.attempts:
                settings.sleep(settings.retry.delay(attempt, retry_after))
        raise _RequestFailed(
            Failure("failed", f"{last} (gave up after {settings.retry.attempts} attempts)")
        )


class _TransportFailed(Exception):
    """The client could not make the request at all (``ApiException`` with status 0)."""


def _list_path(served: Served, namespace: str) -> str:
    group = served.resource.group
    base = f"/apis/{group}/{served.version}" if group else f"/api/{served.version}"
    if namespace:
        return f"{base}/namespaces/{quote(namespace, safe='')}/{served.plural}"
    return f"{base}/{served.plural}"


def _raw_get(
    api_client: Any, path: str, query: Sequence[tuple[str, str | int]], timeout: tuple[float, float]
) -> tuple[int, bytes, Mapping[str, str]]:
    """(status, body, headers) of one GET through the client's own HTTP layer and auth.

    Nothing is decoded into the client's typed models, and none of its generated
    API classes are imported (``CoreV1Api`` alone takes five seconds to import).
    kubernetes >= 33 builds requests with ``param_serialize`` and never raises on a
    status; older clients raise ``ApiException`` for anything but 2xx.
    """
    from kubernetes.client.exceptions import ApiException

    headers = {"Accept": "application/json"}
    try:
        if hasattr(api_client, "param_serialize"):
            request = api_client.param_serialize(
                "GET",
                path,
                query_params=list(query),
                header_params=headers,
                auth_settings=["BearerToken"],
            )
            response = api_client.call_api(*request, _request_timeout=timeout)
            try:
                data = response.read()
            finally:
                response.response.release_conn()
            return int(response.status), bytes(data), response.headers
        response = api_client.call_api(
            path,
            "GET",
            query_params=list(query),
            header_params=headers,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
            _request_timeout=timeout,
        )
        return int(response.status), bytes(response.data), response.headers
    except ApiException as error:
        if not error.status:
            raise _TransportFailed(_first_line(str(error.reason or error))) from None
        body = error.body.encode() if isinstance(error.body, str) else (error.body or b"")
        return int(error.status), body, error.headers or {}


class ListError(Exception):
    """A kind that could not be listed: ``failure.status`` says why."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def _decode(data: bytes) -> dict[str, Any]:
    try:
        value = numbers.loads(data)  # integers past int64 as the API server holds them
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    if surrogates.may_hold(data):
        try:
            value = surrogates.replaced(value)
        except RecursionError:
            raise ValueError("nested too deeply") from None
    return value  # type: ignore[no-any-return]


def _status_message(status: int, data: bytes) -> str:
    """The API server's own words from a ``Status`` body, else the HTTP status."""
    reason = _REASONS.get(status, "")
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        document = None
    if isinstance(document, Mapping) and isinstance(document.get("message"), str):
        return f"{status} {reason}: {document['message']}".replace(" :", ":")
    return f"{status} {reason}".strip()


_REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    410: "Gone",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _first_line(text: str) -> str:
    """urllib3 and ssl errors nest; the last line of the reason says what happened."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "request failed"


def _transport_message(error: Exception, read_timeout: float) -> str:
    import urllib3

    if isinstance(error, urllib3.exceptions.ReadTimeoutError):
        return f"no response within {read_timeout:g} s"
    # NewConnectionError subclasses ConnectTimeoutError in urllib3 2: test it first.
    if isinstance(error, urllib3.exceptions.NewConnectionError):
        return "connection refused or host unreachable"
    if isinstance(error, urllib3.exceptions.ConnectTimeoutError):
        return "connection timed out"
    return f"{type(error).__name__}: {error}"


# -- connecting ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """Where the cluster is: ``kubeconfig`` (None: the usual search) and ``context``."""

    kubeconfig: str | None = None
    context: str | None = None


def connect(target: Target, settings: Settings) -> Cluster:
    """A ``Cluster`` for ``target``; ``ClusterError`` when the configuration is unusable.

    Search order, as ``kubectl`` does it: ``--kubeconfig``, then ``KUBECONFIG``, then
    the in-cluster service account (inside a pod), then ``~/.kube/config``.
    """
    from kubernetes import client
    from kubernetes import config as kube_config
    from kubernetes.config.config_exception import ConfigException

    config: Any = kube_config  # an untyped package
    configuration = client.Configuration()
    path = target.kubeconfig or _kubeconfig_from_env()
    try:
        if path is None and _in_cluster() and not target.context:
            config.load_incluster_config(client_configuration=configuration)
            context = IN_CLUSTER
        else:
            path = path or os.path.expanduser("~/.kube/config")
            if not os.path.exists(path.split(os.pathsep)[0]):
                raise ClusterError(
                    f"kubeconfig {path} does not exist",
                    hint="pass --kubeconfig, set KUBECONFIG, or run inside the cluster",
                )
            context = _context_name(path, target.context)
            config.load_kube_config(
                config_file=path,
                context=target.context,
                client_configuration=configuration,
                persist_config=False,
            )
    except ConfigException as error:
        raise ClusterError(
            f"kubeconfig: {error}", hint="check --kubeconfig and --context"
        ) from None
    if not configuration.verify_ssl:
        # insecure-skip-tls-verify in the kubeconfig: said out loud, not silently accepted.
        raise ClusterError(
            f"context {context} disables TLS verification (insecure-skip-tls-verify)",
            hint="give the cluster's certificate-authority in the kubeconfig",
        )
    # poolgate owns retries (bounded, with backoff); urllib3's own would multiply timeouts.
    configuration.retries = False
    return Cluster(client.ApiClient(configuration), context, configuration.host, settings)


def _kubeconfig_from_env() -> str | None:
    value = os.environ.get("KUBECONFIG", "")
    return value or None


def _in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    )


def _context_name(path: str, wanted: str | None) -> str:
    from kubernetes import config as kube_config
    from kubernetes.config.config_exception import ConfigException

    try:
        config: Any = kube_config  # an untyped package
        contexts, active = config.list_kube_config_contexts(config_file=path)
    except ConfigException as error:
        raise ClusterError(f"kubeconfig {path}: {error}") from None
    names = [str(entry.get("name")) for entry in contexts or []]
    if wanted:
        if wanted not in names:
            raise ClusterError(
                f"kubeconfig {path} has no context {wanted!r}",
                hint=f"contexts: {', '.join(names) or 'none'}",
            )
        return wanted
    if not active:
        raise ClusterError(f"kubeconfig {path} has no current context", hint="pass --context")
    return str(active.get("name"))
