"""CEL engines behind one small interface: compile once, build an activation once
per subject, evaluate many programs against it.

=========  ===================  ==================================================
engine     package              role
=========  ===================  ==================================================
``cpp``    ``cel-expr-python``  default; the official CEL C++ runtime
``python`` ``cel-python``       portable fallback, and the second opinion in tests
=========  ===================  ==================================================

Both engines receive plain Python values and return plain Python values
(``bool``, ``int``, ``float``, ``str``, ``None``, ``list``, ``dict``; CEL bytes,
timestamps and durations as ``bytes``/``bytearray``, ``datetime`` and ``timedelta``),
so the rest of poolgate never sees an engine's own types. A CEL type value (``type(x)``)
is the one exception: each engine returns its own object for it.

The variables a rule may read, each declared ``dyn``, are ``scanner.model.facts.NAMES``
(the cpp engine declares them; the python engine binds what it is given).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from scanner.errors import UsageError

ENGINE_NAMES: tuple[str, ...] = ("auto", "cpp", "python")


class ResultKind(enum.Enum):
    """What an expression must evaluate to, checked at compile time where the type is known."""

    BOOL = "bool"
    STRING = "string"
    LIST = "list"
    ANY = "any"

    def accepts(self, value: object) -> bool:
        """Run-time check for expressions whose static type is ``dyn``."""
        if self is ResultKind.BOOL:
            return isinstance(value, bool)
        if self is ResultKind.STRING:
            return isinstance(value, str)
        if self is ResultKind.LIST:
            return isinstance(value, list)
        return True


class Program(Protocol):
    """One compiled expression."""

    @property
    def source(self) -> str: ...

    def evaluate(self, activation: Any) -> Any:
        """The plain Python result; raises ``CelEvalError`` when evaluation fails."""
        ...

    def variable_value(self, activation: Any) -> Any:
        """The result as a rule variable, for ``Engine.activation`` to bind: unlike
        ``evaluate``, it may keep CEL types plain values lose (a uint, a type)."""
        ...


class Engine(Protocol):
    """A CEL implementation. ``compile`` raises ``CelError`` with a 1-based position."""

    @property
    def name(self) -> str: ...

    def compile(self, source: str, result: ResultKind, *, literal_checks: bool = True) -> Program:
        """``literal_checks``: Kubernetes' compile-time checks of literals (cpp engine);
        off only for programs poolgate writes around sources that passed them."""
        ...

    def activation(self, data: Mapping[str, Any]) -> Any:
        """Bind ``data`` (variable name -> plain value, or a ``Program.variable_value``)
        once, for many evaluations."""
        ...

    def save_cache(self) -> None:
        """Keep what this run compiled for the next one (engines without a cache: nothing)."""
        ...


def cpp_available() -> bool:
    try:
        import cel_expr_python.cel  # noqa: F401
    except ImportError:
        return False
    return True


def get_engine(name: str, variables: Sequence[str] | Mapping[str, str] | None = None) -> Engine:
    """The engine called ``name`` (``auto`` picks ``cpp`` when its wheel is installed).

    ``variables``: what rules may read, poolgate's (``scanner.model.facts.NAMES``) when
    None; names (``dyn``) or names with types (``scanner.cel.k8s.library``'s type
    language)."""
    if name == "auto":
        name = "cpp" if cpp_available() else "python"
    if name == "cpp":
        if not cpp_available():
            raise UsageError(
                "--cel-engine cpp: the cel-expr-python package is not installed",
                hint="pip install cel-expr-python, or use --cel-engine python",
            )
        from scanner.cel.cpp import CppEngine

        return CppEngine(variables)
    if name == "python":
        from scanner.cel.python import PythonEngine

        return PythonEngine(variables)
    raise UsageError(f"unknown CEL engine {name!r}", hint="use auto, cpp or python")
