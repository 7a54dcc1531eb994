"""The default engine: the official CEL C++ runtime through ``cel-expr-python``, in the
Kubernetes CEL environment (``scanner.cel.k8s``).

A program is type-checked by the checker environment, its literals checked as the API
server checks them, its checked tree rewritten where cel-cpp and cel-go part ways
(``scanner.cel.k8s.rewrite``), and planned by the runtime environment. The planned
form is what the program cache keeps, so a cached program skips all of it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Final

from cel_expr_python import cel

from scanner import __version__
from scanner.cel import ResultKind, analysis, budget
from scanner.cel.budget import BUDGET_EXCEEDED, check_nesting
from scanner.cel.programcache import ProgramCache, identity, key
from scanner.errors import CelError, CelEvalError
from scanner.model.facts import NAMES

_POSITION = re.compile(r"<input>:(\d+):(\d+): (.*)")
_K8S: Final = Path(__file__).parent / "k8s"


Variables = Sequence[str] | Mapping[str, str]
"""Variable names (all ``dyn``), or names with their types in the type language of
``scanner.cel.k8s.library`` (``map(string, dyn)``, ``Quantity``)."""


def typed(variables: Variables | None) -> tuple[tuple[str, str], ...]:
    """(name, type) of each variable; ``None``: poolgate's (``scanner.model.facts``), ``dyn``."""
    if variables is None:
        variables = NAMES
    if isinstance(variables, Mapping):
        return tuple((name, str(kind)) for name, kind in variables.items())
    return tuple((name, "dyn") for name in variables)


def declarations(variables: Variables | None = None) -> tuple[str, ...]:
    """The declared variables, for the program cache's identity (programcache.py). The
    functions and the checks are the text of this module, ``checked.py``, ``budget.py``,
    the CEL reading (``analysis.code()``) and the ``k8s`` package, which the identity
    hashes whole (``vetting_code``)."""
    return tuple(f"var {name}: {kind}" for name, kind in typed(variables))


DECLARATIONS: Final = declarations()


def check(env: Any, source: str, result: ResultKind) -> Any:
    """Parse and type-check ``source``; raise ``CelError`` with its position on failure."""
    try:
        expression = env.compile(source)
    except RuntimeError as error:
        raise _compile_error(str(error)) from None
    static = expression.return_type()
    if result is not ResultKind.ANY and static != cel.Type.DYN and not _matches(static, result):
        raise CelError(f"must evaluate to {result.value}, but evaluates to {_type_name(static)}")
    return expression


def _type_name(static: Any) -> str:
    name = str(static.name())
    return name.lower() if name.isupper() else name


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
        try:
            plain = value.plain_value()
        except (TypeError, RuntimeError):  # an optional has no plain value
            raise CelEvalError(
                f"the result is {_type_name(value.type())}, which has no plain value"
            ) from None
        if not self.result.accepts(plain):
            raise CelEvalError(f"must evaluate to {self.result.value}, got {_plain_type(plain)}")
        return plain

    # cel-expr-python's activations take plain values only: a timestamp, a duration or
    # a type handed back is an error where an expression reads it, and a uint an int.
    variable_value = evaluate


def _status_message(text: str) -> str:
    """cel-cpp's iteration limit, in the words the pure-Python engine uses for it too."""
    if "Iteration budget exceeded" in text:
        return BUDGET_EXCEEDED
    return text.strip().splitlines()[0] if text.strip() else "evaluation failed"


def _plain_type(value: object) -> str:
    return {
        bool: "bool",
        int: "int",
        float: "double",
        str: "string",
        list: "list",
        dict: "map",
    }.get(type(value), "null" if value is None else type(value).__name__)


def vetting_code() -> tuple[Path, ...]:
    """The code that decides what a stored program is: how it was checked and rewritten."""
    own = (Path(__file__), Path(budget.__file__), Path(__file__).parent / "checked.py")
    return own + analysis.code() + tuple(sorted(_K8S.glob("*.py")))


_STANDARD: Final = b"s"
_FULL: Final = b"k"
"""The first byte of a stored program: the runtime that plans it."""


class CppEngine:
    name = "cpp"

    def __init__(self, variables: Variables | None = None) -> None:
        """``variables``: what a rule may read (poolgate's, all ``dyn``, by default). An
        admission policy's environment adds ``oldObject``, ``request``,
        ``namespaceObject``, ``authorizer`` the same way."""
        self._typed = typed(variables)
        self._variables = tuple(name for name, _ in self._typed)
        self._cache = ProgramCache(
            identity(Path(cel.__file__), (__version__, *declarations(variables)), vetting_code())
        )

    @cached_property
    def checker(self) -> Any:
        """The environment that type-checks (Kubernetes' declarations)."""
        from scanner.cel.k8s.environment import checker

        return checker(self._typed)

    @cached_property
    def _standard(self) -> Any:
        from scanner.cel.k8s.runtime import standard

        return standard(self._variables)

    @cached_property
    def _full(self) -> Any:
        from scanner.cel.k8s.environment import full_runtime

        return full_runtime(self._variables)

    def compile(
        self, source: str, result: ResultKind, *, literal_checks: bool = True
    ) -> CppProgram:
        """Parse, type-check and vet ``source``, or restore the program an earlier run
        compiled from exactly this text (programcache.py).

        ``literal_checks``: the API server's checks of literals (``scanner.cel.k8s.
        literals``). Off only for programs poolgate writes around sources that already
        passed them (``scanner.evaluate.optimize.binding``), whose own map literal binds values of
        different types."""
        entry = key(source, result.value if literal_checks else f"{result.value}, unchecked")
        stored = self._cache.get(entry)
        if stored is not None:
            try:
                return CppProgram(source, self._plan(stored), result)
            except (RuntimeError, ValueError, TypeError):
                self._cache.forget(entry)  # unreadable: compile it again
        expression = check(self.checker, source, result)
        check_nesting(source)
        planned = self._prepare(expression, source, literal_checks)
        program = CppProgram(source, self._plan(planned), result)
        self._cache.put(entry, planned)
        return program

    def _plan(self, stored: bytes) -> Any:
        """Plan a stored program in the runtime its first byte names."""
        runtime = {_STANDARD: "_standard", _FULL: "_full"}.get(stored[:1])
        if runtime is None:
            raise ValueError("not a stored program")
        return getattr(self, runtime).deserialize(stored[1:])

    def _prepare(self, expression: Any, source: str, literal_checks: bool) -> bytes:
        """The checked program, vetted and rewritten, behind the byte naming its runtime."""
        from scanner.cel import checked
        from scanner.cel.k8s import literals
        from scanner.cel.k8s.environment import FULL_OVERLOADS
        from scanner.cel.k8s.rewrite import Rewriter

        tree = checked.read(expression.serialize())
        if literal_checks:
            literals.check(tree, source, self._converts)
        full = any(
            overload.decode("utf-8") in FULL_OVERLOADS
            for reference in tree.references.values()
            for overload in reference.all(3)
        )
        Rewriter(tree).run()
        return (_FULL if full else _STANDARD) + tree.serialize()

    def _converts(self, function: str, text: str) -> str | None:
        """The error of ``duration(text)`` or ``timestamp(text)``, or None."""
        runtime, programs = self._conversions
        value = programs[function].eval(runtime.Activation({"text": text}))
        return str(value.value()) if value.type() == cel.Type.ERROR else None

    @cached_property
    def _conversions(self) -> tuple[Any, dict[str, Any]]:
        from scanner.cel.k8s.environment import checker
        from scanner.cel.k8s.runtime import standard

        variables = ("text",)
        programs = {
            name: standard(variables).deserialize(
                checker((("text", "string"),)).compile(f"{name}(text)").serialize()
            )
            for name in ("duration", "timestamp")
        }
        return standard(variables), programs

    def save_cache(self) -> None:
        self._cache.save()

    def activation(self, data: Mapping[str, Any]) -> Any:
        """Activations of the standard runtime serve programs of either runtime."""
        return self._standard.Activation(dict(data))
