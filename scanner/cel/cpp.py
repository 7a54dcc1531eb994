"""The default engine: the official CEL C++ runtime through ``cel-expr-python``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from cel_expr_python import cel

from scanner import __version__
from scanner.cel import ResultKind, analysis, budget
from scanner.cel.budget import BUDGET_EXCEEDED, check_nesting
from scanner.cel.functions import joined
from scanner.cel.programcache import ProgramCache, identity, key
from scanner.errors import CelError, CelEvalError
from scanner.model.facts import NAMES

_POSITION = re.compile(r"<input>:(\d+):(\d+): (.*)")


DECLARATIONS: Final = tuple(f"var {name}: dyn" for name in NAMES)
"""The declared variables, for the program cache's identity (programcache.py). The
functions and the checks are this module's, budget.py's and the CEL reading's text
(``analysis.code()``), which the identity hashes whole, so they are not listed again
here."""


def new_env() -> Any:
    """A CEL environment with poolgate's variables, all ``dyn``, the standard library and
    poolgate's functions (scanner/cel/functions.py).

    No extension libraries: rules must run unchanged on the pure-Python engine.
    """
    functions = [
        cel.FunctionDecl(
            "joined",
            [
                cel.Overload(
                    "joined_list_string",
                    cel.Type.STRING,
                    [cel.Type.List(cel.Type.DYN), cel.Type.STRING],
                    impl=joined,
                )
            ],
        )
    ]
    return cel.NewEnv(variables={name: cel.Type.DYN for name in NAMES}, functions=functions)


def check(env: Any, source: str, result: ResultKind) -> Any:
    """Parse and type-check ``source``; raise ``CelError`` with its position on failure."""
    try:
        expression = env.compile(source)
    except RuntimeError as error:
        raise _compile_error(str(error)) from None
    static = expression.return_type()
    if result is not ResultKind.ANY and static != cel.Type.DYN and not _matches(static, result):
        raise CelError(f"must evaluate to {result.value}, but evaluates to {static.name().lower()}")
    return expression


def _matches(static: Any, result: ResultKind) -> bool:
    if result is ResultKind.BOOL:
        return bool(static == cel.Type.BOOL)
    if result is ResultKind.STRING:
        return bool(static == cel.Type.STRING)
    return str(static.name()).startswith("LIST")


def _compile_error(text: str) -> CelError:
    """cel-cpp reports ``ERROR: <input>:L:C: message`` followed by a caret drawing."""
    match = _POSITION.search(text)
    if match is None:
        return CelError(text.strip().splitlines()[0])
    return CelError(match.group(3).strip(), int(match.group(1)), int(match.group(2)))


@dataclass(frozen=True, slots=True)
class CppProgram:
    source: str
    expression: Any
    result: ResultKind

    def evaluate(self, activation: Any) -> Any:
        try:
            value = self.expression.eval(activation)
        except RuntimeError as error:  # a status (evaluation aborted), not an error value
            raise CelEvalError(_status_message(str(error))) from None
        if value.type() == cel.Type.ERROR:
            raise CelEvalError(str(value.value()))
        plain = value.plain_value()
        if not self.result.accepts(plain):
            raise CelEvalError(f"must evaluate to {self.result.value}, got {_type_name(plain)}")
        return plain

    # cel-expr-python's activations take plain values only: a timestamp, a duration or
    # a type handed back is an error where an expression reads it, and a uint an int.
    variable_value = evaluate


def _status_message(text: str) -> str:
    """cel-cpp's iteration limit, in the words the pure-Python engine uses for it too."""
    if "Iteration budget exceeded" in text:
        return BUDGET_EXCEEDED
    return text.strip().splitlines()[0] if text.strip() else "evaluation failed"


def _type_name(value: object) -> str:
    return {
        bool: "bool",
        int: "int",
        float: "double",
        str: "string",
        list: "list",
        dict: "map",
    }.get(type(value), "null" if value is None else type(value).__name__)


class CppEngine:
    name = "cpp"

    def __init__(self) -> None:
        self._env = new_env()
        # the code that vets a program: this module, the nesting limit and its reading
        checks = [Path(__file__), Path(budget.__file__), *analysis.code()]
        self._cache = ProgramCache(
            identity(Path(cel.__file__), (__version__, *DECLARATIONS), checks)
        )

    def compile(self, source: str, result: ResultKind) -> CppProgram:
        """Parse, type-check and nesting-check ``source``, or restore the program an
        earlier run compiled from exactly this text (programcache.py)."""
        entry = key(source, result.value)
        stored = self._cache.get(entry)
        if stored is not None:
            try:
                return CppProgram(source, self._env.deserialize(stored), result)
            except (RuntimeError, ValueError, TypeError):
                self._cache.forget(entry)  # unreadable: compile it again
        expression = check(self._env, source, result)
        check_nesting(source)
        with suppress(RuntimeError, ValueError, TypeError):
            self._cache.put(entry, expression.serialize())
        return CppProgram(source, expression, result)

    def save_cache(self) -> None:
        self._cache.save()

    def activation(self, data: Mapping[str, Any]) -> Any:
        return self._env.Activation(dict(data))
