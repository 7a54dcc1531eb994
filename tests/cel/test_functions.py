"""poolgate's CEL functions are pinned: same names, signatures and results on both engines."""

from __future__ import annotations

import pytest

from scanner.cel import ResultKind, get_engine
from scanner.cel.functions import SIGNATURES


def test_the_function_list_is_pinned() -> None:
    assert SIGNATURES == {"joined": "joined(list, string) -> string"}


@pytest.mark.parametrize("engine_name", ["cpp", "python"])
@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('joined(["a", "b"], ", ")', "a, b"),
        ('joined([], ", ")', ""),
        ('joined([dyn(1), dyn(true), "x"], "/")', "1/true/x"),
        ('joined(["p", "q"].map(v, v + "!"), "")', "p!q!"),
    ],
)
def test_joined(engine_name: str, source: str, expected: str) -> None:
    engine = get_engine(engine_name)
    assert engine.compile(source, ResultKind.STRING).evaluate(engine.activation({})) == expected


def test_joined_type_checks_its_arguments() -> None:
    from scanner.errors import CelError

    with pytest.raises(CelError):
        get_engine("cpp").compile('joined("a", ",")', ResultKind.STRING)
