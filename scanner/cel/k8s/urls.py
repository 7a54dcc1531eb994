"""Kubernetes' URL library (``library/urls.go``) on Go's ``net/url`` rules.

``url()`` and ``isURL()`` accept what ``url.ParseRequestURI`` accepts (an absolute URI
or an absolute path); the getters read the parts ``url.Parse`` finds. The payload is
the text the URL was made from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from scanner.cel.k8s.library import KubernetesError, function, glob, member, opaque, payload

_UNRESERVED: Final = frozenset("-_.~")
_PATH_KEEP: Final = frozenset("$&+,/:;=@")
_VALID_ENCODED: Final = frozenset("!$&'()*+,;=:@[]")


class URLError(ValueError):
    """Go's ``*url.Error`` text: ``parse "<url>": <reason>``."""


@dataclass(frozen=True, slots=True)
class URL:
    scheme: str = ""
    opaque: str = ""
    host: str = ""
    path: str = ""
    raw_path: str = ""
    raw_query: str = ""


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse(raw: str, request: bool) -> URL:
    """Go's ``url.parse``; ``request``: ``ParseRequestURI`` (no fragment, no relative path)."""
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in raw):
        raise URLError("net/url: invalid control character in URL")
    if raw == "" and request:
        raise URLError("empty url")
    if raw == "*":
        return URL(path="*")
    scheme, rest = _scheme(raw)
    scheme = scheme.lower()
    raw_query = ""
    if rest.endswith("?") and rest.count("?") == 1:
        rest = rest[:-1]
    else:
        rest, _, raw_query = rest.partition("?")
    if not rest.startswith("/"):
        if scheme:
            return URL(scheme=scheme, opaque=rest, raw_query=raw_query)
        if request:
            raise URLError("invalid URI for request")
        segment = rest.split("/", 1)[0]
        if ":" in segment:
            raise URLError("first path segment in URL cannot contain colon")
    host = ""
    if (scheme or (not request and not rest.startswith("///"))) and rest.startswith("//"):
        authority, slash, after = rest[2:].partition("/")
        rest = slash + after
        host = _authority(authority)
    path = _unescape(rest, host_mode=False)
    raw_path = "" if _escape_path(path) == rest else rest
    return URL(scheme, "", host, path, raw_path, raw_query)


def _scheme(raw: str) -> tuple[str, str]:
    for index, char in enumerate(raw):
        if char.isascii() and char.isalpha():
            continue
        if char.isascii() and (char.isdigit() or char in "+-."):
            if index == 0:
                return "", raw
            continue
        if char == ":":
            if index == 0:
                raise URLError("missing protocol scheme")
            return raw[:index], raw[index + 1 :]
        return "", raw
    return "", raw


def _authority(authority: str) -> str:
    at = authority.rfind("@")
    host = authority[at + 1 :] if at >= 0 else authority
    if host.startswith("["):
        close = host.rfind("]")
        if close < 0:
            raise URLError("missing ']' in host")
        port = host[close + 1 :]
        if not _valid_port(port):
            raise URLError(f"invalid port {_quote(port)} after host")
    else:
        colon = host.rfind(":")
        if colon >= 0 and not _valid_port(host[colon:]):
            raise URLError(f"invalid port {_quote(host[colon:])} after host")
    return _unescape(host, host_mode=True)


def _valid_port(port: str) -> bool:
    if port == "":
        return True
    return port[0] == ":" and all(char.isascii() and char.isdigit() for char in port[1:])


def _unescape(text: str, host_mode: bool) -> str:
    out = bytearray()
    index = 0
    raw = text.encode("utf-8")
    while index < len(raw):
        byte = raw[index]
        if byte == 0x25:  # %
            hex_part = raw[index + 1 : index + 3]
            if len(hex_part) < 2 or not all(chr(b) in "0123456789abcdefABCDEF" for b in hex_part):
                escape = raw[index : index + 3].decode("utf-8", "replace")
                raise URLError(f"invalid URL escape {_quote(escape)}")
            out.append(int(hex_part, 16))
            index += 3
            continue
        out.append(byte)
        index += 1
    del host_mode
    return out.decode("utf-8", "replace")


def _escape_path(text: str) -> str:
    parts = []
    for byte in text.encode("utf-8"):
        char = chr(byte)
        if byte < 0x80 and (char.isalnum() or char in _UNRESERVED or char in _PATH_KEEP):
            parts.append(char)
        else:
            parts.append(f"%{byte:02X}")
    return "".join(parts)


def _valid_encoded(text: str) -> bool:
    for char in text:
        if char in _VALID_ENCODED or char == "%":
            continue
        if not (char.isascii() and (char.isalnum() or char in _UNRESERVED or char in _PATH_KEEP)):
            return False
    return True


def escaped_path(url: URL) -> str:
    """Go's ``URL.EscapedPath``."""
    if url.raw_path and _valid_encoded(url.raw_path):
        try:
            if _unescape(url.raw_path, host_mode=False) == url.path:
                return url.raw_path
        except URLError:
            pass
    if url.path == "*":
        return "*"
    return _escape_path(url.path)


def split_host_port(host: str) -> tuple[str, str]:
    """Go's ``splitHostPort``: (hostname, port), brackets removed."""
    port = ""
    colon = host.rfind(":")
    if colon >= 0 and _valid_port(host[colon:]):
        host, port = host[:colon], host[colon + 1 :]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


def query(raw_query: str) -> dict[str, list[str]]:
    """Go's ``url.ParseQuery``, keeping what parses (as ``URL.Query`` does)."""
    values: dict[str, list[str]] = {}
    for part in raw_query.split("&"):
        if not part or ";" in part:
            continue
        key, _, value = part.partition("=")
        try:
            key, value = _unescape_query(key), _unescape_query(value)
        except URLError:
            continue
        values.setdefault(key, []).append(value)
    return values


def _unescape_query(text: str) -> str:
    return _unescape(text.replace("+", " "), host_mode=False)


def request_uri(text: str) -> URL:
    """``url()``: checked as ``ParseRequestURI``, read as ``url.Parse`` (the fragment apart)."""
    try:
        parse(text, request=True)
        return parse(text.partition("#")[0], request=False)
    except URLError as error:
        raise KubernetesError(
            f"URL parse error during conversion from string: parse {_quote(text)}: {error}"
        ) from None


def request_uri_error(text: str) -> str | None:
    """``ParseRequestURI``'s error text for ``text`` (``format.uri()``), or None."""
    try:
        parse(text, request=True)
    except URLError as error:
        return f"parse {_quote(text)}: {error}"
    return None


def _load(value: object) -> URL:
    return request_uri(str(payload(value, "URL")))


def _is_url(text: str) -> bool:
    return request_uri_error(text) is None


FUNCTIONS = (
    function(
        "url",
        glob("string_to_url", ["string"], "URL", lambda t: (request_uri(t), opaque("URL", t))[1]),
    ),
    function("getScheme", member("url_get_scheme", ["URL"], "string", lambda u: _load(u).scheme)),
    function("getHost", member("url_get_host", ["URL"], "string", lambda u: _load(u).host)),
    function(
        "getHostname",
        member("url_get_hostname", ["URL"], "string", lambda u: split_host_port(_load(u).host)[0]),
    ),
    function(
        "getPort",
        member("url_get_port", ["URL"], "string", lambda u: split_host_port(_load(u).host)[1]),
    ),
    function(
        "getEscapedPath",
        member("url_get_escaped_path", ["URL"], "string", lambda u: escaped_path(_load(u))),
    ),
    function(
        "getQuery",
        member(
            "url_get_query",
            ["URL"],
            "map(string, list(string))",
            lambda u: query(_load(u).raw_query),
        ),
    ),
    function("isURL", glob("is_url_string", ["string"], "bool", _is_url)),
)
