"""cel-cpp's answers for cel-python's standard functions and operators.

cel-python (``celpy``) differs from cel-cpp and the CEL spec where rules can see it;
the ``python`` engine (scanner/cel/python.py) replaces those functions with these,
which take and return celpy values.
"""

from __future__ import annotations

import datetime
import math
import operator
import re
from collections.abc import Callable
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError, base_functions

# celpy's standard functions differ from cel-cpp's (and the CEL spec) where rules can
# see it: string(true) is "True", string(1.0) is "1.0"; string, int, uint, double, bool
# and size accept null ("None", 0, 0.0, false); `in` searches strings. These give
# cel-cpp's answers instead (found by tests/e2e/hostile/test_fuzz.py, live snapshots).


def _string(value: Any) -> Any:
    if value is None:
        return _no_overload("string")
    if kind_of(value) in ("list", "map"):  # celpy wrote its own repr
        return _no_overload("string", value)
    if isinstance(value, celtypes.BoolType | bool):
        return celtypes.StringType("true" if value else "false")
    if isinstance(value, float):  # DoubleType, and the plain floats celpy's arithmetic makes
        return celtypes.StringType(double_text(value))
    if isinstance(value, datetime.timedelta):  # celpy wrote whole seconds only
        return celtypes.StringType(duration_text(value))
    if isinstance(value, datetime.datetime):  # celpy kept the offset and no fraction
        return celtypes.StringType(timestamp_text(value))
    return celtypes.StringType(value)


def duration_text(value: datetime.timedelta) -> str:
    """A duration as cel-cpp writes it: whole seconds, a fraction of 3, 6 or 9 digits
    when there is one, then the unit ``s``."""
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    seconds, fraction = divmod(abs(micros), 1_000_000)
    return f"{sign}{seconds}{_fraction(fraction)}s"


def timestamp_text(value: datetime.datetime) -> str:
    """A timestamp as cel-cpp writes it: in UTC, with a fraction of 3, 6 or 9 digits."""
    moment = value.astimezone(datetime.UTC) if value.tzinfo else value
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + _fraction(moment.microsecond) + "Z"


def _fraction(micros: int) -> str:
    if micros == 0:
        return ""
    if micros % 1000 == 0:
        return f".{micros // 1000:03d}"
    return f".{micros:06d}"


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
        return CELEvalError(
            f"found no matching overload for '@in' applied to '{kind_of(container)}'"
        )
    return celtypes.BoolType(any(_equal(item, candidate) for candidate in container))


def _equal(left: Any, right: Any) -> bool:
    """CEL's heterogeneous equality: values of different types are unequal (``null``
    equals only ``null``, ``true`` is not ``1``), numbers compare by value across int,
    uint and double, lists and maps element by element."""
    kind, other = kind_of(left), kind_of(right)
    if kind in _NUMBERS and other in _NUMBERS:
        return _number(left) == _number(right)  # celpy's own types refuse to compare
    if kind != other:
        return False
    if kind == "list":
        return len(left) == len(right) and all(map(_equal, left, right))
    if kind == "map":
        return len(left) == len(right) and all(
            found is not _MISSING and _equal(item, found)
            for key, item in left.items()
            for found in (_get(right, key),)
        )
    if kind == "type":
        return _type_value(left) is _type_value(right)
    try:
        return bool(left == right)
    except TypeError:  # a celpy type and the plain Python value of the same CEL type
        return bool(_plain(left) == _plain(right))


def _get(values: Any, key: Any) -> Any:
    """``values[key]`` by CEL equality (the key ``1`` finds ``1u``, but ``true`` does
    not find ``1``, as Python's dict would); an error when missing."""
    if kind_of(key) in _NUMBERS or kind_of(key) == "bool":
        key = next((candidate for candidate in values if _equal(key, candidate)), _MISSING)
        if key is _MISSING:
            return _MISSING
    try:
        return values[key]
    except (KeyError, TypeError):
        return _MISSING


_MISSING = CELEvalError("no such key")


def _plain(value: Any) -> Any:
    """A string, bytes or bool as Python's own type: celpy's refuse to meet plain ones."""
    plain = _PLAIN.get(value.__class__)
    return value if plain is None else plain(value)


_PLAIN: dict[type, Any] = {
    celtypes.StringType: str,
    celtypes.BytesType: bytes,
    celtypes.BoolType: bool,
}


def _number(value: int | float) -> int | float:
    return float(value) if isinstance(value, float) else int(value)


def kind_of(value: Any) -> str:
    """The CEL type name of a celpy value (or of the plain values celpy's operators make:
    ``+`` on lists gives a Python list, arithmetic on doubles a Python float)."""
    kind = _KINDS.get(value.__class__)
    if kind is not None:
        return kind
    if isinstance(value, type) or (callable(value) and value in _CONVERSIONS):
        return "type"
    return type(value).__name__


_KINDS: dict[type, str] = {
    celtypes.StringType: "string",
    celtypes.MapType: "map",
    celtypes.ListType: "list",
    celtypes.BoolType: "bool",
    celtypes.IntType: "int",
    celtypes.DoubleType: "double",
    type(None): "null_type",
    celtypes.UintType: "uint",
    celtypes.BytesType: "bytes",
    celtypes.TimestampType: "google.protobuf.Timestamp",
    celtypes.DurationType: "google.protobuf.Duration",
    str: "string",
    dict: "map",
    list: "list",
    bool: "bool",
    int: "int",
    float: "double",
    bytes: "bytes",
}
_NUMBERS = frozenset({"int", "uint", "double"})
_ORDERED = frozenset(
    {"bool", "string", "bytes", "google.protobuf.Timestamp", "google.protobuf.Duration"}
)


def _no_overload(name: str, *values: Any) -> CELEvalError:
    kinds = ", ".join(kind_of(value) for value in values) if values else "null_type"
    return CELEvalError(f"found no matching overload for '{name}' applied to '({kinds})'")


def _first_error(*values: Any) -> CELEvalError | None:
    return next((value for value in values if isinstance(value, CELEvalError)), None)


def _equals(left: Any, right: Any) -> Any:
    return _first_error(left, right) or celtypes.BoolType(_equal(left, right))


def _differs(left: Any, right: Any) -> Any:
    return _first_error(left, right) or celtypes.BoolType(not _equal(left, right))


def _ordering(name: str, compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], Any]:
    """``<`` and its kin as cel-cpp has them: between numbers of any of int, uint and
    double by value; otherwise between two values of one ordered type only."""

    def call(left: Any, right: Any) -> Any:
        error = _first_error(left, right)
        if error is not None:
            return error
        kind, other = kind_of(left), kind_of(right)
        if kind in _NUMBERS and other in _NUMBERS:
            if "double" in (kind, other):  # cel-cpp compares an int with a double as doubles
                return celtypes.BoolType(compare(float(left), float(right)))
            return celtypes.BoolType(compare(_number(left), _number(right)))
        if kind == other and kind in _ORDERED:
            return celtypes.BoolType(compare(_plain(left), _plain(right)))
        return _no_overload(name, left, right)

    return call


def logical_and(left: Any, right: Any) -> Any:
    """``&&`` as cel-cpp has it: ``false`` on either side decides; otherwise an operand
    that is not a bool is an error (celpy returned the operand itself)."""
    if _is_bool(left) and _is_bool(right):
        return celtypes.BoolType(bool(left) and bool(right))
    if (_is_bool(left) and not left) or (_is_bool(right) and not right):
        return celtypes.BoolType(False)
    return _first_error(left, right) or _no_overload("_&&_", left, right)


def logical_or(left: Any, right: Any) -> Any:
    """``||``: ``true`` on either side decides; otherwise as ``logical_and``."""
    if _is_bool(left) and _is_bool(right):
        return celtypes.BoolType(bool(left) or bool(right))
    if (_is_bool(left) and left) or (_is_bool(right) and right):
        return celtypes.BoolType(True)
    return _first_error(left, right) or _no_overload("_||_", left, right)


def _is_bool(value: Any) -> bool:
    return isinstance(value, celtypes.BoolType | bool)


def _divide(left: Any, right: Any) -> Any:
    """IEEE 754 for doubles, as CEL has it (``0.0/0.0`` is NaN, ``-1.0/0.0`` is
    ``-inf``; celpy gave ``+inf`` for both); celpy's own division otherwise."""
    if isinstance(left, float) and isinstance(right, float) and float(right) == 0.0:
        if float(left) == 0.0 or math.isnan(left):
            # x86's default NaN has its sign bit set: cel-cpp writes string(0.0/0.0) "-nan"
            return celtypes.DoubleType(-math.nan)
        return celtypes.DoubleType(math.copysign(math.inf, left) * math.copysign(1.0, right))
    return _arithmetic("_/_", operator.truediv)(left, right)


def _modulo(left: Any, right: Any) -> Any:
    if kind_of(left) == "int" and (int(left), _number(right)) == (_INT64_MIN, -1):
        raise OverflowError("integer overflow")  # as cel-cpp: the quotient has no int64
    return _arithmetic("_%_", operator.mod)(left, right)


_INT64_MIN = -(2**63)


def _arithmetic(name: str, apply: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """No mixing of int, uint and double (celpy added an int to a uint)."""

    def call(left: Any, right: Any) -> Any:
        error = _first_error(left, right)
        if error is not None:
            return error
        kind, other = kind_of(left), kind_of(right)
        if kind != other and kind in _NUMBERS and other in _NUMBERS:
            return _no_overload(name, left, right)
        return apply(left, right)

    return call


def _index(container: Any, index: Any) -> Any:
    """``l[i]`` and ``m[k]``: a list index in range (celpy took ``l[-1]`` from the end)
    and of a numeric type (cel-cpp takes ``l[1.0]``), no indexing into strings."""
    error = _first_error(container, index)
    if error is not None:
        return error
    kind = kind_of(container)
    if kind == "list":
        if kind_of(index) not in _NUMBERS or _number(index) != int(_number(index)):
            return _no_overload("_[_]", container, index)
        position = int(_number(index))
        if not 0 <= position < len(container):
            return CELEvalError(f"index out of range: index={position} size={len(container)}")
        return container[position]
    if kind != "map":
        return _no_overload("_[_]", container, index)
    return operator.getitem(container, index)


_SPACE = " \t\n\v\f\r"
_INTEGER = re.compile(r"[+-]?[0-9]+")
_UNSIGNED = re.compile(r"\+?[0-9]+")
_DOUBLE = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE
)
_HEX_DOUBLE = re.compile(
    r"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?"
)


def _from_text(name: str, pattern: re.Pattern[str]) -> Callable[[Any], Any]:
    """``int()``, ``uint()`` of a string as cel-cpp reads it: ASCII decimal digits and a
    sign only (celpy also took ``'0x10'``, ``'1_000'`` and other scripts' digits)."""
    convert = _strict(name, base_functions[name])

    def call(value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip(_SPACE)  # as absl's SimpleAtoi
            if not pattern.fullmatch(value):
                return CELEvalError(f"cannot convert string to {name}")
            value = celtypes.StringType(value)
        return convert(value)

    return call


def _double(value: Any) -> Any:
    """``double()`` of a string as cel-cpp reads it: decimal, ``inf``/``nan`` or a
    hexadecimal float (``'0x10'`` is 16), ASCII only."""
    if isinstance(value, str):
        value = celtypes.StringType(value.strip(_SPACE))
        if _HEX_DOUBLE.fullmatch(value):
            hexadecimal = value if "p" in value.lower() else value + "p0"
            return celtypes.DoubleType(float.fromhex(hexadecimal))
        if not _DOUBLE.fullmatch(value):
            return CELEvalError("cannot convert string to double")
    return _strict("double", base_functions["double"])(value)


def _timestamp(value: Any) -> Any:
    """``timestamp()`` as cel-cpp has it: of seconds since the epoch too, and of RFC 3339
    text with a lower-case ``t`` or ``z`` (celpy took neither)."""
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            moment = datetime.datetime.fromtimestamp(int(value), datetime.UTC)
        except (OverflowError, OSError, ValueError):
            return CELEvalError("timestamp out of range")
        return celtypes.TimestampType(moment)
    if isinstance(value, str) and len(value) > 10 and value[10] == "t":
        value = celtypes.StringType(value[:10] + "T" + value[11:])
    if isinstance(value, str) and value.endswith("z"):
        value = celtypes.StringType(value[:-1] + "Z")
    return _strict("timestamp", base_functions["timestamp"])(value)


_CONVERTERS = {
    "string": _string,
    "int": _from_text("int", _INTEGER),
    "uint": _from_text("uint", _UNSIGNED),
    "double": _double,
    "bool": _strict("bool", base_functions["bool"]),
}
_CONVERSIONS: dict[Any, Any] = {
    function: base_functions[name] for name, function in _CONVERTERS.items()
}
"""The functions that replace celpy's conversions, and the type each names: as values
(``type(x) == int``) they are that type."""


def _type_value(value: Any) -> Any:
    return _CONVERSIONS.get(value, value)


FUNCTIONS = {
    **_CONVERTERS,
    "timestamp": _timestamp,
    "size": _strict("size", base_functions["size"]),
    "_in_": _in,
    "_==_": _equals,
    "_!=_": _differs,
    "_<_": _ordering("_<_", operator.lt),
    "_<=_": _ordering("_<=_", operator.le),
    "_>_": _ordering("_>_", operator.gt),
    "_>=_": _ordering("_>=_", operator.ge),
    "_&&_": logical_and,
    "_||_": logical_or,
    "_+_": _arithmetic("_+_", operator.add),
    "_-_": _arithmetic("_-_", operator.sub),
    "_*_": _arithmetic("_*_", operator.mul),
    "_/_": _divide,
    "_%_": _modulo,
    "_[_]": _index,
}
