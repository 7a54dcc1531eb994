"""Rewrites of a checked program before cel-cpp plans it, so it runs as Kubernetes runs it.

The checker sees Kubernetes' declarations; the runtime cannot always do what they
promise through a Python function (``scanner.cel.k8s.library``), and cel-cpp differs
from cel-go in a few places. Each rewrite replaces nodes of the checked tree
(``scanner.cel.checked``) by standard CEL or by a runtime helper (``@k8s.*``, names
no rule can write):

* ``format.named(n)`` and ``<Format>.validate(s)``: their Python result wrapped in
  ``optional.ofNonZeroValue`` (an unknown name gives ``{}``, a valid text ``[]``);
* ``==`` and ``!=`` between quantities: by value (``quantity.equals``);
* ``<duration>.getMilliseconds()``: the whole duration in thousandths of a second,
  as cel-go answers (cel-cpp gives only the part below a second);
* ``transformMap``/``transformMapEntry``: entries gathered as a list, made a map once
  at the end (cel-expr-python has no runtime for ``cel.@mapInsert``);
* every comprehension over a map visits the keys in sorted order (cel-cpp's maps
  iterate in an order that changes from run to run): the keys are read with a
  ``map`` comprehension, sorted, and iterated; a two-variable comprehension reads
  each value as ``m[k]``;
* ``sum()``, ``min()``, ``max()``: folds over the list in CEL, so their result keeps
  the element's type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from scanner.cel import checked as ck
from scanner.cel.checked import Message

_BYTES: Final = 2
_VARINT: Final = 0

OPTIONAL_RESULTS: Final = frozenset({"format-named", "format-validate"})
_FOLDS: Final = ("sum", "min", "max")


class Rewriter:
    """Rewrites one checked program in place."""

    def __init__(self, checked: ck.Checked) -> None:
        self.checked = checked
        self._names = 0

    def run(self) -> None:
        nodes = list(ck.walk(self.checked.root))
        for node in nodes:
            self._call(node)
        for node in nodes:
            self._map_insert(node)
        for node in nodes:
            number, _ = ck.kind(node)
            if number == ck.COMPREHENSION:
                self._ordered(node)
        for node in nodes:
            self._fold(node)

    # --- nodes ----------------------------------------------------------------------

    def _id(self) -> int:
        return self.checked.new_id()

    def _name(self, stem: str) -> str:
        self._names += 1
        return f"@{stem}{self._names}"

    def _call(self, node: Message) -> None:
        parts = ck.call_parts(node)
        if parts is None:
            return
        name, target, args = parts
        overloads = self.checked.overloads(node)
        if overloads and set(overloads) <= OPTIONAL_RESULTS:
            inner = Message("Expr", list(node.fields))
            ck.set_id(inner, self._id())
            self.checked.set_reference(ck.expr_id(inner), overloads)
            self.checked.set_reference(ck.expr_id(node), ["optional_ofNonZeroValue"])
            ck.replace_contents(node, call(ck.expr_id(node), "optional.ofNonZeroValue", [inner]))
        elif name in ("_==_", "_!=_") and any(
            ck.type_text(self.checked.types.get(ck.expr_id(arg))) == "kubernetes.Quantity"
            for arg in args
        ):
            self.checked.set_reference(ck.expr_id(node), [])
            if name == "_==_":
                equals = call(ck.expr_id(node), "@k8s.quantityEquals", list(args))
                ck.replace_contents(node, equals)
            else:
                equals = call(self._id(), "@k8s.quantityEquals", list(args))
                ck.replace_contents(node, call(ck.expr_id(node), "!_", [equals]))
        elif overloads == ["duration_to_milliseconds"] and target is not None:
            self.checked.set_reference(ck.expr_id(node), [])
            ck.replace_contents(node, call(ck.expr_id(node), "@k8s.durationMillis", [target]))

    # --- transformMap, transformMapEntry ---------------------------------------------

    def _map_insert(self, node: Message) -> None:
        number, body = ck.kind(node)
        if number != ck.COMPREHENSION:
            return
        accu = body.text(3)
        inserts = [
            found
            for found in _outside_comprehensions(body.get(6))
            if (parts := ck.call_parts(found)) is not None
            and parts[0] == "cel.@mapInsert"
            and parts[2]
            and ck.ident_name(parts[2][0]) == accu
        ]
        if not inserts:
            return
        pairs = False
        for insert in inserts:
            _, _, args = ck.call_parts(insert)  # type: ignore[misc]
            if len(args) == 3:  # (map, key, value): one [key, value] entry
                entry = list_of(self._id(), [list_of(self._id(), args[1:])])
                pairs = True
            else:  # (map, map): a map of entries
                entry = list_of(self._id(), args[1:])
            self.checked.set_reference(ck.expr_id(insert), ["add_list"])
            ck.replace_contents(insert, call(ck.expr_id(insert), "_+_", [args[0], entry]))
        body.set(4, list_of(self._id(), []))
        result = body.get(7)
        helper = "@k8s.pairsToMap" if pairs else "@k8s.mergeMaps"
        body.set(7, call(self._id(), helper, [result]))

    # --- deterministic map iteration ------------------------------------------------

    def _ordered(self, node: Message) -> None:
        number, body = ck.kind(node)
        if number != ck.COMPREHENSION:
            return
        iter_range = body.get(2)
        range_kind = _range_kind(self.checked, iter_range)
        two = bool(body.text(8))
        if range_kind == "list" or range_kind == "empty":
            return
        bound = self._name("r")
        keys = self._sorted_keys(bound)
        if two:
            key, value = body.text(1), body.text(8)
            indices = call(
                self._id(), "@k8s.indices", [call(self._id(), "size", [ident(self._id(), bound)])]
            )
            if range_kind == "map":
                new_range = keys
            else:
                new_range = conditional(
                    self._id(),
                    self._is_type(bound, "map"),
                    keys,
                    conditional(
                        self._id(), self._is_type(bound, "list"), indices, ident(self._id(), bound)
                    ),
                )
            value_of = call(self._id(), "_[_]", [ident(self._id(), bound), ident(self._id(), key)])
            body.set(6, bind(self._id, self._id(), value, value_of, body.get(6)))
            body.fields = [field for field in body.fields if field[0] != 8]
        elif range_kind == "map":
            new_range = keys
        else:
            new_range = conditional(
                self._id(), self._is_type(bound, "map"), keys, ident(self._id(), bound)
            )
        body.set(2, new_range)
        inner = Message("Expr", list(node.fields))
        ck.set_id(inner, self._id())
        ck.replace_contents(node, bind(self._id, ck.expr_id(node), bound, iter_range, inner))

    def _is_type(self, bound: str, kind: str) -> Message:
        actual = call(self._id(), "type", [ident(self._id(), bound)])
        return call(self._id(), "_==_", [actual, ident(self._id(), kind)])

    def _sorted_keys(self, bound: str) -> Message:
        """``@k8s.sortedKeys(<bound>.map(@k, @k))``."""
        item, keys = self._name("k"), self._name("keys")
        step = call(
            self._id(),
            "_+_",
            [ident(self._id(), keys), list_of(self._id(), [ident(self._id(), item)])],
        )
        extract = comprehension(
            self._id(),
            item,
            ident(self._id(), bound),
            keys,
            list_of(self._id(), []),
            bool_const(self._id(), True),
            step,
            ident(self._id(), keys),
        )
        return call(self._id(), "@k8s.sortedKeys", [extract])

    # --- sum, min, max -------------------------------------------------------------

    def _fold(self, node: Message) -> None:
        parts = ck.call_parts(node)
        if parts is None:
            return
        name, target, args = parts
        overloads = self.checked.overloads(node)
        if name not in _FOLDS or target is None or args or not overloads:
            return
        if not all(overload.startswith("list_") for overload in overloads):
            return
        bound, item, accu = self._name("l"), self._name("e"), self._name("a")
        nothing = call(self._id(), "@k8s.none", [])
        if name == "sum":
            step_value = call(self._id(), "_+_", [ident(self._id(), accu), ident(self._id(), item)])
        else:
            better = "_<_" if name == "min" else "_>_"
            step_value = conditional(
                self._id(),
                call(self._id(), better, [ident(self._id(), item), ident(self._id(), accu)]),
                ident(self._id(), item),
                ident(self._id(), accu),
            )
        is_first = call(self._id(), "_==_", [ident(self._id(), accu), nothing])
        step = conditional(self._id(), is_first, ident(self._id(), item), step_value)
        if name == "sum":
            empty = self._zero(overloads)
        else:
            message = f"{name} called on empty list"
            empty = call(self._id(), "@k8s.fail", [string_const(self._id(), message)])
        result = conditional(
            self._id(),
            call(self._id(), "_==_", [ident(self._id(), accu), call(self._id(), "@k8s.none", [])]),
            empty,
            ident(self._id(), accu),
        )
        fold = comprehension(
            self._id(),
            item,
            ident(self._id(), bound),
            accu,
            call(self._id(), "@k8s.none", []),
            bool_const(self._id(), True),
            step,
            result,
        )
        guarded = conditional(
            self._id(),
            self._is_type(bound, "list"),
            fold,
            call(
                self._id(),
                "@k8s.fail",
                [string_const(self._id(), f"found no matching overload for '{name}'")],
            ),
        )
        self.checked.set_reference(ck.expr_id(node), [])
        ck.replace_contents(node, bind(self._id, ck.expr_id(node), bound, target, guarded))

    def _zero(self, overloads: list[str]) -> Message:
        """The sum of an empty list: the zero of the one element type, else ``0``."""
        if overloads == ["list_uint_sum_uint"]:
            return call(self._id(), "uint", [int_const(self._id(), 0)])
        if overloads == ["list_double_sum_double"]:
            return call(self._id(), "double", [int_const(self._id(), 0)])
        if overloads == ["list_duration_sum_duration"]:
            return call(self._id(), "duration", [string_const(self._id(), "0s")])
        return int_const(self._id(), 0)


def _outside_comprehensions(expr: Message | None) -> list[Message]:
    """The nodes of ``expr`` that are not inside a comprehension of their own."""
    if expr is None:
        return []
    found, stack = [], [expr]
    while stack:
        node = stack.pop()
        found.append(node)
        number, _ = ck.kind(node)
        if number != ck.COMPREHENSION:
            stack.extend(ck.children(node))
    return found


def _range_kind(checked: ck.Checked, iter_range: Message | None) -> str:
    """``list``, ``map``, ``empty`` (a ``[]`` literal, as ``cel.bind`` makes) or ``dyn``."""
    if iter_range is None:
        return "empty"
    number, body = ck.kind(iter_range)
    if number == ck.LIST:
        return "list"
    if number == ck.STRUCT and not body.get(1):
        return "map"
    found = checked.types.get(ck.expr_id(iter_range))
    text = ck.type_text(found)
    if text.startswith("list("):
        return "list"
    if text.startswith("map("):
        return "map"
    return "dyn"


# --- node constructors -----------------------------------------------------------------


def call(node_id: int, function: str, args: list[Message]) -> Message:
    return ck.new_call(node_id, function, args)


def ident(node_id: int, name: str) -> Message:
    return ck.new_ident(node_id, name)


def conditional(node_id: int, test: Message, then: Message, otherwise: Message) -> Message:
    return call(node_id, "_?_:_", [test, then, otherwise])


def list_of(node_id: int, items: list[Message]) -> Message:
    body = Message("CreateList", [[1, _BYTES, item] for item in items])
    return Message("Expr", [[2, _VARINT, node_id], [ck.LIST, _BYTES, body]])


def _const(node_id: int, field: list[object]) -> Message:
    return Message(
        "Expr", [[2, _VARINT, node_id], [ck.CONST, _BYTES, Message("Constant", [field])]]
    )


def bool_const(node_id: int, value: bool) -> Message:
    return _const(node_id, [2, _VARINT, int(value)])


def int_const(node_id: int, value: int) -> Message:
    return _const(node_id, [3, _VARINT, value])


def string_const(node_id: int, value: str) -> Message:
    return _const(node_id, [6, _BYTES, value.encode("utf-8")])


def comprehension(
    node_id: int,
    iter_var: str,
    iter_range: Message,
    accu_var: str,
    accu_init: Message,
    condition: Message,
    step: Message,
    result: Message,
) -> Message:
    body = Message(
        "Comprehension",
        [
            [1, _BYTES, iter_var.encode()],
            [2, _BYTES, iter_range],
            [3, _BYTES, accu_var.encode()],
            [4, _BYTES, accu_init],
            [5, _BYTES, condition],
            [6, _BYTES, step],
            [7, _BYTES, result],
        ],
    )
    return Message("Expr", [[2, _VARINT, node_id], [ck.COMPREHENSION, _BYTES, body]])


def bind(ids: Callable[[], int], node_id: int, name: str, init: Message, body: Message) -> Message:
    """``cel.bind(name, init, body)`` as cel-cpp expands it: a comprehension over ``[]``
    whose accumulator is the bound name (no iterations)."""
    return comprehension(
        node_id,
        "#unused",
        list_of(ids(), []),
        name,
        init,
        bool_const(ids(), False),
        ident(ids(), name),
        body,
    )
