"""Kubernetes' quantity library (``k8s.io/apiserver/pkg/cel/library/quantity.go``) on
apimachinery's ``resource.Quantity`` rules.

A quantity keeps the form Kubernetes keeps it in: an int64 mantissa with a decimal
exponent while the value fits (``50k`` is 50 x 10³), otherwise an arbitrary-precision
decimal rounded up to nano units. The form decides two answers besides the value:
``isInteger()`` is false for ``1.0`` (an int64 form with a negative exponent) and for
any quantity in the decimal form, and ``asApproximateFloat()`` multiplies the
mantissa by a power of ten in floating point, as Go's ``AsApproximateFloat64`` does.

The runtime payload is ``"<form>:<mantissa>e<exponent>"`` (``i:50e3``, ``d:15e8``).
Two quantities of equal value in different forms are equal; ``==`` on values the
checker knows to be quantities compares values (``scanner.cel.k8s.rewrite``).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Final

from scanner.cel.k8s.library import (
    KubernetesError,
    NoOverload,
    function,
    glob,
    kind_name,
    member,
    opaque,
    opaque_type,
    payload,
)

_INT64_MAX: Final = 2**63 - 1
_INT64_MIN: Final = -(2**63)
_SPLIT: Final = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_DECIMAL: Final = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_NUMBER: Final = re.compile(r"[+-]?[0-9]+")
_GRAMMAR: Final = re.compile(_SPLIT)
MAX_EXPONENT: Final = 1000
"""The largest decimal exponent a quantity may be written with (Kubernetes' limit is
int32; every real quantity is far inside this one)."""


class Quantity:
    """A quantity in Kubernetes' form: ``mantissa x 10^exponent``; ``exact``: the int64 form."""

    __slots__ = ("exact", "exponent", "mantissa")

    def __init__(self, mantissa: int, exponent: int, exact: bool) -> None:
        self.mantissa = mantissa
        self.exponent = exponent
        self.exact = exact

    @property
    def value(self) -> Fraction:
        return Fraction(self.mantissa) * Fraction(10) ** self.exponent

    def text(self) -> str:
        return f"{'i' if self.exact else 'd'}:{self.mantissa}e{self.exponent}"


def parse(text: str) -> Quantity:
    """``resource.ParseQuantity``."""
    if not text:
        raise KubernetesError(_format_wrong())
    if text == "0":
        return Quantity(0, 0, True)
    number = _GRAMMAR.match(text)
    if (
        number is None
        or not any(char.isdigit() for char in number.group(1))
        or number.group(1).count(".") > 1
    ):
        # The documented grammar: at least one digit and at most one dot (apimachinery's
        # own parser reads "Mi" as 0, which Kubernetes' CEL library documents as an error).
        raise KubernetesError(_format_wrong())
    positive, value, num, denom, suffix = _scan(text)
    interpreted = _interpret(suffix)
    if interpreted is None:
        raise KubernetesError("unable to parse quantity's suffix")
    base, exponent, binary = interpreted
    if abs(exponent) > MAX_EXPONENT:
        # Go keeps such a quantity as a scale; Python would build the power of ten, and
        # "1e999999999" in a scanned manifest must not cost minutes.
        raise KubernetesError("quantity exponent is outside the supported range")
    mantissa = 1
    if not binary:
        scale = exponent
        precision = 18 - (len(num) + len(denom))
    elif exponent >= 0 and not denom:
        scale = 0
        mantissa = 1 << exponent
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
    else:
        scale, precision = 0, -1
    if precision >= 0:
        scale -= len(denom)
        if scale >= -9:
            shifted = int(num + denom)
            result = shifted * mantissa
            if _INT64_MIN <= result <= _INT64_MAX and shifted <= _INT64_MAX:
                return Quantity(result if positive else -result, scale, True)
    try:
        amount = Fraction(value.rstrip(".") or "0") if value not in ("+", "-") else Fraction(0)
    except ValueError:
        raise KubernetesError("unable to parse numeric part of quantity") from None
    amount *= Fraction(base) ** exponent
    negative = amount < 0
    amount = abs(amount)
    # Rounded up to nano units, in the decimal form's scale of 9.
    nanos = -((-amount * 10**9) // 1)
    if binary and nanos > _INT64_MAX * 10**9:
        return Quantity(-_INT64_MAX if negative else _INT64_MAX, 0, False)
    nanos = int(nanos)
    if amount == 0:
        digits = len(denom) - (exponent if not binary else 0)
        return Quantity(0, -digits, False)
    return Quantity(-nanos if negative else nanos, -9, False)


def _scan(text: str) -> tuple[bool, str, str, str, str]:
    """apimachinery's ``parseQuantityString``: (positive, value, num, denom, suffix)."""
    positive, pos, end = True, 0, len(text)
    if text[0] in "+-":
        positive = text[0] == "+"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos].isascii() and text[pos].isdigit():
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos].isascii() and text[pos].isdigit():
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return positive, text, num, denom, ""
    elif pos >= end:
        return positive, text, num, denom, ""
    value = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in "eEinumkKMGTP":
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos].isascii() and text[pos].isdigit():
        pos += 1
    if pos < end:
        raise KubernetesError(_format_wrong())
    return positive, value, num, denom, text[suffix_start:]


def _format_wrong() -> str:
    return f"quantities must match the regular expression '{_SPLIT}'"


def _interpret(suffix: str) -> tuple[int, int, bool] | None:
    """(base, exponent, binary) of a suffix, as apimachinery's ``suffixHandler``."""
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix], False
    if suffix in _BINARY:
        return 2, _BINARY[suffix], True
    if len(suffix) > 1 and suffix[0] in "eE" and _NUMBER.fullmatch(suffix[1:]):
        exponent = int(suffix[1:])
        if _INT64_MIN <= exponent <= _INT64_MAX:
            exponent = (exponent + 2**31) % 2**32 - 2**31  # Go's int32(parsed)
            return 10, exponent, False
    return None


def _load(value: object) -> Quantity:
    text = payload(value, "Quantity")
    form, _, number = str(text).partition(":")
    mantissa, _, exponent = number.partition("e")
    return Quantity(int(mantissa), int(exponent), form == "i")


def _wrap(quantity: Quantity) -> dict[object, object]:
    return opaque("Quantity", quantity.text())


def _exact_or_decimal(mantissa: int, exponent: int, exact: bool) -> Quantity:
    """An int64-form result that overflowed continues in the decimal form, as
    ``int64Amount`` arithmetic hands over to ``inf.Dec``."""
    if exact and not _INT64_MIN <= mantissa <= _INT64_MAX:
        exact = False
    return Quantity(mantissa, exponent, exact)


def _add(left: Quantity, right: Quantity) -> Quantity:
    if left.mantissa == 0 and left.exact and right.exact:
        return right
    if right.mantissa == 0 and left.exact and right.exact:
        return left
    exponent = min(left.exponent, right.exponent)
    mantissa = left.mantissa * 10 ** (left.exponent - exponent) + right.mantissa * 10 ** (
        right.exponent - exponent
    )
    exact = left.exact and right.exact
    if exact and any(
        not _INT64_MIN <= part.mantissa * 10 ** (part.exponent - exponent) <= _INT64_MAX
        for part in (left, right)
    ):
        exact = False
    return _exact_or_decimal(mantissa, exponent, exact)


def _of_int(number: int) -> Quantity:
    return Quantity(number, 0, True)


def _negated(quantity: Quantity) -> Quantity:
    return Quantity(-quantity.mantissa, quantity.exponent, quantity.exact)


def _compare(left: object, right: object) -> int:
    a, b = _load(left).value, _load(right).value
    return (a > b) - (a < b)


def _as_integer(quantity: Quantity) -> int | None:
    """``Quantity.AsInt64``: the int64 form only, at a non-negative exponent."""
    if not quantity.exact or quantity.exponent < 0:
        return None
    result = quantity.mantissa * 10**quantity.exponent
    return result if _INT64_MIN <= result <= _INT64_MAX else None


def _pow10(exponent: int) -> float:
    """Go's ``math.Pow10``."""
    if exponent < -323:
        return 0.0
    if exponent > 308:
        return float("inf")
    return float(f"1e{exponent}")


def _approximate(quantity: Quantity) -> float:
    try:
        base = float(quantity.mantissa)
    except OverflowError:
        base = float("inf") if quantity.mantissa > 0 else float("-inf")
    return base if quantity.exponent == 0 else base * _pow10(quantity.exponent)


def _divide(quantity: Quantity, denominator: int, digits: int) -> Quantity:
    if denominator == 0:
        raise KubernetesError("division by zero error")
    exact = quantity.value / denominator
    scaled = exact * 10**digits
    rounded = int(scaled + Fraction(1, 2)) if scaled >= 0 else -int(-scaled + Fraction(1, 2))
    return Quantity(rounded, -digits, False)


def _quantity(text: object) -> object:
    return _wrap(parse(str(text)))


def _is_quantity(text: object) -> bool:
    try:
        parse(str(text))
    except KubernetesError:
        return False
    return True


def _sign(value: object) -> int:
    mantissa = _load(value).mantissa
    return (mantissa > 0) - (mantissa < 0)


def _as_integer_checked(value: object) -> int:
    result = _as_integer(_load(value))
    if result is None:
        raise KubernetesError("cannot convert value to integer")
    return result


def _divide_round(value: object, denominator: object, digits: object) -> object:
    if not 0 <= int(digits) <= 10:  # type: ignore[call-overload]
        raise KubernetesError(f"the valid range for roundVal is 0 to 10 but {digits} was passed")
    return _wrap(_divide(_load(value), int(denominator), int(digits)))  # type: ignore[call-overload]


def _divide_int(value: object, denominator: object) -> object:
    quantity = _load(value)
    if int(denominator) == 0:  # type: ignore[call-overload]
        raise KubernetesError("division by zero error")
    exact = quantity.value / int(denominator)  # type: ignore[call-overload]
    whole = int(exact)  # truncated toward zero, as Go's integer division
    return _wrap(_exact_or_decimal(whole, 0, True))


def equals(left: object, right: object) -> bool:
    """Kubernetes' ``==`` with a quantity on one side: by value, whatever the form;
    ``null`` is equal to nothing else, and any other value has no overload."""
    if left is None or right is None:
        return left is right
    try:
        return _compare(left, right) == 0
    except NoOverload:
        kinds = ", ".join(opaque_type(value) or kind_name(value) for value in (left, right))
        raise KubernetesError(
            f"found no matching overload for '_==_' applied to '({kinds})'"
        ) from None


FUNCTIONS = (
    function("quantity", glob("string_to_quantity", ["string"], "Quantity", _quantity)),
    function("isQuantity", glob("is_quantity_string", ["string"], "bool", _is_quantity)),
    function("sign", glob("quantity_sign", ["Quantity"], "int", _sign)),
    function(
        "isGreaterThan",
        member(
            "quantity_is_greater_than",
            ["Quantity", "Quantity"],
            "bool",
            lambda a, b: _compare(a, b) == 1,
        ),
    ),
    function(
        "isLessThan",
        member(
            "quantity_is_less_than",
            ["Quantity", "Quantity"],
            "bool",
            lambda a, b: _compare(a, b) == -1,
        ),
    ),
    function(
        "compareTo",
        member("quantity_compare_to", ["Quantity", "Quantity"], "int", _compare),
    ),
    function(
        "asApproximateFloat",
        member("quantity_get_float", ["Quantity"], "double", lambda q: _approximate(_load(q))),
    ),
    function("asInteger", member("quantity_get_int", ["Quantity"], "int", _as_integer_checked)),
    function(
        "isInteger",
        member(
            "quantity_is_integer",
            ["Quantity"],
            "bool",
            lambda q: _as_integer(_load(q)) is not None,
        ),
    ),
    function(
        "add",
        member(
            "quantity_add",
            ["Quantity", "Quantity"],
            "Quantity",
            lambda a, b: _wrap(_add(_load(a), _load(b))),
        ),
        member(
            "quantity_add_int",
            ["Quantity", "int"],
            "Quantity",
            lambda a, b: _wrap(_add(_load(a), _of_int(b))),
        ),
    ),
    function(
        "sub",
        member(
            "quantity_sub",
            ["Quantity", "Quantity"],
            "Quantity",
            lambda a, b: _wrap(_add(_load(a), _negated(_load(b)))),
        ),
        member(
            "quantity_sub_int",
            ["Quantity", "int"],
            "Quantity",
            lambda a, b: _wrap(_add(_load(a), _of_int(-b))),
        ),
    ),
    function(
        "mul",
        member(
            "quantity_multiply_int",
            ["Quantity", "int"],
            "Quantity",
            lambda a, b: _wrap(
                _exact_or_decimal(_load(a).mantissa * b, _load(a).exponent, _load(a).exact)
            ),
        ),
    ),
    function(
        "div",
        member(
            "quantity_divide_int_default_rounding",
            ["Quantity", "int"],
            "Quantity",
            lambda a, b: _divide_round(a, b, 4),
        ),
        member("quantity_divide_int_round", ["Quantity", "int", "int"], "Quantity", _divide_round),
    ),
    function("divInt", member("quantity_divide_int", ["Quantity", "int"], "Quantity", _divide_int)),
)
