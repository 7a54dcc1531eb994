"""What the commands' options have in common: the rule options every command that
loads rules takes, and ``option_group``, which writes a set of options once and
hands a command their values as one value.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import click

from scanner.cel import ENGINE_NAMES

Decorator = Callable[[Any], Any]

RULE_OPTIONS: list[Decorator] = [
    click.option(
        "--rules",
        "rule_dirs",
        multiple=True,
        type=click.Path(path_type=Path),
        help="Extra rule directory or file: poolgate rules, admission policies (repeatable).",
    ),
    click.option(
        "--cel-engine",
        type=click.Choice(ENGINE_NAMES),
        default="auto",
        show_default=True,
        help="CEL implementation: cpp (cel-expr-python) or python (cel-python).",
    ),
]


def rule_options(func: Any) -> Any:
    """``--rules`` and ``--cel-engine``, as the parameters ``rule_dirs`` and ``cel_engine``."""
    for option in reversed(RULE_OPTIONS):
        func = option(func)
    return func


def option_group(name: str, build: type[Any], options: Sequence[Decorator]) -> Decorator:
    """A decorator that adds ``options`` to a command and hands their values to it as
    one argument ``name``: a ``build``, the frozen dataclass whose fields are the
    options' parameter names. The options appear in the help where the decorator is."""
    fields = [field.name for field in dataclasses.fields(build)]

    def decorate(func: Any) -> Any:
        @functools.wraps(func)
        def command(**values: Any) -> Any:
            group = build(**{field: values.pop(field) for field in fields})
            return func(**values, **{name: group})

        decorated: Any = command
        for option in reversed(options):
            decorated = option(decorated)
        return decorated

    return decorate


def split_ids(values: Sequence[str]) -> list[str]:
    """``--disable PG101,PG102 --disable PG103`` -> ids, built-in ones upper-cased (an
    admission policy loaded as a rule keeps its name: ``--disable gpu-pool-contract``)."""
    return [
        part.upper() if _BUILT_IN_ID.fullmatch(part) else part
        for value in values
        for part in (item.strip() for item in value.split(","))
        if part
    ]


_BUILT_IN_ID: Final = re.compile(r"[A-Za-z][A-Za-z0-9]*[0-9]{3}")
