"""Kubernetes' IP and CIDR libraries (``library/ip.go``, ``library/cidr.go``) with Go's
``net/netip`` rules: no zones, no IPv4-mapped IPv6 addresses, no leading zeros in an
IPv4 octet, canonical text as ``netip.Addr.String()`` writes it. A CIDR keeps the
address it was written with (``cidr('192.168.0.1/24')`` is not ``masked()``).

Payloads: an IP is its canonical text, a CIDR ``<canonical address>/<bits>``.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Final

from scanner.cel.k8s.library import KubernetesError, function, glob, member, opaque, payload
from scanner.cel.k8s.runtime import cidr_text, ip_text

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_IPV4: Final = re.compile(r"(0|[1-9][0-9]{0,2})(\.(0|[1-9][0-9]{0,2})){3}")


def _parse_addr(text: str) -> Address:
    """``netip.ParseAddr``, then Kubernetes' refusals; ``ValueError`` with Go's reason."""
    if "%" in text:
        if ":" not in text:
            raise ValueError("unexpected character")
        raise _Refused(f"IP address {_quote(text)} with zone value is not allowed")
    if ":" in text:
        try:
            six = ipaddress.IPv6Address(text)
        except ipaddress.AddressValueError as error:
            raise ValueError(str(error)) from None
        if six.ipv4_mapped is not None:
            raise _Refused(f"IPv4-mapped IPv6 address {_quote(text)} is not allowed")
        return six
    if not _IPV4.fullmatch(text) or any(int(part) > 255 for part in text.split(".")):
        raise ValueError(
            "IPv4 field has value >255" if _IPV4.fullmatch(text) else "unexpected character"
        )
    return ipaddress.IPv4Address(text)


class _Refused(ValueError):
    """Valid for Go, refused by Kubernetes (a zone, an IPv4-mapped address)."""


def parse_ip(text: str) -> Address:
    try:
        return _parse_addr(text)
    except _Refused as refused:
        raise KubernetesError(str(refused)) from None
    except ValueError as error:
        raise KubernetesError(
            f"IP Address {_quote(text)} parse error during conversion from string: "
            f"ParseAddr({_quote(text)}): {error}"
        ) from None


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def canonical(address: Address) -> str:
    """``netip.Addr.String()``: RFC 5952 for IPv6, as Python's ``str`` writes it."""
    return str(address)


def _wrap_ip(address: Address) -> object:
    return opaque("IP", canonical(address))


def _load_ip(value: object) -> Address:
    return ipaddress.ip_address(str(payload(value, "IP")))


def _ip(text: str) -> object:
    return _wrap_ip(parse_ip(text))


def _is_ip(text: str) -> bool:
    try:
        _parse_addr(text)
    except ValueError:
        return False
    return True


def _is_canonical(text: str) -> bool:
    return canonical(parse_ip(text)) == text


def _family(value: object) -> int:
    return _load_ip(value).version


def _is_link_local_multicast(address: Address) -> bool:
    if address.version == 4:
        return address in ipaddress.IPv4Network("224.0.0.0/24")
    return (int(address) >> 112) & 0xFF0F == 0xFF02


def _is_global_unicast(address: Address) -> bool:
    """Go's ``IsGlobalUnicast``: private and ULA addresses count."""
    if address.version == 4 and str(address) in ("0.0.0.0", "255.255.255.255"):
        return False
    return not (
        address.is_unspecified
        or _is_loopback(address)
        or address.is_multicast
        or _is_link_local_unicast(address)
    )


def _is_loopback(address: Address) -> bool:
    if address.version == 4:
        return str(address).startswith("127.")
    return int(address) == 1


def _is_link_local_unicast(address: Address) -> bool:
    if address.version == 4:
        return address in ipaddress.IPv4Network("169.254.0.0/16")
    return address in ipaddress.IPv6Network("fe80::/10")


# --- CIDR --------------------------------------------------------------------------


def parse_cidr(text: str) -> tuple[Address, int]:
    """``netip.ParsePrefix`` and Kubernetes' refusals: (address, prefix length)."""
    address_text, slash, bits_text = text.rpartition("/")
    reason = ""
    if not slash:
        reason = f"netip.ParsePrefix({_quote(text)}): no '/'"
    elif (
        not bits_text.isdigit()
        or not bits_text.isascii()
        or (len(bits_text) > 1 and bits_text[0] == "0")
    ):
        reason = f"netip.ParsePrefix({_quote(text)}): bad bits after slash: {_quote(bits_text)}"
    else:
        try:
            address = _parse_addr(address_text)
        except _Refused:
            if "%" in address_text:
                reason = (
                    f"netip.ParsePrefix({_quote(text)}): IPv6 zones cannot be present in a prefix"
                )
            else:
                raise KubernetesError(
                    "network address parse error during conversion from string: "
                    f"IPv4-mapped IPv6 address {_quote(text)} is not allowed"
                ) from None
        except ValueError as error:
            reason = (
                f"netip.ParsePrefix({_quote(text)}): ParseAddr({_quote(address_text)}): {error}"
            )
        else:
            bits = int(bits_text)
            if bits > address.max_prefixlen:
                reason = f"netip.ParsePrefix({_quote(text)}): prefix length out of range"
            else:
                return address, bits
    raise KubernetesError(
        "network address parse error during conversion from string: "
        f"network address parse error during conversion from string: {reason}"
    )


def _wrap_cidr(address: Address, bits: int) -> object:
    return opaque("CIDR", f"{canonical(address)}/{bits}")


def _load_cidr(value: object) -> tuple[Address, int]:
    address, _, bits = str(payload(value, "CIDR")).rpartition("/")
    return ipaddress.ip_address(address), int(bits)


def _network(address: Address, bits: int) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network(f"{address}/{bits}", strict=False)


def _contains_ip(cidr: object, ip: object) -> bool:
    address, bits = _load_cidr(cidr)
    other = _load_ip(ip)
    return other.version == address.version and other in _network(address, bits)


def _contains_cidr(cidr: object, other: object) -> bool:
    address, bits = _load_cidr(cidr)
    inner, inner_bits = _load_cidr(other)
    if inner.version != address.version or inner_bits < bits:
        return False
    return _network(inner, bits) == _network(address, bits)


def _masked(value: object) -> object:
    address, bits = _load_cidr(value)
    return _wrap_cidr(_network(address, bits).network_address, bits)


def _is_cidr(text: str) -> bool:
    try:
        parse_cidr(text)
    except KubernetesError:
        return False
    return True


FUNCTIONS = (
    function(
        "ip",
        glob("string_to_ip", ["string"], "IP", _ip),
        member("cidr_ip", ["CIDR"], "IP", lambda c: _wrap_ip(_load_cidr(c)[0])),
    ),
    function("family", member("ip_family", ["IP"], "int", _family)),
    function("ip.isCanonical", glob("ip_is_canonical", ["string"], "bool", _is_canonical)),
    function(
        "isUnspecified",
        member("ip_is_unspecified", ["IP"], "bool", lambda v: _load_ip(v).is_unspecified),
    ),
    function(
        "isLoopback", member("ip_is_loopback", ["IP"], "bool", lambda v: _is_loopback(_load_ip(v)))
    ),
    function(
        "isLinkLocalMulticast",
        member(
            "ip_is_link_local_multicast",
            ["IP"],
            "bool",
            lambda v: _is_link_local_multicast(_load_ip(v)),
        ),
    ),
    function(
        "isLinkLocalUnicast",
        member(
            "ip_is_link_local_unicast",
            ["IP"],
            "bool",
            lambda v: _is_link_local_unicast(_load_ip(v)),
        ),
    ),
    function(
        "isGlobalUnicast",
        member("ip_is_global_unicast", ["IP"], "bool", lambda v: _is_global_unicast(_load_ip(v))),
    ),
    function("isIP", glob("is_ip", ["string"], "bool", _is_ip)),
    function(
        "string",
        glob("ip_to_string", ["IP"], "string", ip_text),
        glob("cidr_to_string", ["CIDR"], "string", cidr_text),
    ),
    function(
        "cidr", glob("string_to_cidr", ["string"], "CIDR", lambda t: _wrap_cidr(*parse_cidr(t)))
    ),
    function(
        "containsIP",
        member(
            "cidr_contains_ip_string",
            ["CIDR", "string"],
            "bool",
            lambda c, t: _contains_ip(c, _ip(t)),
        ),
        member("cidr_contains_ip_ip", ["CIDR", "IP"], "bool", _contains_ip),
    ),
    function(
        "containsCIDR",
        member(
            "cidr_contains_cidr_string",
            ["CIDR", "string"],
            "bool",
            lambda c, t: _contains_cidr(c, _wrap_cidr(*parse_cidr(t))),
        ),
        member("cidr_contains_cidr", ["CIDR", "CIDR"], "bool", _contains_cidr),
    ),
    function(
        "prefixLength", member("cidr_prefix_length", ["CIDR"], "int", lambda c: _load_cidr(c)[1])
    ),
    function("masked", member("cidr_masked", ["CIDR"], "CIDR", _masked)),
    function("isCIDR", glob("is_cidr", ["string"], "bool", _is_cidr)),
)
