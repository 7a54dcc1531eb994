"""cel-cpp's answers for cel-python's standard functions and operators.

cel-python (``celpy``) differs from cel-cpp and the CEL spec where rules can see it;
the ``python`` engine (scanner/cel/python.py) replaces those functions with these,
which take and return celpy values.
"""

from __future__ import annotations

import math
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError, base_functions

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


FUNCTIONS = {
    "string": _string,
    **{
        name: _strict(name, base_functions[name])
        for name in ("int", "uint", "double", "bool", "size")
    },
    "_in_": _in,
}
