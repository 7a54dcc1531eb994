"""An admission policy's evaluation error is part of its message: the same words on
both engines (``stamp.error_text``). The texts are the engines' own, as they report
``object.spec.affinity`` read on a pod without affinity."""

from __future__ import annotations

import pytest

from scanner.errors import CelEvalError
from scanner.evaluate.stamp import error_text


@pytest.mark.parametrize(
    "text",
    [
        'NOT_FOUND: Key not found in map : "affinity"',  # cel-cpp
        "no such member in mapping: 'affinity'",  # cel-python
    ],
)
def test_a_missing_key_reads_the_same_on_both_engines(text: str) -> None:
    assert error_text(CelEvalError(text)) == "no such key: affinity"


def test_other_errors_keep_their_first_line() -> None:
    assert error_text(CelEvalError("division by zero\n | 1 / 0\n | ..^")) == "division by zero"
