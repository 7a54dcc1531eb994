"""Limits that keep hostile YAML from hanging or crashing a scan.

poolgate reads untrusted pull-request text. Three things in YAML can turn a small
file into a large cost, and each has a guard here:

* aliases: nine levels of nine aliases ("billion laughs") expand a 400-byte text into
  387 million nodes; ``check_expansion`` measures the expansion before any walk;
* nesting: the walk refuses documents deeper than ``MAX_DEPTH``;
* libyaml's C composer recurses on the C stack with no limit of its own (about
  30,000 levels crash the interpreter with a segmentation fault, not an exception),
  so ``may_nest_deeply`` screens every text cheaply and ``first_too_deep`` checks
  suspicious ones exactly before they are composed.
"""

from __future__ import annotations

import re
from typing import Final

import yaml
from yaml.error import Mark
from yaml.events import (
    DocumentEndEvent,
    MappingEndEvent,
    MappingStartEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)
from yaml.nodes import MappingNode, Node

MAX_DEPTH: Final = 200
"""Deepest nesting of mappings and sequences a document may have."""

MAX_NODES: Final = 1_000_000
"""Most nodes a walk over one document may visit, aliases expanded."""

COMPOSE_SAFE_DEPTH: Final = 500
"""Nesting libyaml's C composer is known to survive: 1,000 levels pass on a 512 KiB
thread stack (measured), so 500 leaves room for the caller's own frames."""

# Without a run of _BLOCK_RUN indentation/indicator characters, block nesting stays
# below 2 * _BLOCK_RUN = 200; with at most _FLOW_OPENERS "[" or "{" per document, flow
# nesting stays at or below 300. Together: at most COMPOSE_SAFE_DEPTH.
_BLOCK_RUN: Final = 100
_FLOW_OPENERS: Final = 300
# Patterns start with one literal line break so the regular expression engine jumps
# from line to line instead of trying every position (a character class in front is
# not optimised that way). Every break libyaml knows
# starts a line for the run check; only "\n" splits documents, since a missed split
# only makes the bound looser.
_RUN: Final = rf"[ \t?:-]{{{_BLOCK_RUN}}}"
_LEADING_RUN: Final = re.compile(_RUN)
_RUN_AFTER: Final = {
    brk: re.compile(re.escape(brk) + _RUN) for brk in ("\n", "\r", "\x85", "\u2028", "\u2029")
}
_DOCUMENT_MARKER: Final = re.compile(r"\n(?:---|\.\.\.)(?=[ \t\r\n]|$)")


class Refused(Exception):
    """A document that composed but must not be used; becomes a PG001 finding."""

    def __init__(self, message: str, mark: Mark | None) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark


TOO_DEEP: Final = f"nesting deeper than {MAX_DEPTH} levels"
TOO_LARGE: Final = f"alias expansion exceeds limit of {MAX_NODES:,} nodes"
TOO_MANY_NODES: Final = f"document has more than {MAX_NODES:,} nodes (limit)"


def too_deep(mark: Mark | None) -> Refused:
    return Refused(TOO_DEEP, mark)


def too_large(mark: Mark | None) -> Refused:
    return Refused(TOO_LARGE, mark)


def check_expansion(root: Node, text_length: int | None = None) -> None:
    """Raise ``Refused`` if a walk over ``root`` would visit more than ``MAX_NODES`` nodes,
    or (given the document's ``text_length``) if its aliases add more nodes than the
    document has characters.

    Sizes are memoised per node, so an alias bomb is measured in a few dozen steps
    instead of being walked. A node that contains itself through an alias is refused
    too: the composer allows it, and a walk over it would never end.

    The second limit is what bounds memory: a per-document cap alone lets a 14 KB
    document of 990 references to a 1,000-item anchor expand to a million nodes
    (220 MB), and a file of such documents to any size. With at most one added node per
    character, alias expansion costs no more than the same text written out would.
    """
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: Node, depth: int) -> int:
        node_id = id(node)
        known = sizes.get(node_id)
        if known is not None:
            return known
        value = node.value
        total = 1
        if value.__class__ is not str:
            if node_id in active:
                raise Refused("an alias refers to a node that contains it", node.start_mark)
            if depth > MAX_DEPTH:
                raise too_deep(node.start_mark)
            active.add(node_id)
            if node.__class__ is MappingNode:
                for key_node, value_node in value:
                    total += size(key_node, depth + 1) + size(value_node, depth + 1)
            else:
                for item in value:
                    total += size(item, depth + 1)
            active.discard(node_id)
            if total > MAX_NODES:
                raise too_large(root.start_mark)
        sizes[node_id] = total
        return total

    total = size(root, 1)
    added = total - len(sizes)  # len(sizes): the distinct nodes the text spells out
    if text_length is not None and added > text_length:
        raise Refused(
            f"aliases add {added:,} nodes to a document of {text_length:,} characters "
            "(limit: one added node per character)",
            root.start_mark,
        )


def may_nest_deeply(text: str) -> bool:
    """Cheap and conservative: False only if no document can nest past ``COMPOSE_SAFE_DEPTH``.

    Block nesting needs indentation or compact indicators (``- - - x``): at most two
    levels per column. Flow nesting needs one ``[`` or ``{`` per level, and a flow
    collection never spans a ``---`` or ``...`` line, so openers are counted per
    document. It parses nothing: a few regular expression searches and character counts.
    """
    if len(text) <= COMPOSE_SAFE_DEPTH:  # every level costs at least one character
        return False
    if _LEADING_RUN.match(text) is not None:
        return True
    for brk, run in _RUN_AFTER.items():
        if brk in text and run.search(text) is not None:
            return True
    if text.count("[") + text.count("{") <= _FLOW_OPENERS:
        return False
    start = 0
    for marker in _DOCUMENT_MARKER.finditer(text):
        end = marker.start()
        if text.count("[", start, end) + text.count("{", start, end) > _FLOW_OPENERS:
            return True
        start = end
    return text.count("[", start) + text.count("{", start) > _FLOW_OPENERS


def first_too_deep(
    text: str, loader: type[yaml.SafeLoader | yaml.CSafeLoader]
) -> tuple[int, int, int] | None:
    """The first document nesting deeper than ``COMPOSE_SAFE_DEPTH``, or None.

    Returns the document's index in the stream and the 1-based line and column of the
    collection that goes too deep.

    Reads libyaml's event stream, which it produces without recursing. A parse error
    ends the check: composing stops at the same error, before any depth not seen here.
    One error is the depth itself: libyaml 0.2.6 (PyYAML 6.0.4's wheels) refuses 1,000
    flow levels while its scanner looks ahead for a simple key, before it has produced
    the events of the levels in between. Those levels are the flow openers between the
    last event and the error, counted from the text (an opener inside a quoted scalar
    in that window would count too; the document is refused either way).
    """
    depth = 0
    index = 0
    last = 0  # where the last event ended: the scanner's lookahead starts there
    try:
        for event in yaml.parse(text, Loader=loader):
            kind = event.__class__
            if kind is MappingStartEvent or kind is SequenceStartEvent:
                depth += 1
                mark = event.start_mark
                if depth > COMPOSE_SAFE_DEPTH and mark is not None:
                    return index, mark.line + 1, mark.column + 1
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                depth -= 1
            elif kind is DocumentEndEvent:
                index += 1
                depth = 0
            if event.end_mark is not None:
                last = event.end_mark.index
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        if mark is None:
            return None
        opener = _opener_past(text, last, mark.index, COMPOSE_SAFE_DEPTH - depth)
        if opener is None:
            return None
        line = text.count("\n", 0, opener)
        return index, line + 1, opener - (text.rfind("\n", 0, opener) + 1) + 1
    except (yaml.YAMLError, UnicodeEncodeError):
        return None
    return None


def _opener_past(text: str, start: int, end: int, allowed: int) -> int | None:
    """Index of the first flow opener in ``text[start:end]`` beyond ``allowed`` of them."""
    if allowed < 0:
        return None
    seen = 0
    for position in range(start, end):
        if text[position] in "[{":
            seen += 1
            if seen > allowed:
                return position
    return None
