"""What the commands' options have in common: the rule options every command that
loads rules takes, ``--color``, and ``option_group``, which writes a set of options once and
hands a command their values as one value.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from scanner.cel import ENGINE_NAMES

Decorator = Callable[[Any], Any]

RULE_OPTIONS: list[Decorator] = [
    click.option(
        "--rules",
        "rule_dirs",
        multiple=True,
        type=click.Path(file_okay=False, path_type=Path),
        help="Extra rule directory (repeatable).",
    ),
    click.option(
        "--cel-engine",
        type=click.Choice(ENGINE_NAMES),
        default="auto",
        show_default=True,
        help="CEL implementation: cpp (cel-expr-python) or python (cel-python).",
    ),
]


def _set_color(_context: click.Context, _parameter: click.Parameter, value: str) -> str:
    from scanner import console

    console.set_color(value)
    return value


color_option: Decorator = click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    is_eager=True,  # before the other options' errors are printed
    expose_value=False,
    callback=_set_color,
    help="Colour what is printed for people: auto is on a terminal, unless NO_COLOR is set "
    "(FORCE_COLOR: also off a terminal).",
)
"""``--color``, on every command that prints for people; ``scanner.console`` keeps it."""


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
    """``--disable PG101,image-digest-pin --disable PG103`` -> rule ids or names, as
    given (``scanner.ruleset.names`` resolves them)."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]
