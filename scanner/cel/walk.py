"""Follows values through a CEL syntax tree: which parts of which variables evaluating
an expression reads (``Walk``), how deep its comprehensions nest (``nesting``), and
what each top-level conjunct is (``conjunct``).

``scanner.cel.analysis`` states what a read is and how a rule's reads add up; this
module is its walk. It recognises the macros and the functions whose result is made
of their arguments; every other call reads its target and arguments whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from scanner.cel.analysis import (
    ANY,
    ITERATED,
    MACROS,
    NOTHING,
    REACHED,
    WHOLE,
    Conjunct,
    Flow,
    Origin,
    PathTest,
    Read,
)
from scanner.cel.syntax import (
    Binary,
    Call,
    Conditional,
    CreateList,
    CreateMap,
    CreateMessage,
    Ident,
    Index,
    Literal,
    Logical,
    Node,
    Select,
    Unary,
)

_TWO_VARIABLES: Final = frozenset({"transformList", "transformMap", "transformMapEntry"})
_ONE_OR_TWO: Final = frozenset({"all", "exists", "exists_one", "existsOne"})
_TRANSPARENT: Final = frozenset({"value", "orValue", "or"})
"""Methods of optional values whose result is made of their target and arguments."""
_OPTIONAL_BINDS: Final = frozenset({"optMap", "optFlatMap"})
"""Macros of optional values: ``o.optMap(x, e)`` binds ``x`` to ``o``'s value, as
``cel.bind`` does, and its result is made of ``e``."""


class Walk:
    """Follows values through one tree, collecting reads (module docstring)."""

    def __init__(self) -> None:
        self.reads: set[Read] = set()
        self.roots: set[str] = set()
        self.names: set[str] = set()
        self.compared: set[tuple[str, tuple[str, ...], str]] = set()
        self.refs = False

    def use(self, flow: Flow, how: str = WHOLE) -> None:
        for origin in flow:
            self.reads.add(Read(origin.root, origin.path, how, origin.unless_controlled))

    def value(self, node: Node, scope: Mapping[str, Flow], skipped: bool) -> Flow:
        """What ``node``'s value is made of; ``scope``: comprehension variables;
        ``skipped``: inside an ``else`` branch on ``workload.controlled``."""
        if isinstance(node, Ident):
            if not node.leading_dot and node.name in scope:
                flow = scope[node.name]
                return (
                    frozenset(o._replace(unless_controlled=True) for o in flow) if skipped else flow
                )
            self.roots.add(node.name)
            return frozenset({Origin(node.name, (), skipped)})
        if isinstance(node, Select):
            self.names.add(node.field)
            return extend(self.value(node.operand, scope, skipped), node.field)
        if isinstance(node, Index):
            base = self.value(node.operand, scope, skipped)
            index = node.index
            if isinstance(index, Literal) and index.kind == "string":
                self.names.add(str(index.value))
                return extend(base, str(index.value))
            self.use(self.value(index, scope, skipped))
            return extend(base, ANY)
        if isinstance(node, Call):
            return self.call(node, scope, skipped)
        if isinstance(node, Conditional):
            self.use(self.value(node.condition, scope, skipped))
            then = self.value(node.then, scope, skipped)
            on_controlled = _is_controlled(node.condition, scope)
            return then | self.value(node.otherwise, scope, skipped or on_controlled)
        if isinstance(node, Literal):
            if node.kind == "string":
                self.names.add(str(node.value))
            return NOTHING
        if isinstance(node, Binary):
            self.binary(node, scope, skipped)
            return NOTHING
        if isinstance(node, CreateMap | CreateMessage):
            for entry in node.entries:
                if isinstance(node, CreateMessage):
                    self.names.add(str(entry.key.value))  # type: ignore[union-attr]
                else:
                    self.refs = self.refs or _is_ref_key(entry.key)
                    self.use(self.value(entry.key, scope, skipped))
                self.use(self.value(entry.value, scope, skipped))
            return NOTHING
        for child in children(node):
            self.use(self.value(child, scope, skipped))
        return NOTHING

    def binary(self, node: Binary, scope: Mapping[str, Flow], skipped: bool) -> None:
        left, right = node.left, node.right
        if node.operator == "in" and isinstance(left, Literal) and left.kind == "string":
            self.names.add(str(left.value))
            self.use(extend(self.value(right, scope, skipped), str(left.value)))
            return
        if node.operator == "==":
            for path, other in ((left, right), (right, left)):
                found = plain_path(path, scope)
                if found is not None and isinstance(other, Literal) and other.kind == "string":
                    self.compared.add((*found, str(other.value)))
        elif node.operator == "in" and isinstance(right, CreateList):
            found = plain_path(left, scope)
            for element in right.elements:
                if found is not None and isinstance(element, Literal) and element.kind == "string":
                    self.compared.add((*found, str(element.value)))
        self.use(self.value(left, scope, skipped))
        self.use(self.value(right, scope, skipped))

    def call(self, node: Call, scope: Mapping[str, Flow], skipped: bool) -> Flow:
        target, function, args = node.target, node.function, node.args
        if target is None:
            if function == "dyn" and len(args) == 1:
                return self.value(args[0], scope, skipped)
            for arg in args:  # has(a.b) reads a.b: a key test, and whole is no less
                self.use(self.value(arg, scope, skipped))
            return NOTHING
        variables = _bound_names(node)
        if variables is not None:
            return self.comprehension(node, variables, scope, skipped)
        namespace = target.name if isinstance(target, Ident) and target.name not in scope else ""
        if namespace == "cel" and function == "bind" and len(args) == 3:
            name = args[0]
            if isinstance(name, Ident) and not name.leading_dot:
                bound = self.value(args[1], scope, skipped)
                self.use(bound, REACHED)  # evaluated, used or not
                return self.value(args[2], {**scope, name.name: bound}, skipped)
        if namespace == "optional":  # optional.of(x), optional.none(): functions
            if function == "of" and len(args) == 1:
                return self.value(args[0], scope, skipped)
            for arg in args:
                self.use(self.value(arg, scope, skipped))
            return NOTHING
        if function in _OPTIONAL_BINDS and len(args) == 2:
            name = args[0]
            if isinstance(name, Ident) and not name.leading_dot:
                bound = self.value(target, scope, skipped)
                self.use(bound, REACHED)  # tested for a value
                return self.value(args[1], {**scope, name.name: bound}, skipped)
        flow = self.value(target, scope, skipped)
        if function in _TRANSPARENT:
            for arg in args:
                flow = flow | self.value(arg, scope, skipped)
            return flow
        self.use(flow)
        for arg in args:
            self.use(self.value(arg, scope, skipped))
        return NOTHING

    def comprehension(
        self, node: Call, variables: tuple[str, ...], scope: Mapping[str, Flow], skipped: bool
    ) -> Flow:
        assert node.target is not None
        iterated = self.value(node.target, scope, skipped)
        self.use(iterated, ITERATED)
        element = extend(iterated, ANY)
        inner = dict(scope)
        if len(variables) == 2:
            inner[variables[0]] = NOTHING  # an index, or a key: part of what is iterated
        inner[variables[-1]] = element
        for arg in node.args[len(variables) :]:
            self.use(self.value(arg, inner, skipped))
        return iterated if node.function == "filter" else NOTHING


def _skipped(flow: Flow) -> Flow:
    return frozenset(origin._replace(unless_controlled=True) for origin in flow)


def extend(flow: Flow, step: str | None) -> Flow:
    return frozenset(Origin(o.root, (*o.path, step), o.unless_controlled) for o in flow)


def children(node: Node) -> Iterable[Node]:
    if isinstance(node, Unary):
        return (node.operand,)
    if isinstance(node, Logical):
        return node.operands
    if isinstance(node, CreateList):
        return node.elements
    if isinstance(node, CreateMap | CreateMessage):
        return [part for entry in node.entries for part in (entry.key, entry.value)]
    return ()


def _is_ref_key(node: Node) -> bool:
    return isinstance(node, Literal) and node.kind == "string" and node.value == "ref"


def _bound_names(node: Call) -> tuple[str, ...] | None:
    """The variable names a comprehension macro call binds, or None for another call."""
    function, args = node.function, node.args
    names = []
    for arg in args[:2]:
        if not isinstance(arg, Ident) or arg.leading_dot:
            break
        names.append(arg.name)
    if function in _TWO_VARIABLES and len(args) in (3, 4) and len(names) == 2:
        return tuple(names)
    if function in _ONE_OR_TWO and len(args) == 3 and len(names) == 2:
        return tuple(names)
    if function in _ONE_OR_TWO | {"filter"} and len(args) == 2 and names:
        return (names[0],)
    if function == "map" and len(args) in (2, 3) and names:
        return (names[0],)
    return None


def _is_controlled(node: Node, scope: Mapping[str, Flow]) -> bool:
    """``workload.controlled`` alone, on the variable (not a comprehension variable)."""
    return (
        isinstance(node, Select)
        and not node.optional
        and node.field == "controlled"
        and plain_path(node.operand, scope) == ("workload", ())
    )


def plain_path(node: Node, scope: Mapping[str, Flow]) -> tuple[str, tuple[str, ...]] | None:
    """(variable, fields) of ``variable.a.b`` (plain selections only), else None."""
    fields: list[str] = []
    while isinstance(node, Select) and not node.optional:
        fields.append(node.field)
        node = node.operand
    if not isinstance(node, Ident) or (node.name in scope and not node.leading_dot):
        return None
    return node.name, tuple(reversed(fields))


def nesting(node: Node, depth: int) -> tuple[int, int]:
    """(deepest comprehension nesting, offset of the first macro that deep; -1 for none)
    in ``node`` at ``depth``: a macro's arguments are one level deeper, its range is not."""
    best = (0, -1)
    inner = depth
    if isinstance(node, Call) and node.target is not None and node.function in MACROS:
        inner = depth + 1
        best = (inner, node.name_start)
    for child, level in _nested_children(node, depth, inner):
        found = nesting(child, level)
        if found[0] > best[0] or (found[0] == best[0] > 0 and found[1] < best[1]):
            best = found
    return best


def _nested_children(node: Node, depth: int, inner: int) -> list[tuple[Node, int]]:
    if isinstance(node, Call):
        ranges = [] if node.target is None else [(node.target, depth)]
        return ranges + [(arg, inner) for arg in node.args]
    if isinstance(node, Select):
        return [(node.operand, depth)]
    if isinstance(node, Index):
        return [(node.operand, depth), (node.index, depth)]
    if isinstance(node, Binary):
        return [(node.left, depth), (node.right, depth)]
    if isinstance(node, Conditional):
        return [(node.condition, depth), (node.then, depth), (node.otherwise, depth)]
    return [(child, depth) for child in children(node)]


def nodes(node: Node) -> Iterable[Node]:
    """``node`` and every node below it."""
    stack = [node]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(child for child, _ in _nested_children(node, 0, 0))


def conjunct(source: str, node: Node, whole: Walk | None = None, depth: int = 0) -> Conjunct:
    """What ``node``, an operand of the top-level ``&&`` of ``source``, is; ``whole``
    and ``depth``: the walk and nesting of ``node`` when it is the whole expression."""
    alternatives: tuple[PathTest | None, ...] = ()
    if isinstance(node, Logical) and node.operator == "||":
        alternatives = tuple(_test(operand) for operand in node.operands)
    if whole is None:
        whole = Walk()
        whole.value(node, {}, False)
        depth = nesting(node, 0)[0]
    return Conjunct(
        source=source[node.start : node.end],
        test=_test(node),
        alternatives=alternatives,
        roots=frozenset(whole.roots),
        iterates=depth > 0,
        builds_map=any(isinstance(part, CreateMap | CreateMessage) for part in nodes(node)),
    )


def _test(node: Node) -> PathTest | None:
    """The simple test ``node`` is (see ``Test``), or None."""
    negated = isinstance(node, Unary) and node.operator == "!"
    if isinstance(node, Unary) and negated:
        node = node.operand
    found = plain_path(node, {})
    if found is not None and found[1]:
        return PathTest("flag", found[0], found[1], negated)
    if negated or not isinstance(node, Binary):
        return None
    left = plain_path(node.left, {})
    if left is None or not left[1]:
        return None
    right = node.right
    if node.operator == "==" and isinstance(right, Literal) and right.kind == "string":
        return PathTest("equals", left[0], left[1], text=str(right.value))
    values = plain_path(right, {})
    if node.operator == "in" and values is not None and values[0] == "config" and values[1]:
        return PathTest("member", left[0], left[1], values=values[1])
    return None
