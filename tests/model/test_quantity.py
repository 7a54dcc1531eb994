from __future__ import annotations

from fractions import Fraction

import pytest

from scanner.model.quantity import parse_quantity, positive_count


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (1, Fraction(1)),
        ("2", Fraction(2)),
        ("500m", Fraction(1, 2)),
        ("1k", Fraction(1000)),
        ("1Ki", Fraction(1024)),
        ("1e3", Fraction(1000)),
        ("0.5", Fraction(1, 2)),
        ("-1", Fraction(-1)),
        (2.0, Fraction(2)),
    ],
)
def test_parse_quantity(text: object, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "text", ["two", "", "1.2.3", "1 Gi", True, None, [1], "1e999", float("nan")]
)
def test_not_a_quantity(text: object) -> None:
    assert parse_quantity(text) is None


@pytest.mark.parametrize(
    ("text", "count"),
    [(1, 1), ("8", 8), ("0", 0), ("-1", 0), ("500m", 0), ("0.5", 0), ("1k", 1000)],
)
def test_positive_count(text: object, count: int) -> None:
    assert positive_count(text) == count


class _Text(str):
    """A str subclass: not cached by its class, still a quantity."""


@pytest.mark.parametrize("value", ["8", " 8 ", "1e3", "2Ki", "x", "", "-3", True, 8.0, _Text("8")])
def test_positive_count_is_the_same_on_every_call(value: object) -> None:
    """Texts are counted once and remembered; a repeat, or the same value of another
    type, gets exactly the uncached answer."""
    expected = [positive_count(value) for _ in range(3)]
    assert len(set(expected)) == 1
    assert expected[0] == _uncached(value)


def _uncached(value: object) -> int:
    quantity = parse_quantity(value)
    if quantity is None or quantity <= 0 or quantity.denominator != 1:
        return 0
    return int(quantity)
