"""The checker and the full runtime of the Kubernetes environment (``scanner.cel.k8s``):
every library declared once, for both."""

from __future__ import annotations

import json
from functools import cache
from typing import Any, Final

from scanner.cel.functions import declarations as poolgate_functions
from scanner.cel.k8s import formats, ip, lists, quantity, regex, runtime, semver, standard, urls
from scanner.cel.k8s import strings as strings_extension
from scanner.cel.k8s.library import (
    Function,
    config_functions,
    parse_type,
    signature,
    type_config,
)

LIBRARIES: Final[tuple[tuple[str, tuple[Function, ...]], ...]] = (
    ("standard (redeclared)", standard.FUNCTIONS),
    ("ext.Strings (version 2)", strings_extension.FUNCTIONS),
    ("kubernetes.lists", lists.FUNCTIONS),
    ("kubernetes.regex", regex.FUNCTIONS),
    ("kubernetes.urls", urls.FUNCTIONS),
    ("kubernetes.net.ip, net.cidr", ip.FUNCTIONS),
    ("kubernetes.quantity", quantity.FUNCTIONS),
    ("kubernetes.format", formats.FUNCTIONS),
    ("kubernetes.Semver (version 1)", semver.FUNCTIONS),
    ("poolgate", poolgate_functions()),
)
"""Every library declared here, in the order the checker declares them (the
extensions cel-cpp brings itself are in ``EXTENSIONS``)."""

EXTENSIONS: Final = ("optional", "sets", "two-var-comprehensions")

FULL_OVERLOADS: Final = frozenset(
    overload.id
    for name, library in LIBRARIES
    if name != "poolgate"
    for fn in library
    for overload in fn.overloads
    if overload.impl is not None
) - {overload.id for fn in runtime.STANDARD_OVERLOADS for overload in fn.overloads}
"""Overloads only the full runtime has: a program that may call one is planned there."""

FULL_HELPERS: Final = (("@k8s.quantityEquals", ("any", "any"), quantity.equals),)
"""Helpers of programs that call a Kubernetes library (``rewrite.py``)."""


def functions() -> list[Function]:
    """Every declared function, overloads of one name merged (``indexOf`` of strings and lists)."""
    merged: dict[str, Function] = {}
    for _, library in LIBRARIES:
        for fn in library:
            known = merged.get(fn.name)
            merged[fn.name] = (
                fn if known is None else Function(fn.name, known.overloads + fn.overloads)
            )
    return list(merged.values())


def signatures() -> dict[str, list[str]]:
    """Library -> the pinned signature of every overload it declares."""
    return {
        name: [signature(fn.name, overload) for fn in library for overload in fn.overloads]
        for name, library in LIBRARIES
    }


def checker_config() -> str:
    """The checker's cel-cpp environment configuration (YAML, written as JSON)."""
    return json.dumps(
        {
            "extensions": [{"name": name} for name in EXTENSIONS],
            "stdlib": {"exclude_functions": [{"name": name} for name in sorted(standard.REPLACED)]},
            "functions": config_functions(functions()),
        }
    )


@cache
def checker(variables: tuple[tuple[str, str], ...]) -> Any:
    """The environment every program is compiled in, with ``variables`` (name, type in
    the type language of ``library.py``: ``dyn`` for poolgate's own)."""
    from cel_expr_python import cel

    config = json.loads(checker_config())
    config["variables"] = [
        {"name": name, **type_config(parse_type(kind))} for name, kind in variables
    ]
    return cel.NewEnv(config=cel.NewEnvConfigFromYaml(json.dumps(config)))


@cache
def full_runtime(variables: tuple[str, ...]) -> Any:
    """The runtime with every library's Python implementation."""
    from cel_expr_python import cel

    return cel.NewEnv(
        config=cel.NewEnvConfigFromYaml(runtime.EXTENSIONS),
        variables={name: cel.Type.DYN for name in variables},
        functions=runtime.declarations(cel, functions(), runtime.HELPERS + FULL_HELPERS),
    )
