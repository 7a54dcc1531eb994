"""The syntax tree of a CEL expression (``scanner.cel.parser`` builds it) and the one
error of reading one.

Every node spans ``source[start:end]`` (without enclosing parentheses) and knows how
many levels of nodes it holds (``depth``), so that walks over it stay within the
parser's ``MAX_DEPTH``. Macros are not expanded: ``a.all(x, p)`` is a ``Call``.
"""

from __future__ import annotations

from dataclasses import dataclass

from scanner.errors import CelError


class ParseError(CelError):
    """The expression is not CEL this parser reads; ``line`` and ``column`` are 1-based."""

    def __init__(self, message: str, source: str, offset: int) -> None:
        line, column = position(source, offset)
        super().__init__(message, line, column)
        self.offset = offset


def position(source: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of ``offset`` in ``source``, in characters."""
    line = source.count("\n", 0, offset) + 1
    return line, offset - (source.rfind("\n", 0, offset) + 1) + 1


@dataclass(frozen=True, slots=True)
class Literal:
    """A constant: ``kind`` is int, uint, double, string, bytes, bool or null."""

    value: int | float | str | bytes | bool | None
    kind: str
    start: int
    end: int
    depth: int = 1


@dataclass(frozen=True, slots=True)
class Ident:
    """A name: a variable, a comprehension variable, or a type (``int``). ``.name``
    (``leading_dot``) is resolved at the root, past comprehension variables."""

    name: str
    leading_dot: bool
    start: int
    end: int
    depth: int = 1


@dataclass(frozen=True, slots=True)
class Select:
    """``operand.field``, or ``operand.?field`` when ``optional``."""

    operand: Node
    field: str
    optional: bool
    start: int
    end: int
    depth: int


@dataclass(frozen=True, slots=True)
class Index:
    """``operand[index]``, or ``operand[?index]`` when ``optional``."""

    operand: Node
    index: Node
    optional: bool
    start: int
    end: int
    depth: int


@dataclass(frozen=True, slots=True)
class Call:
    """``function(args)``, or ``target.function(args)`` (a method, or a macro such as
    ``all``). ``name_start``: where the function's name begins."""

    target: Node | None
    function: str
    args: tuple[Node, ...]
    leading_dot: bool
    name_start: int
    start: int
    end: int
    depth: int


@dataclass(frozen=True, slots=True)
class Unary:
    """``!operand`` or ``-operand``."""

    operator: str
    operand: Node
    start: int
    end: int
    depth: int


@dataclass(frozen=True, slots=True)
class Binary:
    """Arithmetic or a relation: ``+ - * / % == != < <= > >= in``."""

    operator: str
    left: Node
    right: Node
    start: int
    end: int
    depth: int


@dataclass(frozen=True, slots=True)
class Logical:
    """``a && b && ...`` or ``a || b || ...``: one run of the operator. Parentheses
    start a run of their own: ``(a && b) && c`` has two operands, the first a Logical."""

    operator: str
    operands: tuple[Node, ...]
    start: int
    end: int
    depth: int


@dataclass(frozen=True, slots=True)
class Conditional:
    """``condition ? then : otherwise``."""

    condition: Node
    then: Node
    otherwise: Node
    start: int
    end: int
    depth: int


@dataclass(frozen=True, slots=True)
class CreateList:
    """``[a, ?b]``: ``optional[i]`` when element ``i`` is written ``?e``."""

    elements: tuple[Node, ...]
    optional: tuple[bool, ...]
    start: int
    end: int
    depth: int


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a map (``key: value``) or a message (``field: value``, with the
    field name as a string Literal); ``?key: value`` when ``optional``."""

    key: Node
    value: Node
    optional: bool


@dataclass(frozen=True, slots=True)
class CreateMap:
    entries: tuple[Entry, ...]
    start: int
    end: int
    depth: int


@dataclass(frozen=True, slots=True)
class CreateMessage:
    """``type_name{field: value, ...}``."""

    type_name: str
    entries: tuple[Entry, ...]
    start: int
    end: int
    depth: int


Node = (
    Literal
    | Ident
    | Select
    | Index
    | Call
    | Unary
    | Binary
    | Logical
    | Conditional
    | CreateList
    | CreateMap
    | CreateMessage
)
