"""The standard runtime: the cel-cpp environment that plans a checked program calling
no Kubernetes library (``scanner.cel.k8s``), and the helpers rewritten programs call.

It has cel-cpp's extensions (optionals, strings, sets, two-variable comprehensions),
poolgate's functions and the ``@k8s.*`` helpers of ``rewrite.py``; building it imports
none of the Kubernetes libraries, so a run of poolgate's own rules does not pay for them.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any, Final

from scanner.cel.k8s.library import (
    Function,
    KubernetesError,
    Overload,
    dispatcher,
    parse_type,
    payload,
    runtime_kind,
)

EXTENSIONS: Final = """extensions:
  - name: "optional"
  - name: "strings"
  - name: "sets"
  - name: "two-var-comprehensions"
"""


def cel_equal(left: Any, right: Any) -> bool:
    """CEL's heterogeneous equality on plain values: numbers by value across int, uint
    and double (never a bool), lists and maps element by element, else same type and value."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, bytes | bytearray) and isinstance(right, bytes | bytearray):
        return bytes(left) == bytes(right)
    if type(left) is not type(right):
        return False
    if isinstance(left, list):
        return len(left) == len(right) and all(map(cel_equal, left, right))
    if isinstance(left, dict):
        if len(left) != len(right):
            return False
        for key, value in left.items():
            match = next((k for k in right if cel_equal(k, key)), _MISSING)
            if match is _MISSING or not cel_equal(value, right[match]):
                return False
        return True
    return bool(left == right)


_MISSING: Final = object()


def sorted_keys(keys: list[Any]) -> list[Any]:
    """Map keys in the order comprehensions visit them: bools, then numbers, then
    strings, each in their own order (a map's keys are of those types only; the python
    engine sorts alike: ``scanner.cel.celpy_budget.key_order``)."""
    return sorted(keys, key=_key_order)


def _key_order(key: Any) -> tuple[int, Any]:
    if isinstance(key, bool):
        return 0, key
    if isinstance(key, int | float):
        return 1, key
    return 2, str(key)


def _pairs_to_map(pairs: list[list[Any]]) -> dict[Any, Any]:
    result: dict[Any, Any] = {}
    for key, value in pairs:
        _insert(result, key, value)
    return result


def _merge_maps(maps: list[dict[Any, Any]]) -> dict[Any, Any]:
    result: dict[Any, Any] = {}
    for entries in maps:
        for key, value in entries.items():
            _insert(result, key, value)
    return result


def _insert(result: dict[Any, Any], key: Any, value: Any) -> None:
    """cel-go's ``cel.@mapInsert``: a key given twice is an error."""
    if any(cel_equal(key, known) for known in result):
        shown = ("true" if key else "false") if isinstance(key, bool) else str(key)
        raise KubernetesError(f"insert failed: key {shown} already exists")
    result[key] = value


def _duration_millis(value: datetime.timedelta) -> int:
    """cel-go's ``getMilliseconds()`` of a duration: all of it, in thousandths of a second."""
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    return micros // 1000 if micros >= 0 else -(-micros // 1000)


def _fail(message: str) -> Any:
    raise KubernetesError(message)


def ip_text(value: Any) -> str:
    """``string()`` of an IP: its canonical text (the payload)."""
    return str(payload(value, "IP"))


def cidr_text(value: Any) -> str:
    """``string()`` of a CIDR: its canonical text (the payload)."""
    return str(payload(value, "CIDR"))


STANDARD_OVERLOADS: Final = (
    Function(
        "string",
        (
            Overload("ip_to_string", ("IP",), "string", ip_text),
            Overload("cidr_to_string", ("CIDR",), "string", cidr_text),
        ),
    ),
)
"""Kubernetes overloads the standard runtime has as well: ``string(x)`` of a ``dyn``
may meet an IP in any program, and so many programs call ``string()`` that they
should not all need the full runtime for it."""


NONE: Final = {True: "@none", False: 0}
"""What a fold's accumulator holds before the first element (no rule value equals it)."""

HELPERS: Final[tuple[tuple[str, tuple[str, ...], Callable[..., Any]], ...]] = (
    ("@k8s.sortedKeys", ("list",), sorted_keys),
    ("@k8s.indices", ("int",), lambda size: list(range(size))),
    ("@k8s.pairsToMap", ("list",), _pairs_to_map),
    ("@k8s.mergeMaps", ("list",), _merge_maps),
    ("@k8s.durationMillis", ("duration",), _duration_millis),
    ("@k8s.none", (), lambda: dict(NONE)),
    ("@k8s.fail", ("string",), _fail),
)
"""The helpers of rewritten programs (``rewrite.py``): name, argument kinds,
implementation. No rule can call them: ``@`` starts no CEL identifier."""


def declarations(
    cel: Any,
    functions: Iterable[Function],
    helpers: Iterable[tuple[str, tuple[str, ...], Callable[..., Any]]] = HELPERS,
) -> list[Any]:
    """The runtime's ``FunctionDecl``s: one overload per name, receiver style and
    argument kinds, answering with the first implementation that takes the values."""
    kinds = {
        "any": cel.Type("any"),  # matches a value of any kind at run time
        "map": cel.Type.Map(cel.Type.DYN, cel.Type.DYN),
        "list": cel.Type.List(cel.Type.DYN),
        "string": cel.Type.STRING,
        "int": cel.Type.INT,
        "uint": cel.Type.UINT,
        "double": cel.Type.DOUBLE,
        "bool": cel.Type.BOOL,
        "bytes": cel.Type.BYTES,
        "duration": cel.Type.DURATION,
        "timestamp": cel.Type.TIMESTAMP,
    }
    grouped: dict[tuple[str, bool, tuple[str, ...]], list[Callable[..., Any]]] = {}
    for fn in functions:
        for overload in fn.overloads:
            if overload.impl is not None:
                args = tuple(runtime_kind(parse_type(arg)) for arg in overload.args)
                grouped.setdefault((fn.name, overload.member, args), []).append(overload.impl)
    for name, args, impl in helpers:
        grouped[(name, False, args)] = [impl]
    declared = []
    for index, ((name, member, args), impls) in enumerate(grouped.items()):
        overload = cel.Overload(
            f"poolgate_runtime_{index}",
            cel.Type.DYN,
            [kinds[arg] for arg in args],
            is_member=member,
            impl=dispatcher(name, impls),
        )
        declared.append(cel.FunctionDecl(name, [overload]))
    return declared


@cache
def standard(variables: tuple[str, ...]) -> Any:
    """The standard runtime with ``variables`` declared ``dyn``."""
    from cel_expr_python import cel

    from scanner.cel.functions import declarations as poolgate

    return cel.NewEnv(
        config=cel.NewEnvConfigFromYaml(EXTENSIONS),
        variables={name: cel.Type.DYN for name in variables},
        functions=declarations(cel, (*poolgate(), *STANDARD_OVERLOADS)),
    )
