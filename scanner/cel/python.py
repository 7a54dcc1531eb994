"""The portable engine: ``cel-python`` (``celpy``), pure Python.

Much slower than the C++ runtime (benchmarks/README.md); used where the C++ wheel is not
available and, in tests, as an independent second implementation. When the
C++ package is installed, its type checker still checks result types at load
time, so both engines reject the same rules.
"""

from __future__ import annotations

import datetime
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import celpy
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from scanner.cel import ResultKind, cpp_available
from scanner.cel.budget import BUDGET_EXCEEDED, check_nesting
from scanner.cel.celpy_budget import CountingRunner, IterationLimit
from scanner.cel.celpy_features import refusal, unparsed_feature, unsupported
from scanner.cel.celpy_functions import FUNCTIONS
from scanner.cel.functions import joined
from scanner.errors import CelError, CelEvalError

# celpy logs every evaluation error at WARNING; poolgate reports them itself.
logging.getLogger("celpy").setLevel(logging.CRITICAL)


@dataclass(frozen=True, slots=True)
class PythonProgram:
    source: str
    runner: Any
    result: ResultKind

    def evaluate(self, activation: Any) -> Any:
        return self._checked(self._run(activation))

    def variable_value(self, activation: Any) -> Any:
        """celpy's own value: ``PythonEngine.activation`` takes it back unchanged, so a
        variable keeps its CEL type (a uint, a timestamp, bytes, a type)."""
        value = self._run(activation)
        self._checked(value)
        return value

    def _run(self, activation: Any) -> Any:
        try:
            value = self.runner.evaluate(activation)
        except CELEvalError as error:
            raise CelEvalError(_eval_message(error)) from None
        except IterationLimit:
            raise CelEvalError(BUDGET_EXCEEDED) from None
        except RecursionError:
            raise CelEvalError("expression nests too deeply to evaluate") from None
        except IndexError as error:
            # celpy fails while describing some type errors (`||` over a non-bool and
            # an error held in a list crashes formatting the error's expression tree)
            raise CelEvalError(f"the portable engine failed (IndexError: {error})") from None
        except (TypeError, ValueError, KeyError, ZeroDivisionError, OverflowError) as error:
            raise CelEvalError(f"{type(error).__name__}: {error}") from None
        if isinstance(value, CELEvalError):
            raise CelEvalError(_eval_message(value))
        return value

    def _checked(self, value: Any) -> Any:
        """The plain value, once it holds no error and is of the kind the program must give."""
        plain = to_plain(value)
        if not self.result.accepts(plain):
            raise CelEvalError(f"must evaluate to {self.result.value}, got {type(plain).__name__}")
        return plain


def _eval_message(error: Exception) -> str:
    args = error.args
    return str(args[0]) if args else type(error).__name__


def to_plain(value: Any) -> Any:
    """celpy values -> plain Python values (bool before int: ``BoolType`` is an int)."""
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, celtypes.StringType):
        return str(value)
    if isinstance(value, celtypes.IntType | celtypes.UintType):
        return int(value)
    if isinstance(value, celtypes.DoubleType):
        return float(value)
    if isinstance(value, celtypes.ListType | list | tuple):
        return [to_plain(item) for item in value]
    if isinstance(value, celtypes.MapType | dict):
        return {to_plain(key): to_plain(item) for key, item in value.items()}
    if isinstance(value, celtypes.BytesType):
        return bytes(value)
    if isinstance(value, celtypes.TimestampType):
        moment = datetime.datetime(*value.timetuple()[:6], value.microsecond, value.tzinfo)
        return moment.astimezone(datetime.UTC)  # as cel-cpp returns every timestamp
    if isinstance(value, celtypes.DurationType):
        return datetime.timedelta(value.days, value.seconds, value.microseconds)
    if isinstance(value, CELEvalError):
        raise CelEvalError(_eval_message(value))
    return value  # a type: celpy's own class, as cel-cpp returns its own object


def to_cel(value: Any) -> Any:
    """Plain values -> celpy values, as ``json_to_cel`` and for bytes too; celpy values
    (a rule variable's ``variable_value``) and anything else pass through unchanged."""
    convert = _TO_CEL.get(value.__class__)
    if convert is not None:
        return convert(value)
    if isinstance(value, Mapping) and not isinstance(value, celtypes.MapType):
        return _map(value)
    return value


def _list(value: Any) -> Any:
    return celtypes.ListType([to_cel(item) for item in value])


def _map(value: Any) -> Any:
    return celtypes.MapType({to_cel(key): to_cel(item) for key, item in value.items()})


_TO_CEL: dict[type, Any] = {
    str: celtypes.StringType,
    dict: _map,
    list: _list,
    bool: celtypes.BoolType,
    int: celtypes.IntType,
    float: celtypes.DoubleType,
    type(None): lambda value: None,
    tuple: _list,
    bytes: celtypes.BytesType,
    bytearray: celtypes.BytesType,
    datetime.datetime: celtypes.TimestampType,
    datetime.timedelta: celtypes.DurationType,
}


def _joined(items: Any, separator: Any) -> Any:
    return celtypes.StringType(joined(to_plain(items), str(separator)))


_FUNCTIONS = {"joined": _joined, **FUNCTIONS}


class PythonEngine:
    name = "python"

    def __init__(self, variables: Sequence[str] | Mapping[str, str] | None = None) -> None:
        """``variables``: what rules may read, for the default engine's checker (cel-python
        itself declares none)."""
        # Counts comprehension iterations as cel-cpp does (scanner/cel/budget.py).
        self._env = celpy.Environment(runner_class=CountingRunner)
        self._checker: Any = None
        if cpp_available():
            from scanner.cel.cpp import CppEngine

            self._checker = CppEngine(variables)

    def save_cache(self) -> None:
        """Nothing to keep: compiling with celpy is cheap next to evaluating with it."""

    def compile(
        self, source: str, result: ResultKind, *, literal_checks: bool = True
    ) -> PythonProgram:
        """Refuse what the default engine refuses (its checker, when installed), then
        what cel-python cannot run as the default engine does (``celpy_features``)."""
        if self._checker is not None:
            self._checker.compile(source, result, literal_checks=literal_checks)
        try:
            ast = self._env.compile(source)
        except CELParseError as error:
            line, column = getattr(error, "line", 0) or 0, getattr(error, "column", 0) or 0
            feature = unparsed_feature(source, line, column)
            if feature is None and self._checker is not None:
                feature = "this syntax"  # valid CEL (the checker took it) cel-python cannot parse
            if feature is not None:
                raise CelError(refusal(feature), line, column) from None
            message = str(error.args[0]).strip().splitlines() if error.args else []
            raise CelError(
                "syntax error" + (f" near {message[0].strip()!r}" if message else ""),
                line,
                column,
            ) from None
        feature = unsupported(ast)
        if feature is not None:
            raise CelError(refusal(feature))
        check_nesting(source)
        return PythonProgram(source, self._env.program(ast, functions=_FUNCTIONS), result)

    def activation(self, data: Mapping[str, Any]) -> Any:
        try:
            return {name: to_cel(value) for name, value in data.items()}
        except (ValueError, OverflowError):  # an int outside int64 somewhere in the data
            return {name: to_cel(_int64_safe(value)) for name, value in data.items()}


def _int64_safe(value: Any) -> Any:
    """``value`` with integers outside int64 as doubles (CEL has no wider integer).

    Sources already read such numbers as floats (yamlwalk), as the API server does;
    this keeps a derived fact that overflows from failing the whole scan.
    """
    if isinstance(value, (bool, *_CEL_VALUES)):
        return value
    if isinstance(value, int):
        if -(2**63) <= value < 2**63:
            return value
        if value.bit_length() < 1024:
            return float(value)
        return -math.inf if value < 0 else math.inf
    if isinstance(value, list):
        return [_int64_safe(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _int64_safe(item) for key, item in value.items()}
    return value


_CEL_VALUES = (celtypes.IntType, celtypes.UintType, celtypes.ListType, celtypes.MapType)
"""celpy values ``_int64_safe`` leaves alone: a rule variable's, already in range."""
