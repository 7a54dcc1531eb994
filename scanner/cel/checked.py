"""cel-cpp's compiled programs as data: read and write the checked expression.

``Expression.serialize()`` gives a ``google.protobuf.Any`` holding a
``cel.expr.CheckedExpr``: the expression tree after macro expansion and type checking,
with the overloads each call may take (``reference_map``), the type of every node
(``type_map``) and the source offset of every node (``source_info.positions``).
cel-expr-python shows nothing else of the tree, and the protobuf runtime is not a
dependency, so this module reads and writes the few messages involved directly in
the protobuf wire format. The Kubernetes environment (``scanner.cel.k8s``) uses it to
check literals at compile time as the API server does, and to rewrite a few calls
before the program is planned (``scanner.cel.k8s.rewrite``).

A message is kept as the list of its fields, in order, each ``[number, wire type,
value]``; fields this module knows to hold messages are decoded into ``Message``
values, everything else stays as read, so writing a message back gives the bytes it
was read from unless a field was changed.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from scanner.errors import CelError

_VARINT: Final = 0
_FIXED64: Final = 1
_BYTES: Final = 2
_FIXED32: Final = 5

ANY_URL: Final = b"type.googleapis.com/cel.expr.CheckedExpr"

# Message name -> field number -> message name of the fields that hold messages.
_SCHEMA: Final[dict[str, dict[int, str]]] = {
    "Any": {2: "CheckedExpr"},
    "CheckedExpr": {2: "ReferenceEntry", 3: "TypeEntry", 4: "Expr", 5: "SourceInfo"},
    "ReferenceEntry": {2: "Reference"},
    "Reference": {4: "Constant"},
    "TypeEntry": {2: "Type"},
    "SourceInfo": {4: "PositionEntry"},
    "PositionEntry": {},
    "Expr": {
        3: "Constant",
        4: "Ident",
        5: "Select",
        6: "Call",
        7: "CreateList",
        8: "CreateStruct",
        9: "Comprehension",
    },
    "Constant": {},
    "Ident": {},
    "Select": {1: "Expr"},
    "Call": {1: "Expr", 3: "Expr"},
    "CreateList": {1: "Expr"},
    "CreateStruct": {2: "Entry"},
    "Entry": {3: "Expr", 4: "Expr"},
    "Comprehension": {2: "Expr", 4: "Expr", 5: "Expr", 6: "Expr", 7: "Expr"},
    "Type": {6: "ListType", 7: "MapType", 11: "Type", 14: "AbstractType"},
    "ListType": {1: "Type"},
    "MapType": {1: "Type", 2: "Type"},
    "AbstractType": {2: "Type"},
}

# Expr's kinds by field number.
CONST, IDENT, SELECT, CALL, LIST, STRUCT, COMPREHENSION = 3, 4, 5, 6, 7, 8, 9


@dataclass(slots=True)
class Message:
    """One protobuf message: its fields in order, ``[number, wire type, value]``."""

    name: str
    fields: list[list[Any]] = field(default_factory=list)

    def get(self, number: int, default: Any = None) -> Any:
        for entry in self.fields:
            if entry[0] == number:
                return entry[2]
        return default

    def all(self, number: int) -> list[Any]:
        return [entry[2] for entry in self.fields if entry[0] == number]

    def text(self, number: int) -> str:
        value = self.get(number, b"")
        return value.decode("utf-8") if isinstance(value, bytes) else ""

    def set(self, number: int, value: Any, wire: int = _BYTES) -> None:
        """Replace the field's first occurrence (or append it)."""
        for entry in self.fields:
            if entry[0] == number:
                entry[2] = value
                return
        self.fields.append([number, wire, value])


class WireError(ValueError):
    """The bytes are not the message they should be."""


def decode(data: bytes, name: str) -> Message:
    schema = _SCHEMA[name]
    message = Message(name)
    offset, end = 0, len(data)
    while offset < end:
        tag, offset = _varint(data, offset)
        number, wire = tag >> 3, tag & 7
        value: Any
        if wire == _VARINT:
            value, offset = _varint(data, offset)
        elif wire == _FIXED64:
            value, offset = data[offset : offset + 8], offset + 8
        elif wire == _FIXED32:
            value, offset = data[offset : offset + 4], offset + 4
        elif wire == _BYTES:
            length, offset = _varint(data, offset)
            value, offset = data[offset : offset + length], offset + length
            child = schema.get(number)
            if child is not None:
                value = decode(value, child)
        else:
            raise WireError(f"wire type {wire} in {name}")
        if offset > end:
            raise WireError(f"truncated {name}")
        message.fields.append([number, wire, value])
    return message


def encode(message: Message) -> bytes:
    parts: list[bytes] = []
    for number, wire, value in message.fields:
        parts.append(_encode_varint((number << 3) | wire))
        if wire == _VARINT:
            parts.append(_encode_varint(value))
        elif wire == _BYTES:
            raw = encode(value) if isinstance(value, Message) else value
            parts.append(_encode_varint(len(raw)))
            parts.append(raw)
        else:
            parts.append(value)
    return b"".join(parts)


def _varint(data: bytes, offset: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if offset >= len(data):
            raise WireError("truncated varint")
        byte = data[offset]
        offset += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, offset
        shift += 7


def _encode_varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 values are written as 10-byte varints
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


# --- the checked expression --------------------------------------------------------


@dataclass(slots=True)
class Checked:
    """A decoded ``CheckedExpr`` with its references, types and positions by node id."""

    message: Message
    references: dict[int, Message]
    types: dict[int, Message]
    positions: dict[int, int]
    next_id: int

    @property
    def root(self) -> Message:
        root = self.message.get(4)
        if not isinstance(root, Message):
            raise WireError("no expression")
        return root

    def overloads(self, expr: Message) -> list[str]:
        reference = self.references.get(expr_id(expr))
        if reference is None:
            return []
        return [value.decode("utf-8") for value in reference.all(3)]

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def set_reference(self, node_id: int, overloads: list[str]) -> None:
        """Make ``overloads`` the overloads node ``node_id`` may call (none: no entry)."""
        self.message.fields = [
            entry
            for entry in self.message.fields
            if not (entry[0] == 2 and _signed(entry[2].get(1, 0)) == node_id)
        ]
        self.references.pop(node_id, None)
        if not overloads:
            return
        reference = Message("Reference", [[3, _BYTES, overload.encode()] for overload in overloads])
        entry = Message("ReferenceEntry", [[1, _VARINT, node_id], [2, _BYTES, reference]])
        self.message.fields.append([2, _BYTES, entry])
        self.references[node_id] = reference

    def serialize(self) -> bytes:
        return encode(Message("Any", [[1, _BYTES, ANY_URL], [2, _BYTES, self.message]]))


def read(serialized: bytes) -> Checked:
    """The checked expression inside ``Expression.serialize()``'s bytes."""
    wrapper = decode(serialized, "Any")
    message = wrapper.get(2)
    if not isinstance(message, Message):
        raise WireError("not a checked expression")
    references: dict[int, Message] = {}
    types: dict[int, Message] = {}
    for entry in message.all(2):
        references[_signed(entry.get(1, 0))] = entry.get(2, Message("Reference"))
    for entry in message.all(3):
        types[_signed(entry.get(1, 0))] = entry.get(2, Message("Type"))
    positions: dict[int, int] = {}
    info = message.get(5)
    if isinstance(info, Message):
        for entry in info.all(4):
            positions[_signed(entry.get(1, 0))] = entry.get(2, 0)
    checked = Checked(message, references, types, positions, 0)
    checked.next_id = max((expr_id(node) for node in walk(checked.root)), default=0)
    return checked


# --- expression nodes ----------------------------------------------------------------


def expr_id(expr: Message) -> int:
    return _signed(int(expr.get(2, 0)))


def kind(expr: Message) -> tuple[int, Message]:
    """(kind field number, the kind's message) of an ``Expr``."""
    for number, _, value in expr.fields:
        if number in _SCHEMA["Expr"] and isinstance(value, Message):
            return number, value
    return 0, Message("Empty")


def children(expr: Message) -> Iterator[Message]:
    """The ``Expr`` nodes directly below ``expr``."""
    number, body = kind(expr)
    if number == STRUCT:
        for entry in body.all(2):
            yield from (value for value in (entry.get(3), entry.get(4)) if value is not None)
        return
    for sub_number, _, value in body.fields:
        if isinstance(value, Message) and value.name == "Expr":
            del sub_number
            yield value


def walk(expr: Message) -> Iterator[Message]:
    """Every node of the tree, parents before children (iteratively: trees nest deep)."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(list(children(node))))


def call_parts(expr: Message) -> tuple[str, Message | None, list[Message]] | None:
    """(function, target, arguments) of a call node, else None."""
    number, body = kind(expr)
    if number != CALL:
        return None
    target = body.get(1)
    return body.text(2), target if isinstance(target, Message) else None, body.all(3)


def string_constant(expr: Message) -> str | None:
    number, body = kind(expr)
    if number != CONST:
        return None
    value = body.get(6)
    return value.decode("utf-8") if isinstance(value, bytes) else None


def ident_name(expr: Message) -> str | None:
    number, body = kind(expr)
    return body.text(1) if number == IDENT else None


def new_call(
    node_id: int, function: str, args: list[Message], target: Message | None = None
) -> Message:
    call = Message("Call")
    if target is not None:
        call.fields.append([1, _BYTES, target])
    call.fields.append([2, _BYTES, function.encode()])
    call.fields += [[3, _BYTES, arg] for arg in args]
    return Message("Expr", [[2, _VARINT, node_id], [CALL, _BYTES, call]])


def new_ident(node_id: int, name: str) -> Message:
    return Message(
        "Expr",
        [[2, _VARINT, node_id], [IDENT, _BYTES, Message("Ident", [[1, _BYTES, name.encode()]])]],
    )


def set_id(expr: Message, node_id: int) -> None:
    expr.set(2, node_id, _VARINT)


def replace_contents(expr: Message, other: Message) -> None:
    """Make ``expr`` the node ``other`` is, in place (its parent keeps pointing at it)."""
    expr.fields = other.fields


# --- types ---------------------------------------------------------------------------

PRIMITIVES: Final = {1: "bool", 2: "int", 3: "uint", 4: "double", 5: "string", 6: "bytes"}
WELL_KNOWN: Final = {1: "any", 2: "timestamp", 3: "duration"}


def type_text(value: Message | None) -> str:
    """A CEL type as Kubernetes' messages name it (``int``, ``list(string)``, ``dyn``)."""
    if value is None or not value.fields:
        return "dyn"
    number, _, body = value.fields[0]
    if number == 1:
        return "dyn"
    if number == 2:
        return "null_type"
    if number == 3:
        return PRIMITIVES.get(body, "dyn")
    if number == 4:
        return f"wrapper({PRIMITIVES.get(body, 'dyn')})"
    if number == 5:
        return WELL_KNOWN.get(body, "dyn")
    if number == 6:
        return f"list({type_text(body.get(1))})"
    if number == 7:
        return f"map({type_text(body.get(1))}, {type_text(body.get(2))})"
    if number == 9:
        return str(body.decode("utf-8"))
    if number == 10:
        return "dyn"  # a type parameter: anything
    if number == 11:
        return f"type({type_text(body)})" if isinstance(body, Message) else "type"
    if number == 14:
        parameters = ", ".join(type_text(item) for item in body.all(2))
        return f"{body.text(1)}({parameters})" if parameters else body.text(1)
    return "dyn"


def is_list_type(value: Message | None) -> bool:
    return value is not None and bool(value.fields) and value.fields[0][0] == 6


def assignable(left: Message | None, right: Message | None) -> bool:
    """Whether values of the two types may share a literal under Kubernetes'
    homogeneous aggregate literals: the same type, with ``dyn`` (or a type
    parameter) matching anything at any depth."""
    if left is None or right is None or not left.fields or not right.fields:
        return True
    lnum, _, lbody = left.fields[0]
    rnum, _, rbody = right.fields[0]
    if lnum in (1, 10) or rnum in (1, 10):
        return True
    if lnum != rnum:
        return False
    if isinstance(lbody, Message) and isinstance(rbody, Message):
        if lbody.name == "AbstractType" and lbody.text(1) != rbody.text(1):
            return False
        lparts = [v for _, _, v in lbody.fields if isinstance(v, Message)]
        rparts = [v for _, _, v in rbody.fields if isinstance(v, Message)]
        return len(lparts) == len(rparts) and all(map(assignable, lparts, rparts))
    return bool(lbody == rbody)


def double_constant(raw: bytes) -> float:
    return float(struct.unpack("<d", raw)[0])


def position(source: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of a code point offset."""
    line = source.count("\n", 0, offset) + 1
    column = offset - (source.rfind("\n", 0, offset) + 1) + 1
    return line, column


def error_at(checked: Checked, source: str, expr: Message, message: str) -> CelError:
    offset = checked.positions.get(expr_id(expr))
    if offset is None:
        return CelError(message)
    return CelError(message, *position(source, offset))
