"""Which facts of ``workload`` a rule reads: whether it can run on a controlled
workload before the rest of its facts exist, and which fields its activation needs.

A controlled workload (``scanner.model.workloads``) waits with its instance facts
(``INSTANCE_FACTS``) until a rule needs the rest. A rule *reads instance facts only*
when its expressions never read any other fact of ``workload``:

* every ``workload`` they name (``.workload`` too) is followed by a field
  (``workload.gpu``), never used whole (``size(workload)``, ``"targets" in
  workload``, ``workload.all(...)``, ``workload[key]``), and that field is an
  instance fact;
* except in the ``else`` branch of a conditional on ``workload.controlled`` alone
  (``(workload.controlled ? [] : workload.targets)``): a deferred workload is
  controlled, so that branch is never evaluated on one.

Such a rule reads exactly the same values from the instance facts as from the
complete ones, so it gives the same answer, errors and cost included, and runs
without completing the workload. Every other rule completes it first, and so does a
rule this reading cannot follow (raw, bytes or triple-quoted strings, or ``//``
comments). Only reads that cannot happen are exempt: a rule that might read a
deferred fact is never run on the partial facts, because CEL can turn the failure of
such a read into an answer (``||``, ``&&`` and ``exists`` drop an error where the
other operands decide, and the complete facts could decide differently, or run
into the cost limit instead).

The same reading lists what a rule may read at all (``projection``, which the engine
uses): the fields of ``workload`` it names (``workload_fields``) and, of a field whose
value it reads only at keys it names (``workload.ns.platform``, ``"nodeSelector" in
workload.podSpec``), those keys. The engine converts into CEL only those fields and
keys of the subject's facts that the rules it runs on the subject name, since
cel-expr-python converts a variable whole the first time an expression reads it.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from typing import Final

from scanner.guards import strip_strings
from scanner.model.workloads import INSTANCE_FACTS

_WORKLOAD: Final = re.compile(r"(?<!\w)workload\b")
"""Also after a dot: ``.workload`` is the global variable too (and a field of that name
elsewhere is only counted once too often)."""
FIELD: Final = re.compile(r"\s*\.\s*([A-Za-z_]\w*)(\s*\()?")
"""A field read after a name (``.gpu``); group 2 set when it is a call (a macro)."""
_ON_CONTROLLED: Final = re.compile(r"(?<![\w.])workload\s*\.\s*controlled\s*\?")
_UNREADABLE: Final = re.compile(r"\"\"\"|'''|(?<![\w.'\"])[rRbB]{1,2}[\"']")
_OPEN: Final = "([{"
_CLOSE: Final = ")]}"
_CONDITION_START: Final = "([{,?:"
"""What may come right before a conditional's condition that is ``workload.controlled``
alone (any operator there would make it part of a larger condition)."""


def reads_instance_facts_only(sources: Iterable[str]) -> bool:
    """Whether the expressions ``sources`` (all of one rule's) read ``workload`` only
    as the module docstring allows."""
    for source in sources:
        text = readable(source)
        if text is None:
            return False
        skipped = _never_evaluated(text)
        for match in _WORKLOAD.finditer(text):
            field = FIELD.match(text, match.end())
            if field is None or field.group(2) is not None:
                return False  # whole, indexed, or a macro over its keys
            if field.group(1) not in INSTANCE_FACTS and not any(
                start <= match.start() < end for start, end in skipped
            ):
                return False
    return True


def workload_fields(sources: Iterable[str], *, controlled: bool = False) -> frozenset[str] | None:
    """The fields of ``workload`` the expressions ``sources`` may read (every
    ``workload.<field>`` they name, in any branch), or None when they may read it whole
    or cannot be followed (the cases listed in the module docstring). ``controlled``:
    on a workload whose ``controlled`` is true, where the ``else`` branch of a
    conditional on ``workload.controlled`` alone never runs, so what only that branch
    names is never read (a controlled pod skips its controller's pool checks).

    An activation whose ``workload`` holds only these fields gives such expressions the
    same values, errors and costs as the whole facts (scanner/engine.py): a field they
    name is there or missing in both, and nothing else is read. (Converting the fields
    left out could not have failed either: the readers keep every value within what
    CEL represents, scanner/sources/numbers.py.)
    """
    found = projection(sources, controlled=controlled)
    return None if found is None else frozenset(found)


Projection = dict[str, frozenset[str] | None]
"""Field of ``workload`` -> the keys of its value that may be read, None for all."""


def projection(sources: Iterable[str], *, controlled: bool = False) -> Projection | None:
    """``workload_fields`` one level deeper: for each field, the keys of its value the
    expressions may read, when every read of it is ``workload.<field>.<key>`` (``has()``
    too) or ``"<key>" in workload.<field>``; None for a field read any other way
    (whole, a macro, an index, ``size()``). A field holding a map may then be given
    with only those keys: a key they name is there or missing in both, and an ``in``
    test of a named key answers the same (``"nodeSelector" in workload.podSpec``)."""
    fields: dict[str, set[str] | None] = {}
    for source in sources:
        text = readable(source)
        if text is None:
            return None
        literals = [match.group() for match in _LITERAL.finditer(source)]
        emptied = [match.start() for match in _EMPTIED.finditer(text)]
        skipped = _never_evaluated(text) if controlled else []
        for match in _WORKLOAD.finditer(text):
            if any(start <= match.start() < end for start, end in skipped):
                continue
            field = FIELD.match(text, match.end())
            if field is None or field.group(2) is not None:
                return None
            name = field.group(1)
            key = _key_read(text, match.start(), field.end(), literals, emptied)
            known = fields.get(name, set())
            if key is None or known is None:
                fields[name] = None
            else:
                fields[name] = known | {key}
    return {name: None if keys is None else frozenset(keys) for name, keys in fields.items()}


_LITERAL: Final = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'")
"""A plain string literal, as ``guards.strip_strings`` empties them (in order)."""
_EMPTIED: Final = re.compile(r'""')
_IN_BEFORE: Final = re.compile(r'""\s+in\s+$')
_OPERAND_START: Final = ("(", "[", "{", ",", "?", ":", "&&", "||")
"""What may come right before ``"<key>" in``'s literal for it to be the whole left
operand (``+``, a relation or ``!`` would bind to it first)."""
_LOOSER: Final = frozenset(")]},?:&|=!<>")
"""What may follow ``"<key>" in workload.<field>`` without taking part in its right
operand (``+``, ``.``, ``[`` would)."""


def _key_read(
    text: str, start: int, end: int, literals: list[str], emptied: list[int]
) -> str | None:
    """The one key of ``workload.<field>`` that the read from ``start`` to ``end`` in
    ``text`` (literals emptied) looks at, or None when it may look at any."""
    nested = FIELD.match(text, end)
    if nested is not None:
        return None if nested.group(2) is not None else nested.group(1)
    after = text[end:].lstrip()
    if after and after[0] not in _LOOSER:
        return None
    before = _IN_BEFORE.search(text, 0, start)
    if before is None:
        return None
    ahead = text[: before.start()].rstrip()
    if ahead and not ahead.endswith(_OPERAND_START):
        return None
    position = bisect_left(emptied, before.start())
    if position >= len(literals) or position >= len(emptied) or emptied[position] != before.start():
        return None
    literal = literals[position]
    if "\\" in literal:
        return None  # an escape: not worth decoding here
    return literal[1:-1]


def readable(source: str) -> str | None:
    """``source`` with its string literals emptied, or None when this reading cannot
    follow it (raw, bytes or triple-quoted strings, ``//`` comments)."""
    if _UNREADABLE.search(source):
        return None
    text = strip_strings(source)
    return None if "//" in text else text


def _never_evaluated(text: str) -> list[tuple[int, int]]:
    """The ``else`` branches of conditionals on ``workload.controlled`` alone, as
    (start, end) offsets into ``text``."""
    branches = []
    for match in _ON_CONTROLLED.finditer(text):
        before = text[: match.start()].rstrip()
        if before and before[-1] not in _CONDITION_START:
            continue
        start = _else_start(text, match.end())
        if start is not None:
            branches.append((start, _branch_end(text, start)))
    return branches


def _else_start(text: str, index: int) -> int | None:
    """Just after the ``:`` that ends the ``then`` branch starting at ``index``."""
    pending = 0
    for position, char in _top_level(text, index):
        if char in _CLOSE:
            return None
        if char == "?":
            pending += 1  # a conditional nested in the then branch
        elif char == ":":
            if pending == 0:
                return position + 1
            pending -= 1
    return None


def _branch_end(text: str, index: int) -> int:
    """Where the ``else`` branch starting at ``index`` ends: the conditional binds
    loosest, so at the bracket, comma or map-key colon that closes what encloses it
    (a ``:`` answering a ``?`` inside the branch belongs to the branch), or the end."""
    pending = 0
    for position, char in _top_level(text, index):
        if char in _CLOSE or char == ",":
            return position
        if char == "?":
            pending += 1
        elif char == ":":
            if pending == 0:
                return position  # {cond ? a : b : value}: the value always runs
            pending -= 1
    return len(text)


def _top_level(text: str, index: int) -> Iterator[tuple[int, str]]:
    """(offset, character) of what lies outside brackets from ``index`` on, up to and
    including the bracket that closes one opened before ``index``."""
    depth = 0
    for position in range(index, len(text)):
        char = text[position]
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            if depth == 0:
                yield position, char
                return
            depth -= 1
        elif depth == 0:
            yield position, char
