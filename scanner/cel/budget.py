"""Rule cost limits: what keeps one expensive rule from hanging a scan.

CEL has no loops or recursion; all of its cost comes from comprehensions (the macros
``all``, ``exists``, ``exists_one``, ``map``, ``filter``) multiplied by the size of the
values they touch. cel-expr-python exposes no cost tracker, but it compiles in a limit
of its own: one evaluation stops at its 10,000th comprehension iteration (nested
iterations included). poolgate builds its bound on that limit, the same on both engines:

* **iterations**: every evaluation of an expression may run at most
  ``MAX_ITERATIONS - 1`` comprehension iterations. cel-cpp enforces it itself; the
  pure-Python engine counts the same iterations (with cel-cpp's short-circuits, see
  ``scanner.cel.celpy_budget``), so both stop on the same input.
* **value size**: one iteration can still cost time proportional to the values it
  touches (``x in list``, ``s.matches(re)``; cel-cpp's ``map`` and ``filter`` copy
  their growing result on every step). A rule that has comprehensions is therefore
  not run on a subject holding a list or map with more than ``MAX_ITEMS`` entries or
  a string longer than ``MAX_STRING`` characters. Real objects rarely come near
  either: an EndpointSlice holds at most 1,000 endpoints, and all annotations of an
  object together at most 256 KiB.
* **nesting**: comprehensions nested more than ``MAX_NESTING`` deep are refused when the
  rule loads. Four levels over lists of 10 items already exceed the iteration limit,
  so deeper nesting is a mistake better reported once, at load, than on every subject.

Together: one evaluation does fewer than 10,000 iterations, each over values of
bounded size, so a bad rule costs at most seconds per subject (measured worst cases
are in docs/writing-rules.md, "Rule cost limits") and a scan's time grows with its input, never
explosively. Both run-time limits turn into findings with outcome ``error`` (exit
code 3), never an aborted scan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import cache
from typing import Any, Final, NamedTuple

from scanner.cel.analysis import MACROS as MACROS  # the comprehension macros
from scanner.cel.analysis import analyze
from scanner.errors import CelError
from scanner.inventory import join_path

MAX_ITERATIONS: Final = 10_000
"""cel-cpp's compiled-in ``comprehension_max_iterations``: the 10,000th iteration fails."""

MAX_NESTING: Final = 3
MAX_ITEMS: Final = 1_000
MAX_STRING: Final = 256 * 1024

BUDGET_EXCEEDED: Final = (
    f"evaluation stopped at {MAX_ITERATIONS:,} comprehension iterations (rule cost limit)"
)


def check_nesting(source: str) -> None:
    """Raise ``CelError`` at the offending macro if comprehensions nest past
    ``MAX_NESTING`` (a ``ParseError``, which is one, when ``source`` does not parse)."""
    depth, offset = comprehension_nesting(source)
    if depth > MAX_NESTING:
        from scanner.cel.syntax import position  # with the parser: only when it parsed

        line, column = position(source, offset)
        raise CelError(
            f"comprehensions nested {depth} deep; at most {MAX_NESTING} are allowed "
            "(rule cost limit)",
            line,
            column,
        )


def iterates(source: str) -> bool:
    """Does ``source`` use a comprehension macro anywhere?"""
    return analyze(source).iterates


def comprehension_nesting(source: str) -> tuple[int, int]:
    """(deepest comprehension nesting, offset of the deepest macro's name) in ``source``,
    from its parse (``scanner.cel.analysis``): a comprehension's body (its arguments)
    is inside it; its range (``a`` in ``a.all(x, ...)``) is not."""
    found = analyze(source)
    return found.nesting, found.nesting_offset


# --- value sizes ---------------------------------------------------------------------


class Oversize(NamedTuple):
    """A value a rule with comprehensions must not run on."""

    message: str
    path: str
    """Its field path inside the variable (``spec.containers[0].image``), for a location."""


def oversize(name: str, value: Any, *, many: bool = False) -> Oversize | None:
    """The first value inside ``value`` over ``MAX_ITEMS`` entries or ``MAX_STRING``
    characters, named by its CEL path (``value`` is the CEL variable ``name``), or None.

    ``many``: the caller measures many values, so the C shortcut (``_too_small``) repays
    importing msgspec; a pre-commit run on one file only walks its few objects.
    """
    if (many and _too_small(value)) or not _any_oversize(value):
        return None
    found = _first_oversize(value)
    if found is None:  # pragma: no cover - the two walks apply the same limits
        return None
    parts, size, is_text = found
    path = ""
    for part in parts:
        path = join_path(path, part)
    where = f"{name}{path}" if path.startswith("[") else f"{name}.{path}" if path else name
    if is_text:
        return Oversize(
            f"{where} is {size:,} characters long; rules with comprehensions do not "
            f"run on strings over {MAX_STRING:,} characters (rule cost limit)",
            path,
        )
    return Oversize(
        f"{where} holds {size:,} entries; rules with comprehensions do not run on "
        f"lists or maps over {MAX_ITEMS:,} entries (rule cost limit)",
        path,
    )


def _too_small(value: Any) -> bool:
    """Whether ``value`` is too small to hold anything over a limit, from its compact
    JSON (one call in C, several times cheaper than a walk in Python, which also
    writes the reference count of every value it passes): fewer than ``MAX_ITEMS``
    commas (a list or map over the limit separates its entries with at least that
    many) and too short to hold a string over ``MAX_STRING`` characters (its
    characters and quotes take at least ``MAX_STRING + 3`` bytes). Values msgspec
    does not encode (lone surrogates) or encodes recursively past the interpreter's
    limit (nesting near 1,000 levels) are walked."""
    try:
        encoded = _encoder()(value)
    except (TypeError, ValueError, RecursionError):  # deep values too: the walk is iterative
        return False
    return len(encoded) < MAX_STRING + 3 and encoded.count(b",") < MAX_ITEMS


@cache
def _encoder() -> Callable[[Any], bytes]:
    """msgspec's JSON encoder, imported on first use, so start-up does not pay for it."""
    import msgspec

    return msgspec.json.Encoder().encode


def _any_oversize(root: Any) -> bool:
    """The fast check run on every subject: no paths, no recursion, C-level loops."""
    if root.__class__ is str:
        return len(root) > MAX_STRING
    if not isinstance(root, list | dict):
        return False
    stack: list[Any] = [root]
    pop, push = stack.pop, stack.append
    while stack:
        value = pop()
        if len(value) > MAX_ITEMS:
            return True
        if value.__class__ is dict:
            if value and max(map(len, value)) > MAX_STRING:  # keys are text
                return True
            value = value.values()
        for item in value:
            cls = item.__class__
            if cls is str:
                if len(item) > MAX_STRING:
                    return True
            elif cls is dict or cls is list:
                push(item)
    return False


def _first_oversize(value: Any) -> tuple[list[str | int], int, bool] | None:
    """(path, size, is a string) of the first value over a limit, in document order,
    else None. Iterative, as ``_any_oversize`` is: an oversized value may sit beside
    nesting as deep as a snapshot may hold."""
    if value.__class__ is str:
        return ([], len(value), True) if len(value) > MAX_STRING else None
    if not isinstance(value, list | Mapping):
        return None
    if len(value) > MAX_ITEMS:
        return [], len(value), False
    stack: list[tuple[Iterator[tuple[str | int, Any]], list[str | int]]] = [(_pairs(value), [])]
    while stack:
        pairs, path = stack[-1]
        for key, item in pairs:
            if isinstance(key, str) and len(key) > MAX_STRING:
                return [*path, f"{key[:40]}…"], len(key), True
            if item.__class__ is str:
                if len(item) > MAX_STRING:
                    return [*path, key], len(item), True
            elif isinstance(item, list | Mapping):
                if len(item) > MAX_ITEMS:
                    return [*path, key], len(item), False
                stack.append((_pairs(item), [*path, key]))
                break
        else:
            stack.pop()
    return None


def _pairs(value: Any) -> Iterator[tuple[str | int, Any]]:
    return enumerate(value) if isinstance(value, list) else iter(value.items())
