"""The checks the API server runs on a CEL program's literals when it compiles
(``cel.ASTValidators`` in ``environment/base.go``, and the regex libraries' program
options), run on cel-cpp's checked program:

* a constant pattern of ``matches``, ``find`` or ``findAll`` must be a valid RE2
  regular expression;
* a constant argument of ``duration()`` or ``timestamp()`` must convert;
* a list literal's elements, and a map literal's keys and its values, must share one
  type (``dyn`` matches anything): ``[1, 'a']`` does not compile.

A failed check is a compile error at the literal, so the rule refuses to load.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scanner.cel import checked as ck
from scanner.cel.k8s.library import KubernetesError
from scanner.cel.k8s.regex import compiled

_PATTERNS = {"matches": "invalid matches argument", "find": "", "findAll": ""}
_EXEMPT = frozenset({"format"})
"""Functions whose literal arguments may mix types (``'%s %d'.format(['a', 1])``)."""


def check(checked: ck.Checked, source: str, convert: Callable[[str, str], str | None]) -> None:
    """Raise ``CelError`` at the first literal Kubernetes would refuse. ``convert(function,
    text)``: the error of ``duration(text)``/``timestamp(text)``, or None."""
    exempt: set[int] = set()
    for node in ck.walk(checked.root):
        number, body = ck.kind(node)
        if number == ck.CALL:
            _check_call(checked, source, node, convert)
            if body.text(2) in _EXEMPT:  # as cel-go's strings extension exempts them
                exempt.update(id(arg) for arg in body.all(3))
        elif number == ck.LIST and id(node) not in exempt:
            _check_list(checked, source, body)
        elif number == ck.STRUCT and not body.get(1):
            _check_map(checked, source, body)


def _check_call(
    checked: ck.Checked, source: str, node: ck.Message, convert: Callable[[str, str], str | None]
) -> None:
    parts = ck.call_parts(node)
    if parts is None:
        return
    name, target, args = parts
    if name in _PATTERNS:
        operands = ([target] if target is not None else []) + args
        if len(operands) >= 2:
            pattern = ck.string_constant(operands[1])
            if pattern is not None:
                try:
                    compiled(pattern)
                except KubernetesError as error:
                    message = _PATTERNS[name] or str(error).removeprefix("Illegal regex: ")
                    raise ck.error_at(checked, source, operands[1], message) from None
    elif name in ("duration", "timestamp") and target is None and len(args) == 1:
        text = ck.string_constant(args[0])
        if text is not None and convert(name, text) is not None:
            raise ck.error_at(checked, source, args[0], f"invalid {name} argument")


def _element_type(checked: ck.Checked, node: ck.Message, optional: bool) -> Any:
    """The type an element adds to its literal (an optional entry's, unwrapped)."""
    found = checked.types.get(ck.expr_id(node))
    if optional and found is not None and found.fields and found.fields[0][0] == 14:
        parameters = found.fields[0][2].all(2)
        return parameters[0] if parameters else None
    return found


def _homogeneous(checked: ck.Checked, source: str, items: list[tuple[ck.Message, bool]]) -> None:
    first = None
    for node, optional in items:
        kind = _element_type(checked, node, optional)
        if kind is None or ck.type_text(kind) == "dyn":
            continue
        if first is None:
            first = kind
        elif not ck.assignable(first, kind):
            raise ck.error_at(
                checked,
                source,
                node,
                f"expected type '{ck.type_text(first)}' but found '{ck.type_text(kind)}'",
            )


def _check_list(checked: ck.Checked, source: str, body: ck.Message) -> None:
    optional = set(_packed(body.all(2)))
    elements = body.all(1)
    _homogeneous(
        checked, source, [(item, index in optional) for index, item in enumerate(elements)]
    )


def _check_map(checked: ck.Checked, source: str, body: ck.Message) -> None:
    entries = body.all(2)
    keys = [(entry.get(3), False) for entry in entries if entry.get(3) is not None]
    values = [(entry.get(4), bool(entry.get(5))) for entry in entries if entry.get(4) is not None]
    _homogeneous(checked, source, keys)
    _homogeneous(checked, source, values)


def _packed(values: list[Any]) -> list[int]:
    """``optional_indices``: packed varints (or single varints)."""
    out: list[int] = []
    for value in values:
        if isinstance(value, int):
            out.append(value)
            continue
        offset = 0
        while offset < len(value):
            result = shift = 0
            while True:
                byte = value[offset]
                offset += 1
                result |= (byte & 0x7F) << shift
                shift += 7
                if not byte & 0x80:
                    break
            out.append(result)
    return out
