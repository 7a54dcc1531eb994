"""poolgate's CEL functions are pinned: same names, signatures and results on both engines;
and so is every function of the Kubernetes environment (scanner/cel/k8s/), as Kubernetes
pins its libraries (library_compatibility_test.go): adding, removing or changing one is a
deliberate act, since rules written against it must keep meaning the same thing."""

from __future__ import annotations

import pytest

from scanner.cel import ResultKind, get_engine
from scanner.cel.functions import SIGNATURES
from scanner.cel.k8s.environment import signatures


def test_the_function_list_is_pinned() -> None:
    assert SIGNATURES == {"joined": "joined(list, string) -> string"}


@pytest.mark.parametrize("engine_name", ["cpp", "python"])
@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('joined(["a", "b"], ", ")', "a, b"),
        ('joined([], ", ")', ""),
        ('joined([dyn(1), dyn(true), "x"], "/")', "1/true/x"),
        ('joined(["p", "q"].map(v, v + "!"), "")', "p!q!"),
    ],
)
def test_joined(engine_name: str, source: str, expected: str) -> None:
    engine = get_engine(engine_name)
    assert engine.compile(source, ResultKind.STRING).evaluate(engine.activation({})) == expected


def test_joined_type_checks_its_arguments() -> None:
    from scanner.errors import CelError

    with pytest.raises(CelError):
        get_engine("cpp").compile('joined("a", ",")', ResultKind.STRING)


PINNED: dict[str, list[str]] = {
    "ext.Strings (version 2)": [
        "<string>.charAt(int) -> string",
        "<string>.indexOf(string) -> int",
        "<string>.indexOf(string, int) -> int",
        "<string>.lastIndexOf(string) -> int",
        "<string>.lastIndexOf(string, int) -> int",
        "<string>.lowerAscii() -> string",
        "<string>.upperAscii() -> string",
        "<string>.replace(string, string) -> string",
        "<string>.replace(string, string, int) -> string",
        "<string>.split(string) -> list(string)",
        "<string>.split(string, int) -> list(string)",
        "<string>.substring(int) -> string",
        "<string>.substring(int, int) -> string",
        "<string>.trim() -> string",
        "<string>.format(list(dyn)) -> string",
        "strings.quote(string) -> string",
        "<list(string)>.join() -> string",
        "<list(string)>.join(string) -> string",
    ],
    "kubernetes.lists": [
        "<list(int)>.isSorted() -> bool",
        "<list(uint)>.isSorted() -> bool",
        "<list(double)>.isSorted() -> bool",
        "<list(bool)>.isSorted() -> bool",
        "<list(duration)>.isSorted() -> bool",
        "<list(timestamp)>.isSorted() -> bool",
        "<list(string)>.isSorted() -> bool",
        "<list(bytes)>.isSorted() -> bool",
        "<list(int)>.sum() -> int",
        "<list(uint)>.sum() -> uint",
        "<list(double)>.sum() -> double",
        "<list(duration)>.sum() -> duration",
        "<list(int)>.max() -> int",
        "<list(uint)>.max() -> uint",
        "<list(double)>.max() -> double",
        "<list(bool)>.max() -> bool",
        "<list(duration)>.max() -> duration",
        "<list(timestamp)>.max() -> timestamp",
        "<list(string)>.max() -> string",
        "<list(bytes)>.max() -> bytes",
        "<list(int)>.min() -> int",
        "<list(uint)>.min() -> uint",
        "<list(double)>.min() -> double",
        "<list(bool)>.min() -> bool",
        "<list(duration)>.min() -> duration",
        "<list(timestamp)>.min() -> timestamp",
        "<list(string)>.min() -> string",
        "<list(bytes)>.min() -> bytes",
        "<list(A)>.indexOf(A) -> int",
        "<list(A)>.lastIndexOf(A) -> int",
    ],
    "kubernetes.regex": [
        "<string>.find(string) -> string",
        "<string>.findAll(string) -> list(string)",
        "<string>.findAll(string, int) -> list(string)",
    ],
    "kubernetes.urls": [
        "url(string) -> URL",
        "<URL>.getScheme() -> string",
        "<URL>.getHost() -> string",
        "<URL>.getHostname() -> string",
        "<URL>.getPort() -> string",
        "<URL>.getEscapedPath() -> string",
        "<URL>.getQuery() -> map(string, list(string))",
        "isURL(string) -> bool",
    ],
    "kubernetes.net.ip, net.cidr": [
        "ip(string) -> IP",
        "<CIDR>.ip() -> IP",
        "<IP>.family() -> int",
        "ip.isCanonical(string) -> bool",
        "<IP>.isUnspecified() -> bool",
        "<IP>.isLoopback() -> bool",
        "<IP>.isLinkLocalMulticast() -> bool",
        "<IP>.isLinkLocalUnicast() -> bool",
        "<IP>.isGlobalUnicast() -> bool",
        "isIP(string) -> bool",
        "string(IP) -> string",
        "string(CIDR) -> string",
        "cidr(string) -> CIDR",
        "<CIDR>.containsIP(string) -> bool",
        "<CIDR>.containsIP(IP) -> bool",
        "<CIDR>.containsCIDR(string) -> bool",
        "<CIDR>.containsCIDR(CIDR) -> bool",
        "<CIDR>.prefixLength() -> int",
        "<CIDR>.masked() -> CIDR",
        "isCIDR(string) -> bool",
    ],
    "kubernetes.quantity": [
        "quantity(string) -> Quantity",
        "isQuantity(string) -> bool",
        "sign(Quantity) -> int",
        "<Quantity>.isGreaterThan(Quantity) -> bool",
        "<Quantity>.isLessThan(Quantity) -> bool",
        "<Quantity>.compareTo(Quantity) -> int",
        "<Quantity>.asApproximateFloat() -> double",
        "<Quantity>.asInteger() -> int",
        "<Quantity>.isInteger() -> bool",
        "<Quantity>.add(Quantity) -> Quantity",
        "<Quantity>.add(int) -> Quantity",
        "<Quantity>.sub(Quantity) -> Quantity",
        "<Quantity>.sub(int) -> Quantity",
        "<Quantity>.mul(int) -> Quantity",
        "<Quantity>.div(int) -> Quantity",
        "<Quantity>.div(int, int) -> Quantity",
        "<Quantity>.divInt(int) -> Quantity",
    ],
    "kubernetes.format": [
        "format.dns1123Label() -> Format",
        "format.dns1123Subdomain() -> Format",
        "format.dns1035Label() -> Format",
        "format.qualifiedName() -> Format",
        "format.dns1123LabelPrefix() -> Format",
        "format.dns1123SubdomainPrefix() -> Format",
        "format.dns1035LabelPrefix() -> Format",
        "format.labelValue() -> Format",
        "format.uri() -> Format",
        "format.uuid() -> Format",
        "format.byte() -> Format",
        "format.date() -> Format",
        "format.datetime() -> Format",
        "format.named(string) -> optional_type(Format)",
        "<Format>.validate(string) -> optional_type(list(string))",
    ],
    "kubernetes.Semver (version 1)": [
        "semver(string) -> Semver",
        "semver(string, bool) -> Semver",
        "isSemver(string) -> bool",
        "isSemver(string, bool) -> bool",
        "<Semver>.isGreaterThan(Semver) -> bool",
        "<Semver>.isLessThan(Semver) -> bool",
        "<Semver>.compareTo(Semver) -> int",
        "<Semver>.major() -> int",
        "<Semver>.minor() -> int",
        "<Semver>.patch() -> int",
    ],
    "poolgate": [
        "joined(list(dyn), string) -> string",
    ],
}

STANDARD = {"string": 8, "_<_": 14, "_<=_": 14, "_>_": 14, "_>=_": 14}
"""Standard functions declared again (scanner/cel/k8s/standard.py): overload counts."""


def test_the_kubernetes_environment_is_pinned() -> None:
    declared = signatures()
    standard = declared.pop("standard (redeclared)")
    assert declared == PINNED
    counts: dict[str, int] = {}
    for text in standard:
        name = text.split("(", 1)[0]
        counts[name] = counts.get(name, 0) + 1
    assert counts == STANDARD
