"""One request to the API server (a GET; a publish's PATCH or DELETE) through the
``kubernetes`` client's HTTP layer, and its answer: the raw body decoded into plain
dicts, a ``Status`` body's message, the ``Retry-After`` header, and transport failures
in one line (``scanner.sources.cluster`` pages, retries and reports).

The body is decoded by ``scanner.sources.yaml.numbers`` (integers past int64 read as the
API server holds them), never into the client's typed models.
"""

from __future__ import annotations

import json
import math
import ssl
from collections.abc import Mapping, Sequence
from typing import Any

from scanner.sources.yaml import numbers, surrogates


class TransportFailed(Exception):
    """The client could not make the request at all (``ApiException`` with status 0, or
    a TLS error). ``transient``: the connection was cut (``transient_tls``), and the
    same request may well go through; otherwise no retry would mend it."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


def raw_get(
    api_client: Any, path: str, query: Sequence[tuple[str, str | int]], timeout: tuple[float, float]
) -> tuple[int, bytes, Mapping[str, str]]:
    """(status, body, headers) of one GET through the client's own HTTP layer and auth
    (``raw_request``)."""
    return raw_request(api_client, "GET", path, query, timeout)


def raw_request(
    api_client: Any,
    method: str,
    path: str,
    query: Sequence[tuple[str, str | int]],
    timeout: tuple[float, float],
    *,
    body: Mapping[str, Any] | None = None,
    content_type: str | None = None,
) -> tuple[int, bytes, Mapping[str, str]]:
    """(status, body, headers) of one request through the client's own HTTP layer and
    auth. A ``body`` is given as data: both client generations send it as JSON, which
    is YAML too, under any ``content_type`` they accept for a patch
    (``application/apply-patch+yaml`` included; ``scanner.audit.publish``).

    Nothing is decoded into the client's typed models, and none of its generated
    API classes are imported (``CoreV1Api`` alone is slow to import).
    kubernetes >= 33 builds requests with ``param_serialize`` and never raises on a
    status; older clients raise ``ApiException`` for anything but 2xx.
    """
    import urllib3
    from kubernetes.client.exceptions import ApiException

    headers = {"Accept": "application/json"}
    if content_type is not None:
        headers["Content-Type"] = content_type
    payload = dict(body) if body is not None else None
    try:
        if hasattr(api_client, "param_serialize"):
            request = api_client.param_serialize(
                method,
                path,
                query_params=list(query),
                header_params=headers,
                body=payload,
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
            method,
            query_params=list(query),
            header_params=headers,
            body=payload,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
            _request_timeout=timeout,
        )
        return int(response.status), bytes(response.data), response.headers
    except ApiException as error:
        if not error.status:
            message = _first_line(str(error.reason or error))
            raise TransportFailed(message, transient=transient_tls(error)) from None
        data = error.body.encode() if isinstance(error.body, str) else (error.body or b"")
        return int(error.status), data, error.headers or {}
    except urllib3.exceptions.SSLError as error:  # reading a body: the client lets it through
        raise TransportFailed(f"TLS: {error}", transient=transient_tls(error)) from None


def transient_tls(error: BaseException) -> bool:
    """Whether a TLS failure is the connection being cut rather than the TLS setup.

    An L4 load balancer whose backend (a managed control plane) restarts accepts the
    connection and closes it mid-handshake: ``UNEXPECTED_EOF_WHILE_READING``, which
    client-go retries as a probable EOF. A certificate that does not verify, or names
    another host, fails the same way on every try. The client wraps the ``ssl`` error
    (``ApiException`` around urllib3's ``SSLError``), so the chain is walked; anything
    not known to be a cut connection counts as the setup."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError):
            return False
        if isinstance(current, _CUT_CONNECTION):
            return True
        if isinstance(current, ssl.SSLError) and current.reason == "UNEXPECTED_EOF_WHILE_READING":
            return True  # OpenSSL builds that raise it as a plain SSLError
        current = current.__cause__ or current.__context__
    return False


_CUT_CONNECTION = (ssl.SSLEOFError, ssl.SSLZeroReturnError)


def decode(data: bytes) -> dict[str, Any]:
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


def status_message(status: int, data: bytes) -> str:
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


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The seconds a ``Retry-After`` header asks for (what API servers send), or None:
    absent, an HTTP date, or not a finite, non-negative number (``nan`` would make
    the backoff's sleep fail)."""
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        seconds = float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
    return seconds if seconds is not None and math.isfinite(seconds) and seconds >= 0 else None


def _first_line(text: str) -> str:
    """urllib3 and ssl errors nest; the last line of the reason says what happened."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "request failed"


def transport_message(error: Exception, read_timeout: float) -> str:
    import urllib3

    if isinstance(error, urllib3.exceptions.ReadTimeoutError):
        return f"no response within {read_timeout:g} s"
    # NewConnectionError subclasses ConnectTimeoutError in urllib3 2: test it first.
    if isinstance(error, urllib3.exceptions.NewConnectionError):
        return "connection refused or host unreachable"
    if isinstance(error, urllib3.exceptions.ConnectTimeoutError):
        return "connection timed out"
    return f"{type(error).__name__}: {error}"
