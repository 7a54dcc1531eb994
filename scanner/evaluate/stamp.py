"""Rules decide; the evaluation stamps: what a rule returns becomes a finding.

A finding gets the rule's id and level, the subject's file (or cluster address) and
the line and column of the field path it names (``KubeObject.position``). A
violation may name another object (``ref``), another level, or an absolute line; a
message from an expression is one line and capped (``message``), as VAP's are. The
built-in document rules (PG001-PG003, PG005) have no CEL: their findings are
stamped from the documents the readers and the model found invalid
(``document_findings``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Final

from scanner.cel.budget import Oversize
from scanner.errors import CelEvalError
from scanner.findings.records import Finding, Level, Location, Outcome, Related
from scanner.inventory import InvalidDocument, KubeObject
from scanner.model import Subject
from scanner.ruleset.load import Rule

MESSAGE_LIMIT = 500
"""Messages from expressions are one line and capped (as VAP's are)."""

_LINE_BREAK: Final = re.compile("[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")
"""What ``str.splitlines`` breaks at."""


def violation(
    rule: Rule, subject: Subject, item: object, lookup: Mapping[str, KubeObject]
) -> Finding:
    """The finding of one item of a rule's ``violations`` list; ``CelEvalError`` when
    the item is not a violation (the rule's error, like any failing expression)."""
    if not isinstance(item, Mapping) or not isinstance(item.get("message"), str):
        raise CelEvalError(
            "each violation must be a map with a string 'message' "
            "(and optional 'path', 'ref', 'level', 'line', 'related')"
        )
    line = item.get("line", 0)
    if not isinstance(line, int) or isinstance(line, bool):
        raise CelEvalError("violation 'line' must be an int")
    path = item.get("path", "")
    ref = item.get("ref", "")
    level_text = item.get("level", "")
    if not isinstance(path, str) or not isinstance(ref, str) or not isinstance(level_text, str):
        raise CelEvalError("violation 'path', 'ref' and 'level' must be strings")
    level = rule.doc.level
    if level_text:
        try:
            level = Level.parse(level_text)
        except KeyError:
            raise CelEvalError(
                f"violation level {level_text!r} is not error|warning|note"
            ) from None
    target = lookup.get(ref, subject.obj) if ref else subject.obj
    found = finding(rule, target, message(item["message"]), path, level, line=line)
    related = item.get("related")
    if related is None:
        return found
    return replace(found, related=_related(target, related))


MAX_RELATED: Final = 50
"""Related locations kept per finding (SARIF viewers list them all)."""


def _related(obj: KubeObject, items: object) -> tuple[Related, ...]:
    """A violation's ``related``: a list of maps with a string ``path`` and ``message``."""
    if not isinstance(items, list) or not all(
        isinstance(item, Mapping)
        and isinstance(item.get("path"), str)
        and isinstance(item.get("message"), str)
        for item in items
    ):
        raise CelEvalError(
            "violation 'related' must be a list of maps with string 'path' and 'message'"
        )
    found = []
    for item in items[:MAX_RELATED]:
        line, column = obj.position(item["path"])
        where = Location(obj.origin.uri, line, column, item["path"])
        found.append(Related(where, message(item["message"])))
    return tuple(found)


def failed(rule: Rule, subject: Subject, error: CelEvalError) -> Finding:
    """The finding of a rule that could not be evaluated on ``subject``."""
    text = f"rule could not be evaluated: {_one_line(str(error))}"
    return finding(rule, subject.obj, text, "", Level.ERROR, Outcome.ERROR)


def refused(rule: Rule, subject: Subject, refuse: Oversize) -> Finding:
    """The finding of a rule with comprehensions not run on an oversized subject."""
    text = f"rule could not be evaluated: {refuse.message}"
    return finding(rule, subject.obj, text, refuse.path, Level.ERROR, Outcome.ERROR)


def finding(
    rule: Rule,
    obj: KubeObject,
    message: str,
    path: str,
    level: Level,
    outcome: Outcome = Outcome.FAIL,
    line: int = 0,
) -> Finding:
    """``line`` (absolute, 1-based) overrides the path's position: findings inside an
    embedded document, such as a device-plugin config held in a ConfigMap value,
    have no field path of their own; they point at the line's first character (its key)."""
    if line > 0:
        column = obj.lines.column_at(line)
    else:
        line, column = obj.position(path)
    return Finding(
        rule_id=rule.id,
        level=level,
        message=message,
        location=Location(obj.origin.uri, line, column, path),
        ref=obj.ref,
        source_type=obj.origin.source_type,
        outcome=outcome,
        origin=obj.origin,
    )


def usable_message(text: str) -> bool:
    """Whether a message from an expression is used (VAP: a blank one, or one with
    line breaks, falls back to the static message)."""
    return bool(text.strip()) and not _LINE_BREAK.search(text)


def message(text: object) -> str:
    """A message from an expression on one line, capped. It quotes object data (names,
    values), so a line break inside is shown escaped rather than ending the message
    there: ``runtimeClassName: "nvidia\\u2028x"`` must not read as ``nvidia``."""
    return _capped(_LINE_BREAK.sub(_escaped, str(text).strip()))


_MISSING_KEY: Final = (
    re.compile(r'NOT_FOUND: Key not found in map ?: ?"(?P<key>[^"]*)"'),  # cel-cpp
    re.compile(r"no such member in mapping: '(?P<key>[^']*)'"),  # cel-python
)
"""The two engines' words for reading a missing key, told the same way."""


def error_text(error: object) -> str:
    """An evaluation error's first line, a missing key said the same on both engines
    (``no such key: affinity``): an admission policy's error is part of its message."""
    text = _one_line(error)
    for pattern in _MISSING_KEY:
        found = pattern.search(text)
        if found is not None:
            return f"no such key: {found['key']}"
    return text


def _escaped(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def _one_line(text: object) -> str:
    """The first line of an error (cel-cpp adds lines pointing at the expression)."""
    lines = str(text).strip().splitlines()
    return _capped(lines[0].strip() if lines else "")


def _capped(line: str) -> str:
    return line if len(line) <= MESSAGE_LIMIT else line[: MESSAGE_LIMIT - 1] + "…"


def document_findings(
    invalid: Iterable[InvalidDocument], rules: Mapping[str, Rule]
) -> Iterator[Finding]:
    """Findings of the built-in document rules (PG001-PG003, PG005) that are enabled."""
    for document in invalid:
        rule = rules.get(document.rule_id)
        if rule is None:
            continue
        yield Finding(
            rule_id=rule.id,
            level=rule.doc.level,
            message=document.message,
            location=Location(document.origin.uri, document.line, document.column, document.path),
            ref=document.ref,
            source_type=document.origin.source_type,
            origin=document.origin,
        )
