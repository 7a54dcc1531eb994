"""What the portable engine (cel-python) may run: the CEL for which it gives the default
engine's answer, found on cel-python's own parse tree.

cel-python has the standard library and poolgate's functions; it has no optional
syntax, no extension, no two-variable comprehension and none of Kubernetes' libraries.
Rather than answer differently (or fail on every subject), the python engine refuses a
rule that uses any of them when the rule loads, naming the feature and the default
engine. The check walks the Lark tree cel-python parses (``member_dot_arg`` for a
method or a qualified function, ``ident_arg`` and ``dot_ident_arg`` for a global
function); syntax cel-python cannot parse at all is named from where it stopped.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Final, TypeAlias, cast

import lark

_Tree: TypeAlias = "lark.Tree[Any]"

GLOBALS: Final = frozenset(
    {
        "has",
        "size",
        "int",
        "uint",
        "double",
        "string",
        "bytes",
        "bool",
        "dyn",
        "type",
        "duration",
        "timestamp",
        "matches",
        "joined",
    }
)
"""Global functions and macros both engines answer alike (tests/cel/test_engines.py)."""

METHODS: Final = frozenset(
    {
        "contains",
        "startsWith",
        "endsWith",
        "matches",
        "size",
        "getDate",
        "getDayOfMonth",
        "getDayOfWeek",
        "getDayOfYear",
        "getFullYear",
        "getMonth",
        "getHours",
        "getMinutes",
        "getSeconds",
    }
)
"""Methods both engines answer alike (the duration accessors are not among them:
Kubernetes' ``getMilliseconds`` counts the whole duration)."""

MACROS: Final = {"all": (2,), "exists": (2,), "exists_one": (2,), "map": (2, 3), "filter": (2,)}
"""Comprehension macros and the argument counts the portable engine runs."""

DEFAULT_ENGINE: Final = "run it with the default engine (--cel-engine cpp)"


def unsupported(tree: _Tree) -> str | None:
    """The first feature in ``tree`` the portable engine does not run, named, or None."""
    for node in tree.iter_subtrees_topdown():  # type: ignore[no-untyped-call]
        name, arity = _call(node)
        if name is None:
            continue
        if name in MACROS:
            if arity in MACROS[name]:
                continue
            if arity == 3 and name in ("all", "exists"):
                return f"the two-variable comprehension {name}()"
            return f"{name}() with {arity} arguments"
        if node.data == "member_dot_arg":
            qualified = _qualified(node)
            if qualified is not None:
                return describe(qualified)
            if name in METHODS:
                continue
        elif name in GLOBALS:
            continue
        return describe(name)
    return None


def _call(node: _Tree) -> tuple[str | None, int]:
    """(function name, argument count) of a call node, else (None, 0)."""
    if node.data == "member_dot_arg":
        method, arguments = node.children[1], node.children[2] if len(node.children) > 2 else None
    elif node.data in ("ident_arg", "dot_ident_arg"):
        method, arguments = node.children[0], node.children[1] if len(node.children) > 1 else None
    else:
        return None, 0
    arity = len(arguments.children) if isinstance(arguments, lark.Tree) else 0
    return str(cast(lark.Token, method).value), arity


NAMESPACES: Final = frozenset(
    {"optional", "sets", "strings", "format", "ip", "math", "cel", "base64", "proto", "lists"}
)
"""Extension namespaces: ``sets.contains(...)`` is a function, not a method on ``sets``."""


def _qualified(node: _Tree) -> str | None:
    """``sets.contains`` for ``sets.contains(...)``: a call on a bare identifier that
    names an extension's namespace, else None."""
    member = node.children[0]
    while (
        isinstance(member, lark.Tree)
        and len(member.children) == 1
        and member.data
        in (
            "member",
            "primary",
        )
    ):
        member = member.children[0]
    if isinstance(member, lark.Tree) and member.data == "ident":
        name = str(cast(lark.Token, member.children[0]).value)
        if name in NAMESPACES:
            return f"{name}.{cast(lark.Token, node.children[1]).value}"
    return None


def describe(function: str) -> str:
    """A function named with the library it comes from."""
    library = _libraries().get(function)
    if library is None and "." in function:
        library = _libraries().get(function.split(".", 1)[0] + ".*")
    return f"{function}() ({library})" if library else f"{function}()"


@cache
def _libraries() -> dict[str, str]:
    named: dict[str, str] = {
        "optional.*": "optional types",
        "hasValue": "optional types",
        "value": "optional types",
        "orValue": "optional types",
        "or": "optional types",
        "optMap": "optional types",
        "optFlatMap": "optional types",
        "sets.*": "ext.Sets",
        "existsOne": "two-variable comprehensions",
        "transformList": "two-variable comprehensions",
        "transformMap": "two-variable comprehensions",
        "transformMapEntry": "two-variable comprehensions",
        "getHours": "duration and timestamp accessors",
        "getMinutes": "duration and timestamp accessors",
        "getSeconds": "duration and timestamp accessors",
        "getMilliseconds": "duration and timestamp accessors",
    }
    try:
        from scanner.cel.k8s.environment import LIBRARIES
    except ImportError:  # pragma: no cover - the package is part of poolgate
        return named
    for library, functions in LIBRARIES:
        for fn in functions:
            if fn.name not in GLOBALS and fn.name not in METHODS:
                named.setdefault(fn.name, library)
    return named


def refusal(feature: str) -> str:
    return f"{feature} is not available on the portable engine; {DEFAULT_ENGINE}"


def syntax_refusal(source: str, line: int, column: int) -> str:
    """Why cel-python could not parse what the default engine's checker accepted."""
    offset = _offset(source, line, column)
    around = source[max(0, offset - 1) : offset + 2]
    if "?" in around or "?." in source or "[?" in source or "{?" in source:
        feature = "optional syntax (?. [? {?)"
    elif "`" in source:
        feature = "quoted field names (`a-b`)"
    else:
        feature = "this syntax"
    return refusal(feature)


def _offset(source: str, line: int, column: int) -> int:
    if line <= 0:
        return 0
    lines = source.splitlines(keepends=True)
    return sum(len(text) for text in lines[: line - 1]) + max(column - 1, 0)
