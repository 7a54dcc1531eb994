"""Kubernetes resource quantities (``500m``, ``2``, ``1Ki``, ``1e3``)."""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

_QUANTITY = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)

_SUFFIX: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}


_INT64_MAX = 2**63 - 1


def parse_quantity(value: object) -> Fraction | None:
    """The exact value of a quantity, or ``None`` if it is not one.

    YAML gives ``1`` as an int and ``"1"``/``500m`` as strings; both are accepted.
    Booleans are not quantities even though Python treats them as ints.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(value) if value == value and abs(value) != float("inf") else None
    if not isinstance(value, str):
        return None
    match = _QUANTITY.match(value.strip())
    if match is None:
        return None
    number, exponent, suffix = match.groups()
    base = Fraction(number)
    if exponent:
        power = int(exponent[1:])
        if abs(power) > 30:  # no GPU count needs this; refuse absurd exponents
            return None
        return base * Fraction(10) ** power
    return base * _SUFFIX[suffix or ""]


def positive_count(value: object) -> int:
    """The quantity as a positive whole number, or 0 if it is not one (GPUs are counted)."""
    if value.__class__ is str:
        # Every replica pod and node repeats a handful of texts ("1", "8"): the exact
        # parse (a Fraction) is done once per text.
        return _text_count(value)
    return _count(value)


def is_zero(value: object) -> bool:
    """Whether the quantity is exactly zero (``0``, ``"0"``, ``0m``): a GPU count of
    zero asks for no device, and the API server admits it."""
    if value.__class__ is str:
        return _text_zero(value)
    if value.__class__ is int:  # YAML's 1: no Fraction for the common case
        return value == 0
    return parse_quantity(value) == 0


@lru_cache(maxsize=1024)
def _text_zero(text: str) -> bool:
    return parse_quantity(text) == 0


@lru_cache(maxsize=4096)
def _text_count(text: str) -> int:
    return _count(text)


def _count(value: object) -> int:
    quantity = parse_quantity(value)
    if quantity is None or quantity <= 0 or quantity.denominator != 1 or quantity > _INT64_MAX:
        return 0  # beyond int64 no engine can hold it, and no node has that many GPUs
    return int(quantity)
