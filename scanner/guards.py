"""Match conditions decided false in Python before any CEL runs (cheap matching first).

Most conditions begin with a plain flag of the subject (``workload.gpu && ...``,
``node.gpu && ...``) or with switches of the run (``config.require.runtimeClass !=
""``). Evaluating them in CEL converts the subject into CEL values first (tens of
microseconds for a pod), only to learn that a non-GPU pod is out of scope for a
dozen GPU rules. A guard reads the same facts in Python instead.

A condition is split at its top-level ``&&``. Two kinds of conjunct become guards:

* a **flag**: ``[!]<subject variable>.<field>[.<field>...]`` whose value is a bool
  in the subject's variables;
* a **constant**: a conjunct that reads only ``config``, ``cluster`` or ``params``,
  evaluated once per run.

A guard only ever answers "false": CEL's ``&&`` is false when any operand is false,
whatever the others (even an error), so a rule whose guard is false does not match,
exactly as the whole condition would have decided. Anything else (a flag that is
not a bool, a missing field, a constant that fails or reads something else) leaves
the decision to the CEL condition, which still runs in full when no guard is false.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence, Sized
from dataclasses import dataclass
from typing import Any, Final

from scanner import bindings
from scanner.bindings import BIND_FROM
from scanner.cel import Engine, ResultKind
from scanner.errors import CelError, CelEvalError
from scanner.rules import Rule

ENGINES: Final = bindings.ENGINES
"""Engines whose activations convert values on first read: guards pay there."""

SUBJECT_VARIABLES: Final = frozenset({"workload", "node", "pool", "sharingConfig", "ns"})
RUN_VARIABLES: Final = frozenset({"config", "cluster", "params"})

_FLAG = re.compile(r"(!?)\s*([A-Za-z_]\w*)((?:\s*\.\s*[A-Za-z_]\w*)+)")
_IDENTIFIER = re.compile(r"(?<![\w.])([A-Za-z_]\w*)(\s*\()?")
_LITERAL_WORDS: Final = frozenset({"true", "false", "null", "in"})


@dataclass(frozen=True, slots=True)
class Flag:
    """A conjunct ``[!]variable.a.b``: false when the bool found there says so."""

    variable: str
    fields: tuple[str, ...]
    negated: bool

    def is_false(self, variables: Mapping[str, Any]) -> bool:
        value: Any = variables.get(self.variable)
        for name in self.fields:
            if value.__class__ is not dict:
                return False  # not decided here
            value = value.get(name)
        if value.__class__ is not bool:
            return False
        return value is self.negated


@dataclass(frozen=True, slots=True)
class Guard:
    """What Python decides about one rule's condition."""

    never: bool
    """A constant conjunct is false: the rule matches nothing in this run."""
    flags: tuple[Flag, ...]
    any_of: tuple[tuple[Flag, ...], ...] = ()
    """Conjuncts ``(flag || flag ...)``: false when every one of their flags is."""

    def rejects(self, variables: Mapping[str, Any]) -> bool:
        return (
            self.never
            or any(flag.is_false(variables) for flag in self.flags)
            or any(all(flag.is_false(variables) for flag in flags) for flags in self.any_of)
        )


def conjuncts(source: str) -> list[str] | None:
    """``source`` split at its top-level ``&&``, or None when it cannot be split safely
    (a top-level ``||`` or ``?:``, a comment, an unterminated, raw or triple-quoted
    string)."""
    return _split(source, "&&")


def disjuncts(source: str) -> list[str] | None:
    """``source`` (a conjunct, outer parentheses allowed) split at its top-level ``||``."""
    text = source.strip()
    if _enclosed(text):
        text = text[1:-1]
    return _split(text, "||")


def _enclosed(text: str) -> bool:
    """``(...)`` as one group: ``(a) && (b)`` is not (strings are checked by ``_split``)."""
    if not (text.startswith("(") and text.endswith(")")):
        return False
    depth = 0
    for index, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        if depth == 0:
            return index == len(text) - 1
    return False


def _split(source: str, operator: str) -> list[str] | None:
    parts: list[str] = []
    depth = 0
    start = 0
    index = 0
    length = len(source)
    while index < length:
        char = source[index]
        if char in "\"'":
            if source.startswith(char * 3, index) or source[index - 1 : index] in ("r", "R"):
                return None  # triple-quoted and raw strings are left to CEL
            index += 1
            while index < length and source[index] != char:
                if source[index] == "\n":
                    return None
                index += 2 if source[index] == "\\" else 1
            if index >= length:
                return None
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth < 0:
                return None
        elif source.startswith("//", index) or (
            depth == 0 and (char == "?" or (operator == "&&" and source.startswith("||", index)))
        ):
            return None  # a comment, a conditional, or an || binding looser than &&
        elif depth == 0 and source.startswith(operator, index):
            parts.append(source[start:index].strip())
            start = index + 2
            index += 1
        index += 1
    parts.append(source[start:].strip())
    return parts if all(parts) and depth == 0 else None


def _strip_strings(text: str) -> str:
    return re.sub(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'", '""', text)


def _reads_only_run_values(conjunct: str) -> bool:
    roots = {
        match.group(1)
        for match in _IDENTIFIER.finditer(_strip_strings(conjunct))
        if match.group(2) is None  # a function call is not a variable
    }
    return bool(roots & RUN_VARIABLES) and roots <= RUN_VARIABLES | _LITERAL_WORDS


def build(
    source: str, engine: Engine, run_values: Mapping[str, Any], params: Mapping[str, Any]
) -> Guard | None:
    """The guard of one condition, or None when no conjunct can be decided in Python.

    ``run_values`` are the variables fixed for the whole run (``config``, ``cluster``).
    """
    parts = conjuncts(source)
    if parts is None or len(parts) < 1:
        return None
    flags: list[Flag] = []
    any_of: list[tuple[Flag, ...]] = []
    never = False
    for part in parts:
        flag = _flag(part)
        if flag is not None:
            flags.append(flag)
        elif _reads_only_run_values(part):
            never = never or _constant_false(part, engine, run_values, params)
        elif (alternatives := disjuncts(part)) is not None and len(alternatives) > 1:
            either = [_flag(alternative) for alternative in alternatives]
            if all(either):
                any_of.append(tuple(flag for flag in either if flag is not None))
    if not never and not flags and not any_of:
        return None
    return Guard(never, tuple(flags), tuple(any_of))


def _flag(text: str) -> Flag | None:
    found = _FLAG.fullmatch(text.strip())
    if found is None or found.group(2) not in SUBJECT_VARIABLES:
        return None
    fields = tuple(name.strip() for name in found.group(3).split(".")[1:])
    return Flag(found.group(2), fields, found.group(1) == "!")


def _constant_false(
    conjunct: str, engine: Engine, run_values: Mapping[str, Any], params: Mapping[str, Any]
) -> bool:
    try:
        program = engine.compile(conjunct, ResultKind.BOOL)
        value = program.evaluate(engine.activation({**run_values, "params": params}))
    except (CelError, CelEvalError):
        return False  # decided by the whole condition, per subject
    return value is False


def build_guards(
    rules: Sequence[Rule],
    engine: Engine,
    run_values: Mapping[str, Any],
    subjects: Mapping[str, Sized] | None = None,
) -> dict[str, Guard]:
    """Rule id -> guard, for the rules that have one.

    Like variable binding (bindings.py), only for engines whose activations convert
    values on first read, and with ``subjects``, only for rules with at least
    ``BIND_FROM`` subjects: compiling a constant conjunct costs about a millisecond,
    which a one-file pre-commit run never earns back. The pure-Python engine keeps
    evaluating whole conditions, so the rule fixtures, which run under both engines,
    compare the two ways of deciding.
    """
    if engine.name not in ENGINES:
        return {}
    guards: dict[str, Guard] = {}
    for rule in rules:
        if rule.condition is None:
            continue
        if subjects is not None and len(subjects.get(rule.doc.subject, ())) < BIND_FROM:
            continue
        guard = build(rule.condition.source, engine, run_values, rule.params)
        if guard is not None:
            guards[rule.id] = guard
    return guards
