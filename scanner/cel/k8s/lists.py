"""Kubernetes' list library (``library/lists.go``): ``isSorted``, ``sum``, ``min``,
``max``, ``indexOf``, ``lastIndexOf`` (version 0: no ``includes``, as Kubernetes' base
environment declares it).

``sum``, ``min`` and ``max`` return an element's own type (a ``uint``, a ``duration``,
a ``timestamp``), which no Python function can hand back to cel-cpp; they run as CEL
folds instead, written into the program when it compiles
(``scanner.cel.k8s.rewrite``): each counts one comprehension iteration per element
toward the rule cost limit. The others answer in Python with CEL's equality and
ordering.
"""

from __future__ import annotations

import datetime
from typing import Any, Final

from scanner.cel.k8s.library import KubernetesError, function, member
from scanner.cel.k8s.runtime import cel_equal

COMPARABLE: Final = ("int", "uint", "double", "bool", "duration", "timestamp", "string", "bytes")
SUMMABLE: Final = ("int", "uint", "double", "duration")


_MISSING: Final = object()


def _ordered(value: Any) -> Any:
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, int | float | str | bytes | datetime.datetime | datetime.timedelta):
        return value
    raise KubernetesError(f"no such overload: {type(value).__name__} is not comparable")


def _is_sorted(items: list[Any]) -> bool:
    previous: Any = _MISSING
    for item in items:
        current = _ordered(item)
        if previous is not _MISSING and previous > current:
            return False
        previous = current
    return True


def _index_of(items: list[Any], value: Any) -> int:
    return next((index for index, item in enumerate(items) if cel_equal(item, value)), -1)


def _last_index_of(items: list[Any], value: Any) -> int:
    for index in range(len(items) - 1, -1, -1):
        if cel_equal(items[index], value):
            return index
    return -1


FUNCTIONS = (
    function(
        "isSorted",
        *(
            member(f"list_{kind}_is_sorted_bool", [f"list({kind})"], "bool", _is_sorted)
            for kind in COMPARABLE
        ),
    ),
    function("sum", *(member(f"list_{k}_sum_{k}", [f"list({k})"], k) for k in SUMMABLE)),
    function("max", *(member(f"list_{k}_max_{k}", [f"list({k})"], k) for k in COMPARABLE)),
    function("min", *(member(f"list_{k}_min_{k}", [f"list({k})"], k) for k in COMPARABLE)),
    function("indexOf", member("list_a_index_of_int", ["list(A)", "A"], "int", _index_of)),
    function(
        "lastIndexOf", member("list_a_last_index_of_int", ["list(A)", "A"], "int", _last_index_of)
    ),
)
