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
    stack: list[tuple[_Tree, frozenset[str]]] = [(tree, frozenset())]
    while stack:
        node, bound = stack.pop()
        name, arity = _call(node)
        inner = bound
        if name is not None:
            if name in MACROS:
                if arity not in MACROS[name]:
                    if arity == 3 and name in ("all", "exists"):
                        return f"the two-variable comprehension {name}()"
                    return f"{name}() with {arity} arguments"
                inner = bound | {_macro_variable(node)}
            elif node.data == "member_dot_arg":
                qualified = _qualified(node, bound)
                if qualified is not None:
                    return describe(qualified)
                if name not in METHODS:
                    return describe(name)
            elif name not in GLOBALS:
                return describe(name)
        children = [child for child in node.children if isinstance(child, lark.Tree)]
        stack.extend((child, inner) for child in reversed(children))
    return None


def _macro_variable(node: _Tree) -> str:
    """The variable a comprehension macro binds (its first argument)."""
    arguments = cast(_Tree, node.children[2])
    first = cast(_Tree, arguments.children[0])
    found = next(first.find_data("ident"), None)
    return str(cast(lark.Token, found.children[0]).value) if found is not None else ""


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


def _qualified(node: _Tree, bound: frozenset[str]) -> str | None:
    """``sets.contains`` for ``sets.contains(...)``: a call on a bare identifier that
    names an extension's namespace (and no comprehension variable), else None."""
    member = node.children[0]
    while (
        isinstance(member, lark.Tree)
        and len(member.children) == 1
        and member.data in ("member", "primary")
    ):
        member = member.children[0]
    if isinstance(member, lark.Tree) and member.data == "ident":
        name = str(cast(lark.Token, member.children[0]).value)
        if name in NAMESPACES and name not in bound:
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


def unparsed_feature(source: str, line: int, column: int) -> str | None:
    """The CEL syntax cel-python stopped at (1-based ``line``, ``column``), if it is
    syntax the default engine has: optional syntax, or quoted field names."""
    char = source[_offset(source, line, column) : _offset(source, line, column) + 1]
    if char == "?":
        return "optional syntax (?. [? {?)"
    if char == "`":
        return "quoted field names (`a-b`)"
    return None


def _offset(source: str, line: int, column: int) -> int:
    if line <= 0:
        return 0
    lines = source.splitlines(keepends=True)
    return sum(len(text) for text in lines[: line - 1]) + max(column - 1, 0)
