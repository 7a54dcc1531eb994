"""How a library of the Kubernetes environment is declared, once for both halves of
the cpp engine.

The cpp engine type-checks with one cel-cpp environment and runs with another
(``scanner.cel.k8s``): cel-expr-python converts what a Python function returns by
the type it is declared to return, and has no conversion for Kubernetes' own types
(``net.IP``, ``kubernetes.Quantity``, ...), for optionals, timestamps or durations.
So a library declares each overload with Kubernetes' exact signature for the checker,
and its Python implementation for the runtime, where a Kubernetes value is an
ordinary CEL map, ``{true: <type name>, false: <payload>}`` (``opaque``). Maps read
from the input have text keys only, so no input value passes for one.

Signatures use a small type language: ``int``, ``string``, ``list(string)``,
``map(string, list(string))``, a capitalised Kubernetes type (``IP``, ``Quantity``)
and ``A`` for a type parameter.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

OPAQUE: Final = {
    "Quantity": "kubernetes.Quantity",
    "URL": "kubernetes.URL",
    "IP": "net.IP",
    "CIDR": "net.CIDR",
    "Format": "kubernetes.NamedFormat",
    "Semver": "kubernetes.Semver",
}
"""Kubernetes' types: the name a signature uses -> the CEL type name."""


class NoOverload(Exception):
    """An argument is not of the type this implementation takes (only possible for
    values typed ``dyn``); the runtime tries the next implementation."""


class KubernetesError(Exception):
    """The function fails as Kubernetes' does (an evaluation error)."""


@dataclass(frozen=True, slots=True)
class Overload:
    id: str
    args: tuple[str, ...]
    """Argument types; a member function's receiver first."""
    result: str
    impl: Callable[..., Any] | None = None
    """The Python implementation; None where cel-cpp's runtime has the function."""
    member: bool = False


@dataclass(frozen=True, slots=True)
class Function:
    name: str
    overloads: tuple[Overload, ...]


def function(name: str, *overloads: Overload) -> Function:
    return Function(name, overloads)


def member(
    id: str, args: Iterable[str], result: str, impl: Callable[..., Any] | None = None
) -> Overload:
    return Overload(id, tuple(args), result, impl, member=True)


def glob(
    id: str, args: Iterable[str], result: str, impl: Callable[..., Any] | None = None
) -> Overload:
    return Overload(id, tuple(args), result, impl)


def signature(name: str, overload: Overload) -> str:
    """The pinned text of one overload: ``<Quantity>.add(int) -> Quantity``."""
    if overload.member:
        receiver, *rest = overload.args
        return f"<{receiver}>.{name}({', '.join(rest)}) -> {overload.result}"
    return f"{name}({', '.join(overload.args)}) -> {overload.result}"


# --- Kubernetes values at run time ----------------------------------------------------


def opaque(type_name: str, payload: Any) -> dict[Any, Any]:
    """A Kubernetes value as the runtime holds it."""
    return {True: OPAQUE[type_name], False: payload}


def payload(value: Any, type_name: str) -> Any:
    """The payload of a Kubernetes value of ``type_name``; ``NoOverload`` for anything else."""
    if (
        value.__class__ is dict
        and len(value) == 2
        and all(key.__class__ is bool for key in value)
        and value.get(True) == OPAQUE[type_name]
    ):
        return value[False]
    raise NoOverload


def opaque_type(value: Any) -> str | None:
    """The type name of a Kubernetes value (``net.IP``), or None for any other value."""
    if value.__class__ is dict and len(value) == 2 and all(key.__class__ is bool for key in value):
        name = value.get(True)
        return name if isinstance(name, str) else None
    return None


# --- the checker's declarations ---------------------------------------------------------

_TYPE: Final = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(\()?")


def parse_type(text: str) -> tuple[str, tuple[Any, ...]]:
    """``map(string, list(A))`` -> ("map", (("string", ()), ("list", (("A", ()),))))."""
    parsed, rest = _parse(text)
    if rest.strip():
        raise ValueError(f"bad type {text!r}")
    return parsed


def _parse(text: str) -> tuple[tuple[str, tuple[Any, ...]], str]:
    match = _TYPE.match(text)
    if match is None:
        raise ValueError(f"bad type {text!r}")
    name, rest = match.group(1), text[match.end() :]
    if not match.group(2):
        return (name, ()), rest
    params = []
    while True:
        param, rest = _parse(rest)
        params.append(param)
        rest = rest.lstrip()
        if rest.startswith(","):
            rest = rest[1:]
            continue
        if rest.startswith(")"):
            return (name, tuple(params)), rest[1:]
        raise ValueError(f"bad type {text!r}")


def type_config(parsed: tuple[str, tuple[Any, ...]]) -> dict[str, Any]:
    """A type as cel-cpp's environment configuration writes it."""
    name, params = parsed
    if name == "A":
        return {"type_name": "A", "is_type_param": True}
    config: dict[str, Any] = {"type_name": OPAQUE.get(name, name)}
    if params:
        config["params"] = [type_config(param) for param in params]
    return config


def config_functions(functions: Iterable[Function]) -> list[dict[str, Any]]:
    """The ``functions`` of a cel-cpp environment configuration (YAML, written as JSON)."""
    declared = []
    for fn in functions:
        overloads = []
        for overload in fn.overloads:
            args = [type_config(parse_type(arg)) for arg in overload.args]
            entry: dict[str, Any] = {"id": overload.id}
            if overload.member:
                entry["target"] = args.pop(0)
            if args:
                entry["args"] = args
            entry["return"] = type_config(parse_type(overload.result))
            overloads.append(entry)
        declared.append({"name": fn.name, "overloads": overloads})
    return declared


# --- the runtime's functions -----------------------------------------------------------


def runtime_kind(parsed: tuple[str, tuple[Any, ...]]) -> str:
    """How cel-cpp's runtime matches an argument: by its kind only (``map`` for a
    Kubernetes value, ``any`` for ``dyn`` and type parameters)."""
    name = parsed[0]
    if name in OPAQUE or name == "map":
        return "map"
    if name in ("A", "dyn"):
        return "any"
    return name


def dispatcher(name: str, impls: list[Callable[..., Any]]) -> Callable[..., Any]:
    """One runtime overload for implementations that take the same kinds of
    arguments (``isLessThan`` of quantities and of semantic versions): the first
    that accepts the arguments answers."""
    if len(impls) == 1:
        only = impls[0]

        def single(*args: Any) -> Any:
            try:
                return only(*args)
            except NoOverload:
                raise KubernetesError(_no_overload(name, args)) from None

        return single

    def call(*args: Any) -> Any:
        for impl in impls:
            try:
                return impl(*args)
            except NoOverload:
                continue
        raise KubernetesError(_no_overload(name, args))

    return call


def _no_overload(name: str, args: tuple[Any, ...]) -> str:
    kinds = ", ".join(opaque_type(arg) or _kind(arg) for arg in args)
    return f"found no matching overload for '{name}' applied to '({kinds})'"


def kind_name(value: Any) -> str:
    """The CEL type name of a plain value, for messages."""
    return _kind(value)


def _kind(value: Any) -> str:
    return {
        bool: "bool",
        int: "int",
        float: "double",
        str: "string",
        list: "list",
        dict: "map",
        bytearray: "bytes",
        bytes: "bytes",
    }.get(value.__class__, "null_type" if value is None else type(value).__name__)
