"""poolgate's own CEL functions, the same in both engines.

Every function is pinned here and in tests/cel/test_functions.py (as Kubernetes
pins its CEL libraries): adding or changing one is a deliberate, reviewed act,
because rules written against it must keep meaning the same thing.

=============================  ======================================================
``joined(list, string)``       the list's items as strings, separated by the string
                               (messages that name several pools or taints)
=============================  ======================================================
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def joined(items: Iterable[object], separator: str) -> str:
    return str(separator).join(_text(item) for item in items)


def _text(item: object) -> str:
    if isinstance(item, bool):
        return "true" if item else "false"
    return str(item)


SIGNATURES: dict[str, str] = {"joined": "joined(list, string) -> string"}
"""Name -> signature of every poolgate function (pinned by a test)."""


def declarations() -> tuple[Any, ...]:
    """The functions as the cpp engine declares them (``scanner.cel.k8s.library``)."""
    from scanner.cel.k8s.library import function, glob

    return (
        function("joined", glob("joined_list_string", ["list(dyn)", "string"], "string", joined)),
    )
