"""The portable engine: ``cel-python`` (``celpy``), pure Python.

About 200 times slower than the C++ runtime; used where the C++ wheel is not
available and, in tests, as an independent second implementation. When the
C++ package is installed, its type checker still checks result types at load
time, so both engines reject the same rules.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError, base_functions

from scanner.cel import ResultKind, cpp_available
from scanner.cel.budget import BUDGET_EXCEEDED, check_nesting
from scanner.cel.celpy_budget import CountingRunner, IterationLimit
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
    if isinstance(value, CELEvalError):
        raise CelEvalError(_eval_message(value))
    return value


def _joined(items: Any, separator: Any) -> Any:
    return celtypes.StringType(joined(to_plain(items), str(separator)))


# celpy's standard functions differ from cel-cpp's (and the CEL spec) where rules can
# see it: string(true) is "True", string(1.0) is "1.0"; string, int, uint, double, bool
# and size accept null ("None", 0, 0.0, false); `in` searches strings. These give
# cel-cpp's answers instead (found by tests/hostile/test_fuzz.py, live snapshots).


def _string(value: Any) -> Any:
    if value is None:
        return _no_overload("string")
    if isinstance(value, celtypes.BoolType | bool):
        return celtypes.StringType("true" if value else "false")
    if isinstance(value, float):  # DoubleType, and the plain floats celpy's arithmetic makes
        return celtypes.StringType(double_text(value))
    return celtypes.StringType(value)


def double_text(value: float) -> str:
    """A double as cel-cpp's ``string()`` writes it: the shortest digits that read back
    the same, in ``%g`` style (``1``, ``0.5``, ``123456``, ``1e+06``, ``1e-05``, ``-0``)."""
    if math.isnan(value):
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    if math.isinf(value):
        return "-inf" if value < 0 else "inf"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    digits, exponent = _shortest(abs(value))
    if exponent < -4 or exponent >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if exponent < 0:
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
    whole = digits[: exponent + 1].ljust(exponent + 1, "0")
    fraction = digits[exponent + 1 :]
    return f"{sign}{whole}{'.' + fraction if fraction else ''}"


def _shortest(value: float) -> tuple[str, int]:
    """(significant digits, decimal exponent of the first) of ``repr(value)``."""
    if value == 0:
        return "0", 0
    mantissa, _, power = repr(value).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    exponent = int(power or 0) + len(whole) - 1 - (len(whole + fraction) - len(digits))
    return digits.rstrip("0") or "0", exponent


def _strict(name: str, convert: Any) -> Any:
    def call(*args: Any) -> Any:
        if any(arg is None for arg in args):
            return _no_overload(name)
        return convert(*args)

    return call


def _in(item: Any, container: Any) -> Any:
    """``in`` as cel-cpp has it: over lists (their items) and maps (their keys) only, with
    heterogeneous equality (``"a" in [0]`` is false, ``1 in [1.0]`` true). celpy looked
    among a string's characters and failed on an item of another type."""
    if isinstance(item, CELEvalError):
        return item
    if isinstance(container, CELEvalError):
        return container
    if not isinstance(container, celtypes.ListType | celtypes.MapType | list | dict):
        return CELEvalError(f"found no matching overload for '@in' applied to '{_type(container)}'")
    return celtypes.BoolType(any(_equal(item, candidate) for candidate in container))


def _equal(left: Any, right: Any) -> bool:
    """CEL's heterogeneous equality for ``in``: values of different types are unequal,
    numbers compare by value across int, uint and double."""
    booleans = bool | celtypes.BoolType  # BoolType is an int, not a bool
    if isinstance(left, booleans) or isinstance(right, booleans):
        return (
            isinstance(left, booleans) and isinstance(right, booleans) and bool(left) is bool(right)
        )
    if isinstance(left, int | float) and isinstance(right, int | float):
        return _number(left) == _number(right)  # celpy's own types refuse to compare
    try:
        return bool(left == right)
    except TypeError:
        return False


def _number(value: int | float) -> int | float:
    return float(value) if isinstance(value, float) else int(value)


def _type(value: Any) -> str:
    return "null_type" if value is None else type(value).__name__


def _no_overload(name: str) -> CELEvalError:
    return CELEvalError(f"found no matching overload for '{name}' applied to '(null_type)'")


_FUNCTIONS = {
    "joined": _joined,
    "string": _string,
    **{
        name: _strict(name, base_functions[name])
        for name in ("int", "uint", "double", "bool", "size")
    },
    "_in_": _in,
}


class PythonEngine:
    name = "python"

    def __init__(self) -> None:
        # Counts comprehension iterations as cel-cpp does (scanner/cel/budget.py).
        self._env = celpy.Environment(runner_class=CountingRunner)
        self._checker: Any = None
        if cpp_available():
            from scanner.cel.cpp import new_env

            self._checker = new_env()

    def save_cache(self) -> None:
        """Nothing to keep: compiling with celpy is cheap next to evaluating with it."""

    def compile(self, source: str, result: ResultKind) -> PythonProgram:
        if self._checker is not None:
            from scanner.cel.cpp import check

            check(self._checker, source, result)
        try:
            ast = self._env.compile(source)
        except CELParseError as error:
            message = str(error.args[0]).strip().splitlines() if error.args else []
            raise CelError(
                "syntax error" + (f" near {message[0].strip()!r}" if message else ""),
                getattr(error, "line", 0) or 0,
                getattr(error, "column", 0) or 0,
            ) from None
        check_nesting(source)
        return PythonProgram(source, self._env.program(ast, functions=_FUNCTIONS), result)

    def activation(self, data: Mapping[str, Any]) -> Any:
        try:
            return {name: json_to_cel(value) for name, value in data.items()}
        except (ValueError, OverflowError):  # an int outside int64 somewhere in the data
            return {name: json_to_cel(_int64_safe(value)) for name, value in data.items()}


def _int64_safe(value: Any) -> Any:
    """``value`` with integers outside int64 as doubles (CEL has no wider integer).

    Sources already read such numbers as floats (yamlwalk), as the API server does;
    this keeps a derived fact that overflows from failing the whole scan.
    """
    if isinstance(value, bool):
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
